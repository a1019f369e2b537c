"""The inputs of a model file, framework-neutral: what a build request gives (docs/worker-protocol.md,
`inputs`), matched to the model's own inputs, and described for the run's contract. The same
rules and messages as the C++ side (include/neuralcost/model_inputs.hpp); each adapter makes the
values in its framework.

An input is a dict: name (None: by position), shape (list of ints), dtype (a neural-cost dtype
name, or None: the model's own), range ([low, high), high excluded, or None)."""

from neuralcost_worker.protocol import WorkerError

INTEGER = ("int8", "int32", "int64")
FLOAT = ("fp64", "fp32", "fp16", "bf16")
DTYPES = FLOAT + INTEGER + ("bool",)


def requested(req):
    """The inputs of a build request: `inputs`, else one positional input per `input_shapes`."""
    given = req.get("inputs")
    if not given:
        return [
            {"name": None, "shape": [int(d) for d in s], "dtype": None, "range": None}
            for s in req.get("input_shapes") or []
        ]
    out = []
    for g in given:
        dtype = g.get("dtype")
        if dtype is not None and dtype not in DTYPES:
            raise WorkerError("invalid_argument", f"input dtype '{dtype}' is not one of {', '.join(DTYPES)}")
        r = g.get("range")
        out.append(
            {
                "name": g.get("name"),
                "shape": [int(d) for d in g["shape"]],
                "dtype": dtype,
                "range": None if r is None else (float(r[0]), float(r[1])),
            }
        )
    return out


def match(given, names, model, required=None):
    """`given` in the order of the model's input `names` (the first `required` have no default),
    with positional ones named; errors name the inputs the model has."""
    required = len(names) if required is None else min(required, len(names))
    listed = ", ".join(names) or "none"
    if not given or given[0]["name"] is None:
        if len(given) < required or len(given) > len(names):
            count = f"{len(names)}" if required == len(names) else f"{required} to {len(names)}"
            raise WorkerError(
                "invalid_argument",
                f"{model} takes {count} input{'' if len(names) == 1 else 's'} ({listed}); {len(given)} given",
            )
        return [dict(g, name=n) for g, n in zip(given, names)]
    by_name = {}
    for g in given:
        if g["name"] not in names:
            raise WorkerError("invalid_argument", f"{model} has no input '{g['name']}'; its inputs: {listed}")
        by_name[g["name"]] = g
    last = max(names.index(n) for n in by_name) + 1
    out = []
    for n in names[: max(last, required)]:
        if n not in by_name:
            raise WorkerError(
                "invalid_argument",
                f"{model}: input '{n}' is not given (--input {n}=SHAPE[:DTYPE]); its inputs: {listed}",
            )
        out.append(by_name[n])
    return out


def check_range(spec, dtype, model):
    """An integer input needs its range (token ids are 0..vocabulary size)."""
    if dtype in INTEGER and spec["range"] is None:
        shape = "x".join(map(str, spec["shape"]))
        raise WorkerError(
            "invalid_argument",
            f"{model}: input '{spec['name']}' is {dtype}: give its value range, "
            f"e.g. --input {spec['name']}={shape}:{dtype}:0..30522 (HIGH excluded)",
        )


def _number(v):
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def describe(spec, dtype):
    """ "ids: 8x128 int64, integers uniform in [0, 30522)": what an input was filled with."""
    r = spec["range"]
    if dtype == "bool":
        values = "0 or 1, uniform"
    elif dtype in INTEGER:
        values = f"integers uniform in [{_number(r[0])}, {_number(r[1])})" if r else "integers (no range)"
    else:
        values = f"uniform in [{_number(r[0])}, {_number(r[1])})" if r else "standard normal"
    shape = "x".join(map(str, spec["shape"])) or "scalar"
    return f"{spec['name'] + ': ' if spec['name'] else ''}{shape} {dtype}, {values}"
