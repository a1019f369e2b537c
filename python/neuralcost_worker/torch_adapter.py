"""PyTorch 2 for the worker (docs/worker-protocol.md): the reference networks of
python/reference_torch.py, run eagerly or through torch.compile (Inductor), and captured as the
ATen ops they dispatch, which the C++ core maps with the same table as the LibTorch backend.

Devices: the CPU and each CUDA GPU torch sees ("cuda:0", ...). A model runs on exactly the
device its build request names (the CPU by default), never on a GPU because one is there."""
import importlib
import importlib.util
import logging
import math
import os
import re
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

from neuralcost_worker import inductor_trace, model_inputs, native_timer, torch_step_layers, training, xla_trace  # noqa: E402
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
    """Names every tensor of one forward pass: model inputs, weights and buffers (by data
    pointer), edges. A buffer (a module's registered state: position ids, rotary frequencies,
    running statistics) is described as one, not as a trainable weight nor a model input."""

    def __init__(self, inputs, parameter_names, buffer_names=None):
        # id -> (name, kind, weak reference); kind is "param", "buffer" or "" (an edge). Weak:
        # holding a tensor that an op returned makes the dispatcher run an extra aten::detach on
        # it, which a plain pass does not run; the reference tells a reused id from the tensor
        # it was given to.
        self.known = {}
        self.params = parameter_names
        self.buffers = buffer_names or {}
        self.next = 0
        self.consts = 0
        for i, t in enumerate(inputs):
            self._remember(t, f"input{i}", "")

    def _remember(self, t, name, kind):
        self.known[id(t)] = (name, kind, weakref.ref(t))

    def describe(self, t):
        entry = self.known.get(id(t))
        if entry is None or entry[2]() is not t:
            name, kind = self.params.get(t.data_ptr()), "param"
            if name is None:
                name, kind = self.buffers.get(t.data_ptr()), "buffer"
            if name is None:
                name, kind = f"const{self.consts}", "buffer"
                self.consts += 1
            self._remember(t, name, kind)
        name, kind, _ = self.known[id(t)]
        value = tensor(name, t.shape, str(t.dtype).replace("torch.", ""), bool(kind))
        if kind == "buffer":
            value["buffer"] = True
        if not t.is_contiguous():
            value["contiguous"] = False
        return value

    def produce(self, t, op, inputs):
        first = next((v for v in inputs if isinstance(v, dict) and "tensor" in v), None)
        # a view of a weight that keeps its elements is that weight; one that selects or
        # broadcasts (expand, slice) is an edge, so the weight is counted once at its own size
        if op in _VIEWS and first is not None and first.get("param") and t.numel() == math.prod(first["shape"]):
            self._remember(t, first["tensor"], "buffer" if first.get("buffer") else "param")
        else:
            self._remember(t, f"%{self.next}", "")
            self.next += 1
        return self.describe(t)


class _Modules:
    """The path of the module running now ("stage0.conv"), kept by global module hooks while
    entered: ops dispatched inside a module's forward are named after it."""

    def __init__(self, net):
        self.paths = {id(m): name for name, m in net.named_modules() if name}
        self.stack = []

    def current(self):
        return self.stack[-1] if self.stack else ""

    def __enter__(self):
        hooks = torch.nn.modules.module

        def pre(module, _args):
            self.stack.append(self.paths.get(id(module), self.current()))

        def post(_module, _args, _out):
            if self.stack:
                self.stack.pop()

        self.handles = [hooks.register_module_forward_pre_hook(pre), hooks.register_module_forward_hook(post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.stack.clear()


class _ProgramModules:
    """The module path of the node running now in a torch.export program, from the node's
    nn_module_stack (the innermost module), while an fx Interpreter runs the program node by
    node: the ops a node dispatches are named after the module it came from, as `analyze` names
    layers. The program's own graph nodes, so no module hook is involved."""

    def __init__(self, program):
        self.program = program
        self.now = ""

    def current(self):
        return self.now

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.now = ""

    def run(self, xs):
        outer = self

        class Run(torch.fx.Interpreter):
            def run_node(self, node):
                stack = node.meta.get("nn_module_stack")
                outer.now = str(list(stack.values())[-1][0]) if stack else ""
                return super().run_node(node)

        return Run(self.program).run(*xs)


class _Recorder(TorchDispatchMode):
    """Records every ATen op that reaches the dispatcher, with its arguments in schema order and
    the module it ran in (when `modules` is given)."""

    def __init__(self, namer, modules=None):
        super().__init__()
        self.namer = namer
        self.modules = modules
        self.ops = []

    def value(self, v):
        if isinstance(v, torch.Tensor):
            return self.namer.describe(v)
        if isinstance(v, (list, tuple)):
            if v and all(isinstance(e, torch.Tensor) or e is None for e in v) and any(e is not None for e in v):
                # index's Tensor?[]: the index tensors (None marks a dimension taken whole)
                return {"tensors": [self.namer.describe(e) for e in v if e is not None]}
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
        schema = func._schema
        # the arguments as they are before the call: an in-place op (transpose_, ...) changes them
        values = []
        for i, a in enumerate(schema.arguments):
            if not a.kwarg_only and i < len(args):
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            else:
                v = a.default_value if a.has_default_value() else None
            values.append(self.value(v))
        out = self.call(func, args, kwargs)
        outs = []
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, torch.Tensor):
                outs.append(self.namer.produce(o, schema.name, values))
            elif isinstance(o, (list, tuple)) and all(isinstance(e, torch.Tensor) for e in o):
                outs.append({"tensors": [self.namer.produce(e, schema.name, values) for e in o]})
            else:
                outs.append(self.value(o))
        op = {"op": schema.name, "in": values, "out": outs}
        if self.modules is not None and self.modules.current():
            op["module"] = self.modules.current()
        self.ops.append(op)
        return out


_TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                 "int64": torch.int64, "int32": torch.int32, "int8": torch.int8, "bool": torch.bool}
_NAMES = {v: k for k, v in _TORCH_DTYPES.items()}


def _values(spec, dtype):
    """One input's values (model_inputs.py): floats standard normal or uniform in the range,
    integers uniform in the range, bools 0 or 1. The caller seeds the generator."""
    shape, r, t = spec["shape"], spec["range"], _TORCH_DTYPES[dtype]
    if dtype == "bool":
        return torch.randint(0, 2, shape).to(torch.bool)
    if dtype in model_inputs.INTEGER:
        return torch.randint(int(r[0]), int(r[1]), shape, dtype=t)
    if r is not None:
        return (torch.rand(*shape, dtype=torch.float64) * (r[1] - r[0]) + r[0]).to(t)
    return torch.randn(*shape, dtype=t)


def _program_inputs(request, name, program, dtype):
    """The example inputs of a torch.export program: the request's inputs matched to the program's
    user inputs by name or position; an input's dtype is its own, else the program's for integer
    and bool inputs, else the model's (`dtype`, to which the module is converted)."""
    given = model_inputs.requested(request)
    names = [str(n) for n in program.graph_signature.user_inputs]
    declared = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
    xs, described = [], []
    torch.manual_seed(1)
    for spec in model_inputs.match(given, names, name):
        val = declared.get(spec["name"])
        own = _NAMES.get(getattr(val, "dtype", None))
        chosen = spec["dtype"]
        if own is not None and chosen is not None and (own in model_inputs.FLOAT) != (chosen in model_inputs.FLOAT):
            raise WorkerError("invalid_argument", f"{name}: input '{spec['name']}' is {own} in the program, not {chosen}")
        if chosen is None:
            chosen = own if own is not None and own not in model_inputs.FLOAT else _NAMES[dtype]
        model_inputs.check_range(spec, chosen, name)
        xs.append(_values(spec, chosen))
        described.append(model_inputs.describe(spec, chosen))
    return names[:len(xs)], xs, "; ".join(described)


def _load(request, dtype):
    """(network in eval mode, input names, example inputs, their description, origin) for a
    reference name or a torch.export file."""
    name = request["model"]
    if name in reference_torch.NAMES:
        net, x = reference_torch.build(name, int(request["batch"]), int(request.get("seq", 32)),
                                       int(request.get("width", 128)), int(request.get("depth", 2)))
        return net, ["input0"], [x.to(dtype)], "", "torch.nn module of python/reference_torch.py"
    if not os.path.exists(name):
        raise WorkerError("not_found", f"unknown model '{name}': neither a built-in model "
                          f"({', '.join(reference_torch.NAMES)}) nor a file")
    if not name.endswith(".pt2"):
        raise WorkerError("unimplemented", f"{name}: the torch worker loads torch.export programs (.pt2, written by "
                          "torch.export.save); for TorchScript files use --backend libtorch")
    if not model_inputs.requested(request):
        raise WorkerError("invalid_argument", f"{name}: a model file needs its inputs: --input NAME=SHAPE[:DTYPE[:LOW..HIGH]] "
                          "or --input-shape SHAPE (e.g. 32x3x32x32), once per input")
    program, imported = _load_program(name)
    names, xs, described = _program_inputs(request, name, program, dtype)
    origin = f"torch.export program {name}" + (f" (its output type is defined by {imported}, imported to load it)" if imported else "")
    return program.module(), names, xs, described, origin


_UNREGISTERED = re.compile(r"Deserializing (\S+) in pytree failed because the serialized type is not registered")


def _load_program(name):
    """(the torch.export program in `name`, the package imported to load it or ""). torch.export.load
    logs the cause of a failure as a warning and raises "check the warnings above": the cause is
    taken from the log. A program whose output type (a transformers ModelOutput) is registered by
    an installed package loads after that package is imported; one that is not installed is named."""
    messages = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())
            if record.exc_info and record.exc_info[1] is not None:  # the logged exception's own cause
                e = record.exc_info[1]
                while (e.__cause__ or e.__context__) is not None:
                    e = e.__cause__ or e.__context__
                messages.append(f"{type(e).__name__}: {_first_line(str(e))}")

    log, keep = logging.getLogger("torch.export"), Keep(logging.WARNING)
    log.addHandler(keep)
    imported = ""
    try:
        for attempt in range(2):
            messages.clear()
            try:
                return torch.export.load(name), imported
            except Exception as e:  # a truncated or foreign file, a type no package registered
                cause = _error_line(messages) or f"{type(e).__name__}: {_first_line(str(e))}"
                unregistered = _UNREGISTERED.search(cause)
                package = unregistered.group(1).split(".")[0] if unregistered else ""
                if attempt == 0 and package and importlib.util.find_spec(package) is not None:
                    try:  # the type's module registers it with pytree as it defines it
                        importlib.import_module(unregistered.group(1).rsplit(".", 1)[0])
                    except Exception as failed:
                        raise WorkerError("invalid_argument", f"{name}: not a loadable torch.export program: its "
                                          f"output type {unregistered.group(1)} needs {package}, whose import "
                                          f"failed: {type(failed).__name__}: {_first_line(str(failed))}") from e
                    imported = package
                    continue
                if unregistered:
                    cause = (f"its output type {unregistered.group(1)} is not registered with torch's pytree"
                             + (f": install the package '{package}' in the worker's environment" if package and
                                importlib.util.find_spec(package) is None else ""))
                raise WorkerError("invalid_argument", f"{name}: not a loadable torch.export program: {cause}") from e
    finally:
        log.removeHandler(keep)


def _first_line(text):
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _error_line(messages):
    """The last "SomeError: ..." line of the logged messages (a logged traceback's exception)."""
    found = ""
    for m in messages:
        for line in m.splitlines():
            if re.match(r"\s*[A-Za-z_.]*(Error|Exception)\b.*:", line):
                found = line.strip()
    return found


class _Timer(TorchDispatchMode):
    """Times every ATen op that reaches the dispatcher and keeps its name, nothing else: the
    same ops _Recorder sees (its argument descriptions dispatch nothing to the mode), at a
    fraction of its per-op cost (no argument walk, no tensor naming, no dicts)."""

    def __init__(self, device):
        super().__init__()
        self.names = []
        self.seconds = []
        self.cuda = device.type == "cuda"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        clock = time.perf_counter_ns
        t0 = clock()
        out = func(*args, **(kwargs or {}))
        if self.cuda:
            torch.cuda.synchronize()
        self.seconds.append((clock() - t0) * 1e-9)
        self.names.append(func._schema.name)
        return out


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


class _TrainStep:
    """One whole training step of a network in train mode: forward, loss, backward, optimizer step,
    zero-grad (set to none). Compile mode compiles forward + loss with torch.compile (AOTAutograd
    compiles their backward with them); the optimizer step and zero-grad stay eager."""

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

        def forward_loss(*inputs):
            return loss_fn(net(*inputs), self.target)

        self.loss_fn, self.compiled = loss_fn, compile_mode
        self.forward_loss = torch.compile(forward_loss) if compile_mode else forward_loss
        self.optimizer = _optimizer(self.params, train)
        self.losses = []  # the loss tensors of the first and the latest step (read without a sync per step)

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
        the optimizer (torch_step_layers.py); compiled (or a torch that does not number autograd
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
        return {"events": ["forward", "backward", "optimizer"], "seconds": seconds, "wall": wall, "plain": plain,
                "step_phases": True}

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
            return {"peak_bytes": int(torch.cuda.max_memory_allocated(self.device)), "start_bytes": int(start),
                    "source": "torch.cuda.max_memory_allocated after reset_peak_memory_stats (CUDA caching allocator)",
                    "includes": "every tensor allocated on the GPU and alive at the step's start (parameters, "
                                "optimizer state, inputs, labels) plus the step's activations, gradients and "
                                "temporaries; not the allocator's cached free blocks nor the CUDA context"}
        from torch.profiler import ProfilerActivity, profile
        start = self._resident_bytes()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            self.run()
        events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
                         and e.device_type() == torch.autograd.DeviceType.CPU), key=lambda e: e.start_ns())
        live = peak = 0
        for e in events:
            live += e.nbytes()
            peak = max(peak, live)
        return {"peak_bytes": int(start + peak), "start_bytes": int(start),
                "source": "torch.profiler(profile_memory=True): the CPU allocator's memory events of one step "
                          "(allocations minus frees, in time order), over the storages alive at its start",
                "includes": f"the storages the step keeps between steps (parameters, buffers, optimizer state, "
                            f"inputs, labels: {start} B, each storage once) plus the peak of the step's own CPU "
                            f"allocations not yet freed ({peak} B over {len(events)} allocator events: activations, "
                            "gradients, temporaries); not memory that oneDNN, OpenBLAS or OpenMP allocate themselves"}

    def evidence(self):
        out = {"steps_run": getattr(self, "steps", 0)}
        if self.losses:
            out["loss_first"] = f"{float(self.losses[0]):.6g}"
            out["loss_last"] = f"{float(self.losses[-1]):.6g}"
        return out


class _Model:
    def __init__(self, request):
        dtype = {"fp32": torch.float32, "fp64": torch.float64}.get(request.get("dtype", "fp32"))
        if dtype is None:
            raise WorkerError("unimplemented", f"dtype {request.get('dtype')} is not supported (fp32, fp64)")
        net, names, xs, described, origin = _load(request, dtype)
        self.device = torch.device(request.get("device", "cpu"))
        self.cuda = self.device.type == "cuda"
        self.net = net.to(device=self.device, dtype=dtype)
        self.xs = [x.to(device=self.device) for x in xs]  # each in its own dtype (token ids stay integers)
        self.mode = request["mode"]
        self.name = f"{os.path.basename(request['model'])} ({self.mode}, torch)"
        self.parameters = sum(p.numel() for p in self.net.parameters() if p.requires_grad)
        self.inputs = [{"name": n, "shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
                       for n, x in zip(names, self.xs)]
        self.environment = {"device": str(self.device)}
        if described:
            self.environment["input_values"] = described
        if self.cuda:
            self.environment["cuda_device"] = torch.cuda.get_device_name(self.device)
        self.train = training.parse(request["train"]) if "train" in request else None
        self.training = self.train is not None
        self.step = None
        if self.training:
            if request["model"] not in reference_torch.NAMES:
                raise WorkerError("unimplemented", f"{request['model']}: training runs the built-in networks only "
                                  f"({', '.join(reference_torch.NAMES)}), not model files")
            self.net.train()
            self.step = _TrainStep(self.net, self.xs, self.train, self.mode == "compile", self.device)
            self.environment.update(self.step.contract)
            self.environment["train_zero_grad"] = "optimizer.zero_grad(set_to_none=True) after each step"
            self.environment["train_optimizer_implementation"] = (
                f"torch.optim.{type(self.step.optimizer).__name__} (torch's default implementation: a for-loop "
                "over the parameters on the CPU, foreach kernels on CUDA), eager")
        if self.mode == "compile" and self.training:
            self.forward = None
            self.origin = (f"{origin}, train mode, torch.compile (Inductor, default mode) of forward + loss "
                           "(AOTAutograd compiles their backward); optimizer step and zero-grad eager")
            self.environment["compile_backend"] = "inductor"
        elif self.training:
            self.forward = None
            self.origin = f"{origin}, train mode, eager"
        elif self.mode == "compile":
            self.forward = torch.compile(self.net)
            self.origin = f"{origin}, torch.compile (Inductor, default mode)"
            self.environment["compile_backend"] = "inductor"
        else:
            self.forward = self.net
            self.origin = f"{origin}, eager"
        before = inductor_trace.snapshot() if self.mode == "compile" and not self.training else None
        try:
            self.run()  # compiles in compile mode; fails here when the model cannot run
        except Exception as e:
            if out_of_memory(e):
                raise
            shapes = ", ".join("x".join(map(str, x.shape)) for x in self.xs)
            raise WorkerError("invalid_argument", f"{request['model']}: forward failed for input shape(s) {shapes}: "
                              f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
        # the modules Inductor wrote for this model: their kernels are what layers() times
        self.inductor = inductor_trace.modules_since(before) if before is not None else []

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
        from torch._dynamo.utils import counters
        return {"compiled_programs": counters["stats"]["unique_graphs"],
                "graph_breaks": sum(counters["graph_break"].values()),
                "compiler": "torch.compile (TorchDynamo, Inductor)"}

    def _namer(self):
        params = {p.data_ptr(): n for n, p in self.net.named_parameters()}
        buffers = {b.data_ptr(): n for n, b in self.net.named_buffers() if b.data_ptr() not in params}
        return _Namer(self.xs, params, buffers)

    def capture(self):
        program = isinstance(self.net, torch.fx.GraphModule) and not self.training
        recorder = _Recorder(self._namer(), _ProgramModules(self.net) if program else _Modules(self.net))
        if self.training:
            with torch.enable_grad(), recorder.modules, recorder:  # as the step runs it: train mode, autograd on
                out = self.net(*self.xs)
            # the network's output is what the loss reads; autograd's aten::detach of saved
            # tensors (relu's output) leaves outputs no op reads, which are no results
            self.capture_outputs = [recorder.namer.describe(out)["tensor"]]
            return recorder.ops, ("ATen ops dispatched by one eager forward pass in train mode with autograd on "
                                  "(TorchDispatchMode): the forward of the training step")
        with torch.inference_mode(), recorder.modules, recorder:
            if isinstance(recorder.modules, _ProgramModules):
                recorder.modules.run(self.xs)
            else:
                self.net(*self.xs)
        self.event_modules = [op.get("module", "") for op in recorder.ops]
        source = ("ATen ops dispatched by one eager forward pass (TorchDispatchMode); "
                  "torch.compile runs the same program through Inductor's fused kernels")
        if self.mode == "compile" and self.inductor:
            # each op's event: the Inductor kernel call that ran it (inductor_trace.py), for layers()
            timer = inductor_trace.Timer(self.inductor)
            owner, calls, eager = inductor_trace.map_ops([op["op"] for op in recorder.ops], self.run, timer)
            covered = [[] for _ in calls]
            for op, e in zip(recorder.ops, owner):
                op["event"] = e
                if e is not None:
                    covered[e].append(op["op"])
            self.kernels = (timer, calls, eager, [xla_trace.event_name(("inductor:" if j < len(timer.log) else "eager:") + c,
                                                                      covered[j]) for j, c in enumerate(calls)])
            source += f"; each op's event is the Inductor kernel call that ran it ({len(calls)} calls)"
        return recorder.ops, source

    def layers(self, n):
        """Per-op times of n eager passes, each after a plain pass (for the timer's overhead); a
        training step's phases in both modes."""
        if self.training:
            return self.step.phases(n)
        if self.mode != "eager":
            if getattr(self, "kernels", None) is None:
                raise WorkerError("unimplemented" if not self.inductor else "invalid_argument",
                                  "torch.compile wrote no Inductor module to time" if not self.inductor else
                                  "send 'capture' before 'layers': it maps the ops to the kernels")
            timer, calls, eager, names = self.kernels
            seconds, wall, plain = inductor_trace.time_calls(self.run, timer, n, calls, eager)
            return {"events": names, "seconds": seconds, "wall": wall, "plain": plain, "kernels": True}
        # the compiled per-op timer (native_timer.py), loaded on first use, on the CPU; on a GPU
        # each op is synchronised by the Python dispatch mode
        if not hasattr(self, "native"):
            self.native, self.native_why = native_timer.load() if not self.cuda else (None, "a CUDA device")
        timed, warning = None, ""
        if self.native is not None:
            try:
                timed = self._native_layers(n)
                timer = f"RecordFunction timestamps on the dispatch mode's ops (compiled observer {self.native.path})"
            except native_timer.TimerError as e:
                warning = (f"per-op times by the Python dispatch mode (a few µs per op), not the compiled timer: {e}")
        if timed is None:
            timed = self._mode_layers(n)
            timer = "TorchDispatchMode timestamps (Python)" + ("" if self.native else f": no compiled timer ({self.native_why})")
        names, seconds, wall, plain = timed
        reply = {"events": names, "seconds": [list(e) for e in zip(*seconds)], "wall": wall, "plain": plain,
                 "timer": timer}
        if warning:
            reply["timer_warning"] = warning
        modules = getattr(self, "event_modules", None)
        if modules is not None and len(modules) == len(names):
            reply["modules"] = modules  # of the captured pass: names ops that became no record (aten::t)
        return reply

    def _mode_pass(self):
        """(op names, op seconds, wall seconds) of one eager pass timed by the Python dispatch mode."""
        timer = _Timer(self.device)
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
        """The same ops as _mode_layers, timed by the compiled RecordFunction observer (native_timer.py):
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
                raise WorkerError("internal", f"two eager passes dispatched different ops: no per-op times ({e})") from e
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
        return {"allocated_bytes": s.get("allocated_bytes.all.current", 0),
                "peak_allocated_bytes": s.get("allocated_bytes.all.peak", 0),
                "reserved_bytes": s.get("reserved_bytes.all.current", 0)}


def build(request):
    return _Model(request)
