"""SavedModels a user might train with `neural-cost train-to-target --backend tensorflow --model DIR`
(the TensorFlow engine trains the serving signature's trainable variables): an MLP over the 8x8
digits flattened (a tf.Module, batch None), the same with its batch fixed at 4, which must be
refused, the same with a trainable variable its output does not use (left alone), and a small
Keras convnet over NHWC images exported with model.export (when Keras is there).
Usage: make_digits_saved_models.py OUT_DIR"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


class Mlp(tf.Module):
    def __init__(self):
        super().__init__()
        init = tf.random.stateless_uniform
        self.w1 = tf.Variable(init([64, 32], seed=(1, 2), minval=-0.1, maxval=0.1))
        self.b1 = tf.Variable(tf.zeros([32]))
        self.w2 = tf.Variable(init([32, 10], seed=(3, 4), minval=-0.1, maxval=0.1))
        self.b2 = tf.Variable(tf.zeros([10]))

    def __call__(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2


class MlpWithAnUnusedVariable(Mlp):
    """The MLP and a trainable variable its output does not depend on (no gradient reaches it)."""

    def __init__(self):
        super().__init__()
        self.unused = tf.Variable(tf.zeros([5]))


def save(module, batch, path):
    fn = tf.function(module.__call__, input_signature=[tf.TensorSpec([batch, 64], tf.float32, name="pixels")])
    tf.saved_model.save(module, path, signatures={"serving_default": fn})


def main(out):
    save(Mlp(), None, os.path.join(out, "digits_saved"))
    save(Mlp(), 4, os.path.join(out, "digits_saved_fixed"))
    save(MlpWithAnUnusedVariable(), None, os.path.join(out, "digits_saved_unused"))
    try:
        import keras
    except ImportError:
        return
    net = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    net.export(os.path.join(out, "digits_keras"), verbose=False)


if __name__ == "__main__":
    main(sys.argv[1])
