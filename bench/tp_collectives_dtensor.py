"""An independent count of a tensor-parallel step's collectives: torch's own tensor parallelism
(DTensor's parallelize_module with torchtitan's Llama plan, no sequence parallelism, loss_parallel)
over 2 gloo ranks, counted by torch's CommDebugMode, for a 2-layer Llama. neural-cost's model
(model_parallel_step) and its worker's Megatron split both make 4 all-reduces a layer, one after the
embedding, one of the LM head's input gradient and three in the loss: 13 here.

    .venv/bin/python bench/tp_collectives_dtensor.py          # the plan that shares each block's input
    .venv/bin/python bench/tp_collectives_dtensor.py --naive  # each linear's input its own DTensor

With the input shared (PrepareModuleInput, as torchtitan does) the partial gradients of q, k, v (and
of gate, up) are summed before one all-reduce, as Megatron's fused linears do; without it, each
column-parallel linear all-reduces its own (5 a layer backward).
"""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

H, HEADS, KV, HD, INTER, VOCAB, LAYERS = 128, 4, 2, 32, 352, 1000, 2


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq, self.wk = nn.Linear(H, HEADS * HD, bias=False), nn.Linear(H, KV * HD, bias=False)
        self.wv, self.wo = nn.Linear(H, KV * HD, bias=False), nn.Linear(HEADS * HD, H, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (w(x).view(b, t, -1, HD).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(a.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1, self.w3 = nn.Linear(H, INTER, bias=False), nn.Linear(H, INTER, bias=False)
        self.w2 = nn.Linear(INTER, H, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.attention, self.n2, self.feed_forward = nn.RMSNorm(H), Attention(), nn.RMSNorm(H), FeedForward()

    def forward(self, x):
        x = x + self.attention(self.n1(x))
        return x + self.feed_forward(self.n2(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, H)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm, self.output = nn.RMSNorm(H), nn.Linear(H, VOCAB, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def rank_main(rank, world, port, naive):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        loss_parallel,
        parallelize_module,
    )

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    model = Llama()
    parallelize_module(
        model,
        mesh,
        {
            "tok": RowwiseParallel(input_layouts=Replicate()),
            "output": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
        },
    )
    shared = PrepareModuleInput(
        input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),), use_local_output=False
    )
    for block in model.layers:
        plan = {f"attention.{w}": ColwiseParallel() for w in ("wq", "wk", "wv")}
        plan |= {"attention.wo": RowwiseParallel(), "feed_forward.w2": RowwiseParallel()}
        plan |= {f"feed_forward.{w}": ColwiseParallel() for w in ("w1", "w3")}
        if not naive:
            plan |= {"attention": shared, "feed_forward": shared}
        parallelize_module(block, mesh, plan)
    torch.manual_seed(0)
    ids, target = torch.randint(0, VOCAB, (2, 32)), torch.randint(0, VOCAB, (64,))
    counts = {}
    with CommDebugMode() as mode:
        logits = model(ids)
    counts["forward"] = mode.get_total_counts()
    with loss_parallel():
        with CommDebugMode() as mode:
            loss = F.cross_entropy(logits.flatten(0, 1), target)
        counts["loss"] = mode.get_total_counts()
        with CommDebugMode() as mode:
            loss.backward()
        counts["backward"] = mode.get_total_counts()
    if rank == 0:
        kinds = sorted({str(k) for k in mode.get_comm_counts()})
        print(
            f"torch {torch.__version__}, {'naive' if naive else 'shared-input'} plan, {LAYERS} layers: collectives "
            f"forward {counts['forward']}, loss {counts['loss']}, backward {counts['backward']}, "
            f"total {sum(counts.values())} ({', '.join(kinds)})"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    mp.spawn(rank_main, args=(2, free, "--naive" in sys.argv), nprocs=2)
