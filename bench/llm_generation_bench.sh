#!/usr/bin/env bash
# Issue 25's analysis-speed target: Llama-3.1-405B generation (P = 8k, G = 1k) across 20 batch
# sizes analysed in under 1 s. Prints the wall time of the whole command and how many decode
# contexts were analysed to sum the 20 x 1023 steps exactly (the rest are arithmetic series).
#
#   bash bench/llm_generation_bench.sh [HARDWARE]     (default h100-sxm; builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
nc=./build/tools/neural-cost/neural-cost
[ -x "$nc" ] || { echo "error: $nc is not built (bash scripts/build.sh)" >&2; exit 1; }
hw=${1:-h100-sxm}
batches=1,2,3,4,5,6,7,8,12,16,24,32,48,64,96,128,192,256,384,512
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
"$nc" analyze llama-3.1-405b --phase generate --prompt 8192 --generate 1024 --batch "$batches" --hardware "$hw" \
  --format json -o "$out"
end=$(date +%s.%N)
python3 - "$out" "$start" "$end" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
analysed = sum(e["analysed_decode_steps"] for e in d["estimates"])
steps = sum(e["decode_steps"] for e in d["estimates"])
print(f"llm_generation_bench: {len(d['estimates'])} batch sizes of Llama-3.1-405B, P 8192, G 1024: "
      f"{float(sys.argv[3]) - float(sys.argv[2]):.2f} s (target: under 1 s); "
      f"{analysed} of {steps} decode contexts analysed")
PY
