"""PyTorch 2 for the worker (docs/worker-protocol.md): the reference networks of
python/neuralcost_worker/torch/reference.py, run eagerly or through torch.compile (Inductor), and captured as the
ATen ops they dispatch, which the C++ core maps with the same table as the LibTorch backend.

Devices: the CPU and each CUDA GPU torch sees ("cuda:0", ...). A model runs on exactly the
device its build request names (the CPU by default), never on a GPU because one is there."""

import os
import time

_THREADS = int(os.environ.get("NEURALCOST_THREADS", "0") or 0)
# Inductor compiles in a pool of subprocesses that stay alive and busy after torch.compile
# returns, stealing CPU from the timed runs (and from the next run's worker): compile here.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402

from neuralcost_worker import training, xla_trace  # noqa: E402
from neuralcost_worker.torch import native_timer  # noqa: E402
from neuralcost_worker.torch import reference as reference_torch  # noqa: E402
from neuralcost_worker.torch import trace as inductor_trace  # noqa: E402
from neuralcost_worker.torch.capture import Modules, Namer, ProgramModules, Recorder, Timer  # noqa: E402
from neuralcost_worker.torch.models import load  # noqa: E402
from neuralcost_worker.torch.training import TrainStep  # noqa: E402
from neuralcost_worker.protocol import WorkerError, cpu_name  # noqa: E402

if _THREADS > 0:
    torch.set_num_threads(_THREADS)
# One worker may hold many compiled models (slots): the models of one class at several batches
# are compiled from one forward's code, which TorchDynamo would otherwise stop compiling after 8
# (falling back to eager) and, from the second shape on, compile with dynamic shapes. Each is
# compiled for its own static shapes (dynamic=False below), as in a process of its own.
for _limit in ("recompile_limit", "cache_size_limit"):
    if hasattr(torch._dynamo.config, _limit):
        setattr(torch._dynamo.config, _limit, max(getattr(torch._dynamo.config, _limit), 1024))


def _dynamo_counts():
    """TorchDynamo's process-wide counts: graphs compiled, graph breaks."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


FRAMEWORK = "torch"
MODES = ["eager", "compile"]


def environment():
    env = {
        "torch_version": torch.__version__,
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "mkldnn": "yes" if torch.backends.mkldnn.is_available() else "no",
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", ""),
    }
    if torch.version.cuda:
        env["cuda_version"] = torch.version.cuda
    return env


def devices():
    """The CPU, then every CUDA GPU torch sees (none when torch has no CUDA or finds no GPU)."""
    found = [{"id": "cpu", "name": cpu_name()}]
    if torch.cuda.is_available():
        found += [{"id": f"cuda:{i}", "name": torch.cuda.get_device_name(i)} for i in range(torch.cuda.device_count())]
    return found


def out_of_memory(exc):
    return isinstance(exc, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in str(exc).lower()


class _Model:
    def __init__(self, request):
        dtype = {"fp32": torch.float32, "fp64": torch.float64, "bf16": torch.bfloat16}.get(request.get("dtype", "fp32"))
        if dtype is None:
            raise WorkerError("unimplemented", f"dtype {request.get('dtype')} is not supported (fp32, fp64, bf16)")
        net, names, xs, described, origin = load(request, dtype)
        self.device = torch.device(request.get("device", "cpu"))
        self.cuda = self.device.type == "cuda"
        self.net = net.to(device=self.device, dtype=dtype)
        self.xs = [x.to(device=self.device) for x in xs]  # each in its own dtype (token ids stay integers)
        self.mode = request["mode"]
        self.name = f"{os.path.basename(request['model'])} ({self.mode}, torch)"
        self.parameters = sum(p.numel() for p in self.net.parameters() if p.requires_grad)
        self.inputs = [
            {"name": n, "shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
            for n, x in zip(names, self.xs)
        ]
        self.environment = {"device": str(self.device)}
        if described:
            self.environment["input_values"] = described
        if self.cuda:
            self.environment["cuda_device"] = torch.cuda.get_device_name(self.device)
            # PyTorch lets cuDNN run fp32 convolutions in TF32 by default: on an H200 a ResNet-18
            # then ran at 59 TFLOP/s, 88 % of the fp32 roof it was measured against. An fp32 run
            # computes in fp32, as its roofline assumes.
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            self.environment["cuda_tf32"] = (
                "off: torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32 are False, so that "
                "an fp32 run computes in fp32 as its roofline assumes (PyTorch's default lets cuDNN use TF32)"
            )
        self.train = training.parse(request["train"]) if "train" in request else None
        self.training = self.train is not None
        self.step = None
        if self.training:
            if request["model"] not in reference_torch.NAMES:
                raise WorkerError(
                    "unimplemented",
                    f"{request['model']}: training runs the built-in networks only "
                    f"({', '.join(reference_torch.NAMES)}), not model files",
                )
            self.net.train()
            self.step = TrainStep(self.net, self.xs, self.train, self.mode == "compile", self.device)
            self.environment.update(self.step.contract)
            self.environment["train_zero_grad"] = "optimizer.zero_grad(set_to_none=True) after each step"
            if self.step.mixed:
                self.environment["train_autocast"] = (
                    f"torch.autocast(device_type={self.device.type!r}, dtype=torch.bfloat16) around forward + loss "
                    "(its op lists decide each op's dtype; casts of the fp32 parameters are cached for the pass), "
                    "backward and optimizer outside it; parameters, gradients and optimizer state fp32"
                )
            self.environment["train_optimizer_implementation"] = (
                f"torch.optim.{type(self.step.optimizer).__name__} (torch's default implementation: a for-loop "
                "over the parameters on the CPU, foreach kernels on CUDA), eager"
            )
        if self.mode == "compile" and self.training:
            self.forward = None
            self.origin = (
                f"{origin}, train mode, torch.compile (Inductor, default mode) of forward + loss "
                "(AOTAutograd compiles their backward); optimizer step and zero-grad eager"
            )
            self.environment["compile_backend"] = "inductor"
        elif self.training:
            self.forward = None
            self.origin = f"{origin}, train mode, eager"
        elif self.mode == "compile":
            self.forward = torch.compile(self.net, dynamic=False)
            self.origin = f"{origin}, torch.compile (Inductor, default mode, static shapes)"
            self.environment["compile_backend"] = "inductor"
        else:
            self.forward = self.net
            self.origin = f"{origin}, eager"
        before = inductor_trace.snapshot() if self.mode == "compile" and not self.training else None
        self.dynamo_before = _dynamo_counts()
        try:
            self.run()  # compiles in compile mode; fails here when the model cannot run
        except Exception as e:
            if out_of_memory(e):
                raise
            shapes = ", ".join("x".join(map(str, x.shape)) for x in self.xs)
            raise WorkerError(
                "invalid_argument",
                f"{request['model']}: forward failed for input shape(s) {shapes}: "
                f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
            ) from e
        # the modules Inductor wrote for this model: their kernels are what layers() times
        self.inductor = inductor_trace.modules_since(before) if before is not None else []
        # this model's graphs and breaks: the counters are the process's, which may hold others
        self.dynamo_built = [a - b for a, b in zip(_dynamo_counts(), self.dynamo_before)]

    def run(self):
        if self.training:
            self.step.run()
            return
        with torch.inference_mode():
            self.out = self.forward(*self.xs)
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def execution(self):
        """What the passes ran, by TorchDynamo's own counters: the graphs torch.compile captured and
        compiled (none in eager mode), and the graph breaks that left parts to eager Python."""
        if self.mode != "compile":
            return {"compiled_programs": 0, "compiler": "none (eager)"}
        graphs, breaks = self.dynamo_built
        return {
            "compiled_programs": graphs,
            "graph_breaks": breaks,
            "compiler": "torch.compile (TorchDynamo, Inductor)",
        }

    def _namer(self):
        params = {p.data_ptr(): n for n, p in self.net.named_parameters()}
        buffers = {b.data_ptr(): n for n, b in self.net.named_buffers() if b.data_ptr() not in params}
        return Namer(self.xs, params, buffers)

    def capture(self):
        program = isinstance(self.net, torch.fx.GraphModule) and not self.training
        recorder = Recorder(self._namer(), ProgramModules(self.net) if program else Modules(self.net))
        if self.training:
            # as the step runs it: train mode, autograd on, its precision (autocast's casts are ops too)
            with torch.enable_grad(), self.step.autocast(), recorder.modules, recorder:
                out = self.net(*self.xs)
            # the network's output is what the loss reads; autograd's aten::detach of saved
            # tensors (relu's output) leaves outputs no op reads, which are no results
            self.capture_outputs = [recorder.namer.describe(out)["tensor"]]
            return recorder.ops, (
                "ATen ops dispatched by one eager forward pass in train mode with autograd on "
                "(TorchDispatchMode): the forward of the training step"
            )
        with torch.inference_mode(), recorder.modules, recorder:
            if isinstance(recorder.modules, ProgramModules):
                recorder.modules.run(self.xs)
            else:
                self.net(*self.xs)
        self.event_modules = [op.get("module", "") for op in recorder.ops]
        source = (
            "ATen ops dispatched by one eager forward pass (TorchDispatchMode); "
            "torch.compile runs the same program through Inductor's fused kernels"
        )
        if self.mode == "compile" and self.inductor:
            # each op's event: the Inductor kernel call that ran it (torch/trace.py), for layers()
            timer = inductor_trace.Timer(self.inductor)
            owner, calls, eager = inductor_trace.map_ops([op["op"] for op in recorder.ops], self.run, timer)
            covered = [[] for _ in calls]
            for op, e in zip(recorder.ops, owner):
                op["event"] = e
                if e is not None:
                    covered[e].append(op["op"])
            self.kernels = (
                timer,
                calls,
                eager,
                [
                    xla_trace.event_name(("inductor:" if j < len(timer.log) else "eager:") + c, covered[j])
                    for j, c in enumerate(calls)
                ],
            )
            source += f"; each op's event is the Inductor kernel call that ran it ({len(calls)} calls)"
        return recorder.ops, source

    def layers(self, n):
        """Per-op times of n eager passes, each after a plain pass (for the timer's overhead); a
        training step's phases in both modes."""
        if self.training:
            return self.step.phases(n)
        if self.mode != "eager":
            if getattr(self, "kernels", None) is None:
                raise WorkerError(
                    "unimplemented" if not self.inductor else "invalid_argument",
                    "torch.compile wrote no Inductor module to time"
                    if not self.inductor
                    else "send 'capture' before 'layers': it maps the ops to the kernels",
                )
            timer, calls, eager, names = self.kernels
            seconds, wall, plain = inductor_trace.time_calls(self.run, timer, n, calls, eager)
            return {"events": names, "seconds": seconds, "wall": wall, "plain": plain, "kernels": True}
        # the compiled per-op timer (torch/native_timer.py), loaded on first use, on the CPU; on a GPU
        # each op is synchronised by the Python dispatch mode
        if not hasattr(self, "native"):
            self.native, self.native_why = native_timer.load() if not self.cuda else (None, "a CUDA device")
        timed, warning = None, ""
        if self.native is not None:
            try:
                timed = self._native_layers(n)
                timer = f"RecordFunction timestamps on the dispatch mode's ops (compiled observer {self.native.path})"
            except native_timer.TimerError as e:
                warning = f"per-op times by the Python dispatch mode (a few µs per op), not the compiled timer: {e}"
        if timed is None:
            timed = self._mode_layers(n)
            timer = "TorchDispatchMode timestamps (Python)" + (
                "" if self.native else f": no compiled timer ({self.native_why})"
            )
        names, seconds, wall, plain = timed
        reply = {
            "events": names,
            "seconds": [list(e) for e in zip(*seconds)],
            "wall": wall,
            "plain": plain,
            "timer": timer,
        }
        if warning:
            reply["timer_warning"] = warning
        modules = getattr(self, "event_modules", None)
        if modules is not None and len(modules) == len(names):
            reply["modules"] = modules  # of the captured pass: names ops that became no record (aten::t)
        return reply

    def _mode_pass(self):
        """(op names, op seconds, wall seconds) of one eager pass timed by the Python dispatch mode."""
        timer = Timer(self.device)
        t0 = time.perf_counter_ns()
        with torch.inference_mode(), timer:
            self.out = self.net(*self.xs)
        return timer.names, timer.seconds, (time.perf_counter_ns() - t0) * 1e-9

    def _mode_layers(self, n):
        clock = time.perf_counter_ns
        names, seconds, wall, plain = None, [], [], []
        for _ in range(n):
            t0 = clock()
            self.run()
            plain.append((clock() - t0) * 1e-9)
            ops, op_seconds, w = self._mode_pass()
            wall.append(w)
            if names is None:
                names = ops
            elif ops != names:
                raise WorkerError("internal", "two eager passes dispatched different ops: no per-op times")
            seconds.append(op_seconds)
        return names, seconds, wall, plain

    def _native_layers(self, n):
        """The same ops as _mode_layers, timed by the compiled RecordFunction observer (torch/native_timer.py):
        the dispatch mode names the ops of one pass, the observer learns the calls of the next and
        times the passes after."""

        def forward():
            with torch.inference_mode():
                self.out = self.net(*self.xs)

        clock = time.perf_counter_ns
        names = self._mode_pass()[0]
        self.native.plan(forward, names)  # TimerError: it cannot time these ops (the caller falls back)
        seconds, wall, plain = [], [], []
        for _ in range(n):
            t0 = clock()
            self.run()
            plain.append((clock() - t0) * 1e-9)
            try:
                w, op_seconds = self.native.time(forward)
            except native_timer.TimerError as e:
                raise WorkerError(
                    "internal", f"two eager passes dispatched different ops: no per-op times ({e})"
                ) from e
            wall.append(w)
            seconds.append(op_seconds)
        return names, seconds, wall, plain

    def step_memory(self):
        return self.step.memory()

    def train_evidence(self):
        return self.step.evidence()

    def memory(self):
        if not self.cuda:
            return {}
        s = torch.cuda.memory_stats(self.device)
        return {
            "allocated_bytes": s.get("allocated_bytes.all.current", 0),
            "peak_allocated_bytes": s.get("allocated_bytes.all.peak", 0),
            "reserved_bytes": s.get("reserved_bytes.all.current", 0),
        }


def build(request):
    return _Model(request)
