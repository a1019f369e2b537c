"""Slots (docs/worker-protocol.md, "Slots"): one JAX worker process holds two models, each in the slot
its `build` named; every request addresses one slot; `drop` empties a slot and leaves the others
running; a request to an empty or malformed slot gets an error reply and the worker stays usable.
Driven as the C++ side drives it (`python -m neuralcost_worker jax`), tiny networks."""

import json
import os
import subprocess
import sys

import pytest

from neuralcost_worker import PROTOCOL

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")
TINY = {"batch": 2, "width": 16, "seq": 4, "depth": 2, "mode": "eager", "device": "cpu"}


@pytest.fixture(scope="module")
def worker():
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), NEURALCOST_THREADS="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "neuralcost_worker", "jax"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )

    def request(req):
        process.stdin.write(json.dumps(req) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        assert line, f"the worker died on {req}"
        return json.loads(line)

    assert request({"cmd": "hello", "protocol": PROTOCOL})["ok"]
    yield request
    request({"cmd": "quit"})
    process.wait(timeout=60)


def ops_of(worker, slot):
    reply = worker({"cmd": "capture", "slot": slot})
    assert reply["ok"], reply
    return [op["op"] for op in reply["ops"]]


def test_two_models_in_two_slots_run_side_by_side_and_drop_leaves_the_other(worker):
    assert worker(dict(TINY, cmd="build", model="ff", slot=0))["ok"]
    assert worker(dict(TINY, cmd="build", model="cnn", slot=1))["ok"]
    ff, cnn = ops_of(worker, 0), ops_of(worker, 1)
    assert (
        "jax::conv_general_dilated" in cnn and "jax::conv_general_dilated" not in ff
    )  # each slot answers with its own model
    for slot in (0, 1, 0):
        reply = worker({"cmd": "run", "n": 3, "slot": slot})
        assert reply["ok"] and len(reply["seconds"]) == 3, reply
    assert worker({"cmd": "drop", "slot": 0}) == {"ok": True, "slots": 1}
    gone = worker({"cmd": "run", "n": 1, "slot": 0})
    assert not gone["ok"] and "no model: send 'build' first" in gone["error"], gone
    assert worker({"cmd": "run", "n": 2, "slot": 1})["ok"]
    assert ops_of(worker, 1) == cnn


def test_a_request_to_an_empty_slot_names_it(worker):
    reply = worker({"cmd": "run", "n": 1, "slot": 7})
    assert not reply["ok"] and "no model in slot 7" in reply["error"], reply


@pytest.mark.parametrize("slot", [-1, "0", 1.5, True])
def test_a_malformed_slot_is_an_error_reply_and_the_worker_goes_on(worker, slot):
    reply = worker({"cmd": "run", "n": 1, "slot": slot})
    assert not reply["ok"] and "'slot' must be a non-negative integer" in reply["error"], reply
    assert worker({"cmd": "hello", "protocol": PROTOCOL})["ok"]
