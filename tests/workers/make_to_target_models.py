"""TorchScript files a user might train with `neural-cost train-to-target --model FILE`, made with
Debian's torch 1.13 at build time (both engines load its files): a convolutional net that takes
the digits as images and an MLP that takes them flattened; and three it must refuse: one with 5
outputs where the digits have 10 classes, a frozen one (no trainable parameters), and a file that
is not TorchScript at all. Usage: make_to_target_models.py OUTPUT_DIR"""

import os
import sys

import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.max_pool2d(self.bn1(torch.relu(self.conv1(x))), 2)
        return self.fc(torch.relu(self.conv2(x)).mean((2, 3)))


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.jit.script(ConvNet()).save(os.path.join(out, "convnet.pt"))
    mlp = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    torch.jit.script(mlp).save(os.path.join(out, "mlp.pt"))
    torch.jit.script(nn.Sequential(nn.Linear(64, 5))).save(os.path.join(out, "five.pt"))
    torch.jit.freeze(torch.jit.script(mlp).eval()).save(os.path.join(out, "frozen.pt"))
    with open(os.path.join(out, "junk.pt"), "w") as f:
        f.write("not a model\n")


if __name__ == "__main__":
    main(sys.argv[1])
