"""The JAX adapter of the worker (docs/worker-protocol.md): builds a reference network of
jax/models.py, runs it eagerly (op by op) or jitted, and captures its jaxpr as op records.

Modes. `jit` is jax.jit, compiled during build. `eager` runs the forward function under
jax.disable_jit(): then jit-decorated library functions (jnp.einsum, jax.nn.relu, ...) are not
compiled as units, every primitive is dispatched on its own, and lax.scan is a Python loop over
the steps (jax 0.10, lax/control_flow/loops.py), which is what op by op means in JAX. Without
disable_jit, a scan or a jitted helper would still run as one compiled program.

Threads. NEURALCOST_THREADS = n > 0 pins the process to n CPUs (sched_setaffinity) before jax
starts: XLA's CPU client sizes its thread pools from the CPUs it may run on. With n = 1,
--xla_cpu_multi_thread_eigen=false is added to XLA_FLAGS as well (single-threaded Eigen
kernels). XLA has no flag for any other pool size. environment() reports what was set.

Training. With a build request's `train` (training.py), run() is one training step and memory()
its peak (jax/training.py: value_and_grad, optimizers in jax.numpy; the whole step jitted with
parameters and state donated, or eager under disable_jit); capture() stays the forward's.

Capture. jax.make_jaxpr of forward(params, x), walked into op records "jax::<primitive>" by
jax/capture.py: parameters named by their pytree path, nested calls inlined, each `scan` and each
`while` unrolled into the steps it runs (a while's trip count from one evaluation of the program
on the real parameters and input); a `cond` as the branch it takes on that input.
"""

import numbers
import os

from neuralcost_worker.jax import threads as jax_threads
from neuralcost_worker.protocol import WorkerError, cpu_name


def _apply_threads():
    """Applies NEURALCOST_THREADS before jax starts its thread pools (threads.py); returns what was set."""
    try:
        n = int(os.environ.get("NEURALCOST_THREADS", "0") or 0)
    except ValueError:
        n = 0
    return jax_threads.apply(n)


_THREADS = _apply_threads()
# the CPU only, even where jax has a GPU plugin: a run is where the request says, and the JAX
# worker runs on the CPU (docs/worker-protocol.md)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402  (after the thread settings)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from neuralcost_worker import training, xla_trace  # noqa: E402
from neuralcost_worker.jax import capture as jax_capture  # noqa: E402
from neuralcost_worker.jax import models as jax_models  # noqa: E402
from neuralcost_worker.jax import training as jax_training  # noqa: E402

FRAMEWORK = "jax"
MODES = ["eager", "jit"]
DTYPES = {"fp32": "float32", "fp64": "float64"}


def environment():
    import jaxlib

    devices = jax.devices()
    env = dict(_THREADS)
    env.update(
        {
            "jax_version": jax.__version__,
            "jaxlib_version": jaxlib.__version__,
            "backend": jax.default_backend(),
            "devices": ", ".join(str(d) for d in devices),
            "device_kind": devices[0].device_kind,
            "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
            "cpu_count": str(len(os.sched_getaffinity(0))),
        }
    )
    return env


def devices():
    return [{"id": "cpu", "name": cpu_name()}]


def out_of_memory(exc):
    return "RESOURCE_EXHAUSTED" in str(exc) or "Out of memory" in str(exc)


def _positive(request, key, default):
    value = request.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise WorkerError("invalid_argument", f"'{key}' must be a positive integer (got {value!r})")
    return value


def build(request):
    model = str(request.get("model", ""))
    if model not in jax_models.NAMES + jax_models.TEST_MODELS:
        if os.path.exists(model):
            raise WorkerError(
                "unimplemented",
                f"jax: cannot load model file '{model}': the JAX worker runs "
                f"only the reference models ({', '.join(jax_models.NAMES)})",
            )
        if os.sep in model or os.path.splitext(model)[1]:
            raise WorkerError("not_found", f"jax: model file '{model}' does not exist")
        raise WorkerError(
            "invalid_argument", f"jax: unknown model '{model}' (reference models: {', '.join(jax_models.NAMES)})"
        )
    dtype = request.get("dtype", "fp32")
    if dtype not in DTYPES:
        raise WorkerError("invalid_argument", f"jax: dtype '{dtype}' is not supported (fp32, fp64)")
    if dtype == "fp64":
        jax.config.update("jax_enable_x64", True)  # process-wide; fp32 models stay fp32 (explicit dtypes)
    sizes = {k: _positive(request, k, d) for k, d in (("batch", 1), ("seq", 32), ("width", 128), ("depth", 2))}
    train = training.fp32_only(training.parse(request["train"]), "jax") if "train" in request else None
    forward, params, x = jax_models.build(model, dtype=jnp.dtype(DTYPES[dtype]), **sizes)
    return Model(model, request["mode"], forward, params, x, train)


class Model:
    """A built network; with `train` (training.parse), run() is one training step
    (jax/training.py) and memory() that step's peak; capture() is the forward's either way."""

    def __init__(self, name, mode, forward, params, x, train=None):
        self.name, self.mode, self.forward, self.params, self.x = name, mode, forward, params, x
        self.parameters = sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(params))
        self.inputs = [{"name": "input0", "shape": list(x.shape), "dtype": str(x.dtype)}]
        self.origin = f"neuralcost_worker/jax/models.py: {name} in jax.numpy/lax (input {list(x.shape)}, seed 0)"
        self.environment = {
            "mode": mode,
            "x64": str(jax.config.jax_enable_x64),
            "execution": "jax.disable_jit (op by op)" if mode == "eager" else "jax.jit",
        }
        self.trainer = None
        if train is not None:
            self.compiled = None
            self.trainer = jax_training.Step(forward, params, x, mode, train)  # compiles, runs a first step
            self.environment.update(self.trainer.environment)
            return
        self.compiled = jax.jit(forward) if mode == "jit" else None
        self.run()  # compiles here (jit: the program; eager: each primitive), not in the first timed run

    def run(self):
        if self.trainer is not None:
            self.trainer.run()
        elif self.compiled is not None:
            jax.block_until_ready(self.compiled(self.params, self.x))
        else:
            with jax.disable_jit():
                jax.block_until_ready(self.forward(self.params, self.x))

    def execution(self):
        """What the passes ran, by JAX's own count: the executables jax.jit compiled for the forward
        function (none op by op; one in jit mode, unless a pass retraced)."""
        if self.trainer is not None:
            return self.trainer.execution()
        if self.compiled is None:
            return {"compiled_programs": 0, "compiler": "none (jax.disable_jit: op by op)"}
        return {"compiled_programs": self.compiled._cache_size(), "compiler": "jax.jit (XLA)"}

    def memory(self):
        if self.trainer is not None:
            return self.trainer.memory()
        stats = jax.devices()[0].memory_stats()
        return {k: v for k, v in (stats or {}).items() if isinstance(v, numbers.Number)}

    def capture(self):
        params = self.params if self.trainer is None else self.trainer.params  # a jit step donated these
        closed = jax.make_jaxpr(self.forward)(params, self.x)
        keys = []
        ops = jax_capture.capture(closed, params, self.x, getattr(self.forward, "buffers", {}), keys, jax_models.LAYERS)
        source = f"jaxpr of the {self.name} forward function (jax.make_jaxpr, {len(ops)} ops)"
        if self.trainer is None and self.compiled is not None:
            self.kernels = self._map_kernels(ops, keys)
            source += f"; each op's event is the XLA kernel that ran it ({len(self.kernels[1])} kernels)"
        elif self.trainer is None:
            self.kernels = self._map_programs(ops)
            source += f"; each op's event is the program JAX dispatched for it ({len(self.kernels[1])} programs)"
        return ops, source

    def _map_programs(self, ops):
        """Op by op (eager): sets each op's "event" to the one-primitive XLA program ("jit_add")
        that ran it, matched in order by primitive (xla_trace.match_in_order) over one profiled
        pass; programs the capture does not list (dtype conversions of jax.numpy) are events
        without ops. Returns (None, program names, None) for layers()."""
        _, events = xla_trace.session_events(self.run)
        runs = [module for module, _ in xla_trace.program_runs(events)]
        owner = xla_trace.match_in_order(["jit_" + op["op"].split("::", 1)[1] for op in ops], runs)
        covered = [[] for _ in runs]
        for op, e in zip(ops, owner):
            op["event"] = e
            if e is not None:
                covered[e].append(op["op"])
        return None, runs, [xla_trace.event_name(f"xla:{m}", covered[j]) for j, m in enumerate(runs)], None

    def _map_kernels(self, ops, keys):
        """Sets each op's "event" to the XLA kernel (thunk) of the jitted program that ran it
        (xla_trace.py), by the HLO metadata of the compiled program and one profiled pass (which
        kernels run); returns (module name, kernel names, container names) for layers()."""
        text = self.compiled.lower(self.params, self.x).compile().as_text()
        module = text.split(None, 2)[1].rstrip(",") if text.startswith("HloModule") else None
        kernels, containers = xla_trace.parse_hlo(
            text, lambda op_name, frame: jax_capture.hlo_key(op_name, frame, jax_models.LAYERS)
        )
        _, events = xla_trace.session_events(self.run, module)
        ran = {e[0] for e in events}
        order = [k for k in kernels if k in ran]
        owner = xla_trace.attribute(keys, ops, kernels, order)
        covered = [[] for _ in order]
        for op, e in zip(ops, owner):
            op["event"] = e
            if e is not None:
                covered[e].append(op["op"])
        names = [xla_trace.event_name(f"xla:{k}", covered[j]) for j, k in enumerate(order)]
        return module, order, names, containers

    def layers(self, n):
        """Per-kernel times of n passes under XLA's profiler, each after a plain pass: the kernels
        (jit) or one-primitive programs (eager) capture() mapped the ops to
        (docs/worker-protocol.md, "Kernel traces")."""
        if self.trainer is not None:
            raise WorkerError(
                "unimplemented", "the jax worker times the kernels of a forward pass, not of a training step"
            )
        if getattr(self, "kernels", None) is None:
            raise WorkerError("invalid_argument", "send 'capture' before 'layers': it maps the ops to the kernels")
        module, order, names, _ = self.kernels
        if self.compiled is not None:
            return xla_trace.time_kernels(self.run, n, order, names, module)
        return xla_trace.time_programs(self.run, n, order, names)
