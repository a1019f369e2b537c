"""The JAX adapter of the worker (docs/worker-protocol.md): builds a reference network of
jax_models.py, runs it eagerly (op by op) or jitted, and captures its jaxpr as op records.

Modes. `jit` is jax.jit, compiled during build. `eager` runs the forward function under
jax.disable_jit(): then jit-decorated library functions (jnp.einsum, jax.nn.relu, ...) are not
compiled as units, every primitive is dispatched on its own, and lax.scan is a Python loop over
the steps (jax 0.10, lax/control_flow/loops.py), which is what op by op means in JAX. Without
disable_jit, a scan or a jitted helper would still run as one compiled program.

Threads. NEURALCOST_THREADS = n > 0 pins the process to n CPUs (sched_setaffinity) before jax
starts: XLA's CPU client sizes its thread pools from the CPUs it may run on. With n = 1,
--xla_cpu_multi_thread_eigen=false is added to XLA_FLAGS as well (single-threaded Eigen
kernels). XLA has no flag for any other pool size. environment() reports what was set.

Capture. jax.make_jaxpr of forward(params, x), walked into op records "jax::<primitive>":
  - parameters are "param": true and named by their pytree path ("layers.0.linear1.weight");
    the input is "input0"; other values are fresh edges "%N". Scalar literals are numbers, and
    scalar arithmetic on them alone (a fori_loop's counter) is computed here, not reported.
  - constants of the program (closed-over arrays: batch-norm running statistics) are "param"
    tensors named "const:<path>" (from forward.buffers) or "const:<N>"; the JAX table treats
    weights named "const:..." as constants (buffers), not trainable parameters.
  - a layout op (reshape, transpose, ...) of a weight that keeps its size is still that weight:
    its output keeps the weight's name, so a weight is one weight however it is viewed.
  - nested calls (jit, custom_jvp_call, ...) are inlined; a scan of length L is L copies of its
    body: its weights keep their names, carries chain from step to step, each step's x is a
    `slice` + `squeeze` of xs and the ys are stacked by `reshape` + `concatenate` (what scan does
    under disable_jit). `while` and `cond` are reported as single ops, which the C++ table lists
    as unmodeled (their trip count or branch depends on data).
"""
import numbers
import os

from neuralcost_worker.protocol import WorkerError, tensor


def _apply_threads():
    """Applies NEURALCOST_THREADS before jax starts its thread pools; returns what was set."""
    try:
        n = int(os.environ.get("NEURALCOST_THREADS", "0") or 0)
    except ValueError:
        n = 0
    applied = {"threads": str(n) if n > 0 else "default"}
    if n > 0:
        cpus = sorted(os.sched_getaffinity(0))[:n]
        os.sched_setaffinity(0, cpus)
        applied["cpu_affinity"] = ",".join(map(str, cpus))
        os.environ.setdefault("OMP_NUM_THREADS", str(n))
        if n == 1:
            flags = os.environ.get("XLA_FLAGS", "")
            if "xla_cpu_multi_thread_eigen" not in flags:
                os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    return applied


_THREADS = _apply_threads()

import jax  # noqa: E402  (after the thread settings)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal  # noqa: E402

from neuralcost_worker import jax_models  # noqa: E402

FRAMEWORK = "jax"
MODES = ["eager", "jit"]
DTYPES = {"fp32": "float32", "fp64": "float64"}
# primitives whose inner jaxpr is run as is: inlined into the caller
INLINED = {"pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
           "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint", "named_call"}
# primitives that only relabel or re-lay out their input: of a weight, the weight itself
LAYOUT = {"reshape", "squeeze", "expand_dims", "broadcast_in_dim", "transpose", "convert_element_type",
          "stop_gradient"}


def environment():
    import jaxlib
    devices = jax.devices()
    env = dict(_THREADS)
    env.update({"jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__, "backend": jax.default_backend(),
                "devices": ", ".join(str(d) for d in devices), "device_kind": devices[0].device_kind,
                "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "cpu_count": str(len(os.sched_getaffinity(0)))})
    return env


def out_of_memory(exc):
    return "RESOURCE_EXHAUSTED" in str(exc) or "Out of memory" in str(exc)


def _positive(request, key, default):
    value = request.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WorkerError("invalid_argument", f"'{key}' must be a positive integer (got {value!r})")
    return value


def build(request):
    model = str(request.get("model", ""))
    if model not in jax_models.NAMES:
        if os.path.exists(model):
            raise WorkerError("unimplemented", f"jax: cannot load model file '{model}': the JAX worker runs "
                              f"only the reference models ({', '.join(jax_models.NAMES)})")
        if os.sep in model or os.path.splitext(model)[1]:
            raise WorkerError("not_found", f"jax: model file '{model}' does not exist")
        raise WorkerError("invalid_argument",
                          f"jax: unknown model '{model}' (reference models: {', '.join(jax_models.NAMES)})")
    dtype = request.get("dtype", "fp32")
    if dtype not in DTYPES:
        raise WorkerError("invalid_argument", f"jax: dtype '{dtype}' is not supported (fp32, fp64)")
    if dtype == "fp64":
        jax.config.update("jax_enable_x64", True)  # process-wide; fp32 models stay fp32 (explicit dtypes)
    sizes = {k: _positive(request, k, d) for k, d in (("batch", 1), ("seq", 32), ("width", 128), ("depth", 2))}
    forward, params, x = jax_models.build(model, dtype=jnp.dtype(DTYPES[dtype]), **sizes)
    return Model(model, request["mode"], forward, params, x)


class Model:
    def __init__(self, name, mode, forward, params, x):
        self.name, self.mode, self.forward, self.params, self.x = name, mode, forward, params, x
        self.parameters = sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(params))
        self.inputs = [{"name": "input0", "shape": list(x.shape), "dtype": str(x.dtype)}]
        self.origin = f"neuralcost_worker/jax_models.py: {name} in jax.numpy/lax (input {list(x.shape)}, seed 0)"
        self.environment = {"mode": mode, "x64": str(jax.config.jax_enable_x64),
                            "execution": "jax.disable_jit (op by op)" if mode == "eager" else "jax.jit"}
        self.compiled = jax.jit(forward) if mode == "jit" else None
        self.run()  # compiles here (jit: the program; eager: each primitive), not in the first timed run

    def run(self):
        if self.compiled is not None:
            jax.block_until_ready(self.compiled(self.params, self.x))
        else:
            with jax.disable_jit():
                jax.block_until_ready(self.forward(self.params, self.x))

    def memory(self):
        stats = jax.devices()[0].memory_stats()
        return {k: v for k, v in (stats or {}).items() if isinstance(v, numbers.Number)}

    def capture(self):
        closed = jax.make_jaxpr(self.forward)(self.params, self.x)
        leaves = jax.tree_util.tree_flatten_with_path(self.params)[0]
        args = [tensor(_path(p), leaf.shape, leaf.dtype, param=True) for p, leaf in leaves]
        args.append(tensor("input0", self.x.shape, self.x.dtype))
        buffers = jax.tree_util.tree_flatten_with_path(getattr(self.forward, "buffers", {}))[0]
        walker = _Walker({id(leaf): "const:" + _path(p) for p, leaf in buffers})
        walker.call(closed, args)
        return walker.ops, f"jaxpr of the {self.name} forward function (jax.make_jaxpr, {len(walker.ops)} ops)"


def _path(path):
    """A pytree path as a dotted name: layers.0.linear1.weight."""
    parts = []
    for k in path:
        parts.append(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))))
    return ".".join(parts)


def _number(v):
    """A scalar as a JSON number; non-finite floats as strings ("-inf"), which JSON cannot hold."""
    v = np.asarray(v).item()
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v


def _attr(v):
    """An equation parameter as a JSON value (lists of ints flattened), or None to leave it out."""
    if isinstance(v, (bool, np.bool_, str)):
        return v if isinstance(v, str) else bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return _number(v)
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return str(np.dtype(v))
    if isinstance(v, (tuple, list)):
        flat = []
        for item in v:
            item = _attr(item)
            if isinstance(item, list):
                flat.extend(item)
            elif isinstance(item, int) and not isinstance(item, bool):
                flat.append(item)
            else:
                return None
        return flat
    return None


def _layout(spec, letters):
    """ConvDimensionNumbers spec (dim indices) as a layout string: (0, 3, 1, 2) -> NHWC."""
    out = [""] * len(spec)
    spatial = "DHW"[3 - (len(spec) - 2):] if len(spec) <= 5 else "0123456789"
    for i, dim in enumerate(spec):
        out[dim] = letters[i] if i < 2 else spatial[i - 2]
    return "".join(out)


def _attrs(eqn):
    attrs = {}
    for key, v in eqn.params.items():
        if key == "dimension_numbers" and eqn.primitive.name == "dot_general":
            (lc, rc), (lb, rb) = v
            attrs.update(lhs_contracting=list(map(int, lc)), rhs_contracting=list(map(int, rc)),
                         lhs_batch=list(map(int, lb)), rhs_batch=list(map(int, rb)))
        elif key == "dimension_numbers" and eqn.primitive.name == "conv_general_dilated":
            attrs.update(lhs_layout=_layout(v.lhs_spec, "NC"), rhs_layout=_layout(v.rhs_spec, "OI"),
                         out_layout=_layout(v.out_spec, "NC"))
        elif hasattr(v, "_fields"):  # other dimension numbers (gather, scatter): one entry per field
            attrs.update((f, a) for f, a in ((f, _attr(getattr(v, f))) for f in v._fields) if a is not None)
        elif not isinstance(v, (Jaxpr, ClosedJaxpr)):
            value = _attr(v)
            if value is not None:
                attrs[key] = value
    return attrs


class _Walker:
    """Walks a jaxpr, inlining calls and unrolling scans, and collects the op records."""

    def __init__(self, const_names):
        self.ops = []
        self.edges = 0
        self.const_names = const_names  # id(array) -> name, for named constants
        self.consts = {}                # id(array) -> value, so a constant read twice is one

    def fresh(self, shape, dtype):
        self.edges += 1
        return tensor(f"%{self.edges}", shape, dtype)

    def constant(self, value):
        """A scalar stays a value (written as a number); an array is a named constant tensor."""
        if np.ndim(value) == 0:
            return value
        if id(value) not in self.consts:
            name = self.const_names.get(id(value), f"const:{len(self.consts)}")
            self.consts[id(value)] = (tensor(name, np.shape(value), np.asarray(value).dtype, param=True), value)
        return self.consts[id(value)][0]

    def read(self, env, atom):
        return self.constant(atom.val) if isinstance(atom, Literal) else env[atom]

    def emit(self, name, ins, outs, attrs=None):
        ins = [v if isinstance(v, dict) else _number(v) for v in ins]
        op = {"op": f"jax::{name}", "in": ins, "out": outs}
        if attrs:
            op["attrs"] = attrs
        self.ops.append(op)

    def call(self, jaxpr, args):
        """Runs `jaxpr` (closed or open) on the values `args`; returns its output values."""
        consts = [self.constant(c) for c in jaxpr.consts] if isinstance(jaxpr, ClosedJaxpr) else []
        jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            ins = [self.read(env, v) for v in eqn.invars]
            name = eqn.primitive.name
            inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            if name in INLINED and inner is not None:
                outs = self.call(inner, ins)
            elif name == "scan":
                outs = self.scan(eqn.params, ins, [v.aval for v in eqn.outvars])
            elif (folded := self.fold(eqn, ins)) is not None:
                outs = folded
            else:
                outs = [self.result(name, ins, v.aval) for v in eqn.outvars]
                self.emit(name, ins, outs, _attrs(eqn))
            env.update(zip(eqn.outvars, outs))
        return [self.read(env, v) for v in jaxpr.outvars]

    @staticmethod
    def fold(eqn, ins):
        """Scalar arithmetic on known scalars (a fori_loop's counter), computed here: no op."""
        if not eqn.outvars or eqn.effects or any(isinstance(v, dict) for v in ins) or \
                any(v.aval.shape != () for v in eqn.outvars) or \
                any(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in eqn.params.values()):
            return None
        try:
            outs = eqn.primitive.bind(*ins, **eqn.params)
        except Exception:  # not evaluable here: reported as an op
            return None
        return list(outs) if eqn.primitive.multiple_results else [outs]

    def result(self, name, ins, aval):
        """An output value: the weight itself for a same-size layout op of a weight."""
        tensors = [v for v in ins if isinstance(v, dict)]
        if name in LAYOUT and len(tensors) == 1 and tensors[0].get("param"):
            w = tensors[0]
            if int(np.prod(w["shape"])) == int(np.prod(aval.shape)) and w["dtype"] == str(aval.dtype):
                return tensor(w["tensor"], aval.shape, aval.dtype, param=True)
        return self.fresh(aval.shape, aval.dtype)

    def scan(self, params, ins, out_avals):
        consts_n, carry_n, length = params["num_consts"], params["num_carry"], params["length"]
        consts, carry, xs = ins[:consts_n], ins[consts_n:consts_n + carry_n], ins[consts_n + carry_n:]
        steps = range(length - 1, -1, -1) if params["reverse"] else range(length)
        ys = {}
        for i in steps:
            outs = self.call(params["jaxpr"], consts + carry + [self.index(x, i) for x in xs])
            carry, ys[i] = outs[:carry_n], outs[carry_n:]
        stacked = [self.stack([ys[i][j] for i in range(length)], aval)
                   for j, aval in enumerate(out_avals[carry_n:])]
        return carry + stacked

    def index(self, x, i):
        """Step i's slice of a scanned-over value: slice + squeeze (a weight slice stays a weight)."""
        shape = x["shape"]
        if x.get("param"):
            return tensor(f"{x['tensor']}.{i}", shape[1:], x["dtype"], param=True)
        part = self.fresh([1] + shape[1:], x["dtype"])
        self.emit("slice", [x], [part], {"start_indices": [i] + [0] * (len(shape) - 1),
                                         "limit_indices": [i + 1] + shape[1:]})
        out = self.fresh(shape[1:], x["dtype"])
        self.emit("squeeze", [part], [out], {"dimensions": [0]})
        return out

    def stack(self, values, aval):
        """The scan's stacked output from each step's value: reshape to [1, ...] + concatenate."""
        out = self.fresh(aval.shape, aval.dtype)
        if not values or not all(isinstance(v, dict) for v in values):  # literal step outputs: a fill
            self.emit("broadcast_in_dim", [values[0] if values else 0], [out], {"shape": list(aval.shape)})
            return out
        parts = []
        for v in values:
            parts.append(self.fresh([1] + v["shape"], aval.dtype))
            self.emit("reshape", [v], [parts[-1]], {"new_sizes": parts[-1]["shape"]})
        self.emit("concatenate", parts, [out], {"dimension": 0})
        return out
