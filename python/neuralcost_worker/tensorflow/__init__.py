"""The TensorFlow worker: adapter.py (the protocol's build/run/capture/layers for tensorflow, eager, function or
xla), models.py (the reference networks as tf.Module and raw ops; SavedModels), capture.py (the frozen graph as op
records), training.py (the measured training step) and trace.py (the profiler's kernels per graph node; XLA's
parts are ../xla_trace.py and ../xspace.py)."""
