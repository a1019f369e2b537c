import os
import resource
import signal
import sys
import time

from neuralcost_worker import protocol

fault, _, when = os.environ.get("NEURALCOST_FAULT", "").partition("-at-")
real = {name: getattr(protocol.Worker, name) for name in ("hello", "build", "capture", "run")}


def faulty(name):
    def handler(self, req):
        if name != when:
            return real[name](self, req)
        if fault == "exit":
            sys.stderr.write("faulty worker: exiting at hello\n")
            sys.exit(3)
        if fault == "abort":
            sys.stderr.write("faulty worker: aborting in build\n")
            sys.stderr.flush()
            os.abort()
        if fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang":
            sys.stderr.write("faulty worker: hanging\n")
            sys.stderr.flush()
            while True:
                time.sleep(60)
        if fault == "garbage":
            self.out.write("Traceback (most recent call last): this is not a reply\n")
            self.out.flush()
            return real[name](self, req)
        if fault == "protocol":
            return {"protocol": 99, "framework": self.framework, "modes": [], "environment": {}}
        if fault == "oom":
            resource.setrlimit(resource.RLIMIT_AS, (512 << 20, resource.getrlimit(resource.RLIMIT_AS)[1]))
            hog = [bytearray(64 << 20) for _ in range(64)]  # 4 GiB: raises MemoryError
            return {"held": len(hog)}
        raise SystemExit(f"unknown fault {fault!r}")
    return handler


for _name in real:
    setattr(protocol.Worker, _name, faulty(_name))

if __name__ == "__main__":
    sys.exit(protocol.serve(sys.argv[1]))
