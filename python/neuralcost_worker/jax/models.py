"""The five reference networks of docs/reference-networks.md in plain JAX (jax.numpy and jax.lax,
no Flax): the same layers, parameter counts and contraction FLOPs as python/neuralcost_worker/torch/reference.py and
the C++ static models. Parameters are a nested dict whose flattened paths are the PyTorch names
("block0.linear.weight", "lstm.weight_hh_l1", "encoder0.self_attn.in_proj_weight"); weights are
[out, in] and convolutions NCHW/OIHW, as in PyTorch. Every layer's ops run in a jax.named_scope
named as `analyze` names the layer ("block0.linear", "stage1.pool", "encoder0.self_attn.sdpa"),
so that the capture (jax/capture.py: an op's "module") and the per-layer table name them so.

    forward, params, x = build("lstm", batch=1)
    y = forward(params, x)

Batch-norm running statistics are not parameters: `forward` closes over them as constants (a
trained model's frozen buffers), so tracing it makes them constants of the program, not
arguments; `forward.buffers` holds them (same nested-dict naming) so that tools can name them.

TEST_MODELS are built too but are not reference networks (not listed to users): "lstm_while" is
the reference LSTM with its time loops written as while loops (tests/workers/jax_loops_test.cpp):
layer 0 as lax.while_loop over a counter from 0 to T, the other layers as lax.fori_loop up to a
bound computed from the input (the number of finite steps of the first sequence, T), so that
both stay `while` primitives in the jaxpr. Same parameters and contraction FLOPs as "lstm".
"ff_cond" is the reference ff with each hidden block in a lax.cond on data (tests/workers/
jax_loops_test.cpp): the block runs when its input is all finite, else the other branch returns
zeros; on a real input the block always runs. Same parameters and contraction FLOPs as "ff".
"""

import math

import jax
import jax.numpy as jnp
from jax import lax

HEADS = 4
CLASSES = 10
NAMES = ("ff", "cnn", "rnn", "lstm", "transformer")
TEST_MODELS = ("lstm_while", "ff_cond")


class _Init:
    """Seeded uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) tensors, as PyTorch initialises layers."""

    def __init__(self, seed, dtype):
        self.key = jax.random.PRNGKey(seed)
        self.dtype = dtype

    def uniform(self, shape, fan_in):
        self.key, key = jax.random.split(self.key)
        bound = 1.0 / math.sqrt(fan_in)
        return jax.random.uniform(key, shape, self.dtype, -bound, bound)

    def linear(self, n_in, n_out):
        return {"weight": self.uniform((n_out, n_in), n_in), "bias": self.uniform((n_out,), n_in)}

    def norm(self, n):
        return {"weight": jnp.ones((n,), self.dtype), "bias": jnp.zeros((n,), self.dtype)}


LAYERS = set()  # the layer names scope() has opened


def scope(name):
    """The layer an op belongs to, as `analyze` names it (jax/capture.py reads it back)."""
    LAYERS.add(name)
    return jax.named_scope(name)


def dense(x, w, b=None):
    """x[..., in] @ w[out, in]^T (+ b): one dot_general contracting the last dims, no transpose."""
    y = lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())))
    return y if b is None else y + b


def layer_norm(x, p, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    var = jnp.mean(centred * centred, axis=-1, keepdims=True)
    return centred * lax.rsqrt(var + eps) * p["weight"] + p["bias"]


def ff(init, width, depth, conds=False):
    """With `conds` (TEST_MODELS' ff_cond), each hidden block is the taken branch of a lax.cond
    on whether its input is all finite; the other branch returns zeros."""
    dims = [784] + [width] * depth
    params = {
        f"block{i}": {"linear": init.linear(a, b), "norm": init.norm(width)}
        for i, (a, b) in enumerate(zip(dims, dims[1:]))
    }
    params["classifier"] = init.linear(width, CLASSES)

    def forward(p, x):
        for i in range(depth):

            def block(x, i=i, linear=p[f"block{i}"]["linear"], norm=p[f"block{i}"]["norm"]):
                with scope(f"block{i}.linear"):
                    x = dense(x, linear["weight"], linear["bias"])
                with scope(f"block{i}.relu"):
                    x = jax.nn.relu(x)
                with scope(f"block{i}.norm"):
                    return layer_norm(x, norm)

            if conds:
                x = lax.cond(jnp.all(jnp.isfinite(x)), block, lambda x: jnp.zeros(x.shape[:-1] + (width,), x.dtype), x)
            else:
                x = block(x)
        with scope("classifier"):
            return dense(x, p["classifier"]["weight"], p["classifier"]["bias"])

    return forward, params, {}


def cnn(init, width, depth):
    """depth stages; stage s has width / 2^(depth-1-s) channels; max-pool between stages."""
    if depth > 6:
        raise ValueError(f"cnn: depth {depth} is too deep for 32x32 inputs (at most 6 stages)")
    if width % (1 << (depth - 1)):
        raise ValueError(f"cnn: width {width} must be divisible by {1 << (depth - 1)} for {depth} stages")
    channels = [3] + [width >> (depth - 1 - s) for s in range(depth)]
    params = {
        f"stage{s}": {
            "conv": {"weight": init.uniform((b, a, 3, 3), a * 9), "bias": init.uniform((b,), a * 9)},
            "bn": init.norm(b),
        }
        for s, (a, b) in enumerate(zip(channels, channels[1:]))
    }
    params["classifier"] = init.linear(width, CLASSES)
    # running statistics of a "trained" model: frozen constants, not parameters
    buffers = {
        f"stage{s}": {"bn": {"running_mean": init.uniform((c,), 4), "running_var": 1.0 + init.uniform((c,), 4)}}
        for s, c in enumerate(channels[1:])
    }

    def forward(p, x):
        for s in range(depth):
            conv, norm, stats = p[f"stage{s}"]["conv"], p[f"stage{s}"]["bn"], buffers[f"stage{s}"]["bn"]
            with scope(f"stage{s}.conv"):
                x = (
                    lax.conv_general_dilated(
                        x, conv["weight"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")
                    )
                    + conv["bias"][:, None, None]
                )
            with scope(f"stage{s}.relu"):
                x = jax.nn.relu(x)
            with scope(f"stage{s}.bn"):
                scale = norm["weight"] * lax.rsqrt(stats["running_var"] + 1e-5)  # eval-mode batch norm
                x = (x - stats["running_mean"][:, None, None]) * scale[:, None, None] + norm["bias"][:, None, None]
            if s + 1 < depth:
                with scope(f"stage{s}.pool"):
                    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        with scope("global_pool"):
            x = jnp.mean(x, axis=(2, 3))  # global average pool (flatten: no op)
        with scope("classifier"):
            return dense(x, p["classifier"]["weight"], p["classifier"]["bias"])

    return forward, params, buffers


def recurrent(init, width, depth, lstm, while_loops=False):
    """torch.nn.RNN / LSTM (batch first, biases on); time runs in lax.scan (or, with
    while_loops, in while loops: TEST_MODELS), layer by layer. The input projection of all steps
    is one product before the loop (as cuDNN and PyTorch do)."""
    gates = 4 if lstm else 1
    rnn = {}
    for layer in range(depth):
        for kind, n_in in (("ih", width), ("hh", width)):
            rnn[f"weight_{kind}_l{layer}"] = init.uniform((gates * width, n_in), width)
        for kind in ("ih", "hh"):
            rnn[f"bias_{kind}_l{layer}"] = init.uniform((gates * width,), width)
    kind = "lstm" if lstm else "rnn"
    params = {kind: rnn, "classifier": init.linear(width, CLASSES)}

    def forward(p, x):
        with scope(kind):
            h = layers(p[kind], x)
        with scope("classifier"):  # the last layer's final state is the last step (no op)
            return dense(h, p["classifier"]["weight"], p["classifier"]["bias"])

    def layers(r, x):
        xs = jnp.swapaxes(x, 0, 1)  # [T, B, D]: scan runs over the leading axis
        h = None
        for layer in range(depth):
            w_hh, b_hh = r[f"weight_hh_l{layer}"], r[f"bias_hh_l{layer}"]
            xw = dense(xs, r[f"weight_ih_l{layer}"], r[f"bias_ih_l{layer}"])
            zeros = jnp.zeros(xs.shape[1:2] + (width,), x.dtype)
            collect = layer + 1 < depth  # the last layer only hands on its final state

            if lstm:

                def step(carry, xw_t):
                    h, c = carry
                    i, f, g, o = jnp.split(xw_t + dense(h, w_hh, b_hh), 4, axis=-1)
                    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                    h = jax.nn.sigmoid(o) * jnp.tanh(c)
                    return (h, c), (h if collect else None)

                if while_loops:
                    (h, _), xs = _while_scan(step, (zeros, zeros), xw, layer, collect)
                else:
                    (h, _), xs = lax.scan(step, (zeros, zeros), xw)
            else:

                def step(h, xw_t):
                    h = jnp.tanh(xw_t + dense(h, w_hh, b_hh))
                    return h, (h if collect else None)

                h, xs = lax.scan(step, zeros, xw)
        return h

    return forward, params, {}


def _while_scan(step, carry, xw, layer, collect):
    """lax.scan(step, carry, xw) as a while loop: layer 0 counts from 0 to T (lax.while_loop),
    later layers run lax.fori_loop up to a bound computed from data (T here)."""
    steps = xw.shape[0]
    ys = jnp.zeros(xw.shape[:2] + carry[0].shape[1:], xw.dtype) if collect else None

    def body(i, state):
        carry, ys = state
        carry, y = step(carry, lax.dynamic_index_in_dim(xw, i, keepdims=False))
        return carry, (lax.dynamic_update_index_in_dim(ys, y, i, 0) if collect else None)

    if layer == 0:
        _, carry, ys = lax.while_loop(lambda s: s[0] < steps, lambda s: (s[0] + 1,) + body(s[0], s[1:]), (0, carry, ys))
    else:
        bound = jnp.sum(jnp.isfinite(xw[:, 0, 0]), dtype=jnp.int32)
        carry, ys = lax.fori_loop(0, bound, body, (carry, ys))
    return carry, ys


def transformer(init, width, depth):
    """Post-norm encoder layers as PyTorch's default TransformerEncoderLayer, mean over T."""
    if width % HEADS:
        raise ValueError(f"transformer: width {width} must be divisible by the {HEADS} heads")

    def layer():
        attn = {
            "in_proj_weight": init.uniform((3 * width, width), width),
            "in_proj_bias": init.uniform((3 * width,), width),
            "out_proj": init.linear(width, width),
        }
        return {
            "self_attn": attn,
            "linear1": init.linear(width, 4 * width),
            "linear2": init.linear(4 * width, width),
            "norm1": init.norm(width),
            "norm2": init.norm(width),
        }

    params = {f"encoder{i}": layer() for i in range(depth)}
    params["classifier"] = init.linear(width, CLASSES)

    def attention(p, x, name):
        b, t, d = x.shape
        with scope(f"{name}.in_proj"):
            qkv = dense(x, p["in_proj_weight"], p["in_proj_bias"])
        with scope(f"{name}.split_heads"):
            q, k, v = [
                part.reshape(b, t, HEADS, d // HEADS).transpose(0, 2, 1, 3)  # [B, H, T, D]
                for part in jnp.split(qkv, 3, axis=-1)
            ]
        with scope(f"{name}.sdpa"):
            scores = jnp.einsum("bhqd,bhkd->bhqk", q * (d // HEADS) ** -0.5, k)
            out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
        with scope(f"{name}.merge_heads"):
            out = out.transpose(0, 2, 1, 3).reshape(b, t, d)
        with scope(f"{name}.out_proj"):
            return dense(out, p["out_proj"]["weight"], p["out_proj"]["bias"])

    def forward(p, x):
        for i in range(depth):
            lp, name = p[f"encoder{i}"], f"encoder{i}"
            a = attention(lp["self_attn"], x, f"{name}.self_attn")
            with scope(f"{name}.residual1"):
                x = x + a
            with scope(f"{name}.norm1"):
                x = layer_norm(x, lp["norm1"])
            with scope(f"{name}.linear1"):
                f = dense(x, lp["linear1"]["weight"], lp["linear1"]["bias"])
            with scope(f"{name}.relu"):
                f = jax.nn.relu(f)
            with scope(f"{name}.linear2"):
                f = dense(f, lp["linear2"]["weight"], lp["linear2"]["bias"])
            with scope(f"{name}.residual2"):
                x = x + f
            with scope(f"{name}.norm2"):
                x = layer_norm(x, lp["norm2"])
        with scope("mean_over_time"):
            x = jnp.mean(x, axis=1)
        with scope("classifier"):
            return dense(x, p["classifier"]["weight"], p["classifier"]["bias"])

    return forward, params, {}


def build(name, batch=1, seq=32, width=128, depth=2, dtype=jnp.float32):
    """Returns (forward(params, x), params, example input) for a reference network."""
    init = _Init(0, dtype)
    if name in ("ff", "ff_cond"):
        (forward, params, buffers), shape = ff(init, width, depth, name == "ff_cond"), (batch, 784)
    elif name == "cnn":
        (forward, params, buffers), shape = cnn(init, width, depth), (batch, 3, 32, 32)
    elif name in ("rnn", "lstm", "lstm_while"):
        (forward, params, buffers), shape = (
            recurrent(init, width, depth, name != "rnn", name == "lstm_while"),
            (batch, seq, width),
        )
    elif name == "transformer":
        (forward, params, buffers), shape = transformer(init, width, depth), (batch, seq, width)
    else:
        raise ValueError(f"unknown model '{name}'; built-in models: {', '.join(NAMES)}")
    forward.buffers = buffers
    x = jax.random.normal(jax.random.PRNGKey(1), shape, dtype)
    return forward, params, x
