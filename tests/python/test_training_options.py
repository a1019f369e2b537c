"""The build request's "train" object (python/neuralcost_worker/training.py): defaults, the loss
rule shared with the C++ backends, and one clear error per bad field."""
import pytest

from neuralcost_worker import training
from neuralcost_worker.protocol import WorkerError


def test_no_train_object_is_a_forward_model():
    assert training.parse({"model": "ff"}) is None


def test_defaults_follow_the_optimizer():
    adam = training.parse({"train": {}})
    assert adam["optimizer"] == "adam" and adam["weight_decay"] == 0.0 and adam["betas"] == [0.9, 0.999]
    assert adam["loss"] is None and adam["labels_seed"] == 0
    assert training.parse({"train": {"optimizer": "adamw"}})["weight_decay"] == 0.01


@pytest.mark.parametrize("train, message", [
    ({"optimizer": "lion"}, "train.optimizer 'lion' is not one of sgd, momentum, adam, adamw"),
    ({"learning_rate": 0}, "train.learning_rate must be in (0, 10]"),
    ({"momentum": 1.0}, "train.momentum must be in [0, 1)"),
    ({"betas": [0.9]}, "train.betas must be a list of two numbers"),
    ({"loss": "hinge"}, "train.loss 'hinge' is not one of cross_entropy, mse"),
    ({"labels_seed": -1}, "train.labels_seed must be an integer >= 0"),
    ({"eps": "small"}, "train.eps must be a number"),
])
def test_bad_fields_are_refused_by_name(train, message):
    with pytest.raises(WorkerError, match=None) as e:
        training.parse({"train": train})
    assert message in str(e.value)
    assert e.value.kind == "invalid_argument"


def test_loss_rule_is_cross_entropy_for_batch_by_classes_only():
    assert training.loss_for_output([32, 10]) == "cross_entropy"
    assert training.loss_for_output([32, 1]) == "mse"
    assert training.loss_for_output([32, 16, 10]) == "mse"
    assert training.loss_for_output([32]) == "mse"
