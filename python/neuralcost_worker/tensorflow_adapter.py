"""The TensorFlow adapter of the worker (docs/worker-protocol.md; the interface is in protocol.py).

Modes: eager (op by op), function (tf.function), xla (tf.function(jit_compile=True)). A forward
pass is synchronised by taking its result's .numpy().

Capture traces the forward once with tf.function into a concrete function, freezes it (nested
calls inlined, variables turned into constants) and walks its graph in order. Tensors are named
by their graph names; the model input is input0. A variable's value is named by the variable
("param": true, the same name at every read); non-trainable variables are "buffer:<variable>".
Constants never become ops: scalars become numbers, small integer tensors (shapes, axes,
permutations, paddings) lists of integers, other constants "param" tensors "const:<tensor>".
src/backends/capture/tf_mapping.cpp counts both prefixes as buffers, not parameters. Small
integer results known before the program runs (shape arithmetic) are folded into integers too.
"""
import os
import time

THREADS = int(os.environ.get("NEURALCOST_THREADS", "0") or 0)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2_as_graph  # noqa: E402

from neuralcost_worker import tf_models  # noqa: E402
from neuralcost_worker.protocol import WorkerError, tensor  # noqa: E402

FRAMEWORK = "tensorflow"
MODES = ["eager", "function", "xla"]

# before TensorFlow starts its thread pools (the first op does): n threads in one pool of
# intra-op parallelism, ops one at a time, as the other frameworks run a forward pass
if THREADS > 0:
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)

DTYPES = {"fp32": tf.float32, "fp64": tf.float64}
SMALL = 64  # integer constants up to this many elements become lists of integers
FOLDABLE = {tf.int32, tf.int64, tf.bool}
# ops whose result is their first input, reshaped: of a variable or constant, still that value
ALIASES = {"Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape", "Reshape", "Squeeze", "ExpandDims"}


def environment():
    threads = tf.config.threading
    return {
        "tensorflow_version": tf.__version__,
        "devices": ", ".join(d.name for d in tf.config.list_physical_devices()),
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (TensorFlow's default: on for x86 CPUs)"),
        "intra_op_threads": threads.get_intra_op_parallelism_threads() or f"0 (default: {os.cpu_count()})",
        "inter_op_threads": threads.get_inter_op_parallelism_threads() or "0 (default)",
        "neuralcost_threads": THREADS,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "tf_xla_flags": os.environ.get("TF_XLA_FLAGS", ""),
        "built_with_cuda": tf.test.is_built_with_cuda(),
    }


def out_of_memory(exc):
    return isinstance(exc, tf.errors.ResourceExhaustedError)


def build(req):
    mode, name = req["mode"], req.get("model")
    dtype = DTYPES.get(req.get("dtype", "fp32"))
    if dtype is None:
        raise WorkerError("invalid_argument", f"tensorflow: dtype '{req.get('dtype')}' is not one of {', '.join(DTYPES)}")
    if name in tf_models.NAMES:
        size = {k: int(req.get(k, d)) for k, d in (("batch", 1), ("seq", 32), ("width", 128), ("depth", 2))}
        net, x = tf_models.build(name, dtype=dtype, **size)
        origin = (f"neuralcost_worker/tf_models.py: {name} (tf.Module, raw tf ops), "
                  + ", ".join(f"{k} {v}" for k, v in size.items()))
        return Model(name, net.__call__, x, mode, origin, net.trainable_variables)
    if isinstance(name, str) and os.path.isdir(name):
        return saved_model(req, name, dtype)
    if isinstance(name, str) and os.path.exists(name):
        raise WorkerError("unimplemented", f"{name}: TensorFlow models are read from a SavedModel directory, not a file")
    raise WorkerError("not_found", f"'{name}' is neither a built-in model ({', '.join(tf_models.NAMES)}) nor a SavedModel directory")


def saved_model(req, path, dtype):
    """A SavedModel's serving signature with one input; the input shape from input_shapes."""
    if not os.path.exists(os.path.join(path, "saved_model.pb")):
        raise WorkerError("not_found", f"{path}: no saved_model.pb (not a SavedModel directory)")
    loaded = tf.saved_model.load(path)
    signatures = getattr(loaded, "signatures", {})
    if not signatures:
        raise WorkerError("unimplemented", f"{path}: the SavedModel has no signature to call")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    signature = signatures[key]
    specs = signature.structured_input_signature[1]
    if len(specs) != 1 or signature.structured_input_signature[0]:
        raise WorkerError("unimplemented", f"{path}: signature '{key}' takes {len(specs)} inputs; only one is supported")
    (arg, spec), = specs.items()
    shapes = req.get("input_shapes") or []
    shape = list(shapes[0]) if shapes else [int(req.get("batch", 1)) if d is None else d for d in spec.shape]
    if len(shape) != len(spec.shape) or any(d is not None and d != s for d, s in zip(spec.shape, shape)):
        raise WorkerError("invalid_argument", f"{path}: input shape {shape} does not fit the signature's {spec.shape}")
    if None in shape:
        raise WorkerError("invalid_argument", f"{path}: the input shape {list(spec.shape)} has unknown dimensions; give input_shapes")
    x = tf.constant(np.random.default_rng(1).standard_normal(shape), spec.dtype)

    def forward(t):
        return signature(**{arg: t})

    origin = f"SavedModel {path}, signature '{key}', input '{arg}' {shape} {spec.dtype.name}"
    return Model(os.path.basename(os.path.normpath(path)), forward, x, req["mode"], origin,
                 signature.trainable_variables, loaded=loaded)


class Model:
    def __init__(self, name, forward, x, mode, origin, trainable, loaded=None):
        self.name, self.forward, self.x, self.mode, self.origin = name, forward, x, mode, origin
        self.loaded = loaded  # keeps a SavedModel's objects alive
        self.parameters = sum(int(np.prod(v.shape)) for v in trainable)
        self.inputs = [{"name": "input0", "shape": list(x.shape), "dtype": x.dtype.name}]
        self.spec = tf.TensorSpec(x.shape, x.dtype)
        eager = "op by op" if loaded is None else "the signature's graph, called from Python"
        self.environment = {"mode": {"eager": eager, "function": "tf.function",
                                     "xla": "tf.function(jit_compile=True)"}[mode]}
        if mode == "eager":
            self.fn = forward
        else:
            self.fn = tf.function(forward, input_signature=[self.spec], jit_compile=mode == "xla")
        started = time.perf_counter()
        self.run()  # traces and compiles the compiled modes
        self.environment["first_run_seconds"] = f"{time.perf_counter() - started:.3f}"

    def run(self):
        for y in tf.nest.flatten(self.fn(self.x)):
            y.numpy()

    def memory(self):
        for device in ("GPU:0", "CPU:0"):
            try:
                info = tf.config.experimental.get_memory_info(device)
            except (ValueError, tf.errors.OpError):
                continue
            return {"allocator_current_bytes": info["current"], "allocator_peak_bytes": info["peak"]}
        return {}

    def capture(self):
        concrete = tf.function(self.forward).get_concrete_function(self.spec)
        return Tracer(concrete, self.x).ops, f"graph of tf.function(forward) for input {list(self.spec.shape)} {self.spec.dtype.name}"


class Var:
    """A variable, as the tensor value its reads have: named by the variable, "param": true."""

    def __init__(self, value):
        self.value = value

    def reshaped(self, shape):
        return Var(dict(self.value, shape=[int(d) for d in shape]))


class Literal:
    """A constant: a number or list of integers where an op reads it, or else a constant tensor."""

    def __init__(self, array, name):
        self.array = np.asarray(array)
        self.name = name

    def value(self, as_tensor=False):
        a = self.array
        if not as_tensor and a.ndim == 0 and a.dtype.kind in "biuf" and np.isfinite(a):  # JSON has no inf
            return bool(a) if a.dtype.kind == "b" else int(a) if a.dtype.kind in "iu" else float(a)
        if not as_tensor and a.dtype.kind in "iu" and a.ndim >= 1 and a.size <= SMALL:
            return [int(v) for v in a.ravel()]  # a Pad's [[before, after], ...] row by row
        return tensor(f"const:{self.name}", a.shape, a.dtype.name, param=True)

    def reshaped(self, shape):
        return Literal(self.array.reshape(shape), self.name)


def attrs_of(op):
    out = {}
    for key in op.node_def.attr:
        if key.startswith("_"):
            continue
        v = op.get_attr(key)
        if isinstance(v, tf.DType):
            v = v.name
        elif isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
            v = list(v)
        elif isinstance(v, float) and not np.isfinite(v):
            v = str(v)
        elif not isinstance(v, (bool, int, float, str)):
            continue  # shapes, functions, tensors, lists of types
        out[key] = v
    return out


class Tracer:
    """Walks the graph of a concrete function into op records. The function is frozen first:
    grappler inlines nested calls (PartitionedCall, a SavedModel's signature) and every shape
    becomes static; each variable becomes a constant named as the placeholder it replaces."""

    def __init__(self, concrete, example):
        by_handle = {id(v.handle): v for v in concrete.variables}
        variables, seen = {}, {}
        for outer, inner in concrete.graph.captures:
            v = by_handle.get(id(outer))
            if v is None:
                raise WorkerError("unimplemented", f"capture: '{inner.name}' is a captured tensor that is not a variable")
            base = v.name[:-2] if v.name.endswith(":0") else v.name
            seen[base] = seen.get(base, 0) + 1
            name = base if seen[base] == 1 else f"{base}#{seen[base]}"
            variables[inner.op.name] = Var(tensor(name if v.trainable else f"buffer:{name}", v.shape, v.dtype.name, param=True))
        frozen, _ = convert_variables_to_constants_v2_as_graph(concrete, lower_control_flow=False)
        graph = frozen.graph
        # shapes static inference leaves open (a loop's results), and the small integer results
        # that shape arithmetic computes from constants, are read from one run
        outputs = {t.name for t in graph.outputs}
        unknown, small = [], []
        for op in graph.get_operations():
            for t in op.outputs if op.type != "Const" else ():
                if t.dtype in (tf.resource, tf.variant):
                    continue
                if not t.shape.is_fully_defined():
                    if t.consumers() or t.name in outputs:
                        unknown.append(t)
                elif t.dtype in FOLDABLE and t.shape.num_elements() <= SMALL and not op.op_def.is_stateful:
                    small.append(t)
        values = frozen.prune(graph.inputs, unknown + small)(example) if unknown or small else []
        self.shapes = {t.name: v.shape for t, v in zip(unknown, values)}
        self.small = {t.name: v.numpy() for t, v in zip(small, values[len(unknown):])}
        self.ops = []
        env = {t.name: tensor(f"input{i}", t.shape, t.dtype.name) for i, t in enumerate(graph.inputs)}
        for op in graph.get_operations():
            if op.type == "Const" and op.name in variables:
                env[op.outputs[0].name] = variables[op.name]
            elif op.type == "Const":
                env[op.outputs[0].name] = Literal(tf.make_ndarray(op.get_attr("value")), op.outputs[0].name)
            elif op.type not in ("Placeholder", "NoOp"):
                self.visit(op, env)

    def operand(self, value, as_tensor=False):
        if isinstance(value, Var):
            return value.value
        if isinstance(value, Literal):
            return value.value(as_tensor)
        return value

    def visit(self, op, env):
        values = [env.get(t.name) for t in op.inputs]
        if op.type in ALIASES and values and isinstance(values[0], (Var, Literal)) and op.outputs[0].shape.is_fully_defined():
            env[op.outputs[0].name] = values[0].reshaped(op.outputs[0].shape)  # a view of a weight is that weight
        elif not self.fold(op, env, values):
            self.emit(op, values, env)

    def fold(self, op, env, values):
        """Small integer results known before the program runs (shape arithmetic) become constants:
        those of constants, and those static inference knows (the Shape of an activation)."""
        outs = op.outputs
        if not outs or any(t.name not in self.small for t in outs):
            return False
        if not all(isinstance(v, Literal) for v in values) and any(tf.get_static_value(t) is None for t in outs):
            return False
        for t in outs:
            env[t.name] = Literal(self.small[t.name], t.name)
        return True

    def emit(self, op, values, env):
        where = f"op '{op.name}' ({op.type})"
        if any(v is None for v in values):
            raise WorkerError("internal", f"capture: {where} reads a tensor that was never produced")
        # an op with only constant operands keeps them as tensors, so that it has operands
        literal_only = all(isinstance(v, Literal) for v in values)
        record = {"op": f"tf::{op.type}", "in": [self.operand(v, literal_only) for v in values], "out": [],
                  "attrs": attrs_of(op)}
        for t in op.outputs:
            if t.dtype in (tf.resource, tf.variant):
                continue
            shape = t.shape if t.shape.is_fully_defined() else self.shapes.get(t.name)
            if shape is None:
                continue  # an unused by-product of unknown shape (FusedBatchNormV3's reserve space)
            if t.dtype == tf.string:
                raise WorkerError("unimplemented", f"capture: {where} has a string output '{t.name}'")
            value = tensor(t.name, shape, t.dtype.name)
            record["out"].append(value)
            env[t.name] = value
        self.ops.append(record)
