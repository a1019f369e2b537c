"""Per-layer times of an eager torch training step (docs/profiling.md §4b, docs/worker-protocol.md
"Training"): each module's forward and backward, the loss's, and the optimizer's.

On the CPU the compiled step timer times them (NativeStepLayers: python/native/step_timer.cpp, no
Python hooks in a timed step); on a GPU, or where it is not built or refuses a step, the Python
hooks below (StepLayers), which cost a few µs per module call and per autograd node.

Forward: global module forward hooks keep the stack of modules running; the time between two
hooks goes to the innermost module running then (its self time: a container's own ops, such as a
residual add, are its own; its children's are theirs). Backward: autograd numbers the nodes it
creates (a sequence number per thread), so the hooks also note where each module's stretch of
numbers begins; after the loss, each node of the step's graph belongs to the module that ran when
it was created (AccumulateGrad, unnumbered, to the module of the node that reads it) and gets a pre-hook and a
hook that time it for that module. Nodes run one at a time on the engine's thread, so the time of
each is contiguous even where branches interleave. The hooks' own work (noting, walking,
registering) is charged to no module: it is part of the profiled step, not of a layer. Events
are keyed (phase, module): module "" is the network's own forward (ops outside every named
module), "loss" the loss function; the optimizer step with zero-grad is one event
("optimizer", "")."""

import bisect
import time

import torch

from neuralcost_worker.torch import native_timer


_UNNUMBERED = 2**64 - 1  # AccumulateGrad's sequence number
_sequence_nr = getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", None)


def available():
    """Whether this torch numbers autograd nodes visibly (else the worker times phases only)."""
    return _sequence_nr is not None


class StepLayers:
    """Times one step at a time: step() returns {(phase, module): seconds} and the step's wall."""

    def __init__(self, net, sync):
        self.paths = {id(m): name for name, m in net.named_modules()}  # the network itself is ""
        self.sync = sync
        self.backward = None  # the times of the step whose backward runs now

    def _charge(self, key, seconds):
        self.times[key] = self.times.get(key, 0.0) + seconds

    def _owner(self, node, consumer):
        """The module that created `node`; an AccumulateGrad (unnumbered) is its consumer's: the
        module whose forward read the weight (MultiheadAttention reads out_proj's weights)."""
        seq = node._sequence_nr()
        if seq == _UNNUMBERED:
            return consumer
        i = bisect.bisect_right(self.starts, seq) - 1
        return self.modules[i] if i >= 0 else ""

    def _watch(self, loss):
        """Hooks every node of the step's graph with its timers, for the module that created it."""
        seen, todo = set(), [(loss.grad_fn, "loss")]
        while todo:
            node, consumer = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            owner = self._owner(node, consumer)
            node.register_prehook(lambda _go, step=self.times: self._start(step))
            node.register_hook(lambda _gi, _go, step=self.times, k=("backward", owner): self._stop(step, k))
            todo.extend((n, owner) for n, _ in node.next_functions)

    def _start(self, step):
        if step is self.backward:
            self.sync()
            self.node_start = time.perf_counter_ns()

    def _stop(self, step, key):
        # a node that outlives its step (an AccumulateGrad while a graph holds it) keeps that
        # step's hooks: they time nothing in a later step, nor in a plain one
        if step is self.backward:
            self.sync()
            self._charge(key, (time.perf_counter_ns() - self.node_start) * 1e-9)

    def _note(self, module):
        """From the next autograd node on, nodes are `module`'s."""
        self.starts.append(_sequence_nr())
        self.modules.append(module)

    def _hooks(self):
        clock, stack, sync = time.perf_counter_ns, [], self.sync  # sync: a module's GPU kernels end in its time

        def pre(module, _args):
            sync()
            t = clock()
            if stack:
                self._charge(("forward", stack[-1]), (t - self.mark) * 1e-9)
            stack.append(self.paths.get(id(module), stack[-1] if stack else ""))
            self._note(stack[-1])
            self.mark = clock()

        def post(_module, _args, _out):
            sync()
            t = clock()
            if not stack:
                return
            self._charge(("forward", stack[-1]), (t - self.mark) * 1e-9)
            stack.pop()
            self._note(stack[-1] if stack else "")
            self.mark = clock()

        m = torch.nn.modules.module
        return [m.register_module_forward_pre_hook(pre), m.register_module_forward_hook(post)]

    def step(self, net, xs, loss_fn, target, optimizer):
        """One timed step: forward with the loss, backward, optimizer step and zero-grad."""
        clock = time.perf_counter_ns
        self.times, self.starts, self.modules = {}, [], []
        handles = self._hooks()
        t0 = clock()
        try:
            out = net(*xs)
        finally:
            for h in handles:
                h.remove()
        self._note("loss")
        self.sync()
        t1 = clock()
        loss = loss_fn(out, target)
        self.sync()
        self._charge(("forward", "loss"), (clock() - t1) * 1e-9)
        self._watch(loss)
        self.backward = self.times
        try:
            loss.backward()
            self.sync()
        finally:
            self.backward = None
        t2 = clock()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        self.sync()
        t3 = clock()
        self._charge(("optimizer", ""), (t3 - t2) * 1e-9)
        return self.times, (t3 - t0) * 1e-9, loss.detach()  # the graph and its hooked nodes go


class NativeStepLayers(StepLayers):
    """The same rows timed by the compiled step timer (torch/native_timer.py StepTimer,
    python/native/step_timer.cpp), on the CPU: module hooks run in one learning step only, to say
    whose each top-level call of the forward is; the timed steps run without Python hooks. A
    forward row is its module's calls (the Python between them is in no row), a backward row its
    nodes."""

    def __init__(self, net, timer):
        super().__init__(net, lambda: None)
        self.timer = timer
        self.owners = [""] + sorted({p for p in self.paths.values() if p}) + ["loss"]
        self.index = {o: i for i, o in enumerate(self.owners)}

    def learn(self, net, xs, loss_fn, target, optimizer):
        """One step whose forward and loss teach the timer their calls; TimerError when it cannot."""
        stack, mark, index = [], self.timer.step.mark, self.index
        order = self.order = [0]  # the owners in the order they first ran

        def pre(module, _args):
            stack.append(self.paths.get(id(module), stack[-1] if stack else ""))
            mark(index[stack[-1]])
            if index[stack[-1]] not in order:
                order.append(index[stack[-1]])

        def post(_module, _args, _out):
            if stack:
                stack.pop()
            mark(index[stack[-1]] if stack else 0)

        out = {}

        def forward():
            m = torch.nn.modules.module
            handles = [m.register_module_forward_pre_hook(pre), m.register_module_forward_hook(post)]
            try:
                y = net(*xs)
            finally:
                for h in handles:
                    h.remove()
            mark(index["loss"])
            order.append(index["loss"])
            out["loss"] = loss_fn(y, target)

        self.timer.step.learn(len(self.owners), forward)
        out["loss"].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def step(self, net, xs, loss_fn, target, optimizer):
        clock, timer = time.perf_counter_ns, self.timer.step
        t0 = clock()
        timer.forward()
        try:
            loss = loss_fn(net(*xs), target)
            timer.backward()
            loss.backward()
        finally:
            failed = timer.end()
        if failed:
            raise native_timer.TimerError(failed)
        t2 = clock()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t3 = clock()
        forward, backward, nodes = timer.read()
        times = {}  # in the order they ran: the forwards, then the backwards in reverse
        for i in self.order:
            if forward[i] > 0:
                times[("forward", self.owners[i])] = forward[i]
        for i in reversed(self.order):
            if nodes[i] > 0:
                times[("backward", self.owners[i])] = backward[i]
        times[("optimizer", "")] = (t3 - t2) * 1e-9
        return times, (t3 - t0) * 1e-9, loss.detach()


_native = None  # (NativeTimer or None, why not), loaded on first use


def _native_timer(step):
    global _native
    if getattr(step, "device", torch.device("cpu")).type != "cpu":
        return None, "a CUDA device (the nodes run on its threads; each is synchronised by Python hooks)"
    if _native is None:
        _native = native_timer.load()
    return _native


def time_steps(step, n):
    """n profiled steps of a TrainStep, each after a plain one: the `layers` reply. On the CPU the
    compiled step timer times them; else (or when it cannot) the Python hooks, with the reason."""
    timer, why = _native_timer(step)
    warning = ""
    if timer is not None:
        try:
            layers = NativeStepLayers(step.net, timer)
            layers.learn(step.net, step.xs, step.loss_fn, step.target, step.optimizer)
            step.steps = getattr(step, "steps", 0) + 1  # the learning step trains too (train_steps_run)
            reply = _time(step, layers, n)
            reply["timer"] = (
                f"RecordFunction timestamps of the step's calls and autograd nodes (compiled observer {timer.path})"
            )
            return reply
        except native_timer.TimerError as e:
            warning = (
                f"per-layer step times by Python hooks (a few µs per module and node), not the compiled timer: {e}"
            )
    reply = _time(step, StepLayers(step.net, step._sync), n)
    reply["timer"] = "Python module and autograd-node hooks" + ("" if timer else f": no compiled timer ({why})")
    if warning:
        reply["timer_warning"] = warning
    return reply


def _time(step, layers, n):
    clock = time.perf_counter_ns
    keys, runs, wall, plain = {}, [], [], []
    for _ in range(n):
        t0 = clock()
        step.run()
        plain.append((clock() - t0) * 1e-9)
        times, seconds, loss = layers.step(step.net, step.xs, step.loss_fn, step.target, step.optimizer)
        step._keep(loss)
        for k in times:
            keys.setdefault(k, len(keys))
        runs.append(times)
        wall.append(seconds)
    order = sorted(keys, key=keys.get)
    return {
        "events": [phase for phase, _ in order],
        "modules": [module for _, module in order],
        "seconds": [[r.get(k, 0.0) for r in runs] for k in order],
        "wall": wall,
        "plain": plain,
        "step_phases": True,
    }
