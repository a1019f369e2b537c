"""The real worker package (python/neuralcost_worker), with faults injected on request, for the
robustness tests of tests/workers/worker_faults_test.cpp. NEURALCOST_REAL_WORKER_DIR is the real
package's parent folder; NEURALCOST_FAULT says what goes wrong and when, as FAULT-at-CMD:
    exit-at-hello       exits with status 3 instead of answering
    abort-at-build      dies of SIGABRT (a crash in native code)
    sigkill-at-run      is killed by SIGKILL (what the kernel's OOM killer does)
    hang-at-run         never answers (hang-at-hello: never answers hello)
    hangsecond-at-run   answers the first run request, never a later one
    orphan-at-run       starts a child in a session of its own, writes "WORKER_PID CHILD_PID" to
                        $NEURALCOST_FAULT_PIDFILE, then never answers
With NEURALCOST_FAULT_MODEL=NAME the fault strikes only requests to that model (its slot, in a shared worker).
    garbage-at-capture  answers with a line that is not JSON
    protocol-at-hello   speaks protocol 99
    without-at-build    answers without the field $NEURALCOST_FAULT_KEY (also -at-memory, -at-hello)
    linger-at-build     closes its stdout, then exits with status 3 1.5 s later
    babble-at-build     writes a 1,000-character line of non-ASCII text to stderr, then exits with status 3
    oom-at-build        runs out of memory for real (under an address-space limit 256 MiB above its
                        size, lifted again as the MemoryError leaves) and
                        answers with the protocol's out_of_memory error
    slow-at-build       builds the model for real, then makes each of its passes
                        $NEURALCOST_FAULT_SLOWDOWN (default 0.10) longer with busy work: a known
                        change for A/B tests (bench/aa_bench.sh)
    leak-at-build       builds the model for real, then keeps $NEURALCOST_FAULT_LEAK_BYTES (default
                        1 MiB) more after each of its passes: memory that grows pass by pass
With NEURALCOST_FAULT_FRAMEWORK=NAME (jax, tensorflow, torch) only that framework's worker is faulty.
"""

import os

__path__.append(os.path.join(os.environ["NEURALCOST_REAL_WORKER_DIR"], "neuralcost_worker"))
from neuralcost_worker.__init_real__ import *  # noqa: E402,F401,F403  (PROTOCOL, FRAMEWORKS)
