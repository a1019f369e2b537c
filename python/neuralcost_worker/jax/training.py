"""The JAX worker's training step (docs/worker-protocol.md, `build` with `train`): forward, loss,
backward (jax.value_and_grad) and the optimizer update, written in jax.numpy with torch.optim's
formulas (training.py). No optax: the update is a few lines per optimizer.

Modes. jit: the whole step is one jax.jit program, the parameters and optimizer state donated
(updated in place, as torch's optimizers do). eager: the same step function under
jax.disable_jit(), primitive by primitive. A step ends with jax.block_until_ready on its outputs.

Memory (the `memory` request). The CPU backend keeps no allocator statistics (memory_stats() is
None), so:
- jit: XLA's own peak of the compiled step program, CompiledMemoryStats.peak_memory_in_bytes of
  jax.jit(step).lower(...).compile().memory_analysis(): the buffer assignment's simulated peak,
  arguments (parameters, optimizer state, input, targets) included. It is what the executable
  allocates, computed by the compiler, not sampled while it runs.
- eager: the bytes of all live jax arrays (jax.live_arrays(), every array of the process) sampled
  during one extra step split at its phase boundaries: before it, after the forward (jax.vjp: the
  residuals kept for the backward are alive), after the backward (residuals and gradients) and
  after the update (old and new parameters and state); the largest. A primitive's own temporaries
  are not seen.
"""

import gc

import jax
import jax.numpy as jnp
import numpy as np

from neuralcost_worker import training


def loss_function(forward, loss):
    def cross_entropy(params, x, labels):
        logp = jax.nn.log_softmax(forward(params, x), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    def mse(params, x, target):
        d = forward(params, x) - target
        return jnp.mean(d * d)

    return cross_entropy if loss == "cross_entropy" else mse


def init_state(train, params):
    zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)  # noqa: E731
    if train["optimizer"] == "momentum":
        return {"momentum": zeros()}
    if train["optimizer"] in ("adam", "adamw"):
        return {"step": jnp.zeros((), jnp.int32), "m": zeros(), "v": zeros()}
    return {}


def update(train, params, grads, state):
    """(params, state) after one optimizer step: torch.optim's formulas (training.py)."""
    opt, lr, wd = train["optimizer"], train["learning_rate"], train["weight_decay"]
    tree = jax.tree_util.tree_map
    if wd and opt != "adamw":  # L2 in the gradient (torch's weight_decay of SGD and Adam)
        grads = tree(lambda g, p: g + wd * p, grads, params)
    if opt == "sgd":
        return tree(lambda p, g: p - lr * g, params, grads), state
    if opt == "momentum":
        mu = train["momentum"]
        buf = tree(lambda b, g: mu * b + g, state["momentum"], grads)
        return tree(lambda p, b: p - lr * b, params, buf), {"momentum": buf}
    b1, b2 = train["betas"]
    eps = train["eps"]
    t = state["step"] + 1
    if opt == "adamw" and wd:
        params = tree(lambda p: p * (1 - lr * wd), params)
    m = tree(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = tree(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)

    def adam(p, m, v):
        step = t.astype(p.dtype)  # the bias corrections in the parameters' precision
        denominator = jnp.sqrt(v) / jnp.sqrt(1 - b2**step) + eps
        return p - lr / (1 - b1**step) * m / denominator

    params = tree(adam, params, m, v)
    return params, {"step": t, "m": m, "v": v}


def _live_bytes():
    return sum(a.nbytes for a in jax.live_arrays() if not a.is_deleted())


class Step:
    """A built model's training step: run() is one step, synchronised."""

    def __init__(self, forward, params, x, mode, train):
        self.x, self.train = x, train
        out = jax.eval_shape(forward, params, x)
        self.loss = training.loss_for(train, out.shape)
        self.target = jnp.asarray(training.targets(train, self.loss, out.shape, np.dtype(out.dtype)))
        self.loss_fn = loss_function(forward, self.loss)
        self.params = params  # the current ones (a jit step donates the previous)
        self.state = init_state(train, self.params)
        self.last_loss = None
        self.first_loss = None
        self.steps = 0

        def step(params, state, x, target):
            value, grads = jax.value_and_grad(self.loss_fn)(params, x, target)
            params, state = update(train, params, grads, state)
            return params, state, value

        self.step = step
        self.jitted = jax.jit(step, donate_argnums=(0, 1)) if mode == "jit" else None
        self.environment = dict(training.contract(train, self.loss, out.shape))
        self.environment["train_step_implementation"] = (
            "jax.value_and_grad of the loss, optimizer written in jax.numpy (torch.optim's formulas); "
            + (
                "one jax.jit program, parameters and optimizer state donated"
                if self.jitted is not None
                else "eager: jax.disable_jit(), primitive by primitive"
            )
            + "; jax.block_until_ready on the new parameters, state and loss"
        )
        self.run()  # compiles here (jit: the step program), not in the first timed run

    def run(self):
        if self.jitted is not None:
            out = self.jitted(self.params, self.state, self.x, self.target)
        else:
            with jax.disable_jit():
                out = self.step(self.params, self.state, self.x, self.target)
        jax.block_until_ready(out)
        self._keep(*out)

    def _keep(self, params, state, loss):
        self.params, self.state = params, state
        self.last_loss = loss
        self.steps += 1
        if self.first_loss is None:
            self.first_loss = float(loss)

    def execution(self):
        """What ran (as the forward's execution()) and that it trains: the loss of the first step
        (the build's) and of the latest."""
        facts = {
            "first_step_loss": f"{self.first_loss:.6g}",
            "last_step_loss": f"{float(self.last_loss):.6g}",
            "steps": self.steps,
        }
        if self.jitted is None:
            facts.update(compiled_programs=0, compiler="none (jax.disable_jit: op by op)")
        else:
            facts.update(compiled_programs=self.jitted._cache_size(), compiler="jax.jit (XLA), the whole training step")
        return facts

    def memory(self):
        if self.jitted is not None:
            stats = self.jitted.lower(self.params, self.state, self.x, self.target).compile().memory_analysis()
            args, outs = int(stats.argument_size_in_bytes), int(stats.output_size_in_bytes)
            alias, temp = int(stats.alias_size_in_bytes), int(stats.temp_size_in_bytes)
            return {
                "peak_bytes": args + outs - alias + temp,
                "source": "XLA buffer assignment of the compiled training step (jax.jit(step).lower().compile()"
                ".memory_analysis()): argument + output - alias + temp bytes, what the executable "
                "holds while it runs (arguments: parameters, optimizer state, input, targets; "
                "parameters and state donated, so aliased to the outputs); computed by the compiler, "
                "not sampled at run time; the CPU backend's memory_stats() is None",
                "xla_argument_bytes": args,
                "xla_output_bytes": outs,
                "xla_alias_bytes": alias,
                "xla_temp_bytes": temp,
            }
        return self._sampled_step()

    def _sampled_step(self):
        """One more eager step, split at its phase boundaries, with the live array bytes at each."""
        gc.collect()  # arrays of earlier models held only by reference cycles
        samples = {}
        with jax.disable_jit():
            samples["before"] = _live_bytes()
            value, backward = jax.vjp(lambda p: self.loss_fn(p, self.x, self.target), self.params)
            jax.block_until_ready(value)
            samples["after_forward"] = _live_bytes()
            (grads,) = backward(jnp.ones_like(value))
            jax.block_until_ready(grads)
            samples["after_backward"] = _live_bytes()
            del backward
            params, state = update(self.train, self.params, grads, self.state)
            jax.block_until_ready((params, state))
            samples["after_update"] = _live_bytes()
        self._keep(params, state, value)
        phase = max(samples, key=samples.get)
        out = {
            "peak_bytes": samples[phase],
            "source": "jax.live_arrays() bytes (all live arrays of the process) sampled in one extra eager step "
            "at its phase boundaries (before, after the forward with the vjp residuals alive, after "
            "the backward, after the optimizer update); the largest, at " + phase + "; temporaries "
            "inside a primitive are not seen; the CPU backend's memory_stats() is None",
        }
        out.update({f"live_bytes_{k}": v for k, v in samples.items()})
        return out
