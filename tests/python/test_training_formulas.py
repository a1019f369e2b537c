"""The training step's pieces without a worker: the "train" object's checks (training.py), and the
JAX and TensorFlow optimizers (jax_training.update, tf_training.Optimizer) against torch.optim
itself, step by step, with the same hyperparameters: the three frameworks take the same step."""

import json
import subprocess
import sys

import numpy as np
import pytest

from neuralcost_worker import training
from neuralcost_worker.protocol import WorkerError
from train_values import RESOLVED, complete

SHAPES = [(3, 4), (4,)]
RNG = np.random.default_rng(7)
PARAMS = [RNG.standard_normal(s).astype(np.float32) for s in SHAPES]
GRADS = [[RNG.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(3)]  # three steps
# each case as the tool sends it: every value given (train_values.py)
CASES = {
    "sgd": complete({"optimizer": "sgd", "learning_rate": 0.1, "weight_decay": 0.05}),
    "momentum": complete({"optimizer": "momentum", "learning_rate": 0.1, "momentum": 0.8, "weight_decay": 0.05}),
    "adam": complete(
        {"optimizer": "adam", "learning_rate": 0.01, "betas": [0.8, 0.9], "eps": 1e-3, "weight_decay": 0.05}
    ),
    "adamw": complete(
        {"optimizer": "adamw", "learning_rate": 0.01, "betas": [0.8, 0.9], "eps": 1e-3, "weight_decay": 0.01}
    ),
}

# torch.optim's steps, in a process of its own: torch imported after TensorFlow in one process
# aborts (its triton import), and the capture walkers' tests import TensorFlow first
TORCH_STEPS = """
import json, sys
import torch
request = json.loads(sys.stdin.read())
out = {}
for name, t in request["cases"].items():
    ps = [torch.nn.Parameter(torch.tensor(p, dtype=torch.float32)) for p in request["params"]]
    opt, lr, wd = t["optimizer"], t["learning_rate"], t["weight_decay"]
    if opt in ("sgd", "momentum"):
        o = torch.optim.SGD(ps, lr=lr, momentum=t["momentum"] if opt == "momentum" else 0, weight_decay=wd)
    else:
        cls = torch.optim.AdamW if opt == "adamw" else torch.optim.Adam
        o = cls(ps, lr=lr, betas=tuple(t["betas"]), eps=t["eps"], weight_decay=wd)
    out[name] = []
    for grads in request["grads"]:
        for p, g in zip(ps, grads):
            p.grad = torch.tensor(g, dtype=torch.float32)
        o.step()
        out[name].append([p.detach().tolist() for p in ps])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def torch_steps():
    """{case: [[each parameter after step k] for k in 1..3]} by torch.optim itself, each case's
    hyperparameters as training.parse checks them."""
    cases = {name: dict(training.parse(case)) for name, case in CASES.items()}
    for case in cases.values():
        case["betas"] = list(case["betas"])
    request = {
        "cases": cases,
        "params": [p.tolist() for p in PARAMS],
        "grads": [[g.tolist() for g in step] for step in GRADS],
    }
    done = subprocess.run(
        [sys.executable, "-c", TORCH_STEPS], input=json.dumps(request), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        name: [[np.asarray(p, np.float32) for p in step] for step in steps]
        for name, steps in json.loads(done.stdout).items()
    }


@pytest.mark.parametrize("case", CASES)
def test_jax_optimizers_take_torchs_steps(case, torch_steps):
    import jax.numpy as jnp
    from neuralcost_worker.jax import training as jax_training

    train = training.parse(CASES[case])
    params = [jnp.asarray(p) for p in PARAMS]
    state = jax_training.init_state(train, params)
    for grads, expected in zip(GRADS, torch_steps[case]):
        params, state = jax_training.update(train, params, [jnp.asarray(g) for g in grads], state)
        for got, want in zip(params, expected):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(params[0]), PARAMS[0])


@pytest.mark.parametrize("case", CASES)
def test_tensorflow_optimizers_take_torchs_steps(case, torch_steps):
    import tensorflow as tf
    from neuralcost_worker.tensorflow import training as tf_training

    train = training.parse(CASES[case])
    variables = [tf.Variable(p) for p in PARAMS]
    opt = tf_training.Optimizer(train, variables)
    for grads, expected in zip(GRADS, torch_steps[case]):
        opt.apply([tf.constant(g) for g in grads])
        for got, want in zip(variables, expected):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(variables[0].numpy(), PARAMS[0])


def test_defaults_are_torchs():
    # the worker decides no value: each is the tool's, and a request without one is refused
    t = training.parse(RESOLVED)
    assert (t["optimizer"], t["learning_rate"], t["betas"], t["eps"], t["weight_decay"]) == (
        "adam",
        0.001,
        (0.9, 0.999),
        1e-8,
        0.0,
    )
    for key in training.KEYS:
        partial = {k: v for k, v in RESOLVED.items() if k != key}
        with pytest.raises(WorkerError, match=f"missing key '{key}': the tool sends every value resolved"):
            training.parse(partial)
    with pytest.raises(WorkerError, match="missing keys 'optimizer', 'learning_rate'"):
        training.parse({"momentum": 0.9})


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"optimizer": "lion"}, "unknown optimizer 'lion'"),
        ({"loss": "hinge"}, "unknown loss 'hinge'"),
        ({"learning_rat": 0.1}, "unknown key 'learning_rat'"),
        ({"learning_rate": 0}, "'learning_rate' must be in (0, inf)"),
        ({"learning_rate": "fast"}, "'learning_rate' must be a finite number"),
        ({"betas": [0.9]}, "'betas' must be a list of two numbers"),
        ({"betas": [0.9, 1.0]}, "'betas[1]' must be in [0, 1)"),
        ({"eps": -1e-8}, "'eps' must be in (0, inf)"),
        ({"weight_decay": -0.1}, "'weight_decay' must be in [0, inf)"),
        ({"labels_seed": -1}, "'labels_seed' must be a non-negative integer"),
        ({"precision": "fp16-mixed"}, "unknown precision 'fp16-mixed' (precisions: fp32, bf16-mixed)"),
        ("adam", "'train' must be an object"),
    ],
)
def test_a_bad_train_object_is_refused(bad, message):
    with pytest.raises(WorkerError) as e:
        training.parse(complete(bad) if isinstance(bad, dict) else bad)
    assert e.value.kind == "invalid_argument" and message in str(e.value)


def test_the_loss_follows_the_output():
    t = training.parse(RESOLVED)
    assert training.loss_for(t, [2, 10]) == "cross_entropy"
    assert training.loss_for(training.parse(complete({"loss": "mse"})), [2, 4, 10]) == "mse"
    assert training.loss_for(training.parse(complete({"loss": "mse"})), [2, 10]) == "mse"
    for shape in ([2, 4, 10], [2, 1]):  # the tool's rule: [batch, classes] with two classes or more
        with pytest.raises(WorkerError, match="needs an output"):
            training.loss_for(t, shape)
    labels = training.targets(t, "cross_entropy", [5, 10])
    assert labels.dtype == np.int32 and labels.shape == (5,) and labels.min() >= 0 and labels.max() < 10
    np.testing.assert_array_equal(labels, np.random.default_rng(0).integers(0, 10, 5))  # the recorded draw
    assert training.targets(t, "mse", [2, 3]).shape == (2, 3)
