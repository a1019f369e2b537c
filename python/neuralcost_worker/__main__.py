import sys

from neuralcost_worker.protocol import serve

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python -m neuralcost_worker jax|tensorflow|torch\n")
        sys.exit(2)
    sys.exit(serve(sys.argv[1]))
