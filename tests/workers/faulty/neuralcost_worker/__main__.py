import os
import resource
import signal
import subprocess
import sys
import time

from neuralcost_worker import protocol

fault, _, when = os.environ.get("NEURALCOST_FAULT", "").partition("-at-")
real = {name: getattr(protocol.Worker, name) for name in ("hello", "build", "capture", "run", "memory")}
calls = {}


def faulty(name):
    def handler(self, req):
        # the model of the slot addressed (the one being built at build)
        model = req.get("model") if name == "build" else (self.model_request or {}).get("model")
        only = os.environ.get("NEURALCOST_FAULT_MODEL")
        framework = os.environ.get("NEURALCOST_FAULT_FRAMEWORK")
        if name != when or (only and model != only) or (framework and framework != self.framework):
            return real[name](self, req)
        calls[name] = calls.get(name, 0) + 1
        if fault == "hangsecond" and calls[name] == 1:
            return real[name](self, req)
        if fault in ("hang", "hangsecond"):
            sys.stderr.write("faulty worker: hanging\n")
            sys.stderr.flush()
            while True:
                time.sleep(60)
        if fault == "orphan":
            # a child in a session of its own (out of the worker's process group), then a hang:
            # Ctrl-C must still end both
            child = subprocess.Popen(["sleep", "600"], start_new_session=True)
            with open(os.environ["NEURALCOST_FAULT_PIDFILE"] + ".tmp", "w") as f:
                f.write(f"{os.getpid()} {child.pid}\n")
            os.rename(os.environ["NEURALCOST_FAULT_PIDFILE"] + ".tmp", os.environ["NEURALCOST_FAULT_PIDFILE"])
            while True:
                time.sleep(60)
        if fault == "exit":
            sys.stderr.write("faulty worker: exiting at hello\n")
            sys.exit(3)
        if fault == "abort":
            sys.stderr.write("faulty worker: aborting in build\n")
            sys.stderr.flush()
            os.abort()
        if fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "garbage":
            self.out.write("Traceback (most recent call last): this is not a reply\n")
            self.out.flush()
            return real[name](self, req)
        if fault == "without":
            # the real reply less the field $NEURALCOST_FAULT_KEY (environment, telemetry)
            reply = real[name](self, req)
            reply.pop(os.environ["NEURALCOST_FAULT_KEY"], None)
            return reply
        if fault == "babble":
            # a long last line of non-ASCII text, then an exit: the cut at 500 bytes falls in a character
            sys.stderr.write("faulty worker: " + "é" * 1000 + "\n")
            sys.stderr.flush()
            sys.exit(3)
        if fault == "linger":
            # closes its output, then takes 1.5 s to exit (a framework's teardown on a busy machine)
            self.out.flush()
            os.close(self.out.fileno())
            time.sleep(1.5)
            os._exit(3)
        if fault == "slow":
            # a known change for A/B tests (bench/aa_bench.sh): every pass of the built model takes
            # $NEURALCOST_FAULT_SLOWDOWN (default 0.10) longer, as busy work on this CPU after it
            reply = real[name](self, req)
            slowdown = float(os.environ.get("NEURALCOST_FAULT_SLOWDOWN", "0.10"))
            inner = self.model.run

            def slowed():
                t0 = time.perf_counter_ns()
                inner()
                end = time.perf_counter_ns() + (time.perf_counter_ns() - t0) * slowdown
                while time.perf_counter_ns() < end:
                    pass

            self.model.run = slowed
            return reply
        if fault == "leak":
            # a model that keeps something of every pass (a loss kept with its graph): each pass of
            # the built model holds on to $NEURALCOST_FAULT_LEAK_BYTES (default 1 MiB) more, touched
            reply = real[name](self, req)
            size = int(os.environ.get("NEURALCOST_FAULT_LEAK_BYTES", str(1 << 20)))
            kept = []
            inner = self.model.run

            def leaking():
                inner()
                kept.append(bytearray(b"\x01" * size))

            self.model.run = leaking
            return reply
        if fault == "protocol":
            return {"protocol": 99, "framework": self.framework, "modes": [], "environment": {}}
        if fault == "oom":
            # a real allocation failure under an address-space limit 256 MiB above what the process
            # already maps, so the other threads (a framework's pools, a library's first thread-local
            # block) still have room: a limit below the current size made any thread's next mapping
            # fail, and glibc aborts a thread that cannot get its thread-local data (status 127).
            # The limit is lifted again as the MemoryError leaves, as memory is freed after a real one.
            with open("/proc/self/status") as status:
                mapped = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmSize:"))
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            limit = mapped + (256 << 20)
            resource.setrlimit(
                resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard)
            )
            try:
                hog = bytearray(mapped + (1 << 30))  # one mapping past the limit: raises MemoryError
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            return {"held": len(hog)}
        raise SystemExit(f"unknown fault {fault!r}")

    return handler


for _name in real:
    setattr(protocol.Worker, _name, faulty(_name))

if __name__ == "__main__":
    sys.exit(protocol.serve(sys.argv[1]))
