"""Measured tensor-parallel training steps for `neural-cost profile --train --tensor-parallel N`
(docs/distributed.md §8), served by the collectives worker (`tp_steps` request).

`ranks` local processes (spawn) join one gloo group; each holds its 1/N of a Llama-family decoder
split as Megatron-LM splits it (Shoeybi et al. 2019; Megatron-Core's tensor_parallel layers):

- the embedding vocabulary-parallel: each rank looks up the tokens in its rows of the vocabulary
  (zeros for the others), and the ranks' outputs are all-reduced (forward);
- each layer's q, k, v and gate, up column-parallel (1/N of the heads, KV heads and MLP columns),
  their input's gradient all-reduced (backward: Megatron's f); o_proj and down_proj row-parallel,
  their output all-reduced (forward: Megatron's g); norms and residual adds replicated;
- the LM head column-parallel (the gradient of its input all-reduced backward) and the loss
  vocabulary-parallel: the logits' maximum, the target's logit and the sum of the exponentials
  all-reduced, three floats a token (Megatron's _VocabParallelCrossEntropy), nothing backward.

Every collective is timed from its launch to its completion on each rank. Each round alternates a
step with communication and the same step without it (the collectives skipped: the same kernels
on the same shapes), so the machine's drift touches both alike; a step's time is its slowest
rank's. A collective's link time is its last rank's completion less its last rank's launch, the
skew its first rank's launch to its last's (data_parallel_steps.link_and_wait). Rank 0 sends the
rounds back, with each call's bytes and this rank's parameter elements.
"""

import math
import time
import types

from neuralcost_worker import collectives
from neuralcost_worker.data_parallel_steps import make_optimizer, timed_rounds


class Link:
    """The rank's collectives: in place, timed, or skipped (`enabled` False: the step without
    communication)."""

    def __init__(self, dist, world=1):
        self.dist, self.world, self.enabled, self.calls = dist, world, True, []

    def _timed(self, name, nbytes, run):
        start = time.perf_counter()
        run()
        self.calls.append((name, start, time.perf_counter(), nbytes))

    def all_gather(self, x):
        """[b, s/N, h] -> [b, s, h]: the ranks' tokens gathered (sequence parallelism); skipped, N
        copies of its own."""
        t = x.transpose(0, 1).contiguous()  # the tokens first: all_gather_into_tensor joins dim 0
        if not self.enabled:
            return t.repeat(self.world, 1, 1).transpose(0, 1)
        out = t.new_empty((t.shape[0] * self.world,) + tuple(t.shape[1:]))
        self._timed("all_gather", out.numel() * out.element_size(), lambda: self.dist.all_gather_into_tensor(out, t))
        return out.transpose(0, 1)

    def reduce_scatter(self, x):
        """[b, s, h] -> [b, s/N, h]: summed over the ranks, each keeping its 1/N of the tokens;
        skipped, its own first 1/N."""
        t = x.transpose(0, 1).contiguous()
        out = t.new_empty((t.shape[0] // self.world,) + tuple(t.shape[1:]))
        if not self.enabled:
            out.copy_(t[: out.shape[0]])
        else:
            self._timed("reduce_scatter", t.numel() * t.element_size(), lambda: self.dist.reduce_scatter_tensor(out, t))
        return out.transpose(0, 1)

    def all_reduce(self, t, op=None):
        if not self.enabled:
            return t
        start = time.perf_counter()
        self.dist.all_reduce(t, op=op if op is not None else self.dist.ReduceOp.SUM)
        self.calls.append(("all_reduce", start, time.perf_counter(), t.numel() * t.element_size()))
        return t

    def take(self):
        calls, self.calls = self.calls, []
        return calls


def functions(torch):
    """Megatron's f and g, their sequence-parallel forms (gather, scatter) and its
    vocabulary-parallel cross entropy as autograd functions."""

    class CopyToTensorParallel(torch.autograd.Function):  # f: identity forward, all-reduce backward
        @staticmethod
        def forward(ctx, x, link):
            ctx.link = link
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return ctx.link.all_reduce(grad.contiguous().clone()), None

    class ReduceFromTensorParallel(torch.autograd.Function):  # g: all-reduce forward, identity backward
        @staticmethod
        def forward(ctx, x, link):
            x = x.contiguous()
            return link.all_reduce(x.clone())

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    class GatherFromSequenceParallel(torch.autograd.Function):  # f under sequence parallelism
        @staticmethod
        def forward(ctx, x, link):
            ctx.link = link
            return link.all_gather(x)

        @staticmethod
        def backward(ctx, grad):
            return ctx.link.reduce_scatter(grad), None

    class ScatterToSequenceParallel(torch.autograd.Function):  # g under sequence parallelism
        @staticmethod
        def forward(ctx, x, link):
            ctx.link = link
            return link.reduce_scatter(x)

        @staticmethod
        def backward(ctx, grad):
            return ctx.link.all_gather(grad), None

    class VocabParallelCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target, first, link):  # logits [tokens, vocab / N], this rank's columns
            logits_max = logits.max(dim=-1)[0]
            link.all_reduce(logits_max, op=link.dist.ReduceOp.MAX)
            shifted = logits - logits_max.unsqueeze(-1)
            local = target - first
            outside = (local < 0) | (local >= logits.shape[-1])
            local = local.masked_fill(outside, 0)
            rows = torch.arange(logits.shape[0])
            predicted = shifted[rows, local].masked_fill(outside, 0.0).contiguous()
            link.all_reduce(predicted)
            exp = shifted.exp()
            sum_exp = exp.sum(dim=-1)
            link.all_reduce(sum_exp)
            ctx.save_for_backward(exp.div_(sum_exp.unsqueeze(-1)), local, outside)
            return (sum_exp.log() - predicted).mean()

        @staticmethod
        def backward(ctx, grad):
            softmax, local, outside = ctx.saved_tensors
            rows = torch.arange(softmax.shape[0])
            g = softmax.clone()
            g[rows, local] -= (~outside).to(g.dtype)
            return g.mul_(grad / softmax.shape[0]), None, None, None

    return types.SimpleNamespace(
        f=CopyToTensorParallel,
        g=ReduceFromTensorParallel,
        gather=GatherFromSequenceParallel,
        scatter=ScatterToSequenceParallel,
        cross_entropy=VocabParallelCrossEntropy,
    )


def rotary(torch, tokens, dims, theta):
    inv = 1.0 / (theta ** (torch.arange(0, dims, 2, dtype=torch.float32) / dims))
    angles = torch.outer(torch.arange(tokens, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def build(torch, config, rank, world, link, layers=None, first=True, last=True, sequence_parallel=False):
    """This rank's shard as (module, parameter elements); the vocabulary padded to a multiple of N.
    A pipeline stage (world 1, no collectives) holds `layers` of the layers, the embedding when
    `first`, the final norm and the LM head when `last`. `sequence_parallel` (Korthikanti et al.
    2022): the residual stream, norms and residual adds on 1/N of the tokens; each f an all-gather
    of the tokens (its gradient reduce-scattered), each g a reduce-scatter (its gradient gathered)."""
    from torch import nn
    import torch.nn.functional as F

    fn = functions(torch)
    f, g = (fn.gather, fn.scatter) if sequence_parallel else (fn.f, fn.g)
    if world == 1:  # one device: no split, nothing to sum

        class _Identity:
            @staticmethod
            def apply(x, _link):
                return x

        f = g = _Identity
    h, hd = int(config["hidden"]), int(config["head_dim"])
    heads, kv_heads = int(config["heads"]) // world, int(config["kv_heads"]) // world
    inter = int(config["intermediate"]) // world
    vocab = -(-int(config["vocab"]) // world)  # this rank's rows of the padded vocabulary
    eps = float(config.get("eps", 1e-6))
    offset = bool(config.get("norm_offset", False))
    act = {"silu": F.silu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu}[config["activation"]]

    def norm(x, w):
        return F.rms_norm(x, (x.shape[-1],), (1 + w) if offset else w, eps)

    def linear(n_in, n_out, bias):
        layer = nn.Linear(n_in, n_out, bias=bias)
        nn.init.normal_(layer.weight, std=0.02)
        return layer

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_norm = nn.Parameter(torch.ones(h))
            self.post_norm = nn.Parameter(torch.ones(h))
            qkv_bias = bool(config["qkv_bias"])
            self.q = linear(h, heads * hd, qkv_bias)
            self.k = linear(h, kv_heads * hd, qkv_bias)
            self.v = linear(h, kv_heads * hd, qkv_bias)
            self.o = linear(heads * hd, h, False)  # a row-parallel bias is added once, after the sum
            self.o_bias = nn.Parameter(torch.zeros(h)) if config["output_bias"] else None
            if config["qk_norm"]:
                self.q_norm = nn.Parameter(torch.ones(hd))
                self.k_norm = nn.Parameter(torch.ones(hd))
            mlp_bias = bool(config["mlp_bias"])
            self.gate = linear(h, inter, mlp_bias)
            self.up = linear(h, inter, mlp_bias)
            self.down = linear(inter, h, False)
            self.down_bias = nn.Parameter(torch.zeros(h)) if mlp_bias else None

        def forward(self, x, cos, sin):
            y = f.apply(norm(x, self.input_norm), link)  # every token (sequence parallel: gathered)
            b, s, _ = y.shape
            q = self.q(y).view(b, s, heads, hd).transpose(1, 2)
            k = self.k(y).view(b, s, kv_heads, hd).transpose(1, 2)
            v = self.v(y).view(b, s, kv_heads, hd).transpose(1, 2)
            if config["qk_norm"]:
                q, k = norm(q, self.q_norm), norm(k, self.k_norm)

            def rotate(t):
                half = t.shape[-1] // 2
                return t * cos + torch.cat((-t[..., half:], t[..., :half]), dim=-1) * sin

            q, k = rotate(q), rotate(k)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=heads != kv_heads)
            a = g.apply(self.o(a.transpose(1, 2).reshape(b, s, heads * hd)), link)
            x = x + (a + self.o_bias if self.o_bias is not None else a)
            y = f.apply(norm(x, self.post_norm), link)
            m = g.apply(self.down(act(self.gate(y)) * self.up(y)), link)
            return x + (m + self.down_bias if self.down_bias is not None else m)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            count = int(config["layers"]) if layers is None else layers
            self.embedding = nn.Parameter(torch.randn(vocab, h) * 0.02) if first else None
            self.layers = nn.ModuleList(Layer() for _ in range(count))
            self.final_norm = nn.Parameter(torch.ones(h)) if last else None
            tied = config["tied"] and first
            self.head = nn.Parameter(torch.randn(vocab, h) * 0.02) if last and not tied else None
            self.first = rank * vocab

        def embed(self, ids):
            local = ids - self.first
            outside = (local < 0) | (local >= vocab)
            x = F.embedding(local.masked_fill(outside, 0), self.embedding)
            x = g.apply(x.masked_fill(outside.unsqueeze(-1), 0.0), link)
            return x * math.sqrt(h) if config.get("embedding_scale") else x

        def body(self, x, cos, sin):
            for layer in self.layers:
                x = layer(x, cos, sin)
            return x

        def logits(self, x):
            y = f.apply(norm(x, self.final_norm), link)
            return F.linear(y, self.embedding if self.head is None else self.head)

        def forward(self, ids, cos, sin):
            return self.logits(self.body(self.embed(ids), cos, sin))

    net = Decoder()
    return net, sum(p.numel() for p in net.parameters())


def _rank_main(rank, world, port, request, results):
    torch, dist = collectives.join(rank, world, port, request)
    config = request["config"]
    batch, tokens = int(request["batch"]), int(request["tokens"])
    torch.manual_seed(1 + rank)  # each rank its own shard's weights
    link = Link(dist, world)
    net, elements = build(torch, config, rank, world, link, sequence_parallel=bool(request.get("sequence_parallel")))
    net.train()
    cross_entropy = functions(torch).cross_entropy
    cos, sin = rotary(torch, tokens, int(config["head_dim"]), float(config.get("rope_theta", 10000.0)))
    torch.manual_seed(7)  # every rank the same tokens and targets (one tensor-parallel group)
    vocab = int(config["vocab"])
    ids = torch.randint(0, vocab, (batch, tokens))
    target = torch.randint(0, vocab, (batch * tokens,))
    optimizer = make_optimizer(torch, request["optimizer"], net.parameters())

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = net(ids, cos, sin)
        cross_entropy.apply(logits.reshape(batch * tokens, -1), target, net.first, link).backward()
        optimizer.step()

    def alone():
        link.enabled = False
        try:
            step()
        finally:
            link.enabled = True

    for _ in range(int(request.get("warmup", 2))):
        step()
        alone()
    rounds, calls = timed_rounds(torch, dist, rank, request, step, alone, link.take)
    collectives.leave(
        dist,
        rank,
        results,
        {
            "rounds": rounds,
            "parameters": elements,
            "calls_per_step": len(calls),
            "call_bytes": sorted({c[3] for c in calls}),
            "collectives": sorted({c[0] for c in calls}),
            "torch": torch.__version__,
        },
    )


def measure(request):
    return collectives.run_ranks(_rank_main, request)
