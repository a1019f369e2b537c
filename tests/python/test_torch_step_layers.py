"""Per-layer times of an eager torch training step (python/neuralcost_worker/torch/step_layers.py):
which module each forward interval and each autograd node is charged to, on a small network with
a residual add in a container and a module that reads another module's weights itself."""

import pytest
import torch
from torch import nn

from neuralcost_worker.torch import step_layers as torch_step_layers
from step_nets import Net as _Net
from step_nets import Step


pytestmark = pytest.mark.skipif(not torch_step_layers.available(), reason="torch numbers no autograd nodes visibly")


def test_each_module_gets_its_forward_and_the_nodes_it_created():
    torch.manual_seed(0)
    net = _Net()
    x = torch.randn(4, 8, requires_grad=False)
    target = torch.tensor([0, 1, 2, 0])
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    layers = torch_step_layers.StepLayers(net, lambda: None)
    times, wall, loss = layers.step(net, [x], nn.functional.cross_entropy, target, optimizer)
    keys = set(times)
    for module in ("block.linear", "block.relu", "head", "loss"):
        assert ("forward", module) in keys and ("backward", module) in keys, (module, keys)
    # the residual add and the linear over unused's weights are the container's, backward too
    assert ("backward", "block") in keys
    # never called: no forward; its weights' AccumulateGrad goes to the module that read them
    assert ("forward", "block.unused") not in keys and ("backward", "block.unused") not in keys
    assert ("optimizer", "") in keys
    assert all(s >= 0 for s in times.values())
    assert sum(times.values()) <= wall
    assert float(loss.detach()) > 0
    assert all(p.grad is None for p in net.parameters())  # zero-grad set them to none


def test_hooks_of_a_node_that_outlives_its_step_time_nothing_later():
    class Holding(_Net):  # keeps its last output, hence its graph and the weights' AccumulateGrads
        def forward(self, x):
            self.last = super().forward(x)
            return self.last

    net = Holding()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    layers = torch_step_layers.StepLayers(net, lambda: None)
    charges = []  # per step: how many times each event was charged
    charge = layers._charge

    def counting(key, seconds):
        charges[-1][key] = charges[-1].get(key, 0) + 1
        charge(key, seconds)

    layers._charge = counting
    args = ([torch.randn(4, 8)], nn.functional.cross_entropy, torch.tensor([0, 1, 2, 0]), optimizer)
    for _ in range(4):
        charges.append({})
        first, _, _ = layers.step(net, *args)
        loss = nn.functional.cross_entropy(net(args[0][0]), args[2])  # a plain step, hooks of none
        loss.backward()
        optimizer.zero_grad(set_to_none=True)
    assert charges[0][("backward", "head")] >= 3  # addmm, and the AccumulateGrads of weight and bias
    assert charges[-1] == charges[0]


def test_the_reply_has_a_phase_and_a_module_per_event():
    step = Step(_Net(), optimizer=torch.optim.Adam)
    reply = torch_step_layers.time_steps(step, 3)
    assert reply["step_phases"] is True
    assert len(reply["events"]) == len(reply["modules"]) == len(reply["seconds"])
    assert set(reply["events"]) == {"forward", "backward", "optimizer"}
    pairs = list(zip(reply["events"], reply["modules"]))
    assert len(set(pairs)) == len(pairs)
    assert pairs[-1] == ("optimizer", "")
    assert all(len(s) == 3 for s in reply["seconds"]) and len(reply["wall"]) == len(reply["plain"]) == 3
    assert len(step.kept) == 3
    # each step's events are disjoint stretches of it: hooks of an earlier step time nothing later
    for j, wall in enumerate(reply["wall"]):
        assert sum(s[j] for s in reply["seconds"]) <= wall
