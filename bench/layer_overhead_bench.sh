#!/usr/bin/env bash
# Per-layer timing overhead (issue 16 item 4) for the five reference networks in LibTorch eager
# and the torch worker's eager mode (its compiled per-op timer, and its Python dispatch mode):
# median profiled pass / median plain pass - 1, over passes interleaved one to one (target: at
# most 3%), and the observer's cost per top-level op:
# (profiled - plain) / ops per pass. Prints the 1-minute load average before each run: a figure
# taken while the load is above the CPU count is noise, not a reference.
# With --train (issue 14): profiled training steps against plain ones, "ops" being the step's
# rows (a forward and a backward per layer, the loss, the optimizer).
# Usage: bench/layer_overhead_bench.sh [BIN] [extra neural-cost profile options]
#   BIN: the neural-cost binary (default ./build/tools/neural-cost/neural-cost)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-./build/tools/neural-cost/neural-cost}
[ $# -gt 0 ] && shift
[ -x "$bin" ] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
report=$(mktemp)
trap 'rm -f "$report"' EXIT
cat > "$report" <<'PY'
import json, sys
backend, model, load = sys.argv[1:4]
try:
    r = json.loads(sys.stdin.read())["runs"][0]
except Exception as e:
    print(f"{backend:10} {model:12} no result ({e})")
    sys.exit()
if r["failed"] or not r["layers"]:
    why = r.get("error") or "no layers: " + "; ".join(r["warnings"])
    print(f"{backend:10} {model:12} {why}")
    sys.exit()
pass_s, over, ops = r["profiled_pass_seconds"], r["profiling_overhead"], len(r["layers"])
plain = pass_s / (1 + over)
median = r["timing"]["median_seconds"]
print(f"{backend:10} {model:12} {median*1e6:7.1f}us {plain*1e6:8.1f}us {over*100:8.2f}% {ops:6d} "
      f"{(pass_s - plain) / ops * 1e9:9.0f}  {load}")
PY
echo "CPUs: $(nproc); binary: $bin"
printf '%-10s %-12s %9s %10s %9s %6s %9s  %s\n' backend model median "plain" overhead ops "ns/op" "load (1 min) before"
# torch-mode: the torch worker with its compiled per-op timer off (NEURALCOST_TORCH_TIMER=off), timed
# by its Python dispatch mode as before issue 16's observer
for backend in libtorch torch torch-mode; do
  for model in ff cnn rnn lstm transformer; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    timer=${NEURALCOST_TORCH_TIMER:-}
    [ "$backend" = torch-mode ] && timer=off
    out=$(NEURALCOST_TORCH_TIMER=$timer "$bin" profile "$model" --backend "${backend%-mode}" --batch 32 \
            --layer-runs 200 --budget 1 --format json "$@" 2>/dev/null || true)
    /usr/bin/python3 "$report" "$backend" "$model" "$load" <<< "$out"
  done
done
echo "load (1, 5, 15 min) after: $(cut -d' ' -f1-3 /proc/loadavg)"
