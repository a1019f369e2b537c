"""Collective sweeps on torch.distributed for `neural-cost hardware calibrate --collectives`
(docs/distributed.md): `python -m neuralcost_worker collectives` speaks JSON lines like the
framework workers (docs/worker-protocol.md): hello, sweep, steps (measured data-parallel training
steps, data_parallel_steps.py), tp_steps and pp_steps (measured tensor- and pipeline-parallel ones,
tensor_parallel_steps.py, pipeline_parallel_steps.py), quit.

A sweep starts `ranks` local processes (torch.multiprocessing, spawn), each joins one process
group (gloo on CPUs, nccl on GPUs), and times every (collective, size) of the request: first the
calls per round of each (rank 0's choice, broadcast), then the rounds, each round one pass over
every size. A round's time per call is the slowest rank's (a collective ends when its last rank
does).
Rank 0 sends the rounds back. A rank that dies or hangs ends the sweep with an error, and every
rank is stopped: nothing is left running.
"""

import datetime
import os
import socket
import sys
import time
import traceback

from neuralcost_worker import line_server

ELEMENT_BYTES = 4  # float32


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _operation(dist, torch, name, elements, world):
    """A callable running one `name` collective over a buffer of `elements` float32s (nccl-tests'
    S: the all-gather's output, the reduce-scatter's input, all-to-all's send buffer)."""
    chunk = elements // world
    if name == "all_reduce":
        t = torch.ones(elements)
        return lambda: dist.all_reduce(t)
    if name == "reduce_scatter":
        t, out = torch.ones(chunk * world), torch.empty(chunk)
        return lambda: dist.reduce_scatter_tensor(out, t)
    if name == "all_gather":
        t, out = torch.ones(chunk), torch.empty(chunk * world)
        return lambda: dist.all_gather_into_tensor(out, t)
    if name == "all_to_all":
        t, out = torch.ones(chunk * world), torch.empty(chunk * world)
        return lambda: dist.all_to_all_single(out, t)
    if name == "broadcast":
        t = torch.ones(elements)
        return lambda: dist.broadcast(t, 0)
    raise ValueError(f"unknown collective {name!r}")


def fault(rank, done):
    """NEURALCOST_COLLECTIVES_FAULT=exit:RANK:AFTER makes RANK exit after AFTER points (tests)."""
    spec = os.environ.get("NEURALCOST_COLLECTIVES_FAULT", "")
    parts = spec.split(":")
    if len(parts) == 3 and parts[0] == "exit" and int(parts[1]) == rank and done >= int(parts[2]):
        os._exit(3)


def _rank_main(rank, world, port, request, results):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    timeout = datetime.timedelta(seconds=float(request.get("collective_timeout_seconds", 60)))
    dist.init_process_group(request.get("backend", "gloo"), rank=rank, world_size=world, timeout=timeout)
    rounds = int(request["rounds"])
    min_round = float(request["min_round_seconds"])
    keep_bytes = 4 << 20  # buffers up to this size are kept between rounds; larger ones made again

    def make(point):
        name, size = point["collective"], int(point["bytes"])
        elements = max(size // ELEMENT_BYTES, 1)
        if name in ("reduce_scatter", "all_gather", "all_to_all"):
            elements = max(elements // world, 1) * world
        return elements, _operation(dist, torch, name, elements, world)

    # calls per round: enough for min_round_seconds on rank 0's clock (the median of three calls
    # after two warm-up calls), the same on every rank; after_compute: one call a round, issued
    # after that long of compute on every rank, as a training step issues its collectives
    after_compute = float(request.get("compute_seconds", 0))
    burst = torch.randn(128, 128)
    points, kept = request["points"], {}
    calls = []
    for done, point in enumerate(points):
        fault(rank, done)
        elements, op = make(point)
        if elements * ELEMENT_BYTES <= keep_bytes:
            kept[done] = op
        for _ in range(2):
            op()
        one = []
        for _ in range(3):
            dist.barrier()
            start = time.perf_counter()
            op()
            one.append(time.perf_counter() - start)
        n = torch.tensor([max(1, min(100000, int(min_round / max(sorted(one)[1], 1e-7))))], dtype=torch.int64)
        dist.broadcast(n, 0)
        calls.append((elements, 1 if after_compute > 0 else int(n.item())))
    # rounds interleaved over the sizes: a stretch of the machine's noise touches one round of each
    # size, not every round of a few
    seconds = [[] for _ in points]
    for _ in range(rounds):
        for i, point in enumerate(points):
            op = kept.get(i)
            if op is None:
                op = make(point)[1]
                op()  # its pages touched before the clock starts
            dist.barrier()
            if after_compute > 0:
                until = time.perf_counter() + after_compute
                while time.perf_counter() < until:
                    burst @ burst
            start = time.perf_counter()
            for _ in range(calls[i][1]):
                op()
            per_call = torch.tensor([(time.perf_counter() - start) / calls[i][1]], dtype=torch.float64)
            dist.all_reduce(per_call, op=dist.ReduceOp.MAX)
            seconds[i].append(float(per_call.item()))
            op = None
    out = [
        {"collective": p["collective"], "bytes": c[0] * ELEMENT_BYTES, "calls": c[1], "seconds": t}
        for p, c, t in zip(points, calls, seconds)
    ]
    if rank == 0:
        results.put(out)
    dist.barrier()
    dist.destroy_process_group()


def join(rank, world, port, request):
    """Joins this rank to the run's gloo group (the request's threads and collective timeout);
    returns torch and torch.distributed."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(request.get("threads", 1)))
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    timeout = datetime.timedelta(seconds=float(request.get("collective_timeout_seconds", 120)))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    return torch, dist


def leave(dist, rank, results, reply):
    """Rank 0 puts `reply` in `results`; every rank leaves the group and exits without running the
    interpreter's and torch's destructors: a rank whose DDP, FSDP or autograd threads are torn down
    at exit can abort (SIGABRT) after its work is done, and the parent would take that for a rank
    that died (rank 0's results are already in the queue's pipe)."""
    if rank == 0:
        results.put(reply)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ranks(rank_main, request):
    """Runs rank_main(rank, world, port, request, results) in `ranks` spawned processes and returns
    what rank 0 put in `results`. A rank that dies, or a run past its deadline, stops every rank and
    raises: nothing is left running."""
    import torch.multiprocessing as mp

    world = int(request["ranks"])
    if world < 2:
        raise ValueError(f"a collective needs at least 2 ranks, not {world}")
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    deadline = time.monotonic() + float(request.get("deadline_seconds", 3600))
    context = mp.start_processes(
        rank_main, args=(world, _free_port(), request, results), nprocs=world, join=False, start_method="spawn"
    )
    try:
        while not context.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the run over {world} ranks ran past its deadline")
    except BaseException:
        for p in context.processes:
            if p.is_alive():
                p.kill()
        for p in context.processes:
            p.join(5)
        raise
    if results.empty():
        raise RuntimeError("rank 0 ended without its results")
    return results.get()


def sweep(request):
    return run_ranks(_rank_main, request)


def _hello(req):
    import torch
    import torch.distributed as dist

    return {
        "ok": True,
        "torch": torch.__version__,
        "gloo": bool(dist.is_gloo_available()),
        "nccl": bool(dist.is_nccl_available()),
        "cpus": os.cpu_count(),
    }


def _failure(e):
    # the sweep's processes are gone; the worker stays usable. A rank's exception arrives with its
    # traceback in the message (torch.multiprocessing's ProcessRaisedException): its last line is
    # the cause
    lines = [line for line in str(e).splitlines() if line.strip()]
    text = " ".join((lines[-1] if len(lines) > 1 and "Traceback" in str(e) else str(e)).split())
    if not isinstance(e, (ValueError, TimeoutError)):
        traceback.print_exception(e, file=sys.stderr)
    return {"ok": False, "kind": "rank_failed", "error": f"{type(e).__name__}: {text[:400]}"}


def serve():
    from neuralcost_worker import data_parallel_steps, pipeline_parallel_steps, tensor_parallel_steps

    return line_server.serve(
        {
            "hello": _hello,
            "sweep": lambda req: {"ok": True, "points": sweep(req)},
            "steps": lambda req: {"ok": True, **data_parallel_steps.measure(req)},
            "tp_steps": lambda req: {"ok": True, **tensor_parallel_steps.measure(req)},
            "pp_steps": lambda req: {"ok": True, **pipeline_parallel_steps.measure(req)},
        },
        _failure,
    )
