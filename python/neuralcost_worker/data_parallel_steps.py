"""Measured data-parallel training steps for `neural-cost profile --train --data-parallel N`
(docs/distributed.md §7), served by the collectives worker (`steps` request).

`ranks` local processes (spawn) join one gloo group; each builds the same reference network
(neuralcost_worker.torch.reference, the five networks the tool analyses) and trains it on its own
batch:

- ddp: torch's DistributedDataParallel (its default buckets: 1 MiB first, then 25 MiB); a comm
  hook times each bucket's all-reduce from its launch to its completion;
- fsdp: FSDP2's fully_shard on each child module with parameters, then on the root (the usual
  wrapping: each unit's parameters gathered for its forward pass and again for its backward pass,
  its gradients reduce-scattered); its collectives are timed the same way.

A collective cannot start before its last rank launches it, so its link time is its last rank's
completion less its last rank's launch (the processes share one monotonic clock); the time from
its first rank's launch to its last is the ranks' skew ("waiting"). Each round alternates a step
with communication and a step without it (ddp: no_sync(); fsdp: an unsharded copy of the
network), so the machine's drift touches both alike; a step's time is the slowest rank's (a step
ends when its last rank does). Rank 0 sends the rounds back.
"""

import time

from neuralcost_worker import collectives


def make_optimizer(torch, name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    raise ValueError(f"optimizer {name!r} is not one of sgd, adam")


class _Timed:
    """Wraps torch.distributed's collective functions so that each call's launch and completion
    are recorded (async work: completion is when its future is done)."""

    def __init__(self, dist, names):
        self.dist, self.calls = dist, []
        for name in names:
            original = getattr(dist, name, None)
            if original is not None:
                setattr(dist, name, self._wrap(name, original))

    def _wrap(self, name, original):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            work = original(*args, **kwargs)
            if work is None:  # synchronous
                self.calls.append((name, start, time.perf_counter()))
                return work
            future = work.get_future()
            future.add_done_callback(lambda _f: self.calls.append((name, start, time.perf_counter())))
            return work

        return timed

    def take(self):
        calls, self.calls = self.calls, []
        return calls


def link_and_wait(torch, dist, calls):
    """A step's link time and skew over every rank (the same collectives in the same order): each
    call from its last rank's launch to its last rank's completion, and from its first rank's launch
    to its last's. `calls`: this rank's (name, launch, completion, bytes)."""
    n = torch.tensor([len(calls)], dtype=torch.int64)
    dist.all_reduce(n, op=dist.ReduceOp.MIN)
    if int(n.item()) != len(calls):
        raise RuntimeError("the ranks ran different collectives in one step")
    times = torch.tensor([[c[1], c[2]] for c in calls] or [[0.0, 0.0]], dtype=torch.float64)
    last = times.clone()
    dist.all_reduce(last, op=dist.ReduceOp.MAX)
    first = times.clone()
    dist.all_reduce(first, op=dist.ReduceOp.MIN)
    link = float((last[:, 1] - last[:, 0]).clamp(min=0).sum()) if calls else 0.0
    wait = float((last[:, 0] - first[:, 0]).sum()) if calls else 0.0
    return link, wait


def timed_rounds(torch, dist, rank, request, synced, alone, take_calls):
    """The request's rounds of `steps` steps, each a step with communication (`synced`), then the
    same step without it (`alone`), the ranks lined up by a barrier before each: a step's and its
    compute's time the slowest rank's, the link time and skew (link_and_wait) from take_calls(),
    this rank's calls since it was last called. Returns the rounds and the last synced step's calls."""
    take_calls()
    rounds, calls, done = [], [], 0
    for _ in range(int(request["rounds"])):
        one = {"step_seconds": [], "compute_seconds": [], "link_seconds": [], "wait_seconds": []}
        for _ in range(int(request["steps"])):
            collectives.fault(rank, done)  # tests: a rank that dies mid-run
            done += 1
            dist.barrier()
            start = time.perf_counter()
            synced()
            step_seconds = time.perf_counter() - start
            calls = take_calls()
            link, wait = link_and_wait(torch, dist, calls)
            dist.barrier()
            start = time.perf_counter()
            alone()
            compute_seconds = time.perf_counter() - start
            take_calls()
            t = torch.tensor([step_seconds, compute_seconds], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            one["step_seconds"].append(float(t[0]))
            one["compute_seconds"].append(float(t[1]))
            one["link_seconds"].append(link)
            one["wait_seconds"].append(wait)
        rounds.append(one)
    return rounds, calls


def _rank_main(rank, world, port, request, results):
    from neuralcost_worker.torch import reference

    torch, dist = collectives.join(rank, world, port, request)
    mode = request["mode"]
    size = {k: int(request[k]) for k in ("batch", "seq", "width", "depth")}
    net, x = reference.build(request["model"], **size)
    net.train()
    plain, _ = reference.build(request["model"], **size)  # the same weights (seeded), never synchronised
    plain.train()
    out_shape = net(x).shape
    torch.manual_seed(2 + rank)  # each rank its own labels
    y = torch.randint(0, out_shape[1], (out_shape[0],)) if len(out_shape) == 2 else torch.randn(out_shape)
    loss_fn = torch.nn.CrossEntropyLoss() if len(out_shape) == 2 else torch.nn.MSELoss()
    timed, units = None, []  # fsdp: each unit's parameter elements, in the order they were wrapped
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(net)
        bucket_calls = []

        def hook(_state, bucket):
            start = time.perf_counter()
            buffer = bucket.buffer()
            future = dist.all_reduce(buffer, async_op=True).get_future()

            def done(f):
                bucket_calls.append(("all_reduce", start, time.perf_counter(), buffer.numel() * buffer.element_size()))
                return f.value()[0].div_(world)

            return future.then(done)

        model.register_comm_hook(None, hook)
    elif mode == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        # FSDP2's collectives (torch 2.15 calls the *_single ones; older releases the *_tensor ones)
        timed = _Timed(
            dist, ("all_gather_single", "reduce_scatter_single", "all_gather_into_tensor", "reduce_scatter_tensor")
        )
        mesh = init_device_mesh("cpu", (world,))
        for child in net.children():
            elements = sum(p.numel() for p in child.parameters())
            if elements:
                units.append(elements)
                fully_shard(child, mesh=mesh)
        root = sum(p.numel() for p in net.parameters(recurse=False))
        if root:
            units.append(root)
        fully_shard(net, mesh=mesh)
        model = net
    else:
        raise ValueError(f"mode {mode!r} is not one of ddp, fsdp")
    optimizer = make_optimizer(torch, request["optimizer"], model.parameters())
    plain_optimizer = make_optimizer(torch, request["optimizer"], plain.parameters())

    def step(m, opt):
        opt.zero_grad(set_to_none=True)
        loss_fn(m(x), y).backward()
        opt.step()

    def synced():
        step(model, optimizer)

    def alone():
        if mode == "ddp":
            with model.no_sync():
                step(model, optimizer)
        else:
            step(plain, plain_optimizer)

    def comm_calls():
        """This rank's collectives since the last call: (name, launch, completion, bytes)."""
        if mode == "ddp":
            calls = list(bucket_calls)
            bucket_calls.clear()
            return calls
        return [(c[0], c[1], c[2], 0) for c in timed.take()]

    for _ in range(int(request.get("warmup", 3))):
        synced()
        alone()
    rounds, calls = timed_rounds(torch, dist, rank, request, synced, alone, comm_calls)
    seen = {}  # each kind of collective the step made, and its sizes
    for name, _s, _e, nbytes in calls:
        seen.setdefault(name, set()).add(nbytes)
    collectives.leave(
        dist,
        rank,
        results,
        {
            "rounds": rounds,
            "parameters": sum(p.numel() for p in plain.parameters()),
            "buckets": sorted(seen.get("all_reduce", [])) if mode == "ddp" else [],
            "collectives": sorted(seen),
            "calls_per_step": len(calls),
            "units": units,
            "torch": torch.__version__,
        },
    )


def measure(request):
    return collectives.run_ranks(_rank_main, request)
