"""Writes a reference network as a torch.export program (.pt2), for the torch worker's model-file
test: python export_program.py NAME BATCH OUT.pt2 (run with the project's .venv python)."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from neuralcost_worker.torch import reference as reference_torch  # noqa: E402

name, batch, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
net, x = reference_torch.build(name, batch)
torch.export.save(torch.export.export(net, (x,)), out)
