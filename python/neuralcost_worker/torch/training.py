"""The torch worker's training step (docs/worker-protocol.md, "Training"): forward, loss, backward,
optimizer step and zero-grad of a network in train mode, eager or compiled, with its memory."""

import contextlib
import time

import torch

from neuralcost_worker import training
from neuralcost_worker.torch import step_layers as torch_step_layers
from neuralcost_worker.protocol import WorkerError


def _optimizer(params, train):
    """torch.optim's optimizer of the request, with torch's default implementation (a for-loop
    over the parameters on the CPU, foreach kernels on CUDA)."""
    o, lr, wd = train["optimizer"], train["learning_rate"], train["weight_decay"]
    if o == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if o == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=train["momentum"], weight_decay=wd)
    cls = torch.optim.Adam if o == "adam" else torch.optim.AdamW
    return cls(params, lr=lr, betas=tuple(train["betas"]), eps=train["eps"], weight_decay=wd)


class TrainStep:
    """One whole training step of a network in train mode: forward, loss, backward, optimizer step,
    zero-grad (set to none). Compile mode compiles forward + loss with torch.compile (AOTAutograd
    compiles their backward with them); the optimizer step and zero-grad stay eager. bf16-mixed
    runs forward + loss under torch.autocast(bfloat16) over the fp32 parameters (which are the
    master weights: the optimizer updates them in fp32), the backward outside it, as PyTorch's
    automatic mixed precision recipe does."""

    def __init__(self, net, xs, train, compile_mode, device):
        self.net, self.xs, self.train, self.device = net, xs, train, device
        self.cuda = device.type == "cuda"
        self.params = [p for p in net.parameters() if p.requires_grad]
        if not self.params:
            raise WorkerError("invalid_argument", "the model has no trainable parameters")
        with torch.no_grad():
            out = net(*xs)
        if not isinstance(out, torch.Tensor):
            raise WorkerError("unimplemented", "training needs a model with one tensor output")
        shape = tuple(int(d) for d in out.shape)
        self.loss = training.loss_for(train, shape)
        # the same fixed labels (or target) as the JAX and TensorFlow workers (training.targets)
        target = torch.from_numpy(training.targets(train, self.loss, shape))
        if self.loss == "cross_entropy":
            self.classes = shape[1]
            self.target = target.to(device=device, dtype=torch.int64)
            loss_fn = torch.nn.functional.cross_entropy
        else:
            self.target = target.to(device=device, dtype=out.dtype)
            loss_fn = torch.nn.functional.mse_loss
        self.contract = training.contract(train, self.loss, shape)

        self.mixed = train["precision"] == "bf16-mixed"

        def forward_loss(*inputs):
            with self.autocast():
                return loss_fn(net(*inputs), self.target)

        self.loss_fn, self.compiled = loss_fn, compile_mode
        self.forward_loss = torch.compile(forward_loss) if compile_mode else forward_loss
        self.optimizer = _optimizer(self.params, train)
        self.losses = []  # the loss tensors of the first and the latest step (read without a sync per step)

    def autocast(self):
        """The step's precision for its forward pass: torch.autocast to bfloat16 for bf16-mixed."""
        if self.mixed:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _keep(self, loss):
        loss = loss.detach()
        self.losses = [loss] if not self.losses else [self.losses[0], loss]
        self.steps = getattr(self, "steps", 0) + 1

    def run(self):
        loss = self.forward_loss(*self.xs)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._sync()
        self._keep(loss)

    def phases(self, n):
        """n steps, each after a plain step: eager, each module's forward and backward, the loss and
        the optimizer (torch/step_layers.py); compiled (or a torch that does not number autograd
        nodes visibly), three phases (forward with the loss, backward, optimizer with zero-grad)."""
        if not self.compiled and torch_step_layers.available():
            return torch_step_layers.time_steps(self, n)
        clock = time.perf_counter_ns
        seconds, wall, plain = [[], [], []], [], []
        for _ in range(n):
            t0 = clock()
            self.run()
            plain.append((clock() - t0) * 1e-9)
            t0 = clock()
            loss = self.forward_loss(*self.xs)
            self._sync()
            t1 = clock()
            loss.backward()
            self._sync()
            t2 = clock()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self._sync()
            t3 = clock()
            self._keep(loss)
            wall.append((t3 - t0) * 1e-9)
            for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3))):
                seconds[i].append((b - a) * 1e-9)
        return {
            "events": ["forward", "backward", "optimizer"],
            "seconds": seconds,
            "wall": wall,
            "plain": plain,
            "step_phases": True,
        }

    def _resident_bytes(self):
        """Bytes of the storages alive between steps that the step keeps: parameters, buffers,
        optimizer state, inputs and the target, each storage once."""
        seen = {}
        tensors = list(self.net.parameters()) + list(self.net.buffers()) + list(self.xs) + [self.target]
        for state in self.optimizer.state.values():
            tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
        for t in tensors:
            if t.device == self.device or (t.device.type == self.device.type == "cpu"):
                storage = t.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
        return sum(seen.values())

    def memory(self):
        """One step with the peak reset before it."""
        self.run()  # the optimizer's state exists after a first step
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            start = torch.cuda.memory_allocated(self.device)
            self.run()
            return {
                "peak_bytes": int(torch.cuda.max_memory_allocated(self.device)),
                "start_bytes": int(start),
                "source": "torch.cuda.max_memory_allocated after reset_peak_memory_stats (CUDA caching allocator)",
                "includes": "every tensor allocated on the GPU and alive at the step's start (parameters, "
                "optimizer state, inputs, labels) plus the step's activations, gradients and "
                "temporaries; not the allocator's cached free blocks nor the CUDA context",
            }
        from torch.profiler import ProfilerActivity, profile

        start = self._resident_bytes()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            self.run()
        events = sorted(
            (
                e
                for e in prof.profiler.kineto_results.events()
                if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
            ),
            key=lambda e: e.start_ns(),
        )
        live = peak = 0
        for e in events:
            live += e.nbytes()
            peak = max(peak, live)
        return {
            "peak_bytes": int(start + peak),
            "start_bytes": int(start),
            "source": "torch.profiler(profile_memory=True): the CPU allocator's memory events of one step "
            "(allocations minus frees, in time order), over the storages alive at its start",
            "includes": f"the storages the step keeps between steps (parameters, buffers, optimizer state, "
            f"inputs, labels: {start} B, each storage once) plus the peak of the step's own CPU "
            f"allocations not yet freed ({peak} B over {len(events)} allocator events: activations, "
            "gradients, temporaries); not memory that oneDNN, OpenBLAS or OpenMP allocate themselves",
        }

    def evidence(self):
        out = {"steps_run": getattr(self, "steps", 0)}
        if self.losses:
            out["loss_first"] = f"{float(self.losses[0]):.6g}"
            out["loss_last"] = f"{float(self.losses[-1]):.6g}"
        return out
