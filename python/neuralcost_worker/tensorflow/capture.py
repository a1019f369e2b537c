"""Capture for the TensorFlow adapter (tensorflow/adapter.py): the graph of a concrete function as
op records (docs/worker-protocol.md).

The function is frozen first: grappler inlines nested calls (PartitionedCall, a SavedModel's
signature), and variables become constants named as the placeholders they replace. Its graph is
walked in order. Tensors are named by their graph names; the model input is input0. A
variable's value is named by the variable ("param": true, the same name at every read);
non-trainable variables are "buffer:<variable>". Constants never become ops: scalars become
numbers, small integer tensors (shapes, axes, permutations, paddings) lists of integers, other
constants "param" tensors "const:<tensor>". src/backends/capture/tf_mapping.cpp counts both
prefixes as buffers, not parameters. Small integer results known before the program runs (shape
arithmetic) are folded into integers too. Shapes that static inference leaves open, and those
small integers, are read from one run of the graph.

Loops. A While (tf.while_loop, tf.scan, Keras RNN layers with unroll=False, a Python loop over a
tf.range in a tf.function) is reported as the ops it runs. Control flow v2 makes a While's first
loop variable a counter that the body increments, so the trip count is the While's first output
minus its first input, both read from the run. The While's cond and body (functions of the frozen
graph's library) are then run step by step on the loop variables' values, and each step's ops are
reported with names prefixed "<While op>/<step>/" (the cond's "<While op>/<step>/cond/"), shapes
and small integers from that step's run: the cond's ops for every step and once more (the test
that ends the loop), the body's for every step. Counter arithmetic and compares fold away like
shape arithmetic; a cond that computes on data (a convergence test) is counted. Loop variables
chain from step to step; a weight read in the loop keeps its name. A loop in a body is unrolled
the same way, from the values of the outer step's run. A While that cannot be counted so (its
first variable is no counter, its cond disagrees with the trip count, more than MAX_UNROLLED ops)
stays one tf::While op with attribute "not_unrolled" (why), which the C++ table lists as
unmodeled.

Branches. An If or Case (tf.cond, tf.switch_case; StatelessIf, StatelessCase) is reported as the
ops of the branch it takes: the branch taken on the worker's input is counted, not the others.
The branch is chosen by the predicate's (the branch index's) value from the run (in a loop body,
from that step's run); an index out of range takes the last branch, as Case does. The branch
function is run on the operands' values, its ops reported with names prefixed "<op>/then/",
"<op>/else/" or "<op>/branch<i>/"; its inputs are the operands after the predicate, its outputs
the op's outputs, and a weight read in it keeps its name. An If or Case whose branch cannot be
known (its predicate is no scalar) stays one op with attribute "not_inlined" (why), listed as
unmodeled.

Modules. An op's "module" is the layer it was made in, from its node's name (name scopes; in a
loop body or branch, the loop's or branch's node's name before it): with `layers` (the names
tf_models.scope opened) the longest leading scope path that is one of them ("encoder0.norm1" of
"encoder0.norm1/moments/mean"), else the whole scope path ("sequential/dense" of
"sequential/dense/MatMul"); an op outside every scope has none.

TensorLists (TensorArray: a loop's per-step inputs and outputs) are variant tensors; they are
reported as tensors [length, element...] of their element dtype. The length and element shape
are learnt from the ops that make, fill and read the list (an element shape may be partly
unknown when the list is made) and written into its records when the capture ends.
"""

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants, function_def_to_graph

from neuralcost_worker.protocol import WorkerError, tensor

SMALL = 64  # integer constants up to this many elements become lists of integers
FOLDABLE = {tf.int32, tf.int64, tf.bool}
# ops whose result is their first input, reshaped: of a variable or constant, still that value
ALIASES = {"Identity", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape", "Reshape", "Squeeze", "ExpandDims"}
WHILE = {"While", "StatelessWhile"}
BRANCH = {"If", "StatelessIf", "Case", "StatelessCase"}
MAX_UNROLLED = 200_000  # ops a loop may unroll into; a longer one stays one (unmodeled) op


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


class Lineage:
    """The versions of one TensorList, reported as tensors [length, element...]; their shape is
    set by finish(), from what the list ops taught (an unknown dimension stays 0)."""

    def __init__(self, dtype, length=0, element=None):
        self.dtype, self.length, self.element, self.records = dtype, max(int(length), 0), None, []
        self.learn(element)

    def learn(self, element=None, length=0):
        self.length = max(self.length, int(length))
        if element is None or np.ndim(element) == 0:  # unknown rank
            return
        element = [int(d) if d is not None and d >= 0 else None for d in element]
        if self.element is None or len(self.element) != len(element):
            self.element = element
        else:
            self.element = [a if a is not None else b for a, b in zip(self.element, element)]

    def value(self, name):
        record = {"tensor": name, "shape": [], "dtype": self.dtype}
        self.records.append(record)
        return record

    def finish(self):
        shape = [self.length] + [d or 0 for d in self.element or []]
        for record in self.records:
            record["shape"] = list(shape)


class TList:
    """A value of a TensorList: one version (a tensor name) of its lineage."""

    def __init__(self, lineage, name):
        self.lineage, self.name = lineage, name


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


def freeze(concrete):
    """The concrete function with variables as constants, its control flow kept as ops.
    lower_control_flow=False keeps If and While, not Case (grappler lowers it to _SwitchN and
    Merge, whose branches would all be counted): convert_to_constants' set of ops to keep is
    widened while it runs."""
    kept = convert_to_constants._CONTROL_FLOW_OPS
    convert_to_constants._CONTROL_FLOW_OPS = kept | {"Case", "StatelessCase"}
    try:
        return convert_to_constants.convert_variables_to_constants_v2_as_graph(concrete, lower_control_flow=False)
    finally:
        convert_to_constants._CONTROL_FLOW_OPS = kept


class Program:
    """A graph to walk, and a function that runs it and returns the values capture reads: its
    outputs, open shapes, small integer results, each While's inputs and first output, and each
    If's and Case's inputs."""

    def __init__(self, graph, inputs, outputs, prune):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs
        names = {t.name for t in outputs}
        probes = list(outputs)
        for op in graph.get_operations():
            if op.type in WHILE:
                probes += list(op.inputs) + [op.outputs[0]]
            elif op.type in BRANCH:
                probes += list(op.inputs)
            for t in op.outputs if op.type != "Const" else ():
                if t.dtype in (tf.resource, tf.variant):
                    continue
                if not t.shape.is_fully_defined():
                    if t.consumers() or t.name in names:
                        probes.append(t)
                elif t.dtype in FOLDABLE and t.shape.num_elements() <= SMALL and not op.op_def.is_stateful:
                    probes.append(t)
        self.probes = list({t.name: t for t in probes}.values())
        self.run = prune(inputs, self.probes)
        self.size = sum(op.type not in ("Const", "Placeholder", "NoOp") for op in graph.get_operations())

    def values(self, args):
        return {t.name: v for t, v in zip(self.probes, self.run(*args))}


def function_program(fdef, library, shapes):
    """A function of the frozen graph's library (a While's body or cond, a branch) as a Program."""
    graph_def, names = function_def_to_graph.function_def_to_graph_def(fdef, input_shapes=shapes)
    placeholders = {node.name: node for node in graph_def.node if node.op == "Placeholder"}
    for arg, shape in zip(fdef.signature.input_arg, shapes):
        if shape.rank is not None:  # an argument's own shape attr is the variable handle's, if it was one
            placeholders[arg.name].attr["shape"].shape.CopyFrom(shape.as_proto())
    graph_def.library.CopyFrom(library)
    wrapped = tf.compat.v1.wrap_function(lambda: tf.graph_util.import_graph_def(graph_def, name=""), [])
    graph = wrapped.graph
    inputs = [graph.get_tensor_by_name(f"{a.name}:0") for a in fdef.signature.input_arg]
    outputs = [graph.get_tensor_by_name(names[fdef.ret[a.name]]) for a in fdef.signature.output_arg]
    return Program(graph, inputs, outputs, wrapped.prune)


class Frame:
    """One run of a graph: its probed values, the prefix of its tensor names, and the scope of
    its constants (the prefix without the steps: a constant of a loop body is one constant)."""

    def __init__(self, values, prefix="", scope=""):
        self.values, self.prefix, self.scope = values, prefix, scope

    def shape(self, t):
        return t.shape if t.shape.is_fully_defined() else self.values[t.name].shape if t.name in self.values else None

    def small(self, t):
        v = self.values.get(t.name)
        return None if v is None or t.dtype not in FOLDABLE or v.shape.num_elements() > SMALL else v.numpy()


class Tracer:
    """Walks the graph of a concrete function into op records (self.ops)."""

    def __init__(self, concrete, example, layers=None):
        """`example`: the input, or a list of the inputs, the trip counts and branches are read on;
        `layers`: the layer names of the model's name scopes, if it has them (Modules above)."""
        self.layers = layers
        examples = list(example) if isinstance(example, (list, tuple)) else [example]
        by_handle = {id(v.handle): v for v in concrete.variables}
        variables, seen = {}, {}
        for outer, inner in concrete.graph.captures:
            v = by_handle.get(id(outer))
            if v is None:
                raise WorkerError(
                    "unimplemented", f"capture: '{inner.name}' is a captured tensor that is not a variable"
                )
            base = v.name[:-2] if v.name.endswith(":0") else v.name
            seen[base] = seen.get(base, 0) + 1
            name = base if seen[base] == 1 else f"{base}#{seen[base]}"
            variables[inner.op.name] = Var(
                tensor(name if v.trainable else f"buffer:{name}", v.shape, v.dtype.name, param=True)
            )
        frozen, graph_def = freeze(concrete)
        self.library = graph_def.library
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.programs, self.lineages, self.ops = {}, [], []
        self.nodes = []  # per op: its graph node's name (in a loop body or branch: the body's node)
        graph = frozen.graph
        program = Program(graph, graph.inputs, graph.outputs, frozen.prune)
        env = {t.name: tensor(f"input{i}", t.shape, t.dtype.name) for i, t in enumerate(graph.inputs)}
        for op in graph.get_operations():
            if op.type == "Const" and op.name in variables:
                env[op.outputs[0].name] = variables[op.name]
        self.walk(graph, env, Frame(program.values(examples)))
        for lineage in self.lineages:
            lineage.finish()

    def walk(self, graph, env, frame):
        for op in graph.get_operations():
            if op.type == "Const" and op.outputs[0].name not in env:
                env[op.outputs[0].name] = Literal(
                    tf.make_ndarray(op.get_attr("value")), frame.scope + op.outputs[0].name
                )
            elif op.type in WHILE:
                self.loop(op, env, frame)
            elif op.type in BRANCH:
                self.branch(op, env, frame)
            elif op.type not in ("Const", "Placeholder", "NoOp"):
                self.visit(op, env, frame)

    def operand(self, value, as_tensor=False):
        if isinstance(value, Var):
            return value.value
        if isinstance(value, Literal):
            return value.value(as_tensor)
        if isinstance(value, TList):
            return value.lineage.value(value.name)
        return value

    def read(self, op, env):
        values = [env.get(t.name) for t in op.inputs]
        if any(v is None for v in values):
            raise WorkerError("internal", f"capture: op '{op.name}' ({op.type}) reads a tensor that was never produced")
        return values

    def visit(self, op, env, frame):
        values = [env.get(t.name) for t in op.inputs]
        out = op.outputs[0] if op.outputs else None
        if op.type in ALIASES and values and isinstance(values[0], (Var, Literal)) and out.shape.is_fully_defined():
            env[out.name] = values[0].reshaped(out.shape)  # a view of a weight is that weight
        elif op.type in ALIASES and values and isinstance(values[0], TList):
            env[out.name] = values[0]
        elif not self.fold(op, env, values, frame):
            self.emit(op, self.read(op, env), env, frame)

    def fold(self, op, env, values, frame):
        """Small integer results known before the program runs (shape arithmetic) become constants:
        those of constants, and those static inference knows (the Shape of an activation)."""
        outs = op.outputs
        if not outs or any(frame.small(t) is None for t in outs):
            return False
        if not all(isinstance(v, Literal) for v in values) and any(tf.get_static_value(t) is None for t in outs):
            return False
        for t in outs:
            env[t.name] = Literal(frame.small(t), frame.prefix + t.name)
        return True

    def emit(self, op, values, env, frame, attrs=None):
        where = f"op '{op.name}' ({op.type})"
        # an op with only constant operands keeps them as tensors, so that it has operands
        literal_only = all(isinstance(v, Literal) for v in values)
        record = {
            "op": f"tf::{op.type}",
            "in": [self.operand(v, literal_only) for v in values],
            "out": [],
            "attrs": dict(attrs_of(op), **(attrs or {})),
        }
        for t in op.outputs:
            name = frame.prefix + t.name
            if t.dtype == tf.variant:
                lineage = self.lineage(op, values, t.value_index)
                if lineage is not None:
                    env[t.name] = TList(lineage, name)
                    record["out"].append(lineage.value(name))
                continue
            if t.dtype == tf.resource:
                continue
            shape = frame.shape(t)
            if shape is None:
                continue  # an unused by-product of unknown shape (FusedBatchNormV3's reserve space)
            if t.dtype == tf.string:
                raise WorkerError("unimplemented", f"capture: {where} has a string output '{t.name}'")
            value = tensor(name, shape, t.dtype.name)
            record["out"].append(value)
            env[t.name] = value
        self.learn(op, values, record["out"])
        module = self.module(frame.scope + op.name)
        if module:
            record["module"] = module
        self.ops.append(record)
        self.nodes.append(op.name)

    def module(self, node):
        """The layer of the op whose node (with its loop's or branch's scope) is `node`."""
        parts = node.split("/")[:-1]
        if self.layers is None:
            return "/".join(parts)
        for k in range(len(parts), 0, -1):
            if "/".join(parts[:k]) in self.layers:
                return "/".join(parts[:k])
        return ""

    def lineage(self, op, values, index):
        """The TensorList an op's variant output `index` is a version of (None: not a TensorList)."""
        if op.type in WHILE:  # a While not unrolled: loop variable `index` as it ends
            return values[index].lineage if isinstance(values[index], TList) else None
        if op.type in ("TensorListReserve", "EmptyTensorList"):
            shape = values[0].array if isinstance(values[0], Literal) else None
            length = values[1].array if op.type == "TensorListReserve" and isinstance(values[1], Literal) else 0
            self.lineages.append(Lineage(op.get_attr("element_dtype").name, length, shape))
            return self.lineages[-1]
        if op.type == "TensorListFromTensor" and not isinstance(values[0], TList):
            x = self.operand(values[0], as_tensor=True)
            shape = x["shape"]
            self.lineages.append(Lineage(x["dtype"], shape[0] if shape else 0, shape[1:]))
            return self.lineages[-1]
        lists = [v for v in values if isinstance(v, TList)]
        return lists[0].lineage if lists and op.type.startswith("TensorList") else None

    @staticmethod
    def learn(op, values, outs):
        """What a list op says of its list's length and element shape."""
        if op.type == "TensorListSetItem" and isinstance(values[0], TList) and isinstance(values[2], dict):
            index = values[1].array if isinstance(values[1], Literal) else -1
            values[0].lineage.learn(values[2]["shape"], int(index) + 1)
        elif op.type == "TensorListGetItem" and isinstance(values[0], TList) and outs:
            values[0].lineage.learn(outs[0]["shape"])
        elif op.type == "TensorListStack" and isinstance(values[0], TList) and outs:
            values[0].lineage.learn(outs[0]["shape"][1:], outs[0]["shape"][0])

    def program(self, op, attr, index=None):
        """The function of a While's `attr` (body, cond), or of an If's or Case's (then_branch,
        else_branch; branches[index]), as a Program, made once."""
        name = (op.get_attr(attr) if index is None else op.get_attr(attr)[index]).name
        if name not in self.programs:
            if op.type in WHILE:
                shapes = [tf.TensorShape(s) for s in op.get_attr("output_shapes")]
            else:  # a branch's arguments are the operands after the predicate
                shapes = [t.shape for t in op.inputs[1:]]
            self.programs[name] = function_program(self.functions[name], self.library, shapes)
        return self.programs[name]

    def branch(self, op, env, frame):
        """An If or Case as the ops of the branch it takes on the run's values; one unmodeled op
        when that branch cannot be known."""
        values = self.read(op, env)
        index = frame.small(op.inputs[0])
        if index is None or np.ndim(index):
            return self.emit(op, values, env, frame, {"not_inlined": "its branch index is not a known scalar"})
        if op.type.endswith("If"):
            attr, at, label = ("then_branch", None, "then") if bool(index) else ("else_branch", None, "else")
        else:
            count = len(op.get_attr("branches"))
            at = int(index) if 0 <= int(index) < count else count - 1  # out of range: the last branch
            attr, label = "branches", f"branch{at}"
        start = len(self.ops)
        try:
            program = self.program(op, attr, at)
            run = Frame(
                program.values([frame.values[t.name] for t in op.inputs[1:]]),
                f"{frame.prefix}{op.name}/{label}/",
                f"{frame.scope}{op.name}/{label}/",
            )
            inner = dict(zip((t.name for t in program.inputs), values[1:]))
            self.walk(program.graph, inner, run)
        except Exception as e:  # a branch TensorFlow cannot rebuild or run alone: one unmodeled op
            del self.ops[start:]
            why = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return self.emit(
                op,
                values,
                env,
                frame,
                {"not_inlined": f"its {label} branch could not be run alone: {type(e).__name__}: {why}"[:300]},
            )
        for t, out in zip(op.outputs, program.outputs):
            env[t.name] = inner[out.name]

    def loop(self, op, env, frame):
        """A While as the ops of its cond and body, once per iteration (the cond once more);
        one unmodeled op when it cannot be."""
        values = self.read(op, env)
        first, last = frame.small(op.inputs[0]), frame.small(op.outputs[0])
        if op.inputs[0].dtype != tf.int32 or first is None or last is None or np.ndim(first) or last < first:
            return self.emit(op, values, env, frame, {"not_unrolled": "its first loop variable is not a loop counter"})
        body, cond, trips = self.program(op, "body"), self.program(op, "cond"), int(last) - int(first)
        if trips * (body.size + cond.size) > MAX_UNROLLED:
            return self.emit(
                op,
                values,
                env,
                frame,
                {"not_unrolled": f"{trips} iterations of {body.size + cond.size} ops exceed {MAX_UNROLLED} ops"},
            )
        args, start, inputs = [frame.values[t.name] for t in op.inputs], len(self.ops), values
        for step in range(trips + 1):
            prefix = f"{frame.prefix}{op.name}/{step}/"
            test = Frame(cond.values(args), prefix + "cond/", f"{frame.scope}{op.name}/cond/")
            if bool(test.values[cond.outputs[0].name]) != (step < trips):
                del self.ops[start:]
                return self.emit(
                    op,
                    inputs,
                    env,
                    frame,
                    {"not_unrolled": f"its cond disagrees with its counter ({trips} iterations)"},
                )
            self.walk(cond.graph, dict(zip((t.name for t in cond.inputs), values)), test)
            if step == trips:
                break
            run = Frame(body.values(args), prefix, f"{frame.scope}{op.name}/")
            inner = dict(zip((t.name for t in body.inputs), values))
            self.walk(body.graph, inner, run)
            values, args = [inner[t.name] for t in body.outputs], [run.values[t.name] for t in body.outputs]
        for t, v in zip(op.outputs, values):
            env[t.name] = v
