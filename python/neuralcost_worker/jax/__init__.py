"""The JAX worker: adapter.py (the protocol's build/run/capture/layers for jax, eager or jit), models.py (the
reference networks in jax.numpy/lax), capture.py (the jaxpr as op records) and training.py (the measured training
step). Its kernel trace is XLA's, shared with TensorFlow's xla mode: ../xla_trace.py and ../xspace.py."""
