"""torch.export programs a user might train with `neural-cost train-to-target --model FILE.pt2`
(the torch worker trains ExportedProgram.module()): an MLP over the 8x8 digits flattened, exported
with a dynamic batch, and the same MLP exported with its batch fixed at 4, which must be refused.
Usage: make_digits_programs.py OUT_DIR"""

import os
import sys

import torch
from torch import nn


def main(out):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    example = (torch.zeros(4, 64),)
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    dynamic = torch.export.export(mlp, example, dynamic_shapes=({0: batch},))
    torch.export.save(dynamic, os.path.join(out, "digits_mlp.pt2"))
    torch.export.save(torch.export.export(mlp, example), os.path.join(out, "digits_static.pt2"))


if __name__ == "__main__":
    main(sys.argv[1])
