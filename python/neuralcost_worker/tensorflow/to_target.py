"""Train-to-target in TensorFlow (docs/to-target.md): the engine of `--backend tensorflow`, driven by
the framework-neutral loop of ../to_target.py (the batch order, the evaluations, the curve).

The reference networks are the torch engine's ff and cnn (to_target.build_model), layer for layer
in tf ops: ff's blocks are dense, relu, layer norm (eps 1e-5); cnn's stages a 3 x 3 convolution
(padding 1), relu, batch norm (eps 1e-5, momentum 0.1: batch statistics in training, the running
ones in evaluation, the running variance updated with the unbiased one, as torch does) and a 2 x 2
max pool between stages, then a global average pool; a dense classifier. Images are NHWC (TF's
CPU convolutions take no other layout). The seed's initial weights are torch's own: the torch
module is built and seeded as the torch engine seeds it (to_target.seed_weights) and copied into
tf.Variables in TF's layouts (dense kernels [in, out], convolution kernels HWIO), so a seed starts
from the same weights on the same first batch as in torch, LibTorch and JAX.

A SavedModel of the user's (`--model DIR`) trains its serving signature (`serving_default`, else
the first): one input taking the images, [N, 8, 8, 1] (NHWC), [N, 1, 8, 8] or [N, 64] with an
unknown batch, and one output of [N, classes] logits. Its trainable variables that reach the
output are trained (a variable without a gradient is left alone, as torch's optimizers skip one),
each redrawn by the run's seed with the same rule in TF's layouts (Kaiming-uniform with the fan-in of all dimensions
but the last for kernels, U(-0.05, 0.05) for vectors; numpy's generator seeded with the seed), and
what it computes is what it was saved to compute: a Keras export's serving signature runs batch
norm on its moving statistics and leaves dropout off.

Loss: sparse softmax cross entropy, the mean. Optimizers: tensorflow/training.Optimizer, torch.optim's
formulas in tf ops (not tf.keras.optimizers, whose Adam and momentum differ). bf16-mixed: each
contraction takes bf16 operands and gives a bf16 product (oneDNN accumulates in fp32), then fp32
for the bias and everything else; variables stay fp32. Modes: `compiled` is the whole step (and
the evaluation) one tf.function, traced on the first batch before the clock starts and the
initial weights put back; `eager` runs it op by op (a SavedModel's signature is its saved graph
either way, called from Python). A step ends by reading the loss.
"""

import os


class Engine:
    def __init__(self, s, data):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import numpy as np
        import tensorflow as tf

        from neuralcost_worker import to_target
        from neuralcost_worker.tensorflow import training as tf_training

        if s["threads"] > 0:  # before TensorFlow starts its pools (the first op does)
            tf.config.threading.set_intra_op_parallelism_threads(s["threads"])
            tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.set_visible_devices([], "GPU")
        self.tf = tf
        xt, yt, xv, yv, image, classes = data
        bf16 = s["precision"] == "bf16-mixed"
        if s["model"] in ("ff", "cnn"):
            forward, variables, layout = _reference(s, image, classes, bf16, tf)
        else:
            if bf16:
                raise _bad(f"--precision bf16-mixed: {s['model']} is a SavedModel, whose graph has its own dtypes")
            forward, variables, layout = _saved_model(s["model"], image, classes, s["seed"], tf, np)
        self.stats = forward.stats  # batch-norm statistics: a step changes them too
        self.xt, self.yt = tf.constant(_images(xt, image, layout)), tf.constant(yt.astype(np.int32))
        self.xv, self.yv = tf.constant(_images(xv, image, layout)), tf.constant(yv.astype(np.int32))
        self.parameters = int(sum(int(np.prod(v.shape)) for v in variables))
        self.version = f"TensorFlow {tf.__version__}"
        train = to_target.optimizer_settings(s)
        self.optimizer = tf_training.Optimizer(train, variables)

        def step(x, y):
            with tf.GradientTape() as tape:
                logits = tf.cast(forward(x, True), tf.float32)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            self.optimizer.apply(tape.gradient(loss, self.optimizer.variables))
            return loss

        def correct(x, y):
            predicted = tf.argmax(forward(x, False), axis=1, output_type=tf.int32)
            return tf.reduce_mean(tf.cast(tf.equal(predicted, y), tf.float32))

        self.compile_seconds = 0.0
        if s["mode"] == "compiled":
            import time

            self._step, self._correct = tf.function(step), tf.function(correct)
            t0 = time.perf_counter()
            state = self._state()
            keep = [v.numpy() for v in state]
            self.step(np.arange(s["batch"]))
            self.accuracy()
            for v, k in zip(state, keep):
                v.assign(k)
            self.compile_seconds = time.perf_counter() - t0
        else:
            self._step, self._correct = step, correct

    def _state(self):
        """Every variable a step changes: parameters, optimizer state, batch-norm statistics."""
        return list(self.optimizer.variables) + self.optimizer.state_variables() + self.stats

    def step(self, idx):
        i = self.tf.constant(idx.numpy() if hasattr(idx, "numpy") else idx)
        loss = self._step(self.tf.gather(self.xt, i), self.tf.gather(self.yt, i))
        return float(loss.numpy())

    def accuracy(self):
        return float(self._correct(self.xv, self.yv).numpy())


def _bad(message):
    from neuralcost_worker.to_target import BadRequest

    return BadRequest(message)


def _images(x, image, layout):
    """The images [N, C*H*W] (the dataset's rows) in the layout the model takes."""
    c, h, w = image
    if layout == "nhwc":
        return x.reshape(-1, c, h, w).transpose(0, 2, 3, 1).copy()
    if layout == "nchw":
        return x.reshape(-1, c, h, w)
    return x


def _reference(s, image, classes, bf16, tf):
    """forward(x, training), its trainable variables and its input layout: the torch engine's ff or
    cnn with the seeded torch module's weights."""
    from neuralcost_worker import to_target

    net, torch, _ = to_target.build_model(s["model"], s["width"], s["depth"], image, classes)
    if s["threads"] > 0:
        torch.set_num_threads(s["threads"])
    to_target.seed_weights(net, torch, s["seed"])
    tensors = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    params = {}
    for k, _ in net.named_parameters():
        a = tensors[k]
        if a.ndim == 2:  # a linear layer's [out, in] -> [in, out]
            a = a.T
        elif a.ndim == 4:  # OIHW -> HWIO
            a = a.transpose(2, 3, 1, 0)
        params[k] = tf.Variable(a.copy(), name=k.replace(".", "/"))
    stats = {k: tf.Variable(v.copy(), trainable=False) for k, v in tensors.items() if "running_" in k}

    def contract(f, a, w):
        if not bf16:
            return f(a, w)
        return tf.cast(f(tf.cast(a, tf.bfloat16), tf.cast(w, tf.bfloat16)), tf.float32)

    def dense(name, x):
        return contract(tf.matmul, x, params[name + ".weight"]) + params[name + ".bias"]

    def layer_norm(name, x, eps=1e-5):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) / tf.sqrt(var + eps) * params[name + ".weight"] + params[name + ".bias"]

    def conv(name, x):
        f = lambda a, w: tf.nn.conv2d(a, w, 1, "SAME")  # noqa: E731
        return contract(f, x, params[name + ".weight"]) + params[name + ".bias"]

    def batch_norm(name, x, training, eps=1e-5, momentum=0.1):
        mean_v, var_v = stats[name + ".running_mean"], stats[name + ".running_var"]
        if training:
            mean, var = tf.nn.moments(x, axes=[0, 1, 2])
            n = tf.cast(tf.shape(x)[0] * tf.shape(x)[1] * tf.shape(x)[2], x.dtype)
            mean_v.assign((1 - momentum) * mean_v + momentum * tf.stop_gradient(mean))
            var_v.assign((1 - momentum) * var_v + momentum * tf.stop_gradient(var * n / tf.maximum(n - 1, 1)))
        else:
            mean, var = mean_v, var_v
        return (x - mean) / tf.sqrt(var + eps) * params[name + ".weight"] + params[name + ".bias"]

    depth = s["depth"]

    def ff(x, training):
        for i in range(depth):
            x = layer_norm(f"block{i}.norm", tf.nn.relu(dense(f"block{i}.linear", x)))
        return dense("classifier", x)

    def cnn(x, training):
        for st in range(depth):
            x = batch_norm(f"stage{st}.bn", tf.nn.relu(conv(f"stage{st}.conv", x)), training)
            if st + 1 < depth:
                x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        return dense("classifier", tf.reduce_mean(x, axis=[1, 2]))

    variables = [params[k] for k, _ in net.named_parameters()]
    forward = ff if s["model"] == "ff" else cnn
    forward.stats = list(stats.values())
    return forward, variables, "flat" if s["model"] == "ff" else "nhwc"


def _saved_model(path, image, classes, seed, tf, np):
    """forward(x, training), its trainable variables (redrawn by the seed) and its input layout: a
    SavedModel's serving signature."""
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise _bad(f"--model {path}: not ff or cnn, nor a SavedModel directory (no saved_model.pb)")
    try:
        loaded = tf.saved_model.load(path)
    except Exception as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _bad(f"--model {path}: not a SavedModel TensorFlow can load ({why})") from None
    signatures = getattr(loaded, "signatures", {})
    if not signatures:
        raise _bad(f"--model {path}: the SavedModel has no signature to train")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    fn = signatures[key]
    specs = fn.structured_input_signature[1]
    if fn.structured_input_signature[0] or len(specs) != 1:
        raise _bad(f"--model {path}: signature '{key}' takes {len(specs)} named inputs; train-to-target gives one")
    ((name, spec),) = specs.items()
    shape = spec.shape.as_list()
    c, h, w = image
    layouts = {(h, w, c): "nhwc", (c, h, w): "nchw", (c * h * w,): "flat"}
    if tuple(shape[1:]) not in layouts:
        raise _bad(
            f"--model {path}: input '{name}' is {shape}; train-to-target gives the digits as [N, {h}, {w}, {c}], "
            f"[N, {c}, {h}, {w}] or [N, {c * h * w}]"
        )
    if shape[0] is not None:
        raise _bad(f"--model {path}: input '{name}' has a fixed batch of {shape[0]}; save it with a batch of None")
    layout = layouts[tuple(shape[1:])]
    variables = list(fn.trainable_variables)
    if not variables:
        raise _bad(f"--model {path}: its signature '{key}' has no trainable variables")
    probe = fn(**{name: tf.zeros([2] + shape[1:], spec.dtype)})
    if len(probe) != 1 or list(next(iter(probe.values())).shape) != [2, classes]:
        got = {k: v.shape.as_list() for k, v in probe.items()}
        raise _bad(f"--model {path}: signature '{key}' returns {got}, not one output of [2, {classes}] logits")
    # the variables the output depends on (tf.GradientTape gives the others no gradient): those
    # are trained, as torch's optimizers skip a parameter without a gradient
    with tf.GradientTape() as tape:
        logits = fn(**{name: tf.zeros([2] + shape[1:], spec.dtype)})
        total = tf.add_n([tf.reduce_sum(tf.cast(v, tf.float32)) for v in logits.values()])
    variables = [v for v, g in zip(variables, tape.gradient(total, variables)) if g is not None]
    if not variables:
        raise _bad(f"--model {path}: none of its trainable variables reaches its output")
    rng = np.random.default_rng(seed)
    for v in variables:  # the run's own initial weights, by the seed
        s = v.shape.as_list()
        if len(s) > 1:
            bound = 1.0 / np.sqrt(max(int(np.prod(s[:-1])), 1))  # Kaiming-uniform with a = sqrt(5)
            v.assign(rng.uniform(-bound, bound, s).astype(v.dtype.as_numpy_dtype))
        else:
            v.assign(rng.uniform(-0.05, 0.05, s).astype(v.dtype.as_numpy_dtype))
    (out,) = probe.keys()

    def forward(x, training):
        return fn(**{name: x})[out]

    forward.stats = []
    return forward, variables, layout
