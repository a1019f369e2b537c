"""The five reference networks of docs/reference-networks.md in PyTorch (torch.nn), built the
same way as the C++ LibTorch twins (src/backends/libtorch/reference_modules.cpp): same layers,
same parameter counts, same contraction FLOPs. Works with Debian's torch 1.13 and PyPI's 2.x.

    net, example = build("lstm", batch=1)   # eval mode, random weights (seeded)
"""
import torch
from torch import nn

HEADS = 4
CLASSES = 10


class FeedForward(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        dims = [784] + [width] * depth
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        for linear, norm in zip(self.linears, self.norms):
            x = norm(torch.relu(linear(x)))
        return self.classifier(x)


class Cnn(nn.Module):
    """depth stages; stage s has width / 2^(depth-1-s) channels; max-pool between stages."""

    def __init__(self, width, depth):
        super().__init__()
        channels = [3] + [width >> (depth - 1 - s) for s in range(depth)]
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1) for a, b in zip(channels, channels[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm2d(c) for c in channels[1:])
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        for s, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            x = norm(torch.relu(conv(x)))
            if s + 1 < len(self.convs):
                x = torch.max_pool2d(x, 2)
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Recurrent(nn.Module):
    def __init__(self, width, depth, lstm):
        super().__init__()
        cell = nn.LSTM if lstm else nn.RNN
        self.recurrent = cell(width, width, num_layers=depth, batch_first=True)
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        out, _ = self.recurrent(x)
        return self.classifier(out[:, -1])


class Transformer(nn.Module):
    """Post-norm encoder layers as PyTorch's default TransformerEncoderLayer, mean over T."""

    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, HEADS, 4 * width, dropout=0.0, batch_first=True) for _ in range(depth))
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.classifier(x.mean(1))


def build(name, batch=1, seq=32, width=128, depth=2):
    """Returns (network in eval mode, example input) for a reference network."""
    torch.manual_seed(0)
    if name == "ff":
        net, shape = FeedForward(width, depth), (batch, 784)
    elif name == "cnn":
        net, shape = Cnn(width, depth), (batch, 3, 32, 32)
    elif name in ("rnn", "lstm"):
        net, shape = Recurrent(width, depth, name == "lstm"), (batch, seq, width)
    elif name == "transformer":
        net, shape = Transformer(width, depth), (batch, seq, width)
    else:
        raise ValueError(f"unknown model '{name}'; built-in models: ff, cnn, rnn, lstm, transformer")
    torch.manual_seed(1)
    return net.eval(), torch.randn(*shape)


NAMES = ("ff", "cnn", "rnn", "lstm", "transformer")
