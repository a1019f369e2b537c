"""PyTorch 2 for the worker (docs/worker-protocol.md): the reference networks of
python/reference_torch.py, run eagerly or through torch.compile (Inductor), and captured as the
ATen ops they dispatch, which the C++ core maps with the same table as the LibTorch backend.

Devices: the CPU and each CUDA GPU torch sees ("cuda:0", ...). A model runs on exactly the
device its build request names (the CPU by default), never on a GPU because one is there."""
import os
import sys
import time
import weakref
from pathlib import Path

_THREADS = int(os.environ.get("NEURALCOST_THREADS", "0") or 0)
# Inductor compiles in a pool of subprocesses that stay alive and busy after torch.compile
# returns, stealing CPU from the timed runs (and from the next run's worker): compile here.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reference_torch  # noqa: E402

from neuralcost_worker.protocol import WorkerError, cpu_name, tensor  # noqa: E402

if _THREADS > 0:
    torch.set_num_threads(_THREADS)

FRAMEWORK = "torch"
MODES = ["eager", "compile"]

# ops whose output is a view of their first input: a view of a weight is still that weight (the
# one list, shared with the C++ ATen mapping)
_VIEWS = {line.strip() for line in (Path(__file__).with_name("aten_view_ops.txt")).read_text().splitlines()
          if line.startswith("aten::")}


def environment():
    env = {"torch_version": torch.__version__,
           "intra_op_threads": torch.get_num_threads(), "inter_op_threads": torch.get_num_interop_threads(),
           "mkldnn": "yes" if torch.backends.mkldnn.is_available() else "no",
           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "")}
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


class _Namer:
    """Names every tensor of one forward pass: model inputs, weights (by data pointer), edges."""

    def __init__(self, inputs, parameter_names):
        # id -> (name, parameter, weak reference). Weak: holding a tensor that an op returned
        # makes the dispatcher run an extra aten::detach on it, which a plain pass does not run;
        # the reference tells a reused id from the tensor it was given to.
        self.known = {}
        self.params = parameter_names
        self.next = 0
        self.consts = 0
        for i, t in enumerate(inputs):
            self._remember(t, f"input{i}", False)

    def _remember(self, t, name, param):
        self.known[id(t)] = (name, param, weakref.ref(t))

    def describe(self, t):
        entry = self.known.get(id(t))
        if entry is None or entry[2]() is not t:
            name = self.params.get(t.data_ptr())
            if name is None:
                name = f"const{self.consts}"
                self.consts += 1
            self._remember(t, name, True)
        name, param, _ = self.known[id(t)]
        value = tensor(name, t.shape, str(t.dtype).replace("torch.", ""), param)
        if not t.is_contiguous():
            value["contiguous"] = False
        return value

    def produce(self, t, op, inputs):
        first = next((v for v in inputs if isinstance(v, dict) and "tensor" in v), None)
        if op in _VIEWS and first is not None and first.get("param"):
            self._remember(t, first["tensor"], True)
        else:
            self._remember(t, f"%{self.next}", False)
            self.next += 1
        return self.describe(t)


class _Recorder(TorchDispatchMode):
    """Records every ATen op that reaches the dispatcher, with its arguments in schema order."""

    def __init__(self, namer):
        super().__init__()
        self.namer = namer
        self.ops = []

    def value(self, v):
        if isinstance(v, torch.Tensor):
            return self.namer.describe(v)
        if isinstance(v, (list, tuple)):
            if v and all(isinstance(e, torch.Tensor) for e in v):
                return {"tensors": [self.namer.describe(e) for e in v]}
            if all(isinstance(e, int) and not isinstance(e, bool) for e in v):
                return [int(e) for e in v]
            return None if not v else str(v)
        if isinstance(v, (bool, int, str)) or v is None:
            return v
        if isinstance(v, float):
            return float(v)
        return str(v)

    def call(self, func, args, kwargs):
        return func(*args, **kwargs)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = self.call(func, args, kwargs)
        schema = func._schema
        values = []
        for i, a in enumerate(schema.arguments):
            if not a.kwarg_only and i < len(args):
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            else:
                v = a.default_value if a.has_default_value() else None
            values.append(self.value(v))
        outs = []
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, torch.Tensor):
                outs.append(self.namer.produce(o, schema.name, values))
            elif isinstance(o, (list, tuple)) and all(isinstance(e, torch.Tensor) for e in o):
                outs.append({"tensors": [self.namer.produce(e, schema.name, values) for e in o]})
            else:
                outs.append(self.value(o))
        self.ops.append({"op": schema.name, "in": values, "out": outs})
        return out


def _load(request, dtype):
    """(network in eval mode, example inputs, origin) for a reference name or a torch.export file."""
    name = request["model"]
    if name in reference_torch.NAMES:
        net, x = reference_torch.build(name, int(request["batch"]), int(request.get("seq", 32)),
                                       int(request.get("width", 128)), int(request.get("depth", 2)))
        return net, [x], "torch.nn module of python/reference_torch.py"
    if not os.path.exists(name):
        raise WorkerError("not_found", f"unknown model '{name}': neither a built-in model "
                          f"({', '.join(reference_torch.NAMES)}) nor a file")
    if not name.endswith(".pt2"):
        raise WorkerError("unimplemented", f"{name}: the torch worker loads torch.export programs (.pt2, written by "
                          "torch.export.save); for TorchScript files use --backend libtorch")
    shapes = request.get("input_shapes") or []
    if not shapes:
        raise WorkerError("invalid_argument", f"{name}: a model file needs --input-shape (e.g. 32x3x32x32), once per input")
    try:
        program = torch.export.load(name)
    except Exception as e:  # a truncated or foreign file
        raise WorkerError("invalid_argument", f"{name}: not a loadable torch.export program: {type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    torch.manual_seed(1)
    return program.module(), [torch.randn(*s) for s in shapes], f"torch.export program {name}"


class _Timer(_Recorder):
    """Times every ATen op while recording it as _Recorder does, so that the timed ops are the
    captured ones, in the same order (describing tensors can itself dispatch ops)."""

    def __init__(self, namer, device):
        super().__init__(namer)
        self.seconds = []
        self.cuda = device.type == "cuda"

    def call(self, func, args, kwargs):
        clock = time.perf_counter_ns
        t0 = clock()
        out = func(*args, **kwargs)
        if self.cuda:
            torch.cuda.synchronize()
        self.seconds.append((clock() - t0) * 1e-9)
        return out


class _Model:
    def __init__(self, request):
        dtype = {"fp32": torch.float32, "fp64": torch.float64}.get(request.get("dtype", "fp32"))
        if dtype is None:
            raise WorkerError("unimplemented", f"dtype {request.get('dtype')} is not supported (fp32, fp64)")
        net, xs, origin = _load(request, dtype)
        self.device = torch.device(request.get("device", "cpu"))
        self.cuda = self.device.type == "cuda"
        self.net = net.to(device=self.device, dtype=dtype)
        self.xs = [x.to(device=self.device, dtype=dtype) for x in xs]
        self.mode = request["mode"]
        self.name = f"{os.path.basename(request['model'])} ({self.mode}, torch)"
        self.parameters = sum(p.numel() for p in self.net.parameters() if p.requires_grad)
        self.inputs = [{"name": f"input{i}", "shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
                       for i, x in enumerate(self.xs)]
        self.environment = {"device": str(self.device)}
        if self.cuda:
            self.environment["cuda_device"] = torch.cuda.get_device_name(self.device)
        if self.mode == "compile":
            self.forward = torch.compile(self.net)
            self.origin = f"{origin}, torch.compile (Inductor, default mode)"
            self.environment["compile_backend"] = "inductor"
        else:
            self.forward = self.net
            self.origin = f"{origin}, eager"
        try:
            self.run()  # compiles in compile mode; fails here when the model cannot run
        except Exception as e:
            if out_of_memory(e):
                raise
            shapes = ", ".join("x".join(map(str, x.shape)) for x in self.xs)
            raise WorkerError("invalid_argument", f"{request['model']}: forward failed for input shape(s) {shapes}: "
                              f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e

    def run(self):
        with torch.inference_mode():
            self.out = self.forward(*self.xs)
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def execution(self):
        """What the passes ran, by TorchDynamo's own counters: the graphs torch.compile captured and
        compiled (none in eager mode), and the graph breaks that left parts to eager Python."""
        if self.mode != "compile":
            return {"compiled_programs": 0, "compiler": "none (eager)"}
        from torch._dynamo.utils import counters
        return {"compiled_programs": counters["stats"]["unique_graphs"],
                "graph_breaks": sum(counters["graph_break"].values()),
                "compiler": "torch.compile (TorchDynamo, Inductor)"}

    def _namer(self):
        names = {}
        for n, p in self.net.named_parameters():
            names[p.data_ptr()] = n
        for n, b in self.net.named_buffers():
            names[b.data_ptr()] = n
        return _Namer(self.xs, names)

    def capture(self):
        recorder = _Recorder(self._namer())
        with torch.inference_mode(), recorder:
            self.net(*self.xs)
        return recorder.ops, ("ATen ops dispatched by one eager forward pass (TorchDispatchMode); "
                              "torch.compile runs the same program through Inductor's fused kernels")

    def layers(self, n):
        """Per-op times of n eager passes, each after a plain pass (for the timer's overhead)."""
        if self.mode != "eager":
            raise WorkerError("unimplemented", "torch.compile runs fused kernels: per-op times exist in eager mode only")
        clock = time.perf_counter_ns
        names, seconds, wall, plain = None, [], [], []
        for _ in range(n):
            t0 = clock()
            self.run()
            plain.append((clock() - t0) * 1e-9)
            timer = _Timer(self._namer(), self.device)
            t0 = clock()
            with torch.inference_mode(), timer:
                self.out = self.net(*self.xs)
            wall.append((clock() - t0) * 1e-9)
            ops = [op["op"] for op in timer.ops]
            if names is None:
                names = ops
            elif ops != names:
                raise WorkerError("internal", "two eager passes dispatched different ops: no per-op times")
            seconds.append(timer.seconds)
        return {"events": names, "seconds": [list(e) for e in zip(*seconds)], "wall": wall, "plain": plain}

    def memory(self):
        if not self.cuda:
            return {}
        s = torch.cuda.memory_stats(self.device)
        return {"allocated_bytes": s.get("allocated_bytes.all.current", 0),
                "peak_allocated_bytes": s.get("allocated_bytes.all.peak", 0),
                "reserved_bytes": s.get("reserved_bytes.all.current", 0)}


def build(request):
    return _Model(request)
