"""neural-cost's Python workers: a process holding one model or several (slots), speaking the JSON-lines protocol of
docs/worker-protocol.md on stdin/stdout. Start one with `python -m neuralcost_worker jax`."""

PROTOCOL = 3  # 2: hello lists the devices, build names one; 3: models in slots, drop
FRAMEWORKS = ("jax", "tensorflow", "torch")
