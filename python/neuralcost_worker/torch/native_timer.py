"""The torch worker's compiled per-op timer (python/native/torch_timer.cpp) and per-layer step
timer (python/native/step_timer.cpp, StepTimer), loaded with ctypes.

It times the same ops as a TorchDispatchMode (the ops the capture records) with a RecordFunction
observer: a fraction of a microsecond per op instead of the mode's few microseconds. The library
is built by CMake against the worker environment's torch; the core names it in
$NEURALCOST_TORCH_TIMER ("off": not used). `load()` returns the timer, or None with the reason it cannot be used
(not built, another torch version, no symbol), and the worker then times with its Python mode.
"""

import ctypes
import os
import time

import torch

# an op that makes this many calls inside or more switches RecordFunction off until its exit:
# switching off and on costs about as much as that many callbacks (bench/torch_timer_bench.py)
SWITCH_OFF_FROM = 3


class TimerError(RuntimeError):
    """The timer cannot time these ops (its own refusal, not an error of the model's ops)."""


class NativeTimer:
    def __init__(self, lib, path):
        self.lib = lib
        self.path = path
        lib.neuralcost_timer_error.restype = ctypes.c_char_p
        lib.neuralcost_timer_plan.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        lib.neuralcost_timer_seconds.restype = ctypes.POINTER(ctypes.c_double)
        lib.neuralcost_timer_learned_call.restype = ctypes.c_char_p
        lib.neuralcost_timer_learned_call.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        self.n = None
        self.step = StepTimer(lib)

    def learned(self):
        """The calls of the last learned pass in pre-order: [(name, calls it made)]."""
        calls, inside = [], ctypes.c_int()
        for i in range(self.lib.neuralcost_timer_learned_calls()):
            calls.append((self.lib.neuralcost_timer_learned_call(i, ctypes.byref(inside)).decode(), inside.value))
        return calls

    def _error(self):
        return self.lib.neuralcost_timer_error().decode(errors="replace")

    def plan(self, forward, names):
        """Learns the calls of one pass of `forward` and matches `names` (the ops a dispatch mode
        saw, in order) to them; raises TimerError with the reason when they do not match."""
        if self.lib.neuralcost_timer_learn() != 0:
            raise TimerError(self._error())
        try:
            forward()
        finally:
            self.lib.neuralcost_timer_end()
        encoded = [n.encode() for n in names]
        array = (ctypes.c_char_p * len(encoded))(*encoded)
        if self.lib.neuralcost_timer_plan(array, len(encoded), SWITCH_OFF_FROM) != 0:
            raise TimerError(self._error())
        self.n = len(names)

    def time(self, forward):
        """One timed pass of `forward`: (wall seconds, seconds of each planned op)."""
        if self.n is None:
            raise TimerError("plan a pass before timing one")
        if self.lib.neuralcost_timer_time() != 0:
            raise TimerError(self._error())
        clock = time.perf_counter_ns
        try:
            t0 = clock()
            forward()
            wall = (clock() - t0) * 1e-9
        finally:
            failed = self.lib.neuralcost_timer_end() != 0
        if failed:
            raise TimerError(self._error())
        return wall, self.lib.neuralcost_timer_seconds()[: self.n]


class StepTimer:
    """The per-layer timer of an eager training step on the CPU (python/native/step_timer.cpp): a
    step's top-level calls and autograd nodes timed by RecordFunction observers, charged to owners
    (integers the caller gives the modules; 0 is the network's own)."""

    def __init__(self, lib):
        self.lib = lib
        lib.neuralcost_step_error.restype = ctypes.c_char_p
        lib.neuralcost_step_mark.argtypes = [ctypes.c_int]
        lib.neuralcost_step_mark.restype = None
        lib.neuralcost_step_forward_seconds.restype = ctypes.POINTER(ctypes.c_double)
        lib.neuralcost_step_backward_seconds.restype = ctypes.POINTER(ctypes.c_double)
        lib.neuralcost_step_nodes.restype = ctypes.POINTER(ctypes.c_int)
        self.mark = lib.neuralcost_step_mark
        self.owners = 0

    def _check(self, rc):
        if rc != 0:
            raise TimerError(self.lib.neuralcost_step_error().decode(errors="replace"))

    def learn(self, owners, forward):
        """Learns the top-level calls of `forward` (a step's forward and loss), during which the
        caller's hooks call mark(owner) to say whose the next calls are."""
        self._check(self.lib.neuralcost_step_learn(owners))
        try:
            forward()
        finally:
            failed = self.end()
        if failed:
            raise TimerError(failed)
        self.owners = owners
        return self.lib.neuralcost_step_learned_calls()

    def forward(self):
        """From now on, the step's forward and loss are timed."""
        self._check(self.lib.neuralcost_step_forward())

    def backward(self):
        """The forward has ended (it made the learned calls); from now on its nodes are timed."""
        self._check(self.lib.neuralcost_step_backward())

    def end(self):
        """Stops timing (read() gives the times): "" when the step made the learned calls, else
        why not. Never raises, so that an error of the step's own is the one that propagates."""
        if self.lib.neuralcost_step_end() == 0:
            return ""
        return self.lib.neuralcost_step_error().decode(errors="replace")

    def read(self):
        """(forward seconds, backward seconds, nodes) by owner, of the last timed step."""
        n, lib = self.owners, self.lib
        return (
            lib.neuralcost_step_forward_seconds()[:n],
            lib.neuralcost_step_backward_seconds()[:n],
            lib.neuralcost_step_nodes()[:n],
        )


def load():
    """(NativeTimer, "") when the library of $NEURALCOST_TORCH_TIMER loads into this torch, else
    (None, why not)."""
    path = os.environ.get("NEURALCOST_TORCH_TIMER", "")
    if not path:
        return None, "$NEURALCOST_TORCH_TIMER is not set"
    if path == "off":
        return None, "$NEURALCOST_TORCH_TIMER=off"
    if not os.path.exists(path):
        return None, f"{path} was not built (CMake: NEURALCOST_WITH_TORCH_TIMER, a worker environment with torch)"
    try:
        lib = ctypes.CDLL(path)
        lib.neuralcost_timer_torch_version.restype = ctypes.c_char_p
        built_for = lib.neuralcost_timer_torch_version().decode()
    except (OSError, AttributeError) as e:
        return None, f"{path} does not load: {e}"
    if built_for != torch.__version__:
        return None, f"{path} was built for torch {built_for}, this is torch {torch.__version__}"
    if not hasattr(lib, "neuralcost_step_learn"):
        return None, f"{path} has no step timer (rebuild it)"
    return NativeTimer(lib, path), ""
