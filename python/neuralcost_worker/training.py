"""The training step's settings, framework-neutral (docs/worker-protocol.md, `build` with `train`):
the request's "train" object checked (the tool sends every value resolved, its defaults and its
loss rule applied: nothing is decided here), the loss's fixed targets, and the contract the build
reply records. Each adapter writes the step itself (jax/training.py,
tensorflow/training.py) with the optimizers' formulas of torch.optim (the PyTorch 2 documentation):

    sgd       g += wd p;  p -= lr g
    momentum  g += wd p;  b = mu b + g (b starts at 0, so the first b is g);  p -= lr b
    adam      g += wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  t += 1
              p -= (lr / (1-b1^t)) m / (sqrt(v) / sqrt(1-b2^t) + eps)
    adamw     p *= 1 - lr wd;  then adam without the g += wd p

The loss, as the tool resolves it (src/backends/train_loss.cpp): cross entropy (mean over the
batch) against integer labels for an output [batch, classes], mean squared error (mean over all
elements) against a target of the output's shape otherwise; both are drawn once from
numpy.random.default_rng(labels_seed): labels integers(0, classes, batch), a target
standard_normal(output shape). Same values in every framework.

    train = parse(request["train"])      # WorkerError(invalid_argument) when it is wrong
    loss = loss_for(train, output_shape)  # the request's, checked against the output
    target = targets(train, loss, output_shape)
    env = contract(train, loss, output_shape)
"""

import math
import numbers

import numpy as np

from neuralcost_worker.protocol import WorkerError

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
LOSSES = ("cross_entropy", "mse")
# fp32, or bf16-mixed: torch.autocast to bfloat16 over fp32 parameters (PyTorch Lightning's
# "bf16-mixed"); a worker that cannot run a precision refuses it (unimplemented)
PRECISIONS = ("fp32", "bf16-mixed")
# the keys of a "train" object, each required (torch.optim's defaults are the tool's:
# TrainHyperparameters in include/neuralcost/backend.hpp)
KEYS = (
    "optimizer",
    "learning_rate",
    "momentum",
    "betas",
    "eps",
    "weight_decay",
    "loss",
    "labels_seed",
    "precision",
)
# which hyperparameters each optimizer uses (the others of the request do not apply to it)
USES = {
    "sgd": ("learning_rate", "weight_decay"),
    "momentum": ("learning_rate", "momentum", "weight_decay"),
    "adam": ("learning_rate", "betas", "eps", "weight_decay"),
    "adamw": ("learning_rate", "betas", "eps", "weight_decay"),
}


def _bad(message):
    return WorkerError("invalid_argument", f"train: {message}")


def _real(value, key, low, high, low_open=False, high_open=True):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise _bad(f"'{key}' must be a finite number (got {value!r})")
    if value < low or (low_open and value == low) or value > high or (high_open and value == high):
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise _bad(f"'{key}' must be in {lo}{low:g}, {high:g}{hi} (got {value!r})")
    return float(value)


def parse(train):
    """The request's "train" object, checked: a dict of optimizer, learning_rate, momentum, betas
    (tuple), eps, weight_decay, loss, labels_seed and precision, every one given (the tool resolves
    them)."""
    if not isinstance(train, dict):
        raise _bad(f"'train' must be an object (got {train!r})")
    unknown = sorted(set(train) - set(KEYS))
    if unknown:
        raise _bad(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (keys: {', '.join(KEYS)})"
        )
    missing = [k for k in KEYS if train.get(k) is None]
    if missing:
        raise _bad(
            f"missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}: the tool sends every "
            "value resolved (its defaults and its loss rule)"
        )
    t = dict(train)
    if t["optimizer"] not in OPTIMIZERS:
        raise _bad(f"unknown optimizer {t['optimizer']!r} (optimizers: {', '.join(OPTIMIZERS)})")
    if t["loss"] not in LOSSES:
        raise _bad(f"unknown loss {t['loss']!r} (losses: {', '.join(LOSSES)})")
    if t["precision"] not in PRECISIONS:
        raise _bad(f"unknown precision {t['precision']!r} (precisions: {', '.join(PRECISIONS)})")
    t["learning_rate"] = _real(t["learning_rate"], "learning_rate", 0.0, math.inf, low_open=True)
    t["momentum"] = _real(t["momentum"], "momentum", 0.0, 1.0)
    betas = t["betas"]
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise _bad(f"'betas' must be a list of two numbers (got {betas!r})")
    t["betas"] = tuple(_real(b, f"betas[{i}]", 0.0, 1.0) for i, b in enumerate(betas))
    t["eps"] = _real(t["eps"], "eps", 0.0, math.inf, low_open=True)
    t["weight_decay"] = _real(t["weight_decay"], "weight_decay", 0.0, math.inf)
    seed = t["labels_seed"]
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _bad(f"'labels_seed' must be a non-negative integer (got {seed!r})")
    return t


def fp32_only(train, framework):
    """Refuses a mixed-precision step in a worker that runs fp32 steps only."""
    if train is not None and train["precision"] != "fp32":
        raise WorkerError(
            "unimplemented",
            f"train: precision {train['precision']!r}: the {framework} worker measures fp32 training steps only "
            "(libtorch and torch measure bf16-mixed)",
        )
    return train


def loss_for(train, output_shape):
    """The request's loss, checked against the network's output (cross entropy needs one
    [batch, classes])."""
    classifier = len(output_shape) == 2 and output_shape[1] >= 2
    loss = train["loss"]
    if loss == "cross_entropy" and not classifier:
        raise _bad(
            f"loss 'cross_entropy' needs an output [batch, classes]; this network's output is "
            f"{list(output_shape)} (use 'mse')"
        )
    return loss


def targets(train, loss, output_shape, dtype=np.float32):
    """The fixed labels (int32 [batch]) or regression target (output_shape, dtype), numpy."""
    rng = np.random.default_rng(train["labels_seed"])
    if loss == "cross_entropy":
        return rng.integers(0, output_shape[1], size=output_shape[0]).astype(np.int32)
    return rng.standard_normal(output_shape).astype(dtype)


def contract(train, loss, output_shape):
    """The step's settings as the build reply's environment records them (strings), under the
    contract keys LibTorch uses too: train_loss (the loss's name), train_labels (how its labels or
    target were drawn), and train_applied (the optimizer and the hyperparameters it was built with,
    beside the tool's own train_optimizer and train_hyperparameters)."""
    applied = [train["optimizer"]]
    for key in USES[train["optimizer"]]:
        value = train[key]
        applied.append(f"{key} " + (",".join(f"{v:g}" for v in value) if isinstance(value, tuple) else f"{value:g}"))
    seed = train["labels_seed"]
    env = {"train_loss": loss, "train_applied": ", ".join(applied)}
    if loss == "cross_entropy":
        env["train_labels"] = (
            f"int class labels numpy.random.default_rng({seed}).integers(0, {output_shape[1]}, "
            f"{output_shape[0]}), mean over the batch"
        )
    else:
        env["train_labels"] = (
            f"target numpy.random.default_rng({seed}).standard_normal({list(output_shape)}), mean over all elements"
        )
    return env
