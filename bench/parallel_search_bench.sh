#!/usr/bin/env bash
# Issue 26's search-speed figure: `analyze --train --parallel dp=N --search` over every ZeRO stage ×
# per-device batch (1..32) × checkpoint policy (none, full): 48 configurations, 12 step analyses.
# Prints the wall time for Llama-3 8B on 64 H100s and Llama-3.1 405B on 1,024 (the issue's target,
# a 175B model's whole dp × tp × pp × ep × ... space on 1,024 GPUs in under 5 s, needs tp and pp,
# which are not in the search yet).
#
#   bash bench/parallel_search_bench.sh      (builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
nc=./build/tools/neural-cost/neural-cost
[ -x "$nc" ] || { echo "error: $nc is not built (bash scripts/build.sh)" >&2; exit 1; }
for case in "llama-3-8b 64" "llama-3.1-405b 1024"; do
  set -- $case
  out=$(mktemp)
  start=$(date +%s.%N)
  "$nc" analyze "$1" --train --precision bf16-mixed --prompt 4096 --parallel "dp=$2" --system dgx-h100 --search \
    --format json -o "$out"
  end=$(date +%s.%N)
  python3 - "$out" "$start" "$end" "$1" "$2" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
fits = sum(1 for r in rows if r["fit"] == "fits")
best = next((r for r in rows if r["fit"] == "fits"), None)
print(f"parallel_search_bench: {sys.argv[4]} on {sys.argv[5]} H100s: {len(rows)} configurations in "
      f"{float(sys.argv[3]) - float(sys.argv[2]):.2f} s; {fits} fit"
      + (f"; best {best['zero_stage']} batch {best['batch_per_device']} {best['checkpoint']}: "
         f"{best['samples_per_second']:.1f} samples/s" if best else ""))
PY
  rm -f "$out"
done
