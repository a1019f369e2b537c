"""Writes a recurrent SavedModel whose loop is not unrolled in the graph, for tests/workers/tf_loops_test.cpp.

    make_tf_loop_model.py while_loop DIR   the reference LSTM (shared/reference-models.md: 128 -> 128,
                                           2 layers, two biases per layer, last step, Linear(128 -> 10);
                                           265,482 parameters) written with tf.while_loop and TensorArrays
    make_tf_loop_model.py keras DIR        the same network of Keras layers: LSTM(128, unroll=False) x 2,
                                           Dense(10); Keras has one bias per layer: 264,458 parameters

Both take input [batch, 32, 128] (batch free) and are saved with a serving signature. Exit status
77: Keras is not installed.
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

        self.layers = [{k: var(f"{k}_l{l}", *s) for k, s in (("w_ih", (WIDTH, 4 * WIDTH)), ("w_hh", (WIDTH, 4 * WIDTH)),
                                                             ("b_ih", (4 * WIDTH,)), ("b_hh", (4 * WIDTH,)))}
                       for l in range(DEPTH)]
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

        _, _, _, outputs = tf.while_loop(lambda t, *_: t < steps, body,
                                         (0, zeros, zeros, tf.TensorArray(tf.float32, size=steps)))
        return outputs.stack()

    @tf.function(input_signature=[SPEC])
    def __call__(self, x):
        xs = tf.transpose(x, [1, 0, 2])
        for p in self.layers:
            xs = self.layer(p, xs)
        return tf.matmul(xs[-1], self.fc_w) + self.fc_b


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
    elif kind == "while_loop":
        model = WhileLstm()
        tf.saved_model.save(model, path, signatures=model.__call__)
    else:
        sys.exit(f"unknown model kind '{kind}' (while_loop, keras)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
