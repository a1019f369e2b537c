"""The TensorFlow adapter of the worker (docs/worker-protocol.md; the interface is in protocol.py).

Modes: eager (op by op), function (tf.function), xla (tf.function(jit_compile=True)). A forward
pass is synchronised by taking its result's .numpy().

Training (a build request's `train`): run() is one training step, memory() its peak; capture()
stays the forward's (tensorflow/training.py). Only the reference models train.

Capture traces the forward once with tf.function into a concrete function and walks its frozen
graph into op records: tensorflow/capture.py (loops reported as the ops they run, step by step).
"""

import os
import time

THREADS = int(os.environ.get("NEURALCOST_THREADS", "0") or 0)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from neuralcost_worker import model_inputs, training  # noqa: E402
from neuralcost_worker.protocol import WorkerError, cpu_name  # noqa: E402
from neuralcost_worker.tensorflow import models as tf_models  # noqa: E402
from neuralcost_worker.tensorflow import trace as tf_trace  # noqa: E402
from neuralcost_worker.tensorflow import training as tf_training  # noqa: E402
from neuralcost_worker.tensorflow.capture import Tracer  # noqa: E402

FRAMEWORK = "tensorflow"
MODES = ["eager", "function", "xla"]

# before TensorFlow starts its thread pools (the first op does): n threads in one pool of
# intra-op parallelism, ops one at a time, as the other frameworks run a forward pass
if THREADS > 0:
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)

DTYPES = {"fp32": tf.float32, "fp64": tf.float64}

# the CPU only, even with a CUDA build: a run is where the request says, and the TensorFlow
# worker runs on the CPU (docs/worker-protocol.md); hidden before the first op places anything
tf.config.set_visible_devices([], "GPU")


def devices():
    return [{"id": "cpu", "name": cpu_name()}]


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
        raise WorkerError(
            "invalid_argument", f"tensorflow: dtype '{req.get('dtype')}' is not one of {', '.join(DTYPES)}"
        )
    train = training.fp32_only(training.parse(req["train"]), "tensorflow") if "train" in req else None
    if train is not None and name not in tf_models.NAMES:
        raise WorkerError(
            "unimplemented",
            f"tensorflow: training runs the reference models only ({', '.join(tf_models.NAMES)}), not '{name}'",
        )
    if name in tf_models.NAMES:
        size = {k: int(req.get(k, d)) for k, d in (("batch", 1), ("seq", 32), ("width", 128), ("depth", 2))}
        net, x = tf_models.build(name, dtype=dtype, **size)
        origin = f"neuralcost_worker/tensorflow/models.py: {name} (tf.Module, raw tf ops), " + ", ".join(
            f"{k} {v}" for k, v in size.items()
        )
        return Model(
            name, net.__call__, [x], mode, origin, net.trainable_variables, train=train, layers=tf_models.LAYERS
        )
    if isinstance(name, str) and os.path.isdir(name):
        return saved_model(req, name, dtype)
    if isinstance(name, str) and os.path.exists(name):
        raise WorkerError(
            "unimplemented", f"{name}: TensorFlow models are read from a SavedModel directory, not a file"
        )
    raise WorkerError(
        "not_found", f"'{name}' is neither a built-in model ({', '.join(tf_models.NAMES)}) nor a SavedModel directory"
    )


NUMPY = {
    "fp64": np.float64,
    "fp32": np.float32,
    "fp16": np.float16,
    "bf16": np.float32,
    "int64": np.int64,
    "int32": np.int32,
    "int8": np.int8,
    "bool": np.bool_,
}
NAMES = {
    tf.float64: "fp64",
    tf.float32: "fp32",
    tf.float16: "fp16",
    tf.bfloat16: "bf16",
    tf.int64: "int64",
    tf.int32: "int32",
    tf.int8: "int8",
    tf.bool: "bool",
}


def values(spec, dtype, rng):
    """One input's values (model_inputs.py): floats standard normal or uniform in the range,
    integers uniform in the range, bools 0 or 1."""
    shape, r = spec["shape"], spec["range"]
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype in model_inputs.INTEGER:
        return rng.integers(int(r[0]), int(r[1]), shape, dtype=NUMPY[dtype])
    if r is not None:
        return rng.uniform(r[0], r[1], shape)
    return rng.standard_normal(shape)


def saved_model(req, path, dtype):
    """A SavedModel's serving signature; its inputs by name (or in the signature's order) from the
    request's inputs, or when none are given from the signature (unknown dimensions: the batch)."""
    if not os.path.exists(os.path.join(path, "saved_model.pb")):
        raise WorkerError("not_found", f"{path}: no saved_model.pb (not a SavedModel directory)")
    loaded = tf.saved_model.load(path)
    signatures = getattr(loaded, "signatures", {})
    if not signatures:
        raise WorkerError("unimplemented", f"{path}: the SavedModel has no signature to call")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    signature = signatures[key]
    if signature.structured_input_signature[0]:
        raise WorkerError(
            "unimplemented", f"{path}: signature '{key}' takes positional arguments; only named inputs are supported"
        )
    specs = signature.structured_input_signature[1]
    names = sorted(specs)  # the signature keeps them in a dict, whose order the file does not fix
    given = model_inputs.requested(req)
    if given:
        given = model_inputs.match(given, names, path)
    else:
        given = [
            {
                "name": n,
                "shape": [int(req.get("batch", 1)) if d is None else d for d in specs[n].shape],
                "dtype": None,
                "range": None,
            }
            for n in names
        ]
    rng = np.random.default_rng(1)
    xs, described = [], []
    for g in given:
        spec = specs[g["name"]]
        own = NAMES.get(spec.dtype)
        if own is None:
            raise WorkerError(
                "unimplemented", f"{path}: input '{g['name']}' is {spec.dtype.name}, which the worker cannot fill"
            )
        if g["dtype"] is not None and g["dtype"] != own:
            raise WorkerError(
                "invalid_argument", f"{path}: input '{g['name']}' is {own} in signature '{key}', not {g['dtype']}"
            )
        shape = g["shape"]
        if len(shape) != len(spec.shape) or any(d is not None and d != s for d, s in zip(spec.shape, shape)):
            raise WorkerError(
                "invalid_argument",
                f"{path}: input '{g['name']}' shape {shape} does not fit the signature's {spec.shape}",
            )
        if None in shape:
            raise WorkerError(
                "invalid_argument",
                f"{path}: input '{g['name']}' shape {list(spec.shape)} has unknown dimensions; give its shape",
            )
        model_inputs.check_range(g, own, path)
        xs.append(tf.constant(values(g, own, rng), spec.dtype))
        described.append(model_inputs.describe(g, own))
    arg_names = [g["name"] for g in given]

    def forward(*ts):
        return signature(**dict(zip(arg_names, ts)))

    origin = f"SavedModel {path}, signature '{key}', inputs " + ", ".join(
        f"'{n}' {list(x.shape)} {x.dtype.name}" for n, x in zip(arg_names, xs)
    )
    return Model(
        os.path.basename(os.path.normpath(path)),
        forward,
        xs,
        req["mode"],
        origin,
        signature.trainable_variables,
        loaded=loaded,
        names=arg_names,
        described="; ".join(described),
    )


class Model:
    def __init__(
        self, name, forward, xs, mode, origin, trainable, loaded=None, names=None, described="", train=None, layers=None
    ):
        self.name, self.forward, self.xs, self.mode, self.origin = name, forward, list(xs), mode, origin
        self.scopes = layers  # the layer names of the model's name scopes (tf_capture.Tracer)
        self.loaded = loaded  # keeps a SavedModel's objects alive
        self.parameters = sum(int(np.prod(v.shape)) for v in trainable)
        names = names or [f"input{i}" for i in range(len(self.xs))]
        self.inputs = [{"name": n, "shape": list(x.shape), "dtype": x.dtype.name} for n, x in zip(names, self.xs)]
        self.specs = [tf.TensorSpec(x.shape, x.dtype) for x in self.xs]
        eager = "op by op" if loaded is None else "the signature's graph, called from Python"
        self.environment = {
            "mode": {"eager": eager, "function": "tf.function", "xla": "tf.function(jit_compile=True)"}[mode]
        }
        if described:
            self.environment["input_values"] = described
        started = time.perf_counter()
        self.trainer = None
        if train is not None:  # run() is one training step (tensorflow/training.py); capture() the forward
            self.trainer = tf_training.Step(forward, self.xs, trainable, mode, train)  # runs a first step
            self.environment.update(self.trainer.environment)
        else:
            if mode == "eager":
                self.fn = forward
            else:
                self.fn = tf.function(forward, input_signature=self.specs, jit_compile=mode == "xla")
            self.run()  # traces and compiles the compiled modes
        self.environment["first_run_seconds"] = f"{time.perf_counter() - started:.3f}"

    def run(self):
        if self.trainer is not None:
            return self.trainer.run()
        for y in tf.nest.flatten(self.fn(*self.xs)):
            y.numpy()

    def execution(self):
        """What the passes ran, by TensorFlow's own count: the graphs tf.function traced for the
        forward (none op by op; one in the compiled modes, unless a pass retraced). In xla mode the
        traced function must compile (`_XlaMustCompile`: TensorFlow raises instead of falling back
        to the graph) and XLA's optimized HLO of it has that many instructions."""
        if self.trainer is not None:
            return self.trainer.execution()
        if self.mode == "eager":
            return {"compiled_programs": 0, "compiler": "none (eager)"}
        facts = {"compiled_programs": self.fn.experimental_get_tracing_count(), "compiler": "tf.function graph"}
        if self.mode == "xla":
            if not hasattr(self, "_xla"):
                concrete = self.fn.get_concrete_function(*self.specs)
                hlo = self.fn.experimental_get_compiler_ir(*self.xs)(stage="optimized_hlo")
                self._xla = {
                    "compiler": "tf.function(jit_compile=True), XLA",
                    "xla_must_compile": str(concrete.function_def.attr["_XlaMustCompile"].b).lower(),
                    "xla_hlo_instructions": sum(1 for line in hlo.splitlines() if " = " in line),
                }
            facts.update(self._xla)
        return facts

    def memory(self):
        if self.trainer is not None:
            return self.trainer.memory()
        for device in ("GPU:0", "CPU:0"):
            try:
                info = tf.config.experimental.get_memory_info(device)
            except (ValueError, tf.errors.OpError):
                continue
            return {"allocator_current_bytes": info["current"], "allocator_peak_bytes": info["peak"]}
        return {}

    def capture(self):
        concrete = tf.function(self.forward).get_concrete_function(*self.specs)
        inputs = ", ".join(f"{list(s.shape)} {s.dtype.name}" for s in self.specs)
        tracer = Tracer(concrete, self.xs, self.scopes)
        source = f"graph of tf.function(forward) for input{'s' if len(self.specs) > 1 else ''} {inputs}"
        if self.trainer is None:
            # each op's event: the kernel that ran it in this mode (tensorflow/trace.py), for layers()
            self.kernels = tf_trace.map_model(self, tracer.ops, tracer.nodes)
            source += f"; each op's event is the {self.kernels[0]} kernel that ran it ({len(self.kernels[1])} kernels)"
        return tracer.ops, source

    def layers(self, n):
        """Per-kernel times of n passes under TensorFlow's profiler, each after a plain pass
        (docs/worker-protocol.md, "Kernel traces")."""
        if self.trainer is not None:
            raise WorkerError(
                "unimplemented", "the tensorflow worker times the kernels of a forward pass, not of a training step"
            )
        if getattr(self, "kernels", None) is None:
            raise WorkerError("invalid_argument", "send 'capture' before 'layers': it maps the ops to the kernels")
        return tf_trace.time_model(self, n, self.kernels)
