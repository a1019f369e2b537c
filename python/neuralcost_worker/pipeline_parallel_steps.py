"""Measured pipeline-parallel training steps for `neural-cost profile --train --pipeline-parallel N`
(docs/distributed.md §9), served by the collectives worker (`pp_steps` request).

`ranks` local processes (spawn) join one gloo group; rank d holds stage d of a Llama-family decoder
(tensor_parallel_steps.build without a tensor split): an even share of the layers, the embedding on
the first stage, the final norm, the LM head and the loss on the last. A step runs `micro_batches`
micro-batches through the 1F1B schedule (PipeDream-Flush, Megatron-LM's non-interleaved one): stage
d runs min(N − d − 1, m) forward passes, then one forward and one backward pass in turn, then the
backward passes left; activations go forward and their gradients back by point-to-point sends
(isend, so that no stage waits for its receiver) and blocking receives. With tied embeddings the
first and the last stage hold a copy each and all-reduce their gradients after the backward passes.

Each round alternates a step through the pipeline with the same stages' work without it: every
stage runs its m forward and backward passes on inputs of its own (no sends, no receives, no
waiting), timed apart from its optimizer step. A step's time is its slowest rank's. Rank 0 sends
the rounds back with every stage's times and parameter elements.
"""

import time

from neuralcost_worker import collectives
from neuralcost_worker.data_parallel_steps import make_optimizer
from neuralcost_worker.tensor_parallel_steps import Link, build, functions, rotary


def _rank_main(rank, world, port, request, results):
    torch, dist = collectives.join(rank, world, port, request)
    config = request["config"]
    batch, tokens, m = int(request["batch"]), int(request["tokens"]), int(request["micro_batches"])
    layers = int(config["layers"]) // world
    first, last = rank == 0, rank == world - 1
    tied = bool(config["tied"]) and world > 1
    ends = dist.new_group([0, world - 1]) if tied else None  # every rank takes part in making a group
    torch.manual_seed(1 + rank)
    net, elements = build(torch, config, 0, 1, None, layers=layers, first=first, last=last)
    net.train()
    cross_entropy = functions(torch).cross_entropy
    cos, sin = rotary(torch, tokens, int(config["head_dim"]), float(config.get("rope_theta", 10000.0)))
    hidden, vocab = int(config["hidden"]), int(config["vocab"])
    torch.manual_seed(7)  # the same micro-batches on every stage
    ids = [torch.randint(0, vocab, (batch, tokens)) for _ in range(m)]
    targets = [torch.randint(0, vocab, (batch * tokens,)) for _ in range(m)]
    local_input = torch.randn(batch, tokens, hidden)  # a stage's input when nothing is received
    local_grad = torch.randn(batch, tokens, hidden) * 1e-3
    optimizer = make_optimizer(torch, request["optimizer"], net.parameters())

    no_link = Link(dist)  # the loss on one device: nothing to sum
    no_link.enabled = False

    def forward(i, piped, sent, kept):
        if first:
            x_in, x = None, net.embed(ids[i])
        else:
            x_in = torch.empty(batch, tokens, hidden)
            if piped:
                dist.recv(x_in, rank - 1, tag=0)
            else:
                x_in.copy_(local_input)
            x_in.requires_grad_(True)
            x = x_in
        out = net.body(x, cos, sin)
        if last:
            logits = net.logits(out).reshape(batch * tokens, -1)
            out = cross_entropy.apply(logits, targets[i], 0, no_link) / m
        elif piped:
            sent.append(send(out.detach().contiguous(), rank + 1, 0))
        kept.append((x_in, out))

    def backward(piped, sent, kept):
        x_in, out = kept.pop(0)
        if last:
            out.backward()
        else:
            grad = torch.empty_like(out)
            if piped:
                dist.recv(grad, rank + 1, tag=1)
            else:
                grad.copy_(local_grad)
            out.backward(grad)
        if not first and piped:
            sent.append(send(x_in.grad.contiguous(), rank - 1, 1))

    transfers = [0]  # this rank's sends in the last step through the pipeline
    sizes = set()  # the bytes of each tensor sent

    def send(t, to, tag):
        sizes.add(t.numel() * t.element_size())
        return dist.isend(t, to, tag=tag)

    def passes(piped):
        """The stage's m forward and backward passes in 1F1B order; the sends waited for."""
        sent, kept = [], []
        warm = min(world - rank - 1, m) if piped else 0
        for i in range(warm):
            forward(i, piped, sent, kept)
        for i in range(warm, m):
            forward(i, piped, sent, kept)
            backward(piped, sent, kept)
        for _ in range(warm):
            backward(piped, sent, kept)
        for work in sent:
            work.wait()
        if piped:
            transfers[0] = len(sent)
        if tied and piped and (first or last):  # the two copies of the embedding's gradient summed
            grad = (net.embedding if first else net.head).grad
            dist.all_reduce(grad, group=ends)

    def step():
        optimizer.zero_grad(set_to_none=True)
        passes(True)
        optimizer.step()

    def alone():
        optimizer.zero_grad(set_to_none=True)
        start = time.perf_counter()
        passes(False)
        middle = time.perf_counter()
        optimizer.step()
        return middle - start, time.perf_counter() - middle

    for _ in range(int(request.get("warmup", 2))):
        step()
        alone()
    rounds, done = [], 0
    for _ in range(int(request["rounds"])):
        one = {"step_seconds": [], "stage_pass_seconds": [], "stage_optimizer_seconds": []}
        for _ in range(int(request["steps"])):
            collectives.fault(rank, done)  # tests: a rank that dies mid-run
            done += 1
            dist.barrier()
            start = time.perf_counter()
            step()
            step_seconds = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(step_seconds, op=dist.ReduceOp.MAX)
            dist.barrier()
            own = torch.tensor(alone(), dtype=torch.float64)
            stages = [torch.empty(2, dtype=torch.float64) for _ in range(world)]
            dist.all_gather(stages, own)
            one["step_seconds"].append(float(step_seconds))
            one["stage_pass_seconds"].append([float(s[0]) for s in stages])
            one["stage_optimizer_seconds"].append([float(s[1]) for s in stages])
        rounds.append(one)
    counts = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([elements, transfers[0]], dtype=torch.int64))
    every_size = [None] * world
    dist.all_gather_object(every_size, sorted(sizes))
    collectives.leave(
        dist,
        rank,
        results,
        {
            "rounds": rounds,
            "stage_parameters": [int(c[0]) for c in counts],
            "transfers_per_step": sum(int(c[1]) for c in counts),
            "transfer_sizes": sorted({b for one in every_size for b in one}),
            "torch": torch.__version__,
        },
    )


def measure(request):
    return collectives.run_ranks(_rank_main, request)
