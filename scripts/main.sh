#!/usr/bin/env bash
# The main job: install, build, and profile the five reference networks on this machine in
# four frameworks (LibTorch, JAX, TensorFlow, PyTorch 2), eager and compiled, at batch 32, then
# print the summary (latency with its 95% CI, samples/s, FLOP/s, roofline efficiency, limit,
# verdict) and the side-by-side comparison. Arguments, when given, replace these defaults and
# go to `neural-cost profile` (e.g. --model cnn --batch 1,32 --backend jax).
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
bash scripts/build.sh > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
# LibTorch's OpenMP pool and OpenBLAS's own pool take turns: passive waiting stops the idle
# one from spinning on the CPUs the other needs (libgomp reads this at start-up).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
if [ $# -eq 0 ]; then
  set -- --backend libtorch,jax,tensorflow,torch --mode eager,compiled --batch 32 --summary
fi
exec ./build/tools/neural-cost/neural-cost profile "$@"
