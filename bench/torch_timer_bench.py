"""Cost per op of the torch worker's per-op timers (issue 16, docs/profiling.md §4a): the compiled
RecordFunction observer (python/native/torch_timer.cpp) at several switch-off thresholds, and the
Python TorchDispatchMode it replaces, on small passes whose per-op cost shows: 100 x aten::relu,
100 x aten::linear (batch 1), one 2-layer LSTM of 16 steps. Plain and timed passes are
interleaved; cost per op = (median timed - median plain) / ops.

Usage (the build's timer; the worker environment's Python):
  NEURALCOST_TORCH_TIMER=build/src/neuralcost/torch-timer/libneuralcost_torch_timer.so \\
    .venv/bin/python bench/torch_timer_bench.py [PASSES]
Prints the 1-minute load average: a figure taken while the load is above the CPU count is noise.
"""

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from neuralcost_worker.torch import capture as torch_capture  # noqa: E402
from neuralcost_worker.torch import native_timer  # noqa: E402

torch.set_num_threads(1)
passes = int(sys.argv[1]) if len(sys.argv) > 1 else 300
timer, why = native_timer.load()
if timer is None:
    sys.exit(f"no compiled timer: {why}")


def relu_chain():
    x = torch.randn(1, 64)
    return lambda: [torch.relu(x) for _ in range(100)]


def linear_chain():
    layer, x = torch.nn.Linear(64, 64), torch.randn(1, 64)
    return lambda: [layer(x) for _ in range(100)]


def lstm():
    net, x = torch.nn.LSTM(32, 32, num_layers=2), torch.randn(16, 1, 32)
    return lambda: net(x)


def pass_ns(f):
    t0 = time.perf_counter_ns()
    f()
    return time.perf_counter_ns() - t0


def mode_pass(body):
    mode = torch_capture.Timer(torch.device("cpu"))
    with torch.inference_mode(), mode:
        body()


print(f"torch {torch.__version__}, {passes} passes, load (1 min) {os.getloadavg()[0]:.2f}, CPUs {os.cpu_count()}")
print(
    f"{'pass':8} {'ops':>4} {'calls':>6} {'plain':>9}  "
    + "  ".join(
        f"{h:>11}" for h in ["off from 1", "off from 2", "off from 3", "off from 5", "never off", "python mode"]
    )
)
for label, make in [("relu", relu_chain), ("linear", linear_chain), ("lstm", lstm)]:
    body = make()

    def forward():
        with torch.inference_mode():
            body()

    for _ in range(20):
        forward()
    mode = torch_capture.Timer(torch.device("cpu"))
    with torch.inference_mode(), mode:
        body()
    names = mode.names
    costs = []
    for threshold in [1, 2, 3, 5, 1 << 30]:
        native_timer.SWITCH_OFF_FROM = threshold
        timer.plan(forward, names)
        plain, timed = [], []
        for _ in range(passes):
            plain.append(pass_ns(forward))
            timed.append(timer.time(forward)[0] * 1e9)
        costs.append((statistics.median(timed) - statistics.median(plain)) / len(names))
    plain, timed = [], []
    for _ in range(passes):
        plain.append(pass_ns(forward))
        timed.append(pass_ns(lambda: mode_pass(body)))
    costs.append((statistics.median(timed) - statistics.median(plain)) / len(names))
    calls = timer.lib.neuralcost_timer_learned_calls()
    print(
        f"{label:8} {len(names):4} {calls:6} {statistics.median(plain) / 1e3:7.1f}us  "
        + "  ".join(f"{c:8.0f} ns" for c in costs)
    )
