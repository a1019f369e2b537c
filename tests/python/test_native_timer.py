"""The torch worker's compiled per-op timer (python/neuralcost_worker/torch/native_timer.py and
python/native/torch_timer.cpp): it must time exactly the ops the Python dispatch mode sees (the
ops the capture records), in order, for the reference networks and for composite ops and ops that
call many others; and it must refuse, with a reason, what it cannot time. Needs the build's
library in $NEURALCOST_TORCH_TIMER (CTest sets it); without it the tests fail, not skip."""

import os

import pytest
import torch
from torch import nn

from neuralcost_worker.torch import capture as torch_capture
from neuralcost_worker.torch import native_timer
from neuralcost_worker.torch import reference as reference_torch

torch.set_num_threads(1)


def _forward(net, *xs):
    def forward():
        with torch.inference_mode():
            net(*xs)

    return forward


def _mode_names(net, *xs):
    mode = torch_capture.Timer(torch.device("cpu"))
    with torch.inference_mode(), mode:
        net(*xs)
    return mode.names


@pytest.mark.parametrize("name", reference_torch.NAMES)
def test_times_the_ops_the_dispatch_mode_sees_in_every_reference_network(timer, name):
    net, x = reference_torch.build(name, 2, 8, 32, 2)
    net.eval()
    forward = _forward(net, x)
    forward()
    names = _mode_names(net, x)
    timer.plan(forward, names)
    # the RecordFunction tree has more calls than the mode's ops: composite ops and calls inside ops
    assert timer.lib.neuralcost_timer_learned_calls() >= len(names)
    for _ in range(3):
        wall, seconds = timer.time(forward)
        assert len(seconds) == len(names)
        assert all(s > 0 for s in seconds), seconds
        assert sum(seconds) <= wall  # the ops do not overlap: each is entered and left in turn


class _Nested(nn.Module):
    """An op that makes many calls (aten::lstm: RecordFunction is switched off inside it) between
    ops that make few."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 8, num_layers=2)

    def forward(self, x):
        out, _ = self.lstm(x.transpose(0, 1))
        return torch.relu(out)


def test_the_calls_inside_an_op_are_its_own_even_when_record_function_is_switched_off(timer):
    net, x = _Nested().eval(), torch.randn(3, 4, 8)
    forward = _forward(net, x)
    names = _mode_names(net, x)
    timer.plan(forward, names)
    lstm = [inside for name, inside in timer.learned() if name == "aten::lstm"]
    assert lstm and lstm[0] >= native_timer.SWITCH_OFF_FROM
    wall, seconds = timer.time(forward)
    assert len(seconds) == len(names) and all(s > 0 for s in seconds)
    assert seconds[names.index("aten::lstm")] == max(seconds)  # 2 layers x 4 steps of gates
    # RecordFunction is on again after the switched-off op: the next learning pass sees every call
    learned = timer.learned()
    timer.plan(forward, names)
    assert timer.learned() == learned


def _children(calls, parent):
    """Names of the calls made directly by calls[parent] (pre-order with subtree sizes)."""
    out, i, end = [], parent + 1, parent + 1 + calls[parent][1]
    while i < end:
        out.append(calls[i][0])
        i += 1 + calls[i][1]
    return out


def test_an_op_the_mode_does_not_see_is_descended_and_the_ops_it_calls_are_timed(timer):
    # a composite op (CompositeImplicitAutograd) is not an op of the dispatch mode: the ops it
    # calls are. Played here by aten::matmul, whose calls are named as if the mode had seen them.
    a, w = torch.randn(2, 4, 6), torch.randn(6, 6)

    def forward():
        with torch.inference_mode():
            torch.matmul(a, w)

    timer.plan(forward, ["aten::matmul"])
    calls = timer.learned()
    assert calls[0][0] == "aten::matmul" and calls[0][1] > 1
    inner = _children(calls, 0)
    timer.plan(forward, inner)
    wall, seconds = timer.time(forward)
    assert len(seconds) == len(inner) and all(s > 0 for s in seconds)
    assert sum(seconds) <= wall


def test_an_op_the_pass_does_not_call_is_refused_with_its_name(timer):
    net, x = nn.Linear(4, 4).eval(), torch.randn(2, 4)
    forward = _forward(net, x)
    with pytest.raises(RuntimeError, match="aten::not_an_op"):
        timer.plan(forward, _mode_names(net, x) + ["aten::not_an_op"])


def test_a_pass_that_calls_other_ops_than_learned_fails_instead_of_timing_the_wrong_ops(timer):
    a, xa = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval(), torch.randn(2, 4)
    b = nn.Sequential(nn.ReLU(), nn.Linear(4, 4)).eval()
    timer.plan(_forward(a, xa), _mode_names(a, xa))
    with pytest.raises(RuntimeError, match="when the timer learned the pass"):
        timer.time(_forward(b, xa))
    longer = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.ReLU()).eval()
    timer.plan(_forward(a, xa), _mode_names(a, xa))
    with pytest.raises(RuntimeError, match="after the ops the timer learned"):
        timer.time(_forward(longer, xa))
    # and the timer still works afterwards
    timer.plan(_forward(a, xa), _mode_names(a, xa))
    assert len(timer.time(_forward(a, xa))[1]) == len(_mode_names(a, xa))


def test_an_op_that_raises_inside_a_timed_pass_leaves_record_function_on(timer):
    net = nn.LSTM(8, 8, num_layers=2).eval()
    good, bad = torch.randn(4, 3, 8), torch.randn(4, 3, 5)
    forward = _forward(net, good)
    names = _mode_names(net, good)
    timer.plan(forward, names)
    with pytest.raises(Exception):
        timer.time(_forward(net, bad))
    timer.plan(forward, names)
    assert len(timer.time(forward)[1]) == len(names)


def test_load_says_why_there_is_no_timer(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURALCOST_TORCH_TIMER", "off")
    assert native_timer.load() == (None, "$NEURALCOST_TORCH_TIMER=off")
    monkeypatch.delenv("NEURALCOST_TORCH_TIMER")
    assert "not set" in native_timer.load()[1]
    monkeypatch.setenv("NEURALCOST_TORCH_TIMER", str(tmp_path / "missing.so"))
    assert "was not built" in native_timer.load()[1]
    not_a_library = tmp_path / "libbroken.so"
    not_a_library.write_bytes(b"not an ELF file")
    monkeypatch.setenv("NEURALCOST_TORCH_TIMER", str(not_a_library))
    timer, why = native_timer.load()
    assert timer is None and "does not load" in why


def test_a_library_built_for_another_torch_is_not_used(monkeypatch):
    built = os.environ["NEURALCOST_TORCH_TIMER"]
    monkeypatch.setattr(torch, "__version__", "0.0.1")
    timer, why = native_timer.load()
    assert timer is None
    assert why.startswith(f"{built} was built for torch ") and why.endswith("this is torch 0.0.1")


def test_the_library_is_the_one_ctest_built():
    assert os.environ.get("NEURALCOST_TORCH_TIMER", "").endswith("libneuralcost_torch_timer.so")
