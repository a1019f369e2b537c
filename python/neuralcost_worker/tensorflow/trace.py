"""Per-kernel times of TensorFlow runs from its profiler's trace, mapped back to the captured op
records (docs/worker-protocol.md, "Kernel traces"); the TensorFlow adapter's `layers`.

  - eager: one event per op TensorFlow executes ("EagerExecute", arg eager_op = the op's type,
    its dispatch included), in order; the captured ops are matched to them in order by type
    (xla_trace.match_in_order). Executions the capture does not list (reading a variable,
    making a constant) are events without ops.
  - function (tf.function; also eager mode of a SavedModel, whose signature is a graph): one
    event per graph node the executor runs, arg long_name =
    "<node>:<kernel type>", the node named as in the graph the capture walks. Grappler's
    remapper fuses nodes into one kernel named after the last (MatMul + BiasAdd + Relu into
    "_MklNativeFusedMatMul" named "Relu"): an op with no event of its own whose result only
    that fused kernel's ops read is part of it. A loop body's node is one event over its steps.
  - xla (jit_compile): XLA's thunks ("hlo_op"), mapped by the HLO metadata op_name = the node's
    name (xla_trace.py).
"""

import time
from collections import OrderedDict

from neuralcost_worker import xla_trace, xspace


def session_events(run, module_prefix=None):
    """Runs `run()` once under TensorFlow's profiler (host events; no Python tracer); returns (the
    run's wall seconds, its events). For XLA thunks (module_prefix not None, "" for any), the
    events are (hlo_op, seconds, hlo_module, None) in start order, as xla_trace's."""
    from tensorflow.python.profiler.internal import _pywrap_profiler

    session = _pywrap_profiler.ProfilerSession()
    session.start("", {"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 0})
    t0 = time.perf_counter_ns()
    run()
    t1 = time.perf_counter_ns()
    events = sorted(xspace.events(session.stop()), key=lambda e: e.start_ns)
    if module_prefix is not None:
        events = [
            (e.args["hlo_op"], e.duration_ns * 1e-9, e.args.get("hlo_module", ""), None)
            for e in events
            if "hlo_op" in e.args and e.args.get("hlo_module", "").startswith(module_prefix)
        ]
    return (t1 - t0) * 1e-9, events


def eager_runs(events):
    """[(op type, seconds)] of the ops an eager pass executed, in order."""
    return [
        (e.args.get("eager_op", ""), e.duration_ns * 1e-9)
        for e in events
        if e.name == "EagerExecute" and e.args.get("is_func") != "1"
    ]


def node_runs(events):
    """{long_name: seconds} of the graph nodes a pass ran, in the order they first ran."""
    out = OrderedDict()
    for e in events:
        name = e.args.get("long_name")
        if name is None or ":" not in name or name.startswith("__inference"):
            continue
        out[name] = out.get(name, 0.0) + e.duration_ns * 1e-9
    return out


def _readers(ops):
    """For each op, the indices of the ops that read its outputs."""
    made = {}
    for i, op in enumerate(ops):
        for t in xla_trace._tensor_names(op.get("out", [])):
            made[t] = i
    readers = [set() for _ in ops]
    for i, op in enumerate(ops):
        for t in xla_trace._tensor_names(op.get("in", [])):
            if t in made:
                readers[made[t]].add(i)
    return readers


def map_nodes(ops, nodes, kernels):
    """The event of each captured op for tf.function: `nodes` the ops' graph node names,
    `kernels` the long names that ran ("Relu:_MklNativeFusedMatMul"). Returns (owner list,
    kernel names in order)."""
    order = list(kernels)
    by_node = {k.rsplit(":", 1)[0]: j for j, k in enumerate(order)}
    owner = [by_node.get(n) for n in nodes]
    fused = {j for j, k in enumerate(order) if k.rsplit(":", 1)[1].startswith("_")}
    readers = _readers(ops)
    for i in range(len(ops) - 1, -1, -1):  # producers after their readers: a chain joins one by one
        if owner[i] is None and readers[i]:
            theirs = {owner[r] for r in readers[i]}
            if len(theirs) == 1 and next(iter(theirs)) in fused:
                owner[i] = next(iter(theirs))
    return owner, order


def map_model(model, ops, nodes):
    """Sets each captured op's "event" for the model's mode by one profiled pass; returns what
    layers() needs: (mode, names of the events, their keys, module prefix)."""
    covered = []

    def name_events(keys, label):
        for j in range(len(keys)):
            covered.append([])
        for op in ops:
            if op.get("event") is not None:
                covered[op["event"]].append(op["op"])
        return [xla_trace.event_name(label(k), covered[j]) for j, k in enumerate(keys)]

    if model.mode == "eager" and getattr(model, "loaded", None) is None:
        _, events = session_events(model.run)
        runs = [t for t, _ in eager_runs(events)]
        owner = xla_trace.match_in_order([op["op"].split("::", 1)[1] for op in ops], runs)
        for op, e in zip(ops, owner):
            op["event"] = e
        return "eager", name_events(runs, lambda t: f"tf:{t}"), runs, None
    if model.mode != "xla":  # tf.function, or a SavedModel's signature graph called from Python
        _, events = session_events(model.run)
        owner, order = map_nodes(ops, nodes, node_runs(events))
        for op, e in zip(ops, owner):
            op["event"] = e
        return "function", name_events(order, lambda k: f"tf:{k}"), order, None
    text = model.fn.experimental_get_compiler_ir(*model.xs)(stage="optimized_hlo")
    kernels, _ = xla_trace.parse_hlo(text, lambda op_name, frame: (op_name, None))
    _, events = session_events(model.run, "")
    ran = {e[0] for e in events}
    order = [k for k in kernels if k in ran]
    owner = xla_trace.attribute([(n, None) for n in nodes], ops, kernels, order)
    for op, e in zip(ops, owner):
        op["event"] = e
    return "xla", name_events(order, lambda k: f"xla:{k}"), order, ""


def time_model(model, n, mapped):
    """The `layers` reply of n passes (docs/worker-protocol.md), each after a plain pass."""
    mode, names, keys, module = mapped
    if mode == "xla":
        return xla_trace.time_kernels(model.run, n, keys, names, module, session=session_events)
    if mode == "eager":
        return xla_trace.time_programs(model.run, n, keys, names, session=session_events, runs_of=eager_runs)
    clock = time.perf_counter_ns
    index = {k: j for j, k in enumerate(keys)}
    seconds, wall, plain = [[] for _ in keys], [], []
    for _ in range(n):
        model.run()
        t0 = clock()
        model.run()
        plain.append((clock() - t0) * 1e-9)
        pass_seconds, events = session_events(model.run)
        wall.append(pass_seconds)
        sums = [0.0] * len(keys)
        for k, s in node_runs(events).items():
            if k in index:
                sums[index[k]] += s
        for j, s in enumerate(sums):
            seconds[j].append(s)
    return {"events": list(names), "seconds": seconds, "wall": wall, "plain": plain, "kernels": True}
