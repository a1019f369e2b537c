#!/usr/bin/env bash
# Benchmarks of the timing contract on the five reference networks (LibTorch, eager and
# compiled, batch 32 by default):
#  - per-layer profiling overhead: median profiled pass / median plain pass - 1, over passes
#    interleaved one to one (target: at most 3%);
#  - how long the contract takes to reach its CI target: warm-up and sampling seconds, samples,
#    and whether the target was reached within the budget.
# Usage: bench/profile_bench.sh [extra neural-cost profile options]
# OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are left as the environment sets them; to measure without
# them, unset both for this command only: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bench/profile_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/tools/neural-cost/neural-cost
[ -x "$bin" ] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
out=$(mktemp)
"$bin" profile --mode eager,compiled --batch 32 --layer-runs 100 --budget 5 --target-ci 0.02 --format json "$@" > "$out" || true
/usr/bin/python3 - "$out" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
print(f"{'model':12} {'mode':9} {'median':>10} {'overhead':>9} {'warm-up s':>9} {'sampling s':>10} {'samples':>7} {'CI width':>8}  target  verdict")
for r in runs:
    if r["failed"]:
        print(f"{r['model']:12} {r['mode']:9} failed: {r['error']}")
        continue
    t = r["timing"]
    width = (t["ci95_high_seconds"] - t["ci95_low_seconds"]) / t["median_seconds"]
    print(f"{r['model']:12} {r['mode']:9} {t['median_seconds']*1e3:8.3f}ms {r['profiling_overhead']*100:8.1f}% "
          f"{t['warmup_seconds']:9.2f} {t['sampling_seconds']:10.2f} {t['samples']:7d} {width*100:7.2f}%  "
          f"{'yes' if t['reached_target'] else 'no':6}  {t['verdict']}")
PY
rm -f "$out"
