#!/usr/bin/env bash
# The main job: install, build, then a study of this machine: the five reference networks in
# four frameworks (LibTorch, JAX, TensorFlow, PyTorch 2), eager and compiled, at batch 1 and 32
# (80 cells, each in 6 or more rounds interleaved with the other configurations of its model and
# batch, within 9 minutes: docs/profiling.md, "Rounds"), into results/study-TIME.jsonl, and the report of it,
# results/report-TIME.html (one offline page: roofline, latency, efficiency, batch scaling,
# compiled speedups, findings). Prints where both are. Arguments, when given, go to
# `neural-cost profile` instead (e.g. --model cnn --batch 1,32 --backend jax).
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
# only what the main job runs (the tool, its plugins, the workers' native parts): not the tests
NEURALCOST_BUILD_TARGET=neuralcost_main_job bash scripts/build.sh > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
# LibTorch's OpenMP pool and OpenBLAS's own pool take turns: passive waiting stops the idle
# one from spinning on the CPUs the other needs (libgomp reads this at start-up).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
nc=./build/tools/neural-cost/neural-cost
if [ $# -gt 0 ]; then
  exec "$nc" profile "$@"
fi
mkdir -p results
stamp=$(date +%Y%m%d-%H%M%S)
results="results/study-$stamp.jsonl"
report="results/report-$stamp.html"
# One intra-op thread in every framework: the same contract for all four, and on a VM with few
# CPUs two threads' wake-ups split a cell's rounds into modes 0.5-1.5x apart (docs/profiling.md §2a).
"$nc" study --model ff,cnn,rnn,lstm,transformer --backend libtorch,jax,tensorflow,torch --mode eager,compiled \
  --batch 1,32 --budget 1 --layer-runs 5 --threads 1 --time-limit 540 -o "$results"
"$nc" report "$results" -o "$report"
echo "results: $results"
echo "report:  $report (open it in a browser; it works offline)"
