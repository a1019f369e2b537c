"""Loads the real package's __init__ (its constants) under the faulty package."""

import os

_real = os.path.join(os.environ["NEURALCOST_REAL_WORKER_DIR"], "neuralcost_worker", "__init__.py")
exec(compile(open(_real).read(), _real, "exec"))
