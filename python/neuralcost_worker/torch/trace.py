"""Per-kernel times of torch.compile (Inductor, CPU), mapped back to the captured ATen ops
(docs/worker-protocol.md, "Kernel traces"); the torch adapter's `layers` in compile mode.

Inductor's output is a Python module whose call() runs the kernels one after another: C++
kernels it generated (`cpp_fused_native_layer_norm_relu_0(...)`, named after the ATen ops they
fuse) and library calls (`extern_kernels.addmm(...)`, `torch.ops.aten.convolution.default(...)`).
In torch 2.15 its own kernel profiling (`torch._inductor.config.cpp.enable_kernel_profile`)
fails to load the kernels (undefined symbol aoti_record_function_end), and torch.profiler sees
the library calls only; so for a profiled pass the names call() looks up are swapped for timed
wrappers (as the eager timer wraps each ATen op), and put back after it. Each kernel call of a
pass is an event, in call order.

Mapping: a captured op goes to the first kernel call, from the one the previous op went to, whose
name contains the op's name or one of its aliases (aten::linear: addmm, mm; aten::conv2d:
convolution; ...), a library call before a generated kernel for the ops that are library calls
when compiled (products, convolutions); a library call runs one op, a generated kernel may run
several. The ops of a part TorchDynamo left to eager Python (a graph break: nn.LSTM) run in no
kernel: they are timed by torch.profiler (the ATen ops directly inside a "Torch-Compiled Region",
events after the kernel calls) and matched to them by name in order. An op neither names stays
unattributed.
"""

import re
import time

from neuralcost_worker import xla_trace

_CALL = re.compile(r"^\s*(?:\w+\s*=\s*)?(cpp_fused_\w+|extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?)\(")
ALIASES = {
    "linear": ("addmm", "mm", "linear"),
    "conv2d": ("convolution",),
    "_convolution": ("convolution",),
    "conv1d": ("convolution",),
    "matmul": ("mm", "bmm"),
    "batch_norm": ("batch_norm",),
    "layer_norm": ("layer_norm",),
    "adaptive_avg_pool2d": ("mean", "avg_pool"),
    "lstm": ("lstm", "rnn"),
    "rnn_tanh": ("rnn",),
    "softmax": ("softmax",),
    "scaled_dot_product_attention": ("attention", "bmm"),
}
LIBRARY = {
    "linear",
    "conv2d",
    "_convolution",
    "conv1d",
    "matmul",
    "bmm",
    "mm",
    "addmm",
    "lstm",
    "rnn_tanh",
    "_transformer_encoder_layer_fwd",
    "scaled_dot_product_attention",
}


def modules_since(before):
    """Inductor's output modules loaded after the snapshot `before` (a set of their ids)."""
    from torch._inductor.codecache import PyCodeCache

    return [m for m in PyCodeCache.modules if id(m) not in before and hasattr(m, "call")]


def snapshot():
    from torch._inductor.codecache import PyCodeCache

    return {id(m) for m in PyCodeCache.modules}


class _Timed:
    def __init__(self, name, fn, log):
        self.name, self.fn, self.log = name, fn, log

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter_ns()
        out = self.fn(*args, **kwargs)
        self.log.append((self.name, (time.perf_counter_ns() - t0) * 1e-9))
        return out


class _Proxy:
    """An object (extern_kernels, torch) whose attributes on the way to a timed name are timed."""

    def __init__(self, target, prefix, names, log):
        self._target, self._prefix, self._names, self._log = target, prefix, names, log

    def __getattr__(self, attr):
        value = getattr(self._target, attr)
        full = f"{self._prefix}.{attr}"
        if full in self._names:
            return _Timed(full, value, self._log)
        if any(n.startswith(full + ".") for n in self._names):
            return _Proxy(value, full, self._names, self._log)
        return value


class Timer:
    """Swaps the kernels of Inductor's modules for timed ones while it is entered."""

    def __init__(self, modules):
        self.modules = modules
        self.names = []
        for m in modules:
            with open(m.__file__) as f:
                source = f.read()
            body = source[source.find("def call(") :]
            self.names.append({c.group(1) for c in map(_CALL.match, body.splitlines()) if c})
        self.log = []

    def __enter__(self):
        self.log = []
        self.saved = []
        for m, names in zip(self.modules, self.names):
            saved = {}
            for root in {n.split(".", 1)[0] for n in names}:
                if root not in m.__dict__:
                    continue
                saved[root] = m.__dict__[root]
                m.__dict__[root] = (
                    _Timed(root, saved[root], self.log) if root in names else _Proxy(saved[root], root, names, self.log)
                )
            self.saved.append(saved)
        return self

    def __exit__(self, *exc):
        for m, saved in zip(self.modules, self.saved):
            m.__dict__.update(saved)


def _short(name):
    """A kernel call's name without its namespace: "addmm", "cpp_fused_relu_0", "convolution"."""
    parts = name.split(".")
    return parts[-2] if name.startswith("torch.ops.") and len(parts) >= 4 else parts[-1]


def match(op_names, calls, window=8):
    """The call of each captured op ("aten::relu"), an index into `calls` (the names of a pass's
    kernel calls), or None."""
    out, j, taken = [None] * len(op_names), 0, set()
    for i, op in enumerate(op_names):
        base = op.split("::", 1)[-1]
        tokens = (base.lstrip("_"),) + ALIASES.get(base, ())
        found = [
            k
            for k in range(j, min(j + window, len(calls)))
            if k not in taken and any(t in _short(calls[k]) for t in tokens)
        ]
        if not found:
            continue
        library = [k for k in found if not calls[k].startswith("cpp_fused")]
        k = library[0] if base in LIBRARY and library else found[0]
        if not calls[k].startswith("cpp_fused"):
            taken.add(k)  # a library call runs one op; a generated kernel may fuse several
        out[i], j = k, k
    return out


def eager_ops(prof):
    """[(name, seconds)] of the ATen ops a compiled pass ran outside Inductor's kernels: those
    torch.profiler sees directly inside a "Torch-Compiled Region" (the ops of a part TorchDynamo
    left to eager Python, a graph break: nn.LSTM), in start order."""
    out = []
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        parent = e.cpu_parent
        if e.name.startswith("aten::") and parent is not None and parent.name.startswith("Torch-Compiled Region"):
            out.append((e.name, e.time_range.elapsed_us() * 1e-6))
    return out


def profiled_pass(run, timer, eager):
    """One pass with the kernels timed (and, with `eager`, under torch.profiler for the ops left
    to eager Python): (wall seconds, [(name, seconds)] kernel calls then eager ops)."""
    import contextlib
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU]) if eager else contextlib.nullcontext()
    with prof:
        with timer:
            t0 = time.perf_counter_ns()
            run()
            t1 = time.perf_counter_ns()
    return (t1 - t0) * 1e-9, list(timer.log) + (eager_ops(prof) if eager else [])


def map_ops(op_names, run, timer):
    """(the event of each captured op or None, the events' names, whether eager ops were timed):
    kernel calls by match(), then ops no kernel ran by the eager ATen ops of graph breaks."""
    _, calls = profiled_pass(run, timer, True)
    kernels = len(timer.log)
    names = [n for n, _ in calls]
    owner = match(op_names, names[:kernels])
    left = [i for i, o in enumerate(owner) if o is None]
    for i, k in zip(left, xla_trace.match_in_order([op_names[i] for i in left], names[kernels:])):
        if k is not None:
            owner[i] = kernels + k
    return owner, names, kernels < len(names)


def time_calls(run, timer, n, expected, eager):
    """The `layers` reply of n passes, each after a plain pass (and an untimed one after putting
    the kernels back): each kernel call of a pass is an event, in call order, then each eager
    op of a graph break."""
    from neuralcost_worker.protocol import WorkerError

    clock = time.perf_counter_ns
    seconds, wall, plain = [[] for _ in expected], [], []
    for _ in range(n):
        run()
        t0 = clock()
        run()
        plain.append((clock() - t0) * 1e-9)
        pass_seconds, calls = profiled_pass(run, timer, eager)
        wall.append(pass_seconds)
        if [name for name, _ in calls] != list(expected):
            raise WorkerError("internal", "two compiled passes ran different kernels: no per-kernel times")
        for j, (_, s) in enumerate(calls):
            seconds[j].append(s)
    return seconds, wall, plain
