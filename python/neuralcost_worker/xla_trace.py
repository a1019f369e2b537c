"""Per-kernel times of a compiled XLA program on the CPU, mapped back to the captured op records
(docs/worker-protocol.md, "Kernel traces"). Framework-neutral: the JAX adapter (jit) and the
TensorFlow adapter (xla) give it the optimized HLO text of the program they run and a key per
captured op.

XLA's CPU runtime runs a program as a sequence of thunks, one per instruction of the entry
computation (a fusion is one thunk; a while loop's body runs its own thunks once per step), and
its profiler (tsl's ProfilerSession) records one event per thunk run, with the instruction's
name in the stat "hlo_op". Each instruction of the optimized HLO carries the metadata of the
source ops it came from: op_name (JAX: "jit(forward)/dot_general", the primitive last;
TensorFlow: the graph node's name) and, for JAX, a stack frame (file, line, column of the user's
code that made it). A key is (op name, source location); a kernel's keys are those of the
instructions it runs (its fused computation's included).

Mapping (attribute()): an op goes to the kernel made for it (the fusion whose root it is),
else to the first kernel that carries its key and runs after the kernels of its inputs; an op
no kernel carries stays unattributed (XLA folded it into a constant, or it is a layout change
that became a bitcast); an op is never given to two kernels.
"""

import re
from collections import Counter, OrderedDict

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s([a-z][\w\-]*)\(")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"(?:branch_computations|called_computations)=\{([^}]*)\}")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_FRAME = re.compile(r"stack_frame_id=(\d+)")
# control flow: its event spans the thunks of its computations, which have events of their own
CONTAINERS = {"while", "conditional", "call"}


def _section(lines, title):
    """The "id value" lines of a section of the HLO text's header (FileNames, FileLocations, ...)."""
    out, inside = {}, False
    for line in lines:
        if line.strip() == title:
            inside = True
            continue
        if inside:
            if not line.strip() or not line.strip()[0].isdigit():
                break
            ident, _, rest = line.strip().partition(" ")
            out[int(ident)] = rest
    return out


def _frames(lines):
    """stack_frame_id -> (file name, line, column) of the frame's own location."""
    files = {k: v.strip('"') for k, v in _section(lines, "FileNames").items()}
    locations = {}
    for k, v in _section(lines, "FileLocations").items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        locations[k] = (
            files.get(int(fields.get("file_name_id", 0)), ""),
            int(fields.get("line", 0)),
            int(fields.get("column", 0)),
        )
    frames = {}
    for k, v in _section(lines, "StackFrames").items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        frames[k] = locations.get(int(fields.get("file_location_id", 0)), ("", 0, 0))
    return frames


class Kernel:
    """A thunk of the program: `keys` (Counter) of all its instructions, `own` the key of the
    instruction itself (a fusion's is its root's: the op it was made for)."""

    def __init__(self, keys, own):
        self.keys, self.own = keys, own


def parse_hlo(text, op_key):
    """The kernels of an optimized HLO module's text: {instruction name: Kernel} for every
    instruction of a computation that runs as thunks (the entry, while bodies and conditions,
    branches), in the text's order (a scheduled module's: the order they run in, one at a time);
    the keys of an instruction are op_key(op_name, (file, line, column) or None) of it and of the
    computations it fuses or applies. Also returns the set of control-flow instruction names (while, conditional,
    call), whose events contain other events."""
    lines = text.splitlines()
    frames = _frames(lines)
    computations = OrderedDict()  # name -> [(instruction, opcode, keys of its own, called names)]
    entry, current = None, None
    for line in lines:
        m = _COMPUTATION.match(line)
        if m and "=" not in line.split("(")[0]:
            current = m.group(2)
            computations[current] = []
            if m.group(1):
                entry = current
            continue
        if current is None:
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        rest = m.group(3)
        opcode = _OPCODE.search(" " + rest.split(", metadata=")[0])
        called = _CALLS.findall(rest)
        for group in _BRANCHES.findall(rest):
            called += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
        keys = []
        name = _OP_NAME.search(rest)
        if name:
            frame = _FRAME.search(rest)
            key = op_key(name.group(1), frames.get(int(frame.group(1))) if frame else None)
            if key is not None:
                keys.append(key)
        computations[current].append((m.group(2), opcode.group(1) if opcode else "", keys, called))
    if entry is None:
        return OrderedDict(), set()

    def fused_keys(comp, seen):
        out = Counter()
        if comp in seen or comp not in computations:
            return out
        seen.add(comp)
        for _, _, keys, called in computations[comp]:
            out.update(keys)
            for c in called:
                out.update(fused_keys(c, seen))
        return out

    kernels, containers = OrderedDict(), set()

    def walk(comp, seen):
        if comp in seen or comp not in computations:
            return
        seen.add(comp)
        for inst, opcode, keys, called in computations[comp]:
            if opcode in CONTAINERS:
                containers.add(inst)
                for c in called:  # their instructions are thunks of their own
                    walk(c, seen)
                continue
            k = Counter(keys)
            for c in called:
                k.update(fused_keys(c, set()))
            kernels[inst] = Kernel(k, keys[0] if keys else None)

    walk(entry, set())
    return kernels, containers


def session_events(run, module_prefix=None):
    """Runs `run()` once under XLA's profiler (host events only: no Python tracer); returns (the
    run's wall seconds, [(hlo_op, seconds, hlo_module, run_id)] of the thunks it ran, in start
    order) for modules whose name starts with `module_prefix` (all when None). The session
    starts before and stops after the timed call."""
    import time
    import jax
    from jax._src.lib import _profiler

    options = _profiler.ProfileOptions()
    options.python_tracer_level = 0
    session = _profiler.ProfilerSession(options)
    t0 = time.perf_counter_ns()
    run()
    t1 = time.perf_counter_ns()
    data = jax.profiler.ProfileData.from_serialized_xspace(session.stop())
    events = []
    for plane in data.planes:
        for line in plane.lines:
            for ev in line.events:
                stats = dict(ev.stats)
                op = stats.get("hlo_op")
                if op is None:
                    continue
                module = str(stats.get("hlo_module", ""))
                if module_prefix is not None and not module.startswith(module_prefix):
                    continue
                events.append((ev.start_ns, str(op), ev.duration_ns * 1e-9, module, stats.get("run_id")))
    events.sort(key=lambda e: e[0])
    return (t1 - t0) * 1e-9, [e[1:] for e in events]


def program_runs(events):
    """The programs that ran (one per run_id, in the order they started): [(module, seconds of
    their thunks)]: op by op, each primitive JAX dispatches is a program of its own."""
    runs = OrderedDict()
    for _, seconds, module, run_id in events:
        if run_id not in runs:
            runs[run_id] = [module, 0.0]
        runs[run_id][1] += seconds
    return [tuple(r) for r in runs.values()]


def match_in_order(op_names, run_names):
    """Op by op: the run of each captured op (an index into run_names, or None). The longest runs
    of names the two sequences share are matched first (difflib); then the ops left over take,
    name by name and in order, the runs of their name left over (a framework may run a graph's
    ops in another order than the graph lists them: tf.nn.moments). Runs of ops the capture does
    not list (dtype conversions, reading a variable) stay without ops."""
    import difflib

    out = [None] * len(op_names)
    taken = set()
    matcher = difflib.SequenceMatcher(None, op_names, run_names, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            out[a + k] = b + k
            taken.add(b + k)
    left = {}
    for k, name in enumerate(run_names):
        if k not in taken:
            left.setdefault(name, []).append(k)
    for i, name in enumerate(op_names):
        if out[i] is None and left.get(name):
            out[i] = left[name].pop(0)
    return out


def attribute(op_keys, ops, kernels, order):
    """The kernel of each captured op (an index into `order`, or None): op_keys[i] is op i's key
    (None: no source op, unattributed), ops the op records (their tensors give the data flow),
    kernels {name: Kernel}, order the kernels that ran, in the program's order.

    First, the kernels made for a key (their own instruction's key): when there are as many as
    ops with the key, one op each in order; when there is one, all of them (a loop's body, run
    once per step); when the ops divide evenly, in equal runs. XLA also copies cheap ops into
    their consumers' fusions, so a key is often in other kernels too: an op left over goes to
    the first kernel with its key that runs after the kernels of its inputs (an op never runs
    before what it reads), or, when none does (a loop's later steps), to the first with its key.
    An op whose key no kernel has but whose source location one has (XLA rewrote the op into
    others: logistic into neg, exp, add, div) is placed by its location the same way."""
    out = [None] * len(op_keys)
    ops_of, home = {}, {}
    for i, key in enumerate(op_keys):
        if key is not None:
            ops_of.setdefault(key, []).append(i)
    having, placed = {}, {}  # key, and source location -> positions of the kernels with it, in order
    for j, name in enumerate(order):
        kernel = kernels[name]
        for key in kernel.keys:
            having.setdefault(key, []).append(j)
            if key[1] is not None and j not in placed.get(key[1], []):
                placed.setdefault(key[1], []).append(j)
        if kernel.own is not None:
            home.setdefault(kernel.own, []).append(j)
    for key, mine in ops_of.items():
        ks = home.get(key, [])
        if ks and (len(ks) == 1 or len(mine) % len(ks) == 0):
            per = len(mine) // len(ks) if len(ks) > 1 else len(mine)
            for n, i in enumerate(mine):
                out[i] = ks[min(n // per, len(ks) - 1)]
    after = {}  # tensor name -> position its value is ready after (-1: an input or a weight)
    for i, (key, op) in enumerate(zip(op_keys, ops)):
        ready = max([after.get(t, -1) for t in _tensor_names(op.get("in", []))], default=-1)
        ks = (
            []
            if key is None
            else having.get(key) or placed.get(key[1], [])
            if key[1] is not None
            else having.get(key, [])
        )
        if out[i] is None and ks:
            out[i] = next((k for k in ks if k >= ready), ks[0])
        done = out[i] if out[i] is not None else ready
        for t in _tensor_names(op.get("out", [])):
            after[t] = done
    return out


def _tensor_names(values):
    for v in values:
        if isinstance(v, dict):
            if "tensor" in v:
                yield v["tensor"]
            for t in v.get("tensors", []):
                yield t["tensor"]


def event_name(kernel, op_names):
    """A row's name: the kernel, then the ops it covers (distinct, in order, the first few)."""
    distinct = list(OrderedDict.fromkeys(op_names))
    shown = ", ".join(distinct[:4]) + (f" +{len(distinct) - 4} more" if len(distinct) > 4 else "")
    return f"{kernel} ({shown})" if shown else kernel


def time_kernels(run, n, order, names, module=None, session=None):
    """The `layers` reply (docs/worker-protocol.md) of n passes of run() under the profiler, each
    after a plain pass: per kernel of `order` (named `names`), its thunks' time in each pass (a
    loop body's kernel summed over its steps). An untimed pass precedes each plain one: after
    the profiler's teardown (collecting and parsing its events, milliseconds) XLA's threads are
    parked, and the first pass that wakes them is slower than either timed pass."""
    import time

    index = {k: j for j, k in enumerate(order)}
    seconds, wall, plain = [[] for _ in order], [], []
    clock = time.perf_counter_ns
    for _ in range(n):
        run()
        t0 = clock()
        run()
        plain.append((clock() - t0) * 1e-9)
        pass_seconds, events = (session or session_events)(run, module)
        wall.append(pass_seconds)
        sums = [0.0] * len(order)
        for name, s, _, _ in events:
            j = index.get(name)
            if j is not None:
                sums[j] += s
        for j, s in enumerate(sums):
            seconds[j].append(s)
    return {"events": list(names), "seconds": seconds, "wall": wall, "plain": plain, "kernels": True}


def time_programs(run, n, programs, names, session=None, runs_of=None):
    """time_kernels for op by op: each pass must run the same programs in the same order; each
    event is one program run, timed by its thunks (JAX: the kernels, not JAX's dispatch, which
    is the pass's unattributed rest). `session` and `runs_of` (events -> [(name, seconds)]) are
    another framework's (tensorflow/trace.py)."""
    import time
    from neuralcost_worker.protocol import WorkerError

    seconds, wall, plain = [[] for _ in programs], [], []
    clock = time.perf_counter_ns
    for _ in range(n):
        run()
        t0 = clock()
        run()
        plain.append((clock() - t0) * 1e-9)
        pass_seconds, events = (session or session_events)(run)
        wall.append(pass_seconds)
        runs = (runs_of or program_runs)(events)
        if [m for m, _ in runs] != list(programs):
            raise WorkerError(
                "internal",
                f"two op-by-op passes ran different programs ({len(runs)} and {len(programs)}): no per-op times",
            )
        for j, (_, s) in enumerate(runs):
            seconds[j].append(s)
    return {"events": list(names), "seconds": seconds, "wall": wall, "plain": plain, "kernels": True}
