"""Threads for a JAX process, set before jax starts (the JAX worker's adapter and its train-to-target
engine): n > 0 pins the process to n CPUs (sched_setaffinity), from which XLA's CPU client sizes
its thread pools, and with n = 1 adds --xla_cpu_multi_thread_eigen=false to XLA_FLAGS
(single-threaded Eigen kernels). XLA has no flag for any other pool size."""

import os


def apply(n):
    """Applies n threads (0: jax's default); returns what was set."""
    applied = {"threads": str(n) if n > 0 else "default"}
    if n > 0:
        cpus = sorted(os.sched_getaffinity(0))[:n]
        os.sched_setaffinity(0, cpus)
        applied["cpu_affinity"] = ",".join(map(str, cpus))
        os.environ.setdefault("OMP_NUM_THREADS", str(n))
        if n == 1:
            flags = os.environ.get("XLA_FLAGS", "")
            if "xla_cpu_multi_thread_eigen" not in flags:
                os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    return applied
