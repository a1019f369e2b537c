#!/usr/bin/env bash
# The A/A test of the measurements (issue 23): the main job's default study twice, back to back,
# with the same binary and command, then `compare` of the two and the figures that say whether
# the statistics are honest (bench/aa_analyze.py): cells the A/A compare flags (at most 7 of 80
# is the 95th percentile of 80 tests at alpha 0.05), how often the rerun's estimate lies in the
# first run's 95% interval, whether the report's winners agree, interval half-widths and the
# paired speedups' intervals. With AB=1 a third study follows with a known change, the torch
# worker's passes 10% slower (the faulty test worker's slow-at-build fault): compare must flag
# torch's cells and not the others, and the CI gate (--fail-if-slower 5%) fails on it and passes on
# the A/A.
#
#   bash bench/aa_bench.sh [OUTDIR]      (AB=1 for the known change; STUDY="..." to override the study)
#
# Run it on an otherwise idle machine: it is the machine's noise that it measures. It does not
# build (scripts/build.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
nc=./build/tools/neural-cost/neural-cost
[ -x "$nc" ] || { echo "error: $nc is not built (bash scripts/build.sh)" >&2; exit 1; }
out="${1:-results/aa-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# the main job's study (scripts/main.sh)
study=${STUDY:-"--model ff,cnn,rnn,lstm,transformer --backend libtorch,jax,tensorflow,torch --mode eager,compiled --batch 1,32 --budget 1 --layer-runs 5 --threads 1 --time-limit 540"}
echo "aa_bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
run_study() {  # NAME [ENV...]
  local name=$1; shift
  rm -f "$out/$name.jsonl"
  local t0=$SECONDS
  env "$@" "$nc" study $study -o "$out/$name.jsonl" 2> "$out/$name.log" || { tail -5 "$out/$name.log"; exit 1; }
  echo "aa_bench: study $name took $((SECONDS - t0)) s (load after: $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "$((SECONDS - t0))" > "$out/$name.seconds"
  "$nc" report "$out/$name.jsonl" --format md -o "$out/$name.md" 2>/dev/null
}
run_study a
run_study b
"$nc" compare "$out/a.jsonl" "$out/b.jsonl" --format json -o "$out/aa.json"
set +e
"$nc" compare "$out/a.jsonl" "$out/b.jsonl" --fail-if-slower 5% > /dev/null 2> "$out/aa-gate.err"
echo "aa_bench: the CI gate on the A/A (--fail-if-slower 5%) exits $? (0: passes)"
set -e
args=("$out/a.jsonl" "$out/b.jsonl" "$out/aa.json" "$out/a.md" "$out/b.md")
if [ "${AB:-0}" = 1 ]; then
  run_study c NEURALCOST_WORKER_DIR="$PWD/tests/workers/faulty" NEURALCOST_REAL_WORKER_DIR="$PWD/python" \
    NEURALCOST_FAULT=slow-at-build NEURALCOST_FAULT_FRAMEWORK=torch NEURALCOST_FAULT_SLOWDOWN=0.10
  "$nc" compare "$out/b.jsonl" "$out/c.jsonl" --format json -o "$out/ab.json"
  set +e
  "$nc" compare "$out/b.jsonl" "$out/c.jsonl" --fail-if-slower 5% > /dev/null 2> "$out/ab-gate.err"
  echo "aa_bench: the CI gate on the A/B (torch 10% slower) exits $? (1: fails, as it must): $(head -c 300 "$out/ab-gate.err")"
  set -e
  args+=(--ab "$out/ab.json" --slowed torch)
fi
python3 bench/aa_analyze.py "${args[@]}"
# where the A/A's variance lives, level by level, and what two other estimators would print
python3 bench/aa_components.py "$out/a.jsonl" "$out/b.jsonl"
