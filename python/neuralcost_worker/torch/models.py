"""The models the torch worker runs: the reference networks of torch/reference.py,
torch.export programs (.pt2) with their inputs matched by name or position (model_inputs.py), and
a phase of a decoder LLM's config.json (torch/decoder.py)."""

import importlib
import importlib.util
import logging
import os
import re

import torch

from neuralcost_worker import model_inputs
from neuralcost_worker.torch import reference as reference_torch
from neuralcost_worker.protocol import WorkerError

TORCH_DTYPES = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int8": torch.int8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


def _values(spec, dtype):
    """One input's values (model_inputs.py): floats standard normal or uniform in the range,
    integers uniform in the range, bools 0 or 1. The caller seeds the generator."""
    shape, r, t = spec["shape"], spec["range"], TORCH_DTYPES[dtype]
    if dtype == "bool":
        return torch.randint(0, 2, shape).to(torch.bool)
    if dtype in model_inputs.INTEGER:
        return torch.randint(int(r[0]), int(r[1]), shape, dtype=t)
    if r is not None:
        return (torch.rand(*shape, dtype=torch.float64) * (r[1] - r[0]) + r[0]).to(t)
    return torch.randn(*shape, dtype=t)


def program_inputs(request, name, program, dtype):
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
        own = DTYPE_NAMES.get(getattr(val, "dtype", None))
        chosen = spec["dtype"]
        if own is not None and chosen is not None and (own in model_inputs.FLOAT) != (chosen in model_inputs.FLOAT):
            raise WorkerError(
                "invalid_argument", f"{name}: input '{spec['name']}' is {own} in the program, not {chosen}"
            )
        if chosen is None:
            chosen = own if own is not None and own not in model_inputs.FLOAT else DTYPE_NAMES[dtype]
        model_inputs.check_range(spec, chosen, name)
        xs.append(_values(spec, chosen))
        described.append(model_inputs.describe(spec, chosen))
    return names[: len(xs)], xs, "; ".join(described)


def load(request, dtype):
    """(network in eval mode, input names, example inputs, their description, origin) for a
    reference name or a torch.export file."""
    name = request["model"]
    if "decoder" in request:
        from neuralcost_worker.torch import decoder

        return decoder.build(request, dtype)
    if name in reference_torch.NAMES:
        net, x = reference_torch.build(
            name,
            int(request["batch"]),
            int(request.get("seq", 32)),
            int(request.get("width", 128)),
            int(request.get("depth", 2)),
        )
        return net, ["input0"], [x.to(dtype)], "", "torch.nn module of python/neuralcost_worker/torch/reference.py"
    if not os.path.exists(name):
        raise WorkerError(
            "not_found",
            f"unknown model '{name}': neither a built-in model ({', '.join(reference_torch.NAMES)}) nor a file",
        )
    if not name.endswith(".pt2"):
        raise WorkerError(
            "unimplemented",
            f"{name}: the torch worker loads torch.export programs (.pt2, written by "
            "torch.export.save); for TorchScript files use --backend libtorch",
        )
    if not model_inputs.requested(request):
        raise WorkerError(
            "invalid_argument",
            f"{name}: a model file needs its inputs: --input NAME=SHAPE[:DTYPE[:LOW..HIGH]] "
            "or --input-shape SHAPE (e.g. 32x3x32x32), once per input",
        )
    program, imported = load_program(name)
    names, xs, described = program_inputs(request, name, program, dtype)
    origin = f"torch.export program {name}" + (
        f" (its output type is defined by {imported}, imported to load it)" if imported else ""
    )
    return program.module(), names, xs, described, origin


_UNREGISTERED = re.compile(r"Deserializing (\S+) in pytree failed because the serialized type is not registered")


def load_program(name):
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
                        raise WorkerError(
                            "invalid_argument",
                            f"{name}: not a loadable torch.export program: its "
                            f"output type {unregistered.group(1)} needs {package}, whose import "
                            f"failed: {type(failed).__name__}: {_first_line(str(failed))}",
                        ) from e
                    imported = package
                    continue
                if unregistered:
                    cause = f"its output type {unregistered.group(1)} is not registered with torch's pytree" + (
                        f": install the package '{package}' in the worker's environment"
                        if package and importlib.util.find_spec(package) is None
                        else ""
                    )
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
