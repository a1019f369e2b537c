"""Training steps through the worker protocol (docs/worker-protocol.md, `build` with `train`): the
JAX and TensorFlow workers, driven as the C++ side drives them (`python -m neuralcost_worker`),
one process per framework for the module. Tiny networks (batch 2, width 16, seq 4): a step runs,
trains (the loss falls over a few steps on the fixed data), reports its measured peak memory and
what was measured, records its hyperparameters; a bad "train" object is refused and the worker
stays usable. The TensorFlow worker runs with TF_CPU_ALLOCATOR_USE_BFC=true (every allocation
counted); one more TensorFlow process checks what the default oneDNN allocator says."""

import json
import os
import subprocess
import sys

import pytest

from neuralcost_worker import PROTOCOL
from train_values import RESOLVED

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")
TINY = {"batch": 2, "width": 16, "seq": 4, "depth": 2}
MODES = {"jax": ("eager", "jit"), "tensorflow": ("eager", "function", "xla")}
COMPILED = {"jax": "jit", "tensorflow": "function"}


class Worker:
    def __init__(self, framework, **env):
        environment = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), NEURALCOST_THREADS="1", **env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "neuralcost_worker", framework],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        hello = self.request({"cmd": "hello", "protocol": PROTOCOL})
        assert hello["ok"], hello

    def request(self, req):
        self.process.stdin.write(json.dumps(req) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the worker died on {req}"
        return json.loads(line)

    def close(self):
        self.request({"cmd": "quit"})
        self.process.wait(timeout=60)


@pytest.fixture(scope="module", params=["jax", "tensorflow"])
def worker(request):
    env = {"TF_CPU_ALLOCATOR_USE_BFC": "true"} if request.param == "tensorflow" else {}
    w = Worker(request.param, **env)
    w.framework = request.param
    yield w
    w.close()


def build(worker, model, mode, train, **sizes):
    train = dict(RESOLVED, **train) if isinstance(train, dict) else train
    return worker.request(
        dict({"cmd": "build", "model": model, "mode": mode, "device": "cpu", "train": train}, **dict(TINY, **sizes))
    )


def trains(worker, steps=6):
    """Runs `steps` steps; the run reply's execution facts: losses of the first and latest step."""
    reply = worker.request({"cmd": "run", "n": steps})
    assert reply["ok"], reply
    assert len(reply["seconds"]) == steps and all(s > 0 for s in reply["seconds"])
    facts = reply["execution"]
    assert int(facts["steps"]) == steps + 1  # the build's first step and these
    assert float(facts["last_step_loss"]) < float(facts["first_step_loss"]), facts
    return facts


def test_each_mode_runs_trains_and_measures_its_peak(worker):
    for mode in MODES[worker.framework]:
        built = build(worker, "ff", mode, {"optimizer": "adam", "learning_rate": 0.01})
        assert built["ok"], built
        env = built["environment"]
        assert env["train_applied"] == "adam, learning_rate 0.01, betas 0.9,0.999, eps 1e-08, weight_decay 0"
        assert env["train_loss"] == "cross_entropy" and "default_rng(0).integers(0, 10, 2)" in env["train_labels"]
        facts = trains(worker)
        assert int(facts["compiled_programs"]) == (0 if mode == "eager" else 1), (mode, facts)
        # the step's peak and its source are the memory reply's own fields (protocol.py lifts them)
        telemetry = worker.request({"cmd": "memory"})
        # at least the parameters and Adam's two states (13066 fp32 parameters for ff at width 16)
        assert telemetry["peak_bytes"] >= 3 * built["parameters"] * 4, (mode, telemetry)
        expected = {
            ("jax", "jit"): "XLA buffer assignment of the compiled training step",
            ("jax", "eager"): "jax.live_arrays() bytes",
        }.get((worker.framework, mode), "counting every allocation")
        assert expected in telemetry["source"], (mode, telemetry["source"])
        # capture is still the forward pass (the same ops as without train), on the current parameters
        captured = worker.request({"cmd": "capture"})
        assert captured["ok"] and captured["ops"], captured
        assert worker.request(dict(TINY, cmd="build", model="ff", mode=mode, device="cpu"))["ok"]
        forward = worker.request({"cmd": "capture"})
        assert [op["op"] for op in captured["ops"]] == [op["op"] for op in forward["ops"]]


@pytest.mark.parametrize("model", ["cnn", "rnn", "lstm", "transformer"])
def test_the_other_reference_networks_train(worker, model):
    optimizer = {"cnn": "sgd", "rnn": "momentum", "lstm": "adamw", "transformer": "adam"}[model]
    built = build(worker, model, COMPILED[worker.framework], {"optimizer": optimizer, "learning_rate": 0.01})
    assert built["ok"], built
    assert built["environment"]["train_applied"].split(",")[0] == optimizer
    trains(worker, steps=4)


def test_mse_is_the_loss_asked_for(worker):
    built = build(worker, "ff", COMPILED[worker.framework], {"optimizer": "sgd", "learning_rate": 0.05, "loss": "mse"})
    assert built["ok"], built
    env = built["environment"]
    assert env["train_loss"] == "mse" and "standard_normal([2, 10])" in env["train_labels"]
    assert env["train_applied"] == "sgd, learning_rate 0.05, weight_decay 0"
    trains(worker)


@pytest.mark.parametrize(
    "train, message",
    [
        ({"optimizer": "lion"}, "train: unknown optimizer 'lion' (optimizers: sgd, momentum, adam, adamw)"),
        ({"loss": "hinge"}, "train: unknown loss 'hinge' (losses: cross_entropy, mse)"),
        ({"optimizer": "adam", "lr": 0.1}, "train: unknown key 'lr'"),
        ([1, 2], "train: 'train' must be an object"),
    ],
)
def test_a_bad_train_object_gets_the_error_reply(worker, train, message):
    reply = build(worker, "ff", COMPILED[worker.framework], train)
    assert reply["ok"] is False and reply["kind"] == "invalid_argument", reply
    assert reply["error"].startswith(message), reply
    assert worker.request({"cmd": "run", "n": 1})["kind"] == "invalid_argument"  # no model is left built
    assert build(worker, "ff", "eager", {})["ok"]  # and the worker goes on


def test_bf16_mixed_is_refused_with_the_backends_that_measure_it(worker):
    reply = build(worker, "ff", COMPILED[worker.framework], {"precision": "bf16-mixed"})
    assert reply["ok"] is False and reply["kind"] == "unimplemented", reply
    assert f"the {worker.framework} worker measures fp32 training steps only" in reply["error"], reply
    assert "libtorch and torch measure bf16-mixed" in reply["error"], reply
    assert build(worker, "ff", "eager", {})["ok"]


@pytest.mark.parametrize("model", ["ff", "lstm"])
def test_torch_trains_bf16_mixed_under_autocast(model):
    # torch.autocast to bfloat16 around forward + loss: the capture holds its casts of the fp32
    # weights and bf16 contractions; the step trains and reports its peak
    w = Worker("torch")
    try:
        built = build(w, model, "eager", {"precision": "bf16-mixed", "learning_rate": 0.01})
        assert built["ok"], built
        assert "torch.autocast(device_type='cpu', dtype=torch.bfloat16)" in built["environment"]["train_autocast"]
        reply = w.request({"cmd": "run", "n": 8})
        assert reply["ok"], reply
        facts = reply["train"]
        assert float(facts["loss_last"]) < float(facts["loss_first"]), facts
        ops = w.request({"cmd": "capture"})["ops"]
        casts = [op for op in ops if op["op"] == "aten::_to_copy"]
        assert casts, [op["op"] for op in ops]
        contraction = {"ff": "aten::addmm", "lstm": "aten::mkldnn_rnn_layer"}[model]
        outputs = [op["out"][0] for op in ops if op["op"] == contraction]
        assert outputs and all(o["dtype"] == "bfloat16" for o in outputs), outputs
        assert w.request({"cmd": "memory"})["peak_bytes"] > 0
    finally:
        w.close()


def test_a_train_object_without_a_value_is_refused(worker):
    reply = worker.request(
        dict({"cmd": "build", "model": "ff", "mode": "eager", "device": "cpu", "train": {"optimizer": "sgd"}}, **TINY)
    )
    assert reply["ok"] is False and reply["kind"] == "invalid_argument", reply
    assert "missing keys 'learning_rate', 'momentum'" in reply["error"], reply


# TensorFlow turns oneDNN on by default only on some CPUs (AVX-512 ones): pinned here both ways, so
# the test says the same on every machine
@pytest.mark.parametrize("onednn", ["1", "0"])
def test_tensorflow_says_what_the_default_allocator_counts(onednn):
    w = Worker("tensorflow", TF_CPU_ALLOCATOR_USE_BFC="", TF_ENABLE_ONEDNN_OPTS=onednn)
    try:
        assert build(w, "ff", "eager", {}, batch=64, width=512)["ok"]
        telemetry = w.request({"cmd": "memory"})
        if onednn == "0":  # the plain CPU allocator keeps no statistics: said, and no figure given
            assert telemetry["source"].startswith("none: TensorFlow keeps no allocator statistics"), telemetry
            assert "peak_bytes" not in telemetry, telemetry
            return
        assert "only allocations of 256 KiB and more" in telemetry["source"], telemetry
        # the batch's [64, 512] activations are 128 KiB, the first layer's weight and its Adam states 1.5 MiB each
        assert telemetry["peak_bytes"] >= 3 * 784 * 512 * 4, telemetry
    finally:
        w.close()
