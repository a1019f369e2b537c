"""The worker's side of the protocol (docs/worker-protocol.md): read one JSON request per line,
dispatch it to the framework's adapter, write one JSON reply per line. Timing of `run` and `bench`
is here, the same for every framework; everything framework-specific is in <framework>/adapter.py.

An adapter module has:
    FRAMEWORK, MODES            names
    environment() -> dict       versions, devices, threads (strings)
    devices() -> list           the devices it can run on here, [{"id": "cpu", "name": ...}, ...]
    build(request) -> model     a prepared model on request["device"] (one of devices()), with .name,
                                .parameters, .inputs, .origin, .environment (dict), .run() (one
                                synchronised forward pass),
                                .capture() -> (ops, source), .memory() -> dict, and optionally
                                .layers(n) -> {"events", "seconds", "wall", "plain"}; with a "train"
                                object in the request (training.parse): .training True, .run() one whole
                                training step, .step_memory() -> {"peak_bytes", "start_bytes", "source",
                                "includes"} of one step it runs, .train_evidence() -> {"loss_first", ...}
    out_of_memory(exc) -> bool  (optional) whether an exception is the framework's OOM
"""

import gc
import importlib
import json
import os
import resource
import sys
import time
import traceback

from neuralcost_worker import FRAMEWORKS, PROTOCOL


class WorkerError(Exception):
    """A failed request: `kind` is one of the protocol's error kinds."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def tensor(name, shape, dtype, param=False):
    """An op record's tensor value."""
    value = {"tensor": str(name), "shape": [int(d) for d in shape], "dtype": str(dtype)}
    if param:
        value["param"] = True
    return value


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def loaded_blas_library():
    """The BLAS shared library mapped into this process, as the C++ side finds its own: the first
    file in /proc/self/maps whose name contains 'blas' or 'mkl_rt', symlinks resolved."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if path.startswith("/") and ("blas" in name or "mkl_rt" in name):
                    return os.path.realpath(path)
    except OSError:
        pass
    return ""


def cpu_name():
    """This machine's CPU model, as /proc/cpuinfo names it ("" when unreadable)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _one_line(text):
    lines = [l.strip() for l in str(text).strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


class Worker:
    """Holds models in slots (docs/worker-protocol.md, "Slots"): `build` fills the slot its
    request names (0 when it names none), every other request addresses one, and `drop` empties
    it. `self.model` and `self.training` are the addressed slot's while a request is served."""

    def __init__(self, framework, out):
        self.framework = framework
        self.out = out
        self.adapter = None
        self.slots = {}  # slot -> (model, training, build request)
        self.slot = 0
        self.model = None
        self.training = False
        self.model_request = None

    def select(self, req):
        """Makes the slot `req` names (0 when none) the current one."""
        slot = req.get("slot", 0)
        if not isinstance(slot, int) or isinstance(slot, bool) or slot < 0:
            raise WorkerError("invalid_argument", f"'slot' must be a non-negative integer (got {slot!r})")
        self.slot = slot
        self.model, self.training, self.model_request = self.slots.get(slot, (None, False, None))

    def reply(self, obj):
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.out.flush()

    def require_model(self):
        if self.model is None:
            if self.slot:
                raise WorkerError(
                    "invalid_argument", f"no model in slot {self.slot}: send 'build' with that slot first"
                )
            raise WorkerError("invalid_argument", "no model: send 'build' first")
        return self.model

    def drop(self, req):
        """Empties the slot: its model is released (the process keeps the others)."""
        self.slots.pop(self.slot, None)
        self.model, self.training, self.model_request = None, False, None
        gc.collect()
        return {"slots": len(self.slots)}

    def hello(self, req):
        if req.get("protocol") != PROTOCOL:
            raise WorkerError("unimplemented", f"this worker speaks protocol {PROTOCOL}, not {req.get('protocol')}")
        if self.adapter is None:
            try:
                self.adapter = importlib.import_module(f"neuralcost_worker.{self.framework}.adapter")
            except ImportError as e:
                raise WorkerError(
                    "unimplemented",
                    f"{self.framework} cannot be imported by {sys.executable}: {_one_line(e)} "
                    "(run scripts/python-env.sh to make the project's environment)",
                )
        env = {k: str(v) for k, v in self.adapter.environment().items()}
        env["python"] = sys.version.split()[0]
        env["python_executable"] = sys.executable
        return {
            "protocol": PROTOCOL,
            "framework": self.framework,
            "modes": list(self.adapter.MODES),
            "devices": self.adapter.devices(),
            "environment": env,
        }

    def build(self, req):
        if self.adapter is None:
            raise WorkerError("invalid_argument", "send 'hello' first")
        if req.get("mode") not in self.adapter.MODES:
            raise WorkerError(
                "invalid_argument",
                f"{self.framework}: unknown mode '{req.get('mode')}' (modes: {', '.join(self.adapter.MODES)})",
            )
        device = req.get("device", "cpu")
        ids = [d["id"] for d in self.adapter.devices()]
        if not isinstance(device, str) or device not in ids:
            raise WorkerError(
                "not_found", f"the {self.framework} worker has no device {device!r} here (devices: {', '.join(ids)})"
            )
        req = dict(req, device=device)
        self.slots.pop(self.slot, None)  # a slot built again releases its model first
        self.model, self.model_request = None, req
        self.training = "train" in req
        self.model = self.adapter.build(req)
        self.slots[self.slot] = (self.model, self.training, req)
        m = self.model
        env = {k: str(v) for k, v in getattr(m, "environment", {}).items()}
        env["blas_library"] = loaded_blas_library()  # after the framework and model are loaded
        return {
            "name": m.name,
            "parameters": int(m.parameters),
            "inputs": m.inputs,
            "origin": m.origin,
            "environment": env,
        }

    def capture(self, req):
        model = self.require_model()
        ops, source = model.capture()
        reply = {"ops": ops, "source": source}
        outputs = getattr(model, "capture_outputs", None)  # the model's results among the ops' tensors
        if outputs:
            reply["outputs"] = outputs
        return reply

    def _timed(self, n):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > 1_000_000:
            raise WorkerError("invalid_argument", f"'n' must be an integer from 1 to 1000000 (got {n!r})")
        run = self.require_model().run
        clock = time.perf_counter_ns
        seconds = []
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(n):
            t0 = clock()
            run()
            seconds.append((clock() - t0) * 1e-9)
        after = resource.getrusage(resource.RUSAGE_SELF)
        faults = (after.ru_minflt - before.ru_minflt) + (after.ru_majflt - before.ru_majflt)
        reply = {"seconds": seconds, "page_faults": faults}
        execution = getattr(self.model, "execution", None)
        if execution is not None:  # the framework's own evidence of what ran (docs/worker-protocol.md)
            reply["execution"] = {k: str(v) for k, v in execution().items()}
        evidence = getattr(self.model, "train_evidence", None)
        if getattr(self.model, "training", False) and evidence is not None:  # the losses of the steps run
            reply["train"] = {k: str(v) for k, v in evidence().items()}
        return reply

    def run(self, req):
        return self._timed(req.get("n", 1))

    def bench(self, req):
        return self._timed(req.get("n", 1))

    def layers(self, req):
        n = req.get("n", 1)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > 100_000:
            raise WorkerError("invalid_argument", f"'n' must be an integer from 1 to 100000 (got {n!r})")
        model = self.require_model()
        if not hasattr(model, "layers"):
            raise WorkerError(
                "unimplemented", f"the {self.framework} worker has no per-op timer for this model and mode"
            )
        return model.layers(n)

    def memory(self, req):
        model = self.require_model()
        reply = {}
        telemetry = {}
        if getattr(model, "training", False) and getattr(model, "step_memory", None) is not None:
            # one step with the allocator's peak reset before it (docs/worker-protocol.md, "Training")
            reply.update(model.step_memory())
            telemetry = dict(model.memory())
        else:
            telemetry = dict(model.memory())
            if self.training:
                # an adapter whose memory() reports the step's peak (jax, tensorflow): the same fields
                for key in ("peak_bytes", "start_bytes", "source", "includes"):
                    if key in telemetry:
                        reply[key] = telemetry.pop(key)
                if "peak_bytes" not in reply:
                    reply["reason"] = f"the {self.framework} worker has no memory telemetry for a training step"
        telemetry["process_peak_rss_bytes"] = peak_rss_bytes()
        reply["telemetry"] = telemetry
        return reply

    def classify(self, exc):
        if isinstance(exc, WorkerError):
            return exc.kind
        if isinstance(exc, MemoryError):
            return "out_of_memory"
        oom = getattr(self.adapter, "out_of_memory", None)
        if oom is not None and oom(exc):
            return "out_of_memory"
        if isinstance(exc, FileNotFoundError):
            return "not_found"
        if isinstance(exc, (ValueError, TypeError, KeyError, IndexError)):
            return "invalid_argument"
        return "internal"


def serve(framework):
    if framework not in FRAMEWORKS:
        sys.stderr.write(f"unknown framework '{framework}' (known: {', '.join(FRAMEWORKS)})\n")
        return 2
    # the protocol channel is a private copy of stdout; whatever a framework prints goes to stderr
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker(framework, out)
    handlers = {
        "hello": worker.hello,
        "build": worker.build,
        "capture": worker.capture,
        "run": worker.run,
        "bench": worker.bench,
        "layers": worker.layers,
        "memory": worker.memory,
        "drop": worker.drop,
    }
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise WorkerError("invalid_argument", "a request is a JSON object")
        except ValueError as e:
            worker.reply({"ok": False, "kind": "invalid_argument", "error": f"not a JSON request: {e}"})
            continue
        cmd = req.get("cmd")
        if cmd == "quit":
            worker.reply({"ok": True})
            return 0
        handler = handlers.get(cmd)
        if handler is None:
            worker.reply(
                {
                    "ok": False,
                    "kind": "invalid_argument",
                    "error": f"unknown cmd {cmd!r} (known: {', '.join(handlers)}, quit)",
                }
            )
            continue
        try:
            worker.select(req)
            result = handler(req)
        except BaseException as e:  # a failed request leaves the worker usable
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            kind = worker.classify(e)
            if kind == "internal":
                traceback.print_exc(file=sys.stderr)
            message = _one_line(e) if isinstance(e, WorkerError) else f"{type(e).__name__}: {_one_line(e)}"
            worker.reply({"ok": False, "kind": kind, "error": message})
            continue
        result["ok"] = True
        worker.reply(result)
    return 0
