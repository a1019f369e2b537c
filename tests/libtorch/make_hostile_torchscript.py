"""TorchScript files a user might be handed, for the LibTorch backend's tests (Debian's
/usr/bin/python3, torch 1.13; run at build time):

    make_hostile_torchscript.py DIR    writes into DIR:
      hang.pt   forward never returns (a loop whose test stays true)
      ok.pt     forward returns x + 1 (a model to run after those)
      bomb.pt   a 256 MiB zero weight, re-zipped with deflate: 256 kB whose entries expand to 256 MiB
"""

import io
import os
import sys
import zipfile

import torch


class Hang(torch.nn.Module):
    def forward(self, x):
        y = x
        while bool(y.sum() == y.sum()):  # never false for finite inputs
            y = y + 0
        return y


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Weight(torch.nn.Module):
    def __init__(self, mib):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(mib * (1 << 20) // 4))

    def forward(self, x):
        return x + self.w[: x.shape[-1]]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.jit.script(Hang()).save(os.path.join(out, "hang.pt"))
    torch.jit.script(AddOne()).save(os.path.join(out, "ok.pt"))
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Weight(256)), buffer)
    buffer.seek(0)
    bomb = os.path.join(out, "bomb.pt")
    with zipfile.ZipFile(buffer) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))


if __name__ == "__main__":
    main()
