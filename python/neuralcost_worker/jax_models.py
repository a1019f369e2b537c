"""The five reference networks of docs/reference-networks.md in plain JAX (jax.numpy and jax.lax,
no Flax): the same layers, parameter counts and contraction FLOPs as python/reference_torch.py and
the C++ static models. Parameters are a nested dict whose flattened paths are the PyTorch names
("linears.0.weight", "recurrent.weight_hh_l1", "layers.0.self_attn.in_proj_weight"); weights are
[out, in] and convolutions NCHW/OIHW, as in PyTorch.

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
    params = {"linears": [init.linear(a, b) for a, b in zip(dims, dims[1:])],
              "norms": [init.norm(width) for _ in range(depth)],
              "classifier": init.linear(width, CLASSES)}

    def forward(p, x):
        for linear, norm in zip(p["linears"], p["norms"]):
            def block(x, linear=linear, norm=norm):
                return layer_norm(jax.nn.relu(dense(x, linear["weight"], linear["bias"])), norm)
            if conds:
                x = lax.cond(jnp.all(jnp.isfinite(x)), block,
                             lambda x: jnp.zeros(x.shape[:-1] + (width,), x.dtype), x)
            else:
                x = block(x)
        return dense(x, p["classifier"]["weight"], p["classifier"]["bias"])

    return forward, params, {}


def cnn(init, width, depth):
    """depth stages; stage s has width / 2^(depth-1-s) channels; max-pool between stages."""
    if depth > 6:
        raise ValueError(f"cnn: depth {depth} is too deep for 32x32 inputs (at most 6 stages)")
    if width % (1 << (depth - 1)):
        raise ValueError(f"cnn: width {width} must be divisible by {1 << (depth - 1)} for {depth} stages")
    channels = [3] + [width >> (depth - 1 - s) for s in range(depth)]
    convs = []
    for a, b in zip(channels, channels[1:]):
        convs.append({"weight": init.uniform((b, a, 3, 3), a * 9), "bias": init.uniform((b,), a * 9)})
    params = {"convs": convs, "norms": [init.norm(c) for c in channels[1:]],
              "classifier": init.linear(width, CLASSES)}
    # running statistics of a "trained" model: frozen constants, not parameters
    buffers = {"norms": [{"running_mean": init.uniform((c,), 4), "running_var": 1.0 + init.uniform((c,), 4)}
                         for c in channels[1:]]}

    def forward(p, x):
        for s, (conv, norm, stats) in enumerate(zip(p["convs"], p["norms"], buffers["norms"])):
            x = lax.conv_general_dilated(x, conv["weight"], (1, 1), ((1, 1), (1, 1)),
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
            x = jax.nn.relu(x + conv["bias"][:, None, None])
            scale = norm["weight"] * lax.rsqrt(stats["running_var"] + 1e-5)  # eval-mode batch norm
            x = (x - stats["running_mean"][:, None, None]) * scale[:, None, None] + norm["bias"][:, None, None]
            if s + 1 < depth:
                x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        x = jnp.mean(x, axis=(2, 3))  # global average pool
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
    params = {"recurrent": rnn, "classifier": init.linear(width, CLASSES)}

    def forward(p, x):
        r = p["recurrent"]
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
        return dense(h, p["classifier"]["weight"], p["classifier"]["bias"])

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
        _, carry, ys = lax.while_loop(lambda s: s[0] < steps, lambda s: (s[0] + 1,) + body(s[0], s[1:]),
                                      (0, carry, ys))
    else:
        bound = jnp.sum(jnp.isfinite(xw[:, 0, 0]), dtype=jnp.int32)
        carry, ys = lax.fori_loop(0, bound, body, (carry, ys))
    return carry, ys


def transformer(init, width, depth):
    """Post-norm encoder layers as PyTorch's default TransformerEncoderLayer, mean over T."""
    if width % HEADS:
        raise ValueError(f"transformer: width {width} must be divisible by the {HEADS} heads")

    def layer():
        attn = {"in_proj_weight": init.uniform((3 * width, width), width),
                "in_proj_bias": init.uniform((3 * width,), width),
                "out_proj": init.linear(width, width)}
        return {"self_attn": attn, "linear1": init.linear(width, 4 * width),
                "linear2": init.linear(4 * width, width), "norm1": init.norm(width), "norm2": init.norm(width)}

    params = {"layers": [layer() for _ in range(depth)], "classifier": init.linear(width, CLASSES)}

    def attention(p, x):
        b, t, d = x.shape
        qkv = dense(x, p["in_proj_weight"], p["in_proj_bias"])
        q, k, v = (part.reshape(b, t, HEADS, d // HEADS).transpose(0, 2, 1, 3)  # [B, H, T, D]
                   for part in jnp.split(qkv, 3, axis=-1))
        scores = jnp.einsum("bhqd,bhkd->bhqk", q * (d // HEADS) ** -0.5, k)
        out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
        out = out.transpose(0, 2, 1, 3).reshape(b, t, d)
        return dense(out, p["out_proj"]["weight"], p["out_proj"]["bias"])

    def forward(p, x):
        for lp in p["layers"]:
            x = layer_norm(x + attention(lp["self_attn"], x), lp["norm1"])
            f = dense(jax.nn.relu(dense(x, lp["linear1"]["weight"], lp["linear1"]["bias"])),
                      lp["linear2"]["weight"], lp["linear2"]["bias"])
            x = layer_norm(x + f, lp["norm2"])
        return dense(jnp.mean(x, axis=1), p["classifier"]["weight"], p["classifier"]["bias"])

    return forward, params, {}


def build(name, batch=1, seq=32, width=128, depth=2, dtype=jnp.float32):
    """Returns (forward(params, x), params, example input) for a reference network."""
    init = _Init(0, dtype)
    if name in ("ff", "ff_cond"):
        (forward, params, buffers), shape = ff(init, width, depth, name == "ff_cond"), (batch, 784)
    elif name == "cnn":
        (forward, params, buffers), shape = cnn(init, width, depth), (batch, 3, 32, 32)
    elif name in ("rnn", "lstm", "lstm_while"):
        (forward, params, buffers), shape = recurrent(init, width, depth, name != "rnn", name == "lstm_while"), \
            (batch, seq, width)
    elif name == "transformer":
        (forward, params, buffers), shape = transformer(init, width, depth), (batch, seq, width)
    else:
        raise ValueError(f"unknown model '{name}'; built-in models: {', '.join(NAMES)}")
    forward.buffers = buffers
    x = jax.random.normal(jax.random.PRNGKey(1), shape, dtype)
    return forward, params, x
