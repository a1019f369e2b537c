"""Train-to-target in JAX (docs/to-target.md): the engine of `--backend jax`, driven by the
framework-neutral loop of ../to_target.py (the batch order, the evaluations, the curve).

The same training as the torch engine's, written in jax.numpy and lax:
- The networks are the torch engine's ff and cnn (to_target.build_model), layer for layer: ff's
  blocks are linear, relu, layer norm (eps 1e-5); cnn's stages are a 3 x 3 convolution (padding
  1), relu, batch norm (eps 1e-5, momentum 0.1: batch statistics in training, the running ones
  in evaluation, the running variance updated with the unbiased one, as torch does) and a 2 x 2
  max pool between stages, then a global average pool; a linear classifier.
- The seed's initial weights are torch's own: the torch module is built and seeded exactly as the
  torch engine seeds it (to_target.seed_weights) and its parameters are copied into JAX arrays, in
  torch's layouts (weights [out, in] and OIHW, images NCHW). So a seed starts from the same weights
  on the same first batch in every engine, and the study checks the first losses agree.
- Loss: cross entropy, the mean over the batch. Optimizers: jax/training.update, torch.optim's
  formulas (SGD with momentum 0.9, or Adam with betas (0.9, 0.999) and eps 1e-8).
- bf16-mixed: each contraction (linear, convolution) takes bf16 operands, accumulates in fp32 and
  rounds its product to bf16, as torch.autocast's CPU kernels do; the bias and everything else
  (layer and batch norm, softmax, the loss) are fp32; parameters and optimizer state stay fp32.
  (torch adds the bias inside the bf16 kernel, so the two bf16 trainings are close, not equal.)
- Modes: `compiled` is one jax.jit program for the training step (parameters, optimizer state
  and batch-norm statistics donated) and one for the evaluation, compiled on the first batch and
  the validation split before the clock starts, then the initial weights put back (MLPerf's
  initialisation, as the torch engine's torch.compile). `eager` runs the same functions under
  jax.disable_jit(), primitive by primitive (as the JAX worker's eager mode). A step ends with
  jax.block_until_ready.

Threads: `threads` > 0 pins the process to that many CPUs before jax starts (XLA sizes its pools
from them; one thread also turns off Eigen's thread pool), as the JAX worker does.
"""

import os
import time

from neuralcost_worker.jax import threads as jax_threads


class Engine:
    def __init__(self, s, data):
        jax_threads.apply(s["threads"])
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax
        import jax.numpy as jnp
        import numpy as np

        from neuralcost_worker import to_target
        from neuralcost_worker.jax import training as jax_training

        self.jax = jax
        xt, yt, xv, yv, image, classes = data
        net, torch, layout = to_target.build_model(s["model"], s["width"], s["depth"], image, classes)
        if s["threads"] > 0:
            torch.set_num_threads(s["threads"])
        to_target.seed_weights(net, torch, s["seed"])
        params = {k: jnp.asarray(v.detach().numpy()) for k, v in net.named_parameters()}
        stats = {k: jnp.asarray(v.detach().numpy()) for k, v in net.named_buffers() if "running_" in k}
        shape = (-1,) + tuple(layout)
        self.xt, self.yt = jnp.asarray(xt.reshape(shape)), jnp.asarray(yt.astype(np.int32))
        self.xv, self.yv = jnp.asarray(xv.reshape(shape)), jnp.asarray(yv.astype(np.int32))
        self.parameters = int(sum(p.size for p in params.values()))
        self.version = f"JAX {jax.__version__}"
        forward = _forward(s["model"], s["depth"], s["precision"] == "bf16-mixed", jax, jnp)
        train = to_target.optimizer_settings(s)

        def loss_of(params, stats, x, y):
            logits, stats = forward(params, stats, x, True)
            logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1)), stats

        def step(params, opt_state, stats, x, y):
            (loss, stats), grads = jax.value_and_grad(loss_of, has_aux=True)(params, stats, x, y)
            params, opt_state = jax_training.update(train, params, grads, opt_state)
            return params, opt_state, stats, loss

        def correct(params, stats, x, y):
            logits, _ = forward(params, stats, x, False)
            return jnp.mean((jnp.argmax(logits, axis=1) == y).astype(jnp.float32))

        self.params, self.stats = params, stats
        self.opt_state = jax_training.init_state(train, params)
        self.compile_seconds = 0.0
        if s["mode"] == "compiled":
            self._step = jax.jit(step, donate_argnums=(0, 1, 2))
            self._correct = jax.jit(correct)
            t0 = time.perf_counter()
            keep = jax.tree_util.tree_map(np.array, (self.params, self.opt_state, self.stats))
            self.step(np.arange(s["batch"]))
            self.accuracy()
            self.params, self.opt_state, self.stats = jax.tree_util.tree_map(jnp.asarray, keep)
            self.compile_seconds = time.perf_counter() - t0
        else:
            self._step, self._correct = _eager(jax, step), _eager(jax, correct)

    def step(self, idx):
        i = self.jax.numpy.asarray(idx.numpy() if hasattr(idx, "numpy") else idx)
        out = self._step(self.params, self.opt_state, self.stats, self.xt[i], self.yt[i])
        self.jax.block_until_ready(out)
        self.params, self.opt_state, self.stats, loss = out
        return loss

    def accuracy(self):
        return float(self._correct(self.params, self.stats, self.xv, self.yv))


def _eager(jax, f):
    def run(*args):
        with jax.disable_jit():
            return f(*args)

    return run


def _forward(model, depth, bf16, jax, jnp):
    """forward(params, stats, x, training) -> (logits, stats): the torch engine's ff or cnn
    (to_target.build_model), parameters named as its state_dict."""
    lax = jax.lax
    low = jnp.bfloat16 if bf16 else None

    def contract(f, a, w):  # autocast: bf16 operands, fp32 accumulation, a bf16 result
        if low is None:
            return f(a, w)
        return f(a.astype(low), w.astype(low)).astype(low).astype(jnp.float32)

    def linear(p, name, x):
        y = contract(lambda a, w: jnp.matmul(a, w.T, preferred_element_type=jnp.float32), x, p[name + ".weight"])
        return y + p[name + ".bias"]

    def layer_norm(p, name, x, eps=1e-5):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + eps) * p[name + ".weight"] + p[name + ".bias"]

    def conv(p, name, x):
        def f(a, w):
            return lax.conv_general_dilated(
                a,
                w,
                (1, 1),
                ((1, 1), (1, 1)),
                dimension_numbers=("NCHW", "OIHW", "NCHW"),
                preferred_element_type=jnp.float32,
            )

        return contract(f, x, p[name + ".weight"]) + p[name + ".bias"][None, :, None, None]

    def batch_norm(p, stats, name, x, training, eps=1e-5, momentum=0.1):
        mean_key, var_key = name + ".running_mean", name + ".running_var"
        if training:
            mean = jnp.mean(x, axis=(0, 2, 3))
            var = jnp.mean(jnp.square(x - mean[None, :, None, None]), axis=(0, 2, 3))
            n = x.shape[0] * x.shape[2] * x.shape[3]
            unbiased = var * (n / max(n - 1, 1))
            stats = dict(stats)
            stats[mean_key] = (1 - momentum) * stats[mean_key] + momentum * jax.lax.stop_gradient(mean)
            stats[var_key] = (1 - momentum) * stats[var_key] + momentum * jax.lax.stop_gradient(unbiased)
        else:
            mean, var = stats[mean_key], stats[var_key]
        y = (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + eps)
        return y * p[name + ".weight"][None, :, None, None] + p[name + ".bias"][None, :, None, None], stats

    def ff(p, stats, x, training):
        for i in range(depth):
            x = layer_norm(p, f"block{i}.norm", jax.nn.relu(linear(p, f"block{i}.linear", x)))
        return linear(p, "classifier", x), stats

    def cnn(p, stats, x, training):
        for s in range(depth):
            x = jax.nn.relu(conv(p, f"stage{s}.conv", x))
            x, stats = batch_norm(p, stats, f"stage{s}.bn", x, training)
            if s + 1 < depth:
                x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return linear(p, "classifier", jnp.mean(x, axis=(2, 3))), stats

    return ff if model == "ff" else cnn
