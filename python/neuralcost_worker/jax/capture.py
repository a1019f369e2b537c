"""Capture for the JAX adapter (jax/adapter.py): the jaxpr of a forward function as op records
"jax::<primitive>" (docs/worker-protocol.md), which src/backends/capture/jax_mapping.cpp maps.

  - an op made inside jax.named_scope(...) carries "module": the scopes around it joined with "."
    (those of an inlined call's caller first): the layer name of the per-layer table. With
    `layers` (the names jax_models.scope opened), the longest leading join that is one of them:
    "encoder0.self_attn.sdpa", not the "bhqd,bhkd->bhqk" scope jnp.einsum opens inside it.
  - parameters are "param": true and named by their pytree path ("encoder0.linear1.weight");
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
    under disable_jit).
  - a `while` (lax.while_loop; lax.fori_loop with bounds that are not static) is the ops it runs.
    Its trip count depends on data, so when the program has a while the walker carries each
    value's concrete array next to its name: it evaluates the program once, on the real
    parameters and input, as it walks it (primitive.bind, op by op). At a while, its cond and body
    are run (jitted) on the loop variables' values until the cond fails: that is the trip count.
    The cond is then walked once per test (trip count + 1 times: the last test ends the loop) and
    the body once per step, carries chained, weights keeping their names, fresh edges per step.
    Counter arithmetic and compares of a counter that is a known scalar (lax.while_loop from a
    literal, fori_loop) fold away like any scalar arithmetic; a compare on a traced value (a
    bound computed from data, a convergence test) is one op per test. A while in a scan or in
    another while's body is counted from the values of the step it runs in. A while that cannot
    be counted (a value it reads is unknown, its cond disagrees with the count, it would unroll
    into more than MAX_UNROLLED ops) stays one `while` op with attribute "not_unrolled" (why),
    which the C++ table lists as unmodeled with that reason.
  - a `cond` (lax.cond, lax.switch) is the ops of the branch it takes: the branch taken on the
    worker's input is counted (branching that depends on data is counted for that input; the
    other branches are not). The index is a known scalar (a literal predicate, or scalar
    arithmetic on literals that folded away: lax.switch on a constant) and is read without
    evaluating anything; otherwise it is evaluated: a program with a cond, like one with a while,
    is walked with concrete values. The taken branch is inlined, its invars bound to the cond's
    operands and its outvars becoming the cond's outputs; its ops carry the attribute
    "cond_branch" ("1 of 2": the branch's index in `branches`, innermost cond). A cond whose
    index cannot be known (a value it reads is unknown) stays one `cond` op with attribute
    "not_inlined" (why), which the C++ table lists as unmodeled with that reason.
"""

import numbers

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import source_info_util
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal, jaxpr_as_fun

from neuralcost_worker.protocol import tensor

# primitives whose inner jaxpr is run as is: inlined into the caller
INLINED = {
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
    "remat",
    "remat2",
    "checkpoint",
    "named_call",
}
# primitives that only relabel or re-lay out their input: of a weight, the weight itself
LAYOUT = {"reshape", "squeeze", "expand_dims", "broadcast_in_dim", "transpose", "convert_element_type", "stop_gradient"}
MAX_UNROLLED = 200_000  # ops a while may unroll into; a longer one stays one (unmodeled) op


def capture(closed, params, x, buffers, keys=None, layers=None):
    """The op records of `closed` (the jaxpr of forward(params, x)); `buffers` names constants;
    `layers`: the model's layer names, if its scopes name them (the module docstring).
    With a list `keys`, appends each op's eqn_key, for xla_trace.attribute (a scan's slices and
    stacking, which the walker makes, get the scan's location; None: no location)."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    args = [tensor(path_name(p), leaf.shape, leaf.dtype, param=True) for p, leaf in leaves]
    args.append(tensor("input0", x.shape, x.dtype))
    named = jax.tree_util.tree_flatten_with_path(buffers)[0]
    walker = _Walker({id(leaf): "const:" + path_name(p) for p, leaf in named}, _has_control(closed), layers)
    walker.call(closed, args, [leaf for _, leaf in leaves] + [x])
    if keys is not None:
        keys.extend(walker.keys)
    return walker.ops


def eqn_key(eqn, outer=None, module=""):
    """(primitive, (file, line, column) of the user's code that made it): what XLA's HLO metadata
    says of the instructions the equation became (xla_trace.py). An equation of a library
    function (jax.nn.relu's max) has no user frame of its own: it has its caller's, `outer`.
    In a layer (`module`), the primitive is "<module>/<primitive>": the same line run for two
    layers (a Python loop over stages) is two keys."""
    frame = source_info_util.user_frame(eqn.source_info.traceback)
    where = (frame.file_name, frame.start_line, frame.start_column) if frame is not None else outer
    return (f"{module}/{eqn.primitive.name}" if module else eqn.primitive.name), where


def scopes(eqn):
    """The jax.named_scope names around an equation ("encoder0", "self_attn.sdpa"): an op's module
    path is their join with "." ("encoder0.self_attn.sdpa"); transformations (jvp, vmap) are not
    scopes."""
    return tuple(c.name for c in eqn.source_info.name_stack.stack if isinstance(c, source_info_util.Scope))


def hlo_key(op_name, frame, layers=None):
    """The eqn_key of an HLO instruction's metadata: op_name "jit(forward)/.../dot_general", whose
    middle is the name stack ("stage0.relu/jit(relu)"): with `layers`, its longest leading join
    of scopes (transformations such as "jit(relu)" left out) that is a layer is the module."""
    parts = op_name.split("/")
    scopes = [p for p in parts[1:-1] if not p.endswith(")")]
    module = next(
        (".".join(scopes[:k]) for k in range(len(scopes), 0, -1) if layers and ".".join(scopes[:k]) in layers), ""
    )
    return (f"{module}/{parts[-1]}" if module else parts[-1]), frame


def path_name(path):
    """A pytree path as a dotted name: encoder0.linear1.weight."""
    parts = []
    for k in path:
        parts.append(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))))
    return ".".join(parts)


def _inner_jaxprs(eqn):
    for v in eqn.params.values():
        for item in v if isinstance(v, (tuple, list)) else [v]:
            if isinstance(item, (Jaxpr, ClosedJaxpr)):
                yield item


def _has_control(jaxpr):
    """Whether `jaxpr` has a while or a cond (anywhere inside): then values are carried."""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return any(
        eqn.primitive.name in ("while", "cond") or any(_has_control(j) for j in _inner_jaxprs(eqn))
        for eqn in jaxpr.eqns
    )


def _size(jaxpr):
    """About how many ops one run of `jaxpr` reports (a scan's steps counted, a while's once)."""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    n = 0
    for eqn in jaxpr.eqns:
        inner = list(_inner_jaxprs(eqn))
        n += (
            eqn.params["length"] * _size(inner[0])
            if eqn.primitive.name == "scan"
            else max(map(_size, inner))
            if eqn.primitive.name == "cond"
            else sum(map(_size, inner))
            if inner
            else 1
        )
    return max(n, 1)


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
    spatial = "DHW"[3 - (len(spec) - 2) :] if len(spec) <= 5 else "0123456789"
    for i, dim in enumerate(spec):
        out[dim] = letters[i] if i < 2 else spatial[i - 2]
    return "".join(out)


def _attrs(eqn):
    attrs = {}
    for key, v in eqn.params.items():
        if key == "dimension_numbers" and eqn.primitive.name == "dot_general":
            (lc, rc), (lb, rb) = v
            attrs.update(
                lhs_contracting=list(map(int, lc)),
                rhs_contracting=list(map(int, rc)),
                lhs_batch=list(map(int, lb)),
                rhs_batch=list(map(int, rb)),
            )
        elif key == "dimension_numbers" and eqn.primitive.name == "conv_general_dilated":
            attrs.update(
                lhs_layout=_layout(v.lhs_spec, "NC"),
                rhs_layout=_layout(v.rhs_spec, "OI"),
                out_layout=_layout(v.out_spec, "NC"),
            )
        elif hasattr(v, "_fields"):  # other dimension numbers (gather, scatter): one entry per field
            attrs.update((f, a) for f, a in ((f, _attr(getattr(v, f))) for f in v._fields) if a is not None)
        elif not isinstance(v, (Jaxpr, ClosedJaxpr)):
            value = _attr(v)
            if value is not None:
                attrs[key] = value
    return attrs


class _Walker:
    """Walks a jaxpr, inlining calls and taken branches and unrolling scans and whiles, and collects
    the op records. With `concrete`, every value's array is carried along (None where unknown),
    for the whiles and conds."""

    def __init__(self, const_names, concrete, layers=None):
        self.ops = []
        self.layers = layers  # the layer names the scopes may name (None: any scope)
        self.edges = 0
        self.const_names = const_names  # id(array) -> name, for named constants
        self.consts = {}  # id(array) -> value, so a constant read twice is one
        self.concrete = concrete
        self.jitted = {}  # id(closed jaxpr) -> (jaxpr, jitted function): a while's cond, body
        self.keys = []  # per op: (primitive, source location) of its equation, or None
        self.eqn = None  # the equation being emitted (None: an op the walker makes)
        self.outer = None  # the source location of the innermost call being inlined
        self.scan_where = None  # ... of the innermost scan being unrolled
        self.scope = ()  # the named scopes (jax.named_scope) the op is made in

    def module(self):
        """The layer of an op made in self.scope: the longest leading join that is a layer."""
        for k in range(len(self.scope), 0, -1):
            name = ".".join(self.scope[:k])
            if self.layers is None or name in self.layers:
                return name
        return ""

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

    def value(self, known, atom):
        """The concrete value of `atom`, or None (unknown, or no while or cond to resolve)."""
        if not self.concrete:
            return None
        return np.asarray(atom.val, atom.aval.dtype) if isinstance(atom, Literal) else known.get(atom)

    def emit(self, name, ins, outs, attrs=None):
        ins = [v if isinstance(v, dict) else _number(v) for v in ins]
        op = {"op": f"jax::{name}", "in": ins, "out": outs}
        if attrs:
            op["attrs"] = attrs
        module = self.module()
        if module:
            op["module"] = module
        self.ops.append(op)
        if self.eqn is not None and self.eqn.primitive.name == name:
            self.keys.append(eqn_key(self.eqn, self.outer, module if self.layers else ""))
        else:  # a scan's slices and stacking: where the scan is (XLA's dynamic slices carry it)
            qualified = f"{module}/{name}" if module and self.layers else name
            self.keys.append((qualified, self.scan_where) if self.scan_where is not None else None)

    def evaluate(self, eqn, vals):
        """The concrete outputs of `eqn` on `vals` (None where they cannot be had)."""
        if self.concrete and all(v is not None for v in vals):
            try:
                outs = eqn.primitive.bind(*vals, **eqn.params)
                return list(outs) if eqn.primitive.multiple_results else [outs]
            except Exception:  # noqa: BLE001 (a value that cannot be had only leaves later whiles uncounted)
                pass
        return [None] * len(eqn.outvars)

    def call(self, jaxpr, args, vals=None):
        """Runs `jaxpr` (closed or open) on the values `args` (and their arrays `vals`);
        returns its output values and their arrays."""
        consts = list(jaxpr.consts) if isinstance(jaxpr, ClosedJaxpr) else []
        jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
        env = dict(zip(jaxpr.constvars, [self.constant(c) for c in consts]))
        env.update(zip(jaxpr.invars, args))
        known = dict(zip(jaxpr.constvars, consts)) if self.concrete else {}
        known.update(zip(jaxpr.invars, vals if vals is not None else [None] * len(args)))
        scope = self.scope
        for eqn in jaxpr.eqns:
            # an inlined call's equations name their scopes relative to the call's
            self.scope = scope + scopes(eqn)
            ins = [self.read(env, v) for v in eqn.invars]
            in_vals = [self.value(known, v) for v in eqn.invars]
            name = eqn.primitive.name
            inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            if name in INLINED and inner is not None:
                outer, self.outer = self.outer, eqn_key(eqn, self.outer)[1]
                outs, out_vals = self.call(inner, ins, in_vals)
                self.outer = outer
            elif name == "scan":
                where, self.scan_where = self.scan_where, eqn_key(eqn, self.outer)[1]
                outs, out_vals = self.scan(eqn.params, ins, in_vals, [v.aval for v in eqn.outvars])
                self.scan_where = where
            elif name == "while":
                outs, out_vals = self.loop(eqn, ins, in_vals)
            elif name == "cond":
                outs, out_vals = self.branch(eqn, ins, in_vals)
            elif (folded := self.fold(eqn, ins)) is not None:
                outs, out_vals = folded, folded
            else:
                outs = [self.result(name, ins, v.aval) for v in eqn.outvars]
                self.eqn = eqn
                self.emit(name, ins, outs, _attrs(eqn))
                self.eqn = None
                out_vals = self.evaluate(eqn, in_vals)
            env.update(zip(eqn.outvars, outs))
            if self.concrete:
                known.update(zip(eqn.outvars, out_vals))
        self.scope = scope
        return [self.read(env, v) for v in jaxpr.outvars], [self.value(known, v) for v in jaxpr.outvars]

    @staticmethod
    def fold(eqn, ins):
        """Scalar arithmetic on known scalars (a fori_loop's counter), computed here: no op."""
        if (
            not eqn.outvars
            or eqn.effects
            or any(isinstance(v, dict) for v in ins)
            or any(v.aval.shape != () for v in eqn.outvars)
            or any(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in eqn.params.values())
        ):
            return None
        try:
            outs = eqn.primitive.bind(*ins, **eqn.params)
        except Exception:  # noqa: BLE001 (not evaluable here: reported as an op)
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

    def scan(self, params, ins, vals, out_avals):
        consts_n, carry_n, length = params["num_consts"], params["num_carry"], params["length"]
        split = (slice(0, consts_n), slice(consts_n, consts_n + carry_n), slice(consts_n + carry_n, None))
        (consts, carry, xs), (const_vals, carry_vals, xs_vals) = ([v[s] for s in split] for v in (ins, vals))
        steps = range(length - 1, -1, -1) if params["reverse"] else range(length)
        ys, ys_vals = {}, {}
        for i in steps:
            outs, out_vals = self.call(
                params["jaxpr"],
                consts + carry + [self.index(x, i) for x in xs],
                const_vals + carry_vals + [None if v is None else v[i] for v in xs_vals],
            )
            carry, ys[i] = outs[:carry_n], outs[carry_n:]
            carry_vals, ys_vals[i] = out_vals[:carry_n], out_vals[carry_n:]
        stacked = [self.stack([ys[i][j] for i in range(length)], aval) for j, aval in enumerate(out_avals[carry_n:])]
        stacked_vals = [
            self.stack_values([ys_vals[i][j] for i in range(length)], aval)
            for j, aval in enumerate(out_avals[carry_n:])
        ]
        return carry + stacked, carry_vals + stacked_vals

    def stack_values(self, values, aval):
        if not self.concrete or any(v is None for v in values):
            return None
        return jnp.stack([jnp.asarray(v, aval.dtype) for v in values]) if values else jnp.zeros(aval.shape, aval.dtype)

    def index(self, x, i):
        """Step i's slice of a scanned-over value: slice + squeeze (a weight slice stays a weight)."""
        shape = x["shape"]
        if x.get("param"):
            return tensor(f"{x['tensor']}.{i}", shape[1:], x["dtype"], param=True)
        part = self.fresh([1] + shape[1:], x["dtype"])
        self.emit(
            "slice", [x], [part], {"start_indices": [i] + [0] * (len(shape) - 1), "limit_indices": [i + 1] + shape[1:]}
        )
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

    def jit(self, closed):
        if id(closed) not in self.jitted:
            self.jitted[id(closed)] = (closed, jax.jit(jaxpr_as_fun(closed)))
        return self.jitted[id(closed)][1]

    def trips(self, params, vals):
        """A while's trip count, from its loop variables' values; (0, why) when it cannot be had."""
        if not self.concrete or any(v is None for v in vals):
            return 0, "the values it starts from are not known at capture, so its trip count is not either"
        cond_n, body_n = params["cond_nconsts"], params["body_nconsts"]
        size = _size(params["cond_jaxpr"]) + _size(params["body_jaxpr"])
        limit = MAX_UNROLLED // size
        cond, body = self.jit(params["cond_jaxpr"]), self.jit(params["body_jaxpr"])
        carry, steps = vals[cond_n + body_n :], 0
        try:
            while bool(cond(*vals[:cond_n], *carry)[0]):
                if steps == limit:
                    return 0, f"more than {limit} iterations of about {size} ops exceed {MAX_UNROLLED} ops"
                carry, steps = body(*vals[cond_n : cond_n + body_n], *carry), steps + 1
        except Exception as e:  # noqa: BLE001
            return (
                0,
                f"its trip count could not be found ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
            )
        return steps, None

    def loop(self, eqn, ins, vals):
        """A while as its cond once per test and its body once per step; one op when it cannot be."""
        p = eqn.params
        cond_n, body_n = p["cond_nconsts"], p["body_nconsts"]
        trips, why = self.trips(p, vals)
        start = len(self.ops)
        carry, carry_vals = ins[cond_n + body_n :], vals[cond_n + body_n :]
        for step in range(trips + 1 if why is None else 0):
            _, test = self.call(p["cond_jaxpr"], ins[:cond_n] + carry, vals[:cond_n] + carry_vals)
            if test[0] is None or bool(test[0]) != (step < trips):
                why = f"its cond disagrees with its trip count ({trips} iterations)"
                break
            if step == trips:
                return carry, carry_vals
            carry, carry_vals = self.call(
                p["body_jaxpr"], ins[cond_n : cond_n + body_n] + carry, vals[cond_n : cond_n + body_n] + carry_vals
            )
            if len(self.ops) - start > MAX_UNROLLED:
                why = f"{trips} iterations exceed {MAX_UNROLLED} ops"
                break
        del self.ops[start:]
        outs = [self.result("while", ins, v.aval) for v in eqn.outvars]
        self.emit("while", ins, outs, dict(_attrs(eqn), not_unrolled=why))
        return outs, self.evaluate(eqn, vals)

    def branch(self, eqn, ins, vals):
        """A cond as the ops of the branch it takes; one op when the index cannot be known."""
        branches = eqn.params["branches"]
        index = ins[0] if not isinstance(ins[0], dict) else vals[0]  # a known scalar: no evaluation
        if index is None:
            outs = [self.result("cond", ins, v.aval) for v in eqn.outvars]
            why = "the value of its index (which branch runs) is not known at capture"
            self.emit("cond", ins, outs, dict(_attrs(eqn), branches=len(branches), not_inlined=why))
            return outs, [None] * len(outs)
        taken = int(np.clip(np.asarray(index).item(), 0, len(branches) - 1))  # as cond clamps
        start = len(self.ops)
        outs, out_vals = self.call(branches[taken], ins[1:], vals[1:])
        for op in self.ops[start:]:  # an inner cond's ops keep their own (innermost) label
            op.setdefault("attrs", {}).setdefault("cond_branch", f"{taken} of {len(branches)}")
        return outs, out_vals
