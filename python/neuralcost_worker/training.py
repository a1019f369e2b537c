"""The build request's "train" object (docs/worker-protocol.md, "Training"), checked the same way
for every framework, and the loss rule that every backend shares (include/neuralcost/backend.hpp,
loss_for_output): cross entropy on fixed random integer labels when the network's output is
[batch, classes], mean squared error against a fixed random target otherwise."""
import math

from neuralcost_worker.protocol import WorkerError

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
LOSSES = ("cross_entropy", "mse")


def _number(train, key, default, low, high, low_open=False, high_open=False):
    v = train.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise WorkerError("invalid_argument", f"train.{key} must be a number (got {v!r})")
    if v < low or v > high or (low_open and v == low) or (high_open and v == high):
        raise WorkerError("invalid_argument", f"train.{key} must be in {'(' if low_open else '['}{low}, {high}"
                          f"{')' if high_open else ']'} (got {v})")
    return float(v)


def parse(request):
    """The request's training settings with their defaults, or None for a forward-only model."""
    train = request.get("train")
    if train is None:
        return None
    if not isinstance(train, dict):
        raise WorkerError("invalid_argument", "'train' must be an object")
    optimizer = train.get("optimizer", "adam")
    if optimizer not in OPTIMIZERS:
        raise WorkerError("invalid_argument", f"train.optimizer '{optimizer}' is not one of {', '.join(OPTIMIZERS)}")
    loss = train.get("loss")
    if loss is not None and loss not in LOSSES:
        raise WorkerError("invalid_argument", f"train.loss '{loss}' is not one of {', '.join(LOSSES)}")
    betas = train.get("betas", [0.9, 0.999])
    if not isinstance(betas, list) or len(betas) != 2:
        raise WorkerError("invalid_argument", f"train.betas must be a list of two numbers (got {betas!r})")
    seed = train.get("labels_seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise WorkerError("invalid_argument", f"train.labels_seed must be an integer >= 0 (got {seed!r})")
    return {"optimizer": optimizer,
            "learning_rate": _number(train, "learning_rate", 1e-3, 0, 10, low_open=True),
            "momentum": _number(train, "momentum", 0.9, 0, 1, high_open=True),
            "betas": [_number({"b": b}, "b", 0, 0, 1, high_open=True) for b in betas],
            "eps": _number(train, "eps", 1e-8, 0, 1, low_open=True),
            "weight_decay": _number(train, "weight_decay", 0.01 if optimizer == "adamw" else 0.0, 0, 1),
            "loss": loss, "labels_seed": seed}


def loss_for_output(shape):
    """The loss for a network output of `shape` (a list of ints)."""
    return "cross_entropy" if len(shape) == 2 and shape[1] >= 2 else "mse"


def describe(train, loss):
    """The settings as contract facts (strings), with the loss that ran."""
    return {"train_loss": loss, "train_optimizer": train["optimizer"],
            "train_hyperparameters": (f"learning_rate {train['learning_rate']}, momentum {train['momentum']}, betas "
                                      f"{tuple(train['betas'])}, eps {train['eps']}, weight_decay "
                                      f"{train['weight_decay']}, labels_seed {train['labels_seed']}")}
