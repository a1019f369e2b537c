"""pytest setup for the capture walkers' tests: python/ on the path (as the worker has it), one
thread per framework, quiet TensorFlow logs."""

import os
import sys

os.environ.setdefault("NEURALCOST_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
