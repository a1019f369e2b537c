"""The five reference networks of docs/reference-networks.md in PyTorch (torch.nn), built the same
way as the C++ LibTorch twins (src/backends/libtorch/reference_modules.cpp): same layers, same
parameter counts, same contraction FLOPs. Works with Debian's torch 1.13 and PyPI's 2.x. Modules are
named as analyze names the layers (block0.linear, stage0.pool, lstm, encoder1, last_step), so that
module hooks name the ops that ran with the names of the static model.

    net, example = build("lstm", batch=1)   # eval mode, random weights (seeded)
"""

import torch
from torch import nn

HEADS = 4
CLASSES = 10


class _Block(nn.Module):
    """Named sub-modules in the order they run, so that every op runs inside a module whose path
    is the name analyze gives the layer (block0.linear, stage1.pool, ...)."""

    def __init__(self, **layers):
        super().__init__()
        for name, layer in layers.items():
            self.add_module(name, layer)

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x


class _Lambda(nn.Module):
    """A function as a named module (last_step, mean_over_time): its ops get the module's name."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class FeedForward(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        dims = [784] + [width] * depth
        for i, (a, b) in enumerate(zip(dims, dims[1:])):
            self.add_module(f"block{i}", _Block(linear=nn.Linear(a, b), relu=nn.ReLU(), norm=nn.LayerNorm(width)))
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        for block in list(self.children())[:-1]:
            x = block(x)
        return self.classifier(x)


class Cnn(nn.Module):
    """depth stages; stage s has width / 2^(depth-1-s) channels; max-pool between stages."""

    def __init__(self, width, depth):
        super().__init__()
        channels = [3] + [width >> (depth - 1 - s) for s in range(depth)]
        for s, (a, b) in enumerate(zip(channels, channels[1:])):
            layers = dict(conv=nn.Conv2d(a, b, 3, padding=1), relu=nn.ReLU(), bn=nn.BatchNorm2d(b))
            if s + 1 < depth:
                layers["pool"] = nn.MaxPool2d(2)
            self.add_module(f"stage{s}", _Block(**layers))
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x


class Recurrent(nn.Module):
    def __init__(self, width, depth, lstm):
        super().__init__()
        self.kind = "lstm" if lstm else "rnn"
        cell = nn.LSTM if lstm else nn.RNN
        self.add_module(self.kind, cell(width, width, num_layers=depth, batch_first=True))
        self.last_step = _Lambda(lambda out: out[:, -1])
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        out, _ = getattr(self, self.kind)(x)
        return self.classifier(self.last_step(out))


class Transformer(nn.Module):
    """Post-norm encoder layers as PyTorch's default TransformerEncoderLayer, mean over T."""

    def __init__(self, width, depth):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            self.add_module(
                f"encoder{i}", nn.TransformerEncoderLayer(width, HEADS, 4 * width, dropout=0.0, batch_first=True)
            )
        self.mean_over_time = _Lambda(lambda x: x.mean(1))
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x):
        for i in range(self.depth):
            x = getattr(self, f"encoder{i}")(x)
        return self.classifier(self.mean_over_time(x))


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
