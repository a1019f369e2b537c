"""pytest setup for the capture walkers' tests: python/ on the path (as the worker has it), one
thread per framework, quiet TensorFlow logs; the torch worker's compiled timers as a fixture."""

import os
import sys

import pytest

os.environ.setdefault("NEURALCOST_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


@pytest.fixture(scope="module")
def timer():
    """The torch worker's compiled timers (python/native/), from $NEURALCOST_TORCH_TIMER (CTest sets
    it): a test that asks for them fails, not skips, without them."""
    from neuralcost_worker.torch import native_timer

    t, why = native_timer.load()
    assert t is not None, f"the compiled timer does not load: {why}"
    return t
