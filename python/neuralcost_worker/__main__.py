import sys

from neuralcost_worker.protocol import serve

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python -m neuralcost_worker jax|tensorflow|torch|collectives|to-target\n")
        sys.exit(2)
    if sys.argv[1] == "collectives":
        from neuralcost_worker.collectives import serve as serve_collectives

        sys.exit(serve_collectives())
    if sys.argv[1] == "to-target":
        from neuralcost_worker.to_target import serve as serve_to_target

        sys.exit(serve_to_target())
    sys.exit(serve(sys.argv[1]))
