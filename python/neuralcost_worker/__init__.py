"""neural-cost's Python workers: one process per run, speaking the JSON-lines protocol of
docs/worker-protocol.md on stdin/stdout. Start one with `python -m neuralcost_worker jax`."""
PROTOCOL = 2  # 2: hello lists the devices, build names one
FRAMEWORKS = ("jax", "tensorflow", "torch")
