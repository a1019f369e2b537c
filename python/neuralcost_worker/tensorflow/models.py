"""The five reference networks of docs/reference-networks.md in TensorFlow, mirroring
python/neuralcost_worker/torch/reference.py layer for layer: same parameter counts, same contraction FLOPs. They
are tf.Modules of tf.Variables and raw tf ops (no Keras layers), so the graph a tf.function
traces holds a small, known set of op types (src/backends/capture/tf_mapping.cpp maps them).
Images are NHWC, the only convolution layout TensorFlow runs on a CPU. Variables are named by
PyTorch's parameter paths ("block0.linear.weight", "lstm.weight_hh_l1"; the layout is
TensorFlow's: a linear weight is [in, out]), and every layer's ops run in a tf.name_scope named
as `analyze` names the layer ("block0.relu", "encoder0.self_attn.sdpa"); LAYERS lists those
names, so that the capture (tensorflow/capture.py: an op's "module") names the per-layer table's rows so.

    net, example = build("lstm", batch=1)   # random weights (seeded), inference form
"""

import numpy as np
import tensorflow as tf

HEADS = 4
CLASSES = 10
EPSILON = 1e-5  # PyTorch's LayerNorm and BatchNorm default


LAYERS = set()  # the layer names scope() has opened


def scope(name):
    """The layer the ops made inside belong to, as `analyze` names it (tensorflow/capture.py reads it
    back from the nodes' names: "block0.relu/Relu")."""
    LAYERS.add(name)
    return tf.name_scope(name)


class _Init:
    """Seeded weights: uniform in +-1/sqrt(fan_in), as torch.nn initialises Linear and Conv."""

    def __init__(self, dtype, seed=0):
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)

    def uniform(self, name, shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        value = self.rng.uniform(-bound, bound, size=shape)
        return tf.Variable(value.astype(self.dtype.as_numpy_dtype), name=name)

    def constant(self, name, shape, value, trainable=True):
        return tf.Variable(tf.fill(shape, tf.constant(value, self.dtype)), name=name, trainable=trainable)


class Linear(tf.Module):
    """x[..., fan_in] @ w[fan_in, out] + b: tf.matmul (MatMul, or BatchMatMulV2 for rank > 2)."""

    def __init__(self, init, name, fan_in, out):
        super().__init__()
        self.name_ = name
        self.w = init.uniform(f"{name}.weight", (fan_in, out), fan_in)
        self.b = init.uniform(f"{name}.bias", (out,), fan_in)

    def __call__(self, x):
        with scope(self.name_):
            return tf.nn.bias_add(tf.matmul(x, self.w), self.b)


class LayerNorm(tf.Module):
    """Over the last dimension, in explicit ops (TensorFlow has no layer-norm kernel)."""

    def __init__(self, init, name, width):
        super().__init__()
        self.name_ = name
        self.gamma = init.constant(f"{name}.weight", (width,), 1.0)
        self.beta = init.constant(f"{name}.bias", (width,), 0.0)

    def __call__(self, x):
        with scope(self.name_):
            mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
            return (x - mean) * tf.math.rsqrt(variance + EPSILON) * self.gamma + self.beta


class BatchNorm(tf.Module):
    """Inference form (running statistics, which are non-trainable variables, as in Keras)."""

    def __init__(self, init, name, channels):
        super().__init__()
        self.name_ = name
        self.gamma = init.constant(f"{name}.weight", (channels,), 1.0)
        self.beta = init.constant(f"{name}.bias", (channels,), 0.0)
        self.mean = init.constant(f"{name}.running_mean", (channels,), 0.0, trainable=False)
        self.variance = init.constant(f"{name}.running_var", (channels,), 1.0, trainable=False)

    def __call__(self, x):
        with scope(self.name_):
            if x.dtype == tf.float64:  # FusedBatchNormV3 has no float64 kernel
                return tf.nn.batch_normalization(x, self.mean, self.variance, self.beta, self.gamma, EPSILON)
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                x,
                self.gamma,
                self.beta,
                self.mean,
                self.variance,
                epsilon=EPSILON,
                data_format="NHWC",
                is_training=False,
            )
            return y


class FeedForward(tf.Module):
    def __init__(self, init, width, depth):
        super().__init__()
        dims = [784] + [width] * depth
        self.linears = [Linear(init, f"block{i}.linear", a, b) for i, (a, b) in enumerate(zip(dims, dims[1:]))]
        self.norms = [LayerNorm(init, f"block{i}.norm", width) for i in range(depth)]
        self.classifier = Linear(init, "classifier", width, CLASSES)

    def __call__(self, x):
        for i, (linear, norm) in enumerate(zip(self.linears, self.norms)):
            x = linear(x)
            with scope(f"block{i}.relu"):
                x = tf.nn.relu(x)
            x = norm(x)
        return self.classifier(x)


class Cnn(tf.Module):
    """depth stages; stage s has width / 2^(depth-1-s) channels; max-pool between stages."""

    def __init__(self, init, width, depth):
        super().__init__()
        channels = [3] + [width >> (depth - 1 - s) for s in range(depth)]
        self.filters, self.biases = [], []
        for s, (a, b) in enumerate(zip(channels, channels[1:])):
            self.filters.append(init.uniform(f"stage{s}.conv.weight", (3, 3, a, b), a * 9))  # HWIO
            self.biases.append(init.uniform(f"stage{s}.conv.bias", (b,), a * 9))
        self.norms = [BatchNorm(init, f"stage{s}.bn", c) for s, c in enumerate(channels[1:])]
        self.classifier = Linear(init, "classifier", width, CLASSES)

    def __call__(self, x):
        for s, (w, b, norm) in enumerate(zip(self.filters, self.biases, self.norms)):
            with scope(f"stage{s}.conv"):
                x = tf.nn.bias_add(tf.nn.conv2d(x, w, strides=1, padding="SAME"), b)  # 3x3, pad 1
            with scope(f"stage{s}.relu"):
                x = tf.nn.relu(x)
            x = norm(x)
            if s + 1 < len(self.filters):
                with scope(f"stage{s}.pool"):
                    x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        with scope("global_pool"):
            x = tf.reduce_mean(x, axis=[1, 2])  # global average pool
        return self.classifier(x)


class Recurrent(tf.Module):
    """PyTorch's RNN (tanh) / LSTM with two biases per layer, unrolled over T in Python."""

    def __init__(self, init, width, depth, lstm):
        super().__init__()
        self.lstm = lstm
        self.kind = "lstm" if lstm else "rnn"
        gates = 4 * width if lstm else width
        self.layers = []
        for l in range(depth):
            self.layers.append(
                {
                    k: init.uniform(f"{self.kind}.{n}_l{l}", shape, width)
                    for k, n, shape in (
                        ("w_ih", "weight_ih", (width, gates)),
                        ("w_hh", "weight_hh", (width, gates)),
                        ("b_ih", "bias_ih", (gates,)),
                        ("b_hh", "bias_hh", (gates,)),
                    )
                }
            )
        self.classifier = Linear(init, "classifier", width, CLASSES)

    def __call__(self, x):
        with scope(self.kind):
            h = self.recur(x)
        return self.classifier(h)  # the last layer's last step (unstacked: no op)

    def recur(self, x):
        steps = tf.unstack(x, axis=1)
        batch, width = steps[0].shape
        for p in self.layers:
            h = c = tf.zeros((batch, width), x.dtype)
            outputs = []
            for x_t in steps:
                z = tf.nn.bias_add(tf.matmul(x_t, p["w_ih"]), p["b_ih"]) + tf.nn.bias_add(
                    tf.matmul(h, p["w_hh"]), p["b_hh"]
                )
                if self.lstm:
                    i, f, g, o = tf.split(z, 4, axis=1)  # PyTorch's gate order
                    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
                    h = tf.sigmoid(o) * tf.tanh(c)
                else:
                    h = tf.tanh(z)
                outputs.append(h)
            steps = outputs
        return steps[-1]


class EncoderLayer(tf.Module):
    """PyTorch's default TransformerEncoderLayer: post-norm, ReLU, no dropout."""

    def __init__(self, init, name, width):
        super().__init__()
        self.name_ = name
        self.in_proj = Linear(init, f"{name}.self_attn.in_proj", width, 3 * width)
        self.out_proj = Linear(init, f"{name}.self_attn.out_proj", width, width)
        self.linear1 = Linear(init, f"{name}.linear1", width, 4 * width)
        self.linear2 = Linear(init, f"{name}.linear2", 4 * width, width)
        self.norm1 = LayerNorm(init, f"{name}.norm1", width)
        self.norm2 = LayerNorm(init, f"{name}.norm2", width)

    def attention(self, x):
        batch, seq, width = x.shape
        head = width // HEADS

        def heads(t):  # [B, T, C] -> [B, H, T, D]
            return tf.transpose(tf.reshape(t, (batch, seq, HEADS, head)), (0, 2, 1, 3))

        qkv = self.in_proj(x)
        with scope(f"{self.name_}.self_attn.split_heads"):
            q, k, v = [heads(t) for t in tf.split(qkv, 3, axis=-1)]
        with scope(f"{self.name_}.self_attn.sdpa"):
            scores = tf.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(head))  # BatchMatMulV2, adj_y
            a = tf.matmul(tf.nn.softmax(scores), v)
        with scope(f"{self.name_}.self_attn.merge_heads"):
            a = tf.reshape(tf.transpose(a, (0, 2, 1, 3)), (batch, seq, width))
        return self.out_proj(a)

    def __call__(self, x):
        a = self.attention(x)
        with scope(f"{self.name_}.residual1"):
            x = x + a
        x = self.norm1(x)
        f = self.linear1(x)
        with scope(f"{self.name_}.relu"):
            f = tf.nn.relu(f)
        f = self.linear2(f)
        with scope(f"{self.name_}.residual2"):
            x = x + f
        return self.norm2(x)


class Transformer(tf.Module):
    def __init__(self, init, width, depth):
        super().__init__()
        if width % HEADS:
            raise ValueError(f"width {width} must be divisible by the {HEADS} attention heads")
        self.layers = [EncoderLayer(init, f"encoder{l}", width) for l in range(depth)]
        self.classifier = Linear(init, "classifier", width, CLASSES)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        with scope("mean_over_time"):
            x = tf.reduce_mean(x, axis=1)
        return self.classifier(x)


NAMES = ("ff", "cnn", "rnn", "lstm", "transformer")


def build(name, batch=1, seq=32, width=128, depth=2, dtype=tf.float32):
    """Returns (module, example input) for a reference network; call module(x) for a forward."""
    init = _Init(tf.as_dtype(dtype))
    if name == "ff":
        net, shape = FeedForward(init, width, depth), (batch, 784)
    elif name == "cnn":
        if depth > 6 or width % (1 << (depth - 1)):
            raise ValueError(f"cnn: width {width} must be divisible by 2^(depth-1), depth at most 6 (got {depth})")
        net, shape = Cnn(init, width, depth), (batch, 32, 32, 3)
    elif name in ("rnn", "lstm"):
        net, shape = Recurrent(init, width, depth, name == "lstm"), (batch, seq, width)
    elif name == "transformer":
        net, shape = Transformer(init, width, depth), (batch, seq, width)
    else:
        raise ValueError(f"unknown model '{name}'; built-in models: {', '.join(NAMES)}")
    x = np.random.default_rng(1).standard_normal(shape).astype(init.dtype.as_numpy_dtype)
    return net, tf.constant(x)
