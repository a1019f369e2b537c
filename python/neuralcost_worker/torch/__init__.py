"""The torch worker: adapter.py (the protocol's build/run/capture/layers for torch, eager or torch.compile),
models.py (what a build names: a reference network of reference.py or a torch.export program), capture.py (the
ATen ops of one pass, module names, the per-op timer), training.py (the measured training step), trace.py (the
Inductor kernels that ran each op), and the torch-only parts: step_layers.py (per-layer times of an eager step),
native_timer.py (the compiled RecordFunction observer) and aten_view_ops.txt (shared with the C++ mapping)."""
