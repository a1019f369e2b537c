"""The torch worker's compiled per-layer step timer (python/native/step_timer.cpp, StepTimer in
python/neuralcost_worker/torch/native_timer.py, NativeStepLayers in step_layers.py): it must charge
every autograd node to the same module as the Python hooks do (the reference), each module's
forward calls to that module, and fall back to the hooks, with the reason, when a step does not
make the calls it learned. Needs the build's library in $NEURALCOST_TORCH_TIMER (CTest sets it)."""

import pytest
import torch
from torch import nn

from neuralcost_worker.torch import native_timer
from neuralcost_worker.torch import reference as reference_torch
from neuralcost_worker.torch import step_layers
from step_nets import Net, Step, step_args

torch.set_num_threads(1)


def _counting(layers):
    """Counts the Python hooks' charges per (phase, module): one per autograd node in backward."""
    counts = {}
    charge = layers._charge

    def counting(key, seconds):
        counts[key] = counts.get(key, 0) + 1
        charge(key, seconds)

    layers._charge = counting
    return counts


def _python_nodes(net, xs, loss_fn, target, optimizer):
    layers = step_layers.StepLayers(net, lambda: None)
    counts = _counting(layers)
    times, _, _ = layers.step(net, xs, loss_fn, target, optimizer)
    return {m: n for (phase, m), n in counts.items() if phase == "backward"}, times


def _native_nodes(timer, net, xs, loss_fn, target, optimizer):
    layers = step_layers.NativeStepLayers(net, timer)
    layers.learn(net, xs, loss_fn, target, optimizer)
    times, wall, _ = layers.step(net, xs, loss_fn, target, optimizer)
    _, _, nodes = timer.step.read()
    return {layers.owners[i]: n for i, n in enumerate(nodes) if n}, times, wall


@pytest.mark.parametrize("name", ["ff", "cnn", "rnn", "lstm", "transformer"])
def test_nodes_go_to_the_module_the_python_hooks_name(timer, name):
    torch.manual_seed(0)
    net, example = reference_torch.build(name, batch=4, seq=8, width=16)
    net.train()
    xs = [example]
    target = torch.tensor([0, 1, 2, 3])
    optimizer = torch.optim.Adam(net.parameters())
    args = (xs, nn.functional.cross_entropy, target, optimizer)
    python, python_times = _python_nodes(net, *args)
    native, native_times, wall = _native_nodes(timer, net, *args)
    assert native == python
    backward = {k for k in native_times if k[0] == "backward"}
    assert backward == {k for k in python_times if k[0] == "backward"}
    # a forward row is a module's calls: every module with one ran calls of its own under the
    # Python hooks too (their other rows are containers' Python between their children)
    forward = {k for k in native_times if k[0] == "forward"}
    assert forward and forward <= {k for k in python_times if k[0] == "forward"}
    assert ("forward", "loss") in forward and ("backward", "loss") in backward
    assert all(s > 0 for s in native_times.values())
    assert sum(native_times.values()) <= wall


def test_a_container_s_own_calls_and_weights_read_by_another_module(timer):
    torch.manual_seed(0)
    net = Net()
    args = step_args(net)
    python, _ = _python_nodes(net, *args)
    native, times, _ = _native_nodes(timer, net, *args)
    assert native == python
    assert native["head"] == 4  # addmm, the transpose of its weight, the AccumulateGrads of weight and bias
    assert ("forward", "block") in times and ("backward", "block") in times  # the add, the linear over unused's weight
    assert ("forward", "block.unused") not in times and "block.unused" not in native
    assert all(p.grad is None for p in net.parameters())  # zero-grad set them to none


def test_a_step_that_makes_other_calls_is_refused_and_the_hooks_time_it(timer):
    net = Net()
    layers = step_layers.NativeStepLayers(net, timer)
    args = step_args(net)
    layers.learn(net, *args)
    net.skip = True
    with pytest.raises(native_timer.TimerError, match="top-level calls where the timer learned|was aten::"):
        layers.step(net, *args)
    net.skip = False
    times, _, _ = layers.step(net, *args)  # the failed step left no observer behind
    assert ("backward", "head") in times
    # the learning step takes one path, the timed ones (after the first plain step) the other
    reply = step_layers.time_steps(Step(Net(), skip_from=1), 2)
    assert reply["timer"].startswith("Python module and autograd-node hooks")
    assert "not the compiled timer" in reply["timer_warning"]


def test_time_steps_uses_the_compiled_timer_on_the_cpu(timer):
    step = Step(Net(), optimizer=torch.optim.Adam)
    reply = step_layers.time_steps(step, 3)
    assert "compiled observer" in reply["timer"] and "timer_warning" not in reply
    assert len(step.kept) == 3
    # every optimizer step is counted (train_steps_run), the timer's learning step too: Adam's own
    # count of its steps is the independent one
    assert step.steps == int(step.optimizer.state[step.optimizer.param_groups[0]["params"][0]]["step"]) == 7
    pairs = list(zip(reply["events"], reply["modules"]))
    # in the order they ran: the forwards (a module at its first entry), the backwards in reverse
    assert pairs == [("forward", m) for m in ("block", "block.linear", "block.relu", "head", "loss")] + [
        ("backward", m) for m in ("loss", "head", "block.relu", "block.linear", "block")
    ] + [("optimizer", "")]
    assert ("backward", "loss") in pairs and ("forward", "loss") in pairs
    for j, wall in enumerate(reply["wall"]):
        assert sum(s[j] for s in reply["seconds"]) <= wall
