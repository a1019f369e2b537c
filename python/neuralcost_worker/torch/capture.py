"""The torch worker's op observers (docs/worker-protocol.md): TorchDispatchMode recorders that
name every tensor of one pass (inputs, weights, buffers, edges) and the module each op ran in (by
module hooks, or a torch.export program's nn_module_stack), and the per-op timer of eager passes."""

import math
import time
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from neuralcost_worker.protocol import tensor

# ops whose output is a view of their first input: a view of a weight is still that weight (the
# one list, shared with the C++ ATen mapping)
_VIEWS = {
    line.strip()
    for line in (Path(__file__).with_name("aten_view_ops.txt")).read_text().splitlines()
    if line.startswith("aten::")
}


class Namer:
    """Names every tensor of one forward pass: model inputs, weights and buffers (by data
    pointer), edges. A buffer (a module's registered state: position ids, rotary frequencies,
    running statistics) is described as one, not as a trainable weight nor a model input."""

    def __init__(self, inputs, parameter_names, buffer_names=None):
        # id -> (name, kind, weak reference); kind is "param", "buffer" or "" (an edge). Weak:
        # holding a tensor that an op returned makes the dispatcher run an extra aten::detach on
        # it, which a plain pass does not run; the reference tells a reused id from the tensor
        # it was given to.
        self.known = {}
        self.params = parameter_names
        self.buffers = buffer_names or {}
        self.next = 0
        self.consts = 0
        for i, t in enumerate(inputs):
            self._remember(t, f"input{i}", "")

    def _remember(self, t, name, kind):
        self.known[id(t)] = (name, kind, weakref.ref(t))

    def describe(self, t):
        entry = self.known.get(id(t))
        if entry is None or entry[2]() is not t:
            name, kind = self.params.get(t.data_ptr()), "param"
            if name is None:
                name, kind = self.buffers.get(t.data_ptr()), "buffer"
            if name is None:
                name, kind = f"const{self.consts}", "buffer"
                self.consts += 1
            self._remember(t, name, kind)
        name, kind, _ = self.known[id(t)]
        if t.is_complex():  # (real, imaginary) pairs in a last dim of 2, as the cost model counts them
            real = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
            value = tensor(
                name, list(t.shape) + [2], real.get(str(t.dtype).replace("torch.", ""), "complex"), bool(kind)
            )
            value["complex"] = True
        else:
            value = tensor(name, t.shape, str(t.dtype).replace("torch.", ""), bool(kind))
        if kind == "buffer":
            value["buffer"] = True
        if not t.is_contiguous():
            value["contiguous"] = False
        return value

    def produce(self, t, op, inputs):
        first = next((v for v in inputs if isinstance(v, dict) and "tensor" in v), None)
        # a view of a weight that keeps its elements is that weight; one that selects or
        # broadcasts (expand, slice) is an edge, so the weight is counted once at its own size
        if op in _VIEWS and first is not None and first.get("param") and t.numel() == math.prod(first["shape"]):
            self._remember(t, first["tensor"], "buffer" if first.get("buffer") else "param")
        else:
            self._remember(t, f"%{self.next}", "")
            self.next += 1
        return self.describe(t)


class Modules:
    """The path of the module running now ("stage0.conv"), kept by global module hooks while
    entered: ops dispatched inside a module's forward are named after it."""

    def __init__(self, net):
        self.paths = {id(m): name for name, m in net.named_modules() if name}
        self.stack = []

    def current(self):
        return self.stack[-1] if self.stack else ""

    def __enter__(self):
        hooks = torch.nn.modules.module

        def pre(module, _args):
            self.stack.append(self.paths.get(id(module), self.current()))

        def post(_module, _args, _out):
            if self.stack:
                self.stack.pop()

        self.handles = [hooks.register_module_forward_pre_hook(pre), hooks.register_module_forward_hook(post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.stack.clear()


class ProgramModules:
    """The module path of the node running now in a torch.export program, from the node's
    nn_module_stack (the innermost module), while an fx Interpreter runs the program node by
    node: the ops a node dispatches are named after the module it came from, as `analyze` names
    layers. The program's own graph nodes, so no module hook is involved."""

    def __init__(self, program):
        self.program = program
        self.now = ""

    def current(self):
        return self.now

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.now = ""

    def run(self, xs):
        outer = self

        class Run(torch.fx.Interpreter):
            def run_node(self, node):
                stack = node.meta.get("nn_module_stack")
                outer.now = str(list(stack.values())[-1][0]) if stack else ""
                return super().run_node(node)

        return Run(self.program).run(*xs)


def _expert_rows(args, kwargs):
    """The rows each group of a _grouped_mm(mat_a [rows, in], mat_b [E, in, out], offs) took: offs
    holds the groups' cumulative ends (transformers' grouped_mm experts: a routing histogram).
    None for another form."""
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    if not isinstance(offs, torch.Tensor) or offs.dim() != 1 or len(args) < 2 or args[1].dim() != 3:
        return None
    ends = [int(e) for e in offs.tolist()]
    return [e - s for s, e in zip([0] + ends[:-1], ends)]


class Recorder(TorchDispatchMode):
    """Records every ATen op that reaches the dispatcher, with its arguments in schema order and
    the module it ran in (when `modules` is given)."""

    def __init__(self, namer, modules=None):
        super().__init__()
        self.namer = namer
        self.modules = modules
        self.ops = []

    def value(self, v):
        if isinstance(v, torch.Tensor):
            return self.namer.describe(v)
        if isinstance(v, (list, tuple)):
            if v and all(isinstance(e, torch.Tensor) or e is None for e in v) and any(e is not None for e in v):
                # index's Tensor?[]: the index tensors (None marks a dimension taken whole)
                return {"tensors": [self.namer.describe(e) for e in v if e is not None]}
            if all(isinstance(e, int) and not isinstance(e, bool) for e in v):
                return [int(e) for e in v]
            return None if not v else str(v)
        if isinstance(v, (bool, int, str)) or v is None:
            return v
        if isinstance(v, float):
            # JSON has no infinities or NaN (masked_fill's -inf): those as their names
            return float(v) if math.isfinite(v) else str(v)
        return str(v)

    def call(self, func, args, kwargs):
        return func(*args, **kwargs)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        # the arguments as they are before the call: an in-place op (transpose_, ...) changes them
        values = []
        for i, a in enumerate(schema.arguments):
            if not a.kwarg_only and i < len(args):
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            else:
                v = a.default_value if a.has_default_value() else None
            values.append(self.value(v))
        out = self.call(func, args, kwargs)
        outs = []
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor):
                outs.append(self.namer.produce(o, schema.name, values))
            elif isinstance(o, (list, tuple)) and all(isinstance(e, torch.Tensor) for e in o):
                outs.append({"tensors": [self.namer.produce(e, schema.name, values) for e in o]})
            else:
                outs.append(self.value(o))
        op = {"op": schema.name, "in": values, "out": outs}
        if schema.name == "aten::_grouped_mm":
            rows = _expert_rows(args, kwargs)
            if rows is not None:
                op["attrs"] = {"expert_rows": rows}
        if self.modules is not None and self.modules.current():
            op["module"] = self.modules.current()
        self.ops.append(op)
        return out


class Timer(TorchDispatchMode):
    """Times every ATen op that reaches the dispatcher and keeps its name, nothing else: the
    same ops Recorder sees (its argument descriptions dispatch nothing to the mode), at a
    fraction of its per-op cost (no argument walk, no tensor naming, no dicts)."""

    def __init__(self, device):
        super().__init__()
        self.names = []
        self.seconds = []
        self.cuda = device.type == "cuda"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        clock = time.perf_counter_ns
        t0 = clock()
        out = func(*args, **(kwargs or {}))
        if self.cuda:
            torch.cuda.synchronize()
        self.seconds.append((clock() - t0) * 1e-9)
        self.names.append(func._schema.name)
        return out
