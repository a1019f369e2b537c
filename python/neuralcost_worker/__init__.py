"""neural-cost's Python workers: a process holding one model or several (slots), speaking the JSON-lines protocol of
docs/worker-protocol.md on stdin/stdout. Start one with `python -m neuralcost_worker jax`."""

# 2: hello lists the devices, build names one; 3: models in slots, drop; 4: build's "train" carries
# every value resolved by the tool, the loss included (training.parse checks them, decides none)
PROTOCOL = 4
FRAMEWORKS = ("jax", "tensorflow", "torch")
