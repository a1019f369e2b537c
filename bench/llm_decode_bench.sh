#!/usr/bin/env bash
# Issue 25's measured check: the time per output token of a ~100-500 M-parameter decoder on this
# machine, fp32 and bf16, batch 1 and 8, each with its efficiency against the roofline and its
# verdict. The decoder is SmolLM2-135M's published config (data/decoders/smollm2-135m.json), built
# by transformers in the torch worker with random weights; one decode step over a KV cache of
# CONTEXT tokens is the timed pass (docs/llm.md, "Measured"). Prints one line per cell and the
# parameters of the model that ran; writes the runs to llm-decode-<dtype>.json in OUT.
#
#   bash bench/llm_decode_bench.sh [OUT] [CONTEXT]     (defaults /tmp/llm_decode, 512; builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
nc=./build/tools/neural-cost/neural-cost
[ -x "$nc" ] || { echo "error: $nc is not built (bash scripts/build.sh)" >&2; exit 1; }
out=${1:-/tmp/llm_decode}
context=${2:-512}
mkdir -p "$out"
config=data/decoders/smollm2-135m.json
for dtype in fp32 bf16; do
  "$nc" profile "$config" --phase decode --context "$context" --batch 1,8 --dtype "$dtype" --layer-runs 0 \
    -o "$out/llm-decode-$dtype.json"
done
python3 - "$out" "$context" <<'PY'
import json, sys
out, context = sys.argv[1], sys.argv[2]
for dtype in ("fp32", "bf16"):
    for r in json.load(open(f"{out}/llm-decode-{dtype}.json"))["runs"]:
        if r["failed"]:
            print(f"llm_decode_bench: {dtype} batch {r['batch']}: failed: {r['outcome']}")
            continue
        t = r["timing"]
        ms = lambda s: f"{1e3 * s:.1f} ms"
        print(
            f"llm_decode_bench: SmolLM2-135M ({r['totals']['parameter_count']:,} parameters) decode at C {context}, "
            f"{dtype}, batch {r['batch']}: {ms(t['median_seconds'])} per step "
            f"[{ms(t['ci95_low_seconds'])}, {ms(t['ci95_high_seconds'])}], "
            f"{r['batch'] / t['median_seconds']:.1f} tokens/s, efficiency {100 * r['efficiency']:.1f}% "
            f"({r['bound']}-bound), "
            f"verdict {r['outcome']['verdict']}"
        )
PY
