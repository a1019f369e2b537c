"""A ResNet-18 (He et al. 2016, the torchvision layout: 11,689,512 parameters) in plain torch.nn,
exported with torch.export to a .pt2 file that the torch worker loads. bench/gpu_check.sh uses it
for the ResNet-18-sized GPU run; torchvision is not needed.

Usage: python gpu_resnet18.py OUT.pt2 BATCH
"""

import sys

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=False)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


if __name__ == "__main__":
    out, batch = sys.argv[1], int(sys.argv[2])
    net = ResNet18().eval()
    params = sum(p.numel() for p in net.parameters())
    assert params == 11689512, f"ResNet-18 has 11,689,512 parameters, this one {params}"
    program = torch.export.export(net, (torch.randn(batch, 3, 224, 224),))
    torch.export.save(program, out)
    print(f"{out}: ResNet-18, {params} parameters, batch {batch}")
