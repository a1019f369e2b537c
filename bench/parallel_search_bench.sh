#!/usr/bin/env bash
# Issue 26's search-speed figures.
#  1. `analyze --train --parallel dp=N --search` over every ZeRO stage × per-device batch (1..32) ×
#     checkpoint policy (none, full): 48 configurations, 12 step analyses: Llama-3 8B on 64 H100s
#     and Llama-3.1 405B on 1,024.
#  2. `analyze DECODER --train --search --devices N --global-batch G` over every dp × tp × pp ×
#     micro-batch (1, 2, 4, 8) × recomputation × ZeRO stage (ddp, zero1): the issue's target, a
#     175B model on 1,024 GPUs in under 5 s (Megatron's GPT-3 175B, batch 1,536, on A100s), and
#     Llama-3.1 405B on 2,016 H100s (its 126 layers take pp of 1, 2, 3, 6, 7, 9, 14, 18, ...).
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
for case in "megatron-gpt-175b 1024 1536 dgx-a100 2048" "llama-3.1-405b 2016 2016 dgx-h100 4096"; do
  set -- $case
  out=$(mktemp)
  start=$(date +%s.%N)
  "$nc" analyze "$1" --train --precision bf16-mixed --prompt "$5" --search --devices "$2" --global-batch "$3" \
    --system "$4" --format json -o "$out"
  end=$(date +%s.%N)
  python3 - "$out" "$start" "$end" "$1" "$2" "$4" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
fits = [r for r in rows if r["fit"] == "fits"]
best = fits[0] if fits else None
print(f"parallel_search_bench: {sys.argv[4]} on {sys.argv[5]} devices ({sys.argv[6]}): {len(rows)} layouts in "
      f"{float(sys.argv[3]) - float(sys.argv[2]):.2f} s; {len(fits)} fit"
      + (f"; best {best['layout']}: step {best['step_seconds']:.2f} s, MFU {100 * best['mfu']:.1f}%" if best else ""))
PY
  rm -f "$out"
done
