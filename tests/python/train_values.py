"""What the tool sends with every build that trains (protocol 4): each value of the "train" object
resolved on its side (TrainHyperparameters' defaults, torch.optim's; the loss by its rule), the
worker deciding none. Shared by the tests that build training steps."""

RESOLVED = {
    "optimizer": "adam",
    "learning_rate": 0.001,
    "momentum": 0.9,
    "betas": [0.9, 0.999],
    "eps": 1e-8,
    "weight_decay": 0.0,
    "loss": "cross_entropy",
    "labels_seed": 0,
    "precision": "fp32",
}


def complete(train):
    """`train` with the values it leaves out as the tool would send them."""
    return dict(RESOLVED, **train)
