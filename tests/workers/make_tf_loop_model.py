"""Writes a SavedModel whose control flow (a loop, a branch) is not unrolled in the graph, for
tests/workers/tf_loops_test.cpp.

    make_tf_loop_model.py while_loop DIR   the reference LSTM (docs/reference-networks.md: 128 -> 128,
                                           2 layers, two biases per layer, last step, Linear(128 -> 10);
                                           265,482 parameters) written with tf.while_loop and TensorArrays
    make_tf_loop_model.py keras DIR        the same network of Keras layers: LSTM(128, unroll=False) x 2,
                                           Dense(10); Keras has one bias per layer: 264,458 parameters

    make_tf_loop_model.py cond DIR         the reference ff (784 -> 128 -> 128 -> 10, ReLU and LayerNorm after
                                           each hidden Linear; 118,794 parameters), each hidden block inside
                                           a tf.cond on all(isfinite(x)) whose other branch returns zeros

Several KIND DIR pairs write several models with one import of TensorFlow. The LSTMs take
input [batch, 32, 128], the ff [batch, 784] (batch free); all are saved with a serving signature.
Exit status 77: Keras is not installed.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SEQ, WIDTH, DEPTH, CLASSES = 32, 128, 2, 10
SPEC = tf.TensorSpec([None, SEQ, WIDTH], tf.float32)


class WhileLstm(tf.Module):
    """PyTorch's LSTM (gates i, f, g, o; b_ih and b_hh), a tf.while_loop over the time steps."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)

        def var(name, *shape):
            return tf.Variable(rng.uniform(-0.1, 0.1, shape).astype(np.float32), name=name)

        self.layers = [
            {
                k: var(f"{k}_l{l}", *s)
                for k, s in (
                    ("w_ih", (WIDTH, 4 * WIDTH)),
                    ("w_hh", (WIDTH, 4 * WIDTH)),
                    ("b_ih", (4 * WIDTH,)),
                    ("b_hh", (4 * WIDTH,)),
                )
            }
            for l in range(DEPTH)
        ]
        self.fc_w, self.fc_b = var("fc.w", WIDTH, CLASSES), var("fc.b", CLASSES)

    def layer(self, p, xs):  # xs: [T, B, C]
        steps = tf.shape(xs)[0]
        inputs = tf.TensorArray(tf.float32, size=steps).unstack(xs)
        zeros = tf.zeros([tf.shape(xs)[1], WIDTH])

        def body(t, h, c, outputs):
            z = tf.matmul(inputs.read(t), p["w_ih"]) + p["b_ih"] + tf.matmul(h, p["w_hh"]) + p["b_hh"]
            i, f, g, o = tf.split(z, 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            return t + 1, h, c, outputs.write(t, h)

        _, _, _, outputs = tf.while_loop(
            lambda t, *_: t < steps, body, (0, zeros, zeros, tf.TensorArray(tf.float32, size=steps))
        )
        return outputs.stack()

    @tf.function(input_signature=[SPEC])
    def __call__(self, x):
        xs = tf.transpose(x, [1, 0, 2])
        for p in self.layers:
            xs = self.layer(p, xs)
        return tf.matmul(xs[-1], self.fc_w) + self.fc_b


class CondFf(tf.Module):
    """The reference ff with each hidden block (Linear, ReLU, LayerNorm) as a tf.cond's true branch."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.blocks = []
        for i, (n, m) in enumerate(((784, 128), (128, 128))):
            self.blocks.append(
                {
                    "w": tf.Variable(rng.uniform(-0.05, 0.05, (n, m)).astype(np.float32), name=f"fc{i}.w"),
                    "b": tf.Variable(np.zeros(m, np.float32), name=f"fc{i}.b"),
                    "gamma": tf.Variable(np.ones(m, np.float32), name=f"ln{i}.gamma"),
                    "beta": tf.Variable(np.zeros(m, np.float32), name=f"ln{i}.beta"),
                }
            )
        self.fc_w = tf.Variable(rng.uniform(-0.05, 0.05, (128, CLASSES)).astype(np.float32), name="fc2.w")
        self.fc_b = tf.Variable(np.zeros(CLASSES, np.float32), name="fc2.b")

    @staticmethod
    def block(p, h):
        h = tf.nn.relu(tf.matmul(h, p["w"]) + p["b"])
        mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)
        return (h - mean) * tf.math.rsqrt(var + 1e-5) * p["gamma"] + p["beta"]

    @tf.function(input_signature=[tf.TensorSpec([None, 784], tf.float32)])
    def __call__(self, x):
        finite = tf.reduce_all(tf.math.is_finite(x))
        h = x
        for p in self.blocks:
            h = tf.cond(finite, lambda p=p, h=h: self.block(p, h), lambda: tf.zeros([tf.shape(h)[0], 128]))
        return tf.matmul(h, self.fc_w) + self.fc_b


def keras_lstm(path):
    try:
        import keras
    except ImportError:
        sys.exit(77)
    inputs = keras.Input((SEQ, WIDTH))
    h = keras.layers.LSTM(WIDTH, return_sequences=True, unroll=False)(inputs)
    h = keras.layers.LSTM(WIDTH, unroll=False)(h)
    keras.Model(inputs, keras.layers.Dense(CLASSES)(h)).export(path, format="tf_saved_model", verbose=False)


def main(kind, path):
    if kind == "keras":
        keras_lstm(path)
    elif kind in ("while_loop", "cond"):
        model = WhileLstm() if kind == "while_loop" else CondFf()
        tf.saved_model.save(model, path, signatures=model.__call__)
    else:
        sys.exit(f"unknown model kind '{kind}' (while_loop, keras, cond)")


if __name__ == "__main__":
    # KIND DIR [KIND DIR ...]: several models for one import of TensorFlow
    pairs = sys.argv[1:]
    if not pairs or len(pairs) % 2:
        sys.exit(__doc__)
    keras_missing = False
    for kind, path in zip(pairs[::2], pairs[1::2]):
        try:
            main(kind, path)
        except SystemExit as e:
            if e.code != 77:
                raise
            keras_missing = True
    sys.exit(77 if keras_missing else 0)
