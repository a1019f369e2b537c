"""Small networks for the tests of the torch worker's per-layer step timers (its Python hooks,
test_torch_step_layers.py; its compiled step timer, test_native_step_timer.py): a residual add in a
container and a module whose weights another module reads."""

import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.relu = nn.ReLU()
        self.unused = nn.Linear(8, 8)  # its weights are read by the container, not by its forward

    def forward(self, x):
        y = self.relu(self.linear(x))
        return x + torch.nn.functional.linear(y, self.unused.weight)  # the container's own ops


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Residual()
        self.head = nn.Linear(8, 3)
        self.skip = False  # a step that takes the other path makes other calls

    def forward(self, x):
        return self.head(x if self.skip else self.block(x))


def step_args(net, optimizer=torch.optim.SGD):
    """(inputs, loss function, target, optimizer) of a step of `net` on 4 samples."""
    return (
        [torch.randn(4, 8)],
        nn.functional.cross_entropy,
        torch.tensor([0, 1, 2, 0]),
        optimizer(net.parameters(), lr=0.1),
    )


class Step:
    """The attributes of the torch worker's TrainStep that step_layers.time_steps uses; from its
    `skip_from`-th plain step on, the network takes the other path."""

    def __init__(self, net, optimizer=torch.optim.SGD, skip_from=None):
        self.net = net
        self.xs, self.loss_fn, self.target, self.optimizer = step_args(net, optimizer)
        self.device, self.runs, self.skip_from, self.kept = torch.device("cpu"), 0, skip_from, []
        self.steps = 0  # as TrainStep counts them (train_steps_run): run() and _keep() each count one

    def run(self):
        self.runs += 1
        self.steps += 1
        if self.skip_from is not None:
            self.net.skip = self.runs >= self.skip_from
        loss = self.loss_fn(self.net(*self.xs), self.target)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _sync(self):
        pass

    def _keep(self, loss):
        self.kept.append(float(loss.detach()))
        self.steps += 1
