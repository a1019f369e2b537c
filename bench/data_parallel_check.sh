#!/usr/bin/env bash
# Issue 26's measured checks: real DDP and FSDP training steps (2 local processes, gloo) of cnn and
# transformer, real tensor-parallel steps (Megatron's split, 2 ranks) of the built-in 4-layer Llama
# at two sizes, and real 1F1B pipeline steps of it over 2 stages with 4 and 8 micro-batches, against
# the prediction from this machine's calibrated link.
#
#   bash bench/data_parallel_check.sh [SPEC.json]
#
# Without a spec it calibrates first (`hardware calibrate --collectives --ranks 2 --max-bytes 16MiB`,
# about a minute). Then `profile --train --data-parallel 2` for each model and mode (7 rounds of 3
# steps with and 3 without communication; about 15 s each), then `profile --train --tensor-parallel 2`
# at batch 4 × 128 and 8 × 256 tokens, without and with --sequence-parallel (about 10 and 40 s each),
# then `profile --train --pipeline-parallel 2`
# with 4 and 8 micro-batches of 4 × 128 (about 25 and 45 s). Prints, per case, the measured step
# and link time (median of round medians, 95 % interval), the predicted ones and the errors.
# Run it on a quiet machine: the 2 ranks take both vCPUs of this VM.
set -euo pipefail
cd "$(dirname "$0")/.."
nc=./build/tools/neural-cost/neural-cost
[ -x "$nc" ] || { echo "error: $nc is not built (bash scripts/build.sh)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
spec=${1:-}
if [ -z "$spec" ]; then
  spec=$out/link.json
  "$nc" hardware calibrate --collectives --ranks 2 --max-bytes 16MiB --spec-output "$spec" --format json \
    -o "$out/calibration.json"
fi
for model in cnn transformer; do
  for mode in ddp fsdp; do
    "$nc" profile --train --data-parallel 2 --model "$model" --batch 32 --zero "$mode" --link "$spec" \
      --format json -o "$out/$model-$mode.json"
  done
done
"$nc" profile --train --tensor-parallel 2 --batch 4 --prompt 128 --link "$spec" --format json -o "$out/tp-4x128.json"
"$nc" profile --train --tensor-parallel 2 --batch 8 --prompt 256 --link "$spec" --format json -o "$out/tp-8x256.json"
"$nc" profile --train --tensor-parallel 2 --sequence-parallel --batch 4 --prompt 128 --link "$spec" --format json \
  -o "$out/tpsp-4x128.json"
"$nc" profile --train --tensor-parallel 2 --sequence-parallel --batch 8 --prompt 256 --link "$spec" --format json \
  -o "$out/tpsp-8x256.json"
for m in 4 8; do
  "$nc" profile --train --pipeline-parallel 2 --micro-batches "$m" --link "$spec" --format json -o "$out/pp-m$m.json"
done
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
ms = lambda s: f"{1e3 * s:.2f}"
print(f"{'case':18} {'step ms [95%]':>26} {'pred':>7} {'err':>7}   {'link ms [95%]':>24} {'pred':>6} {'err':>7} "
      f"{'compute':>8} {'skew':>6}")
cases = [(f"{m} {mode}", f"{m}-{mode}") for m in ("cnn", "transformer") for mode in ("ddp", "fsdp")]
cases += [("llama tp b4x128", "tp-4x128"), ("llama tp b8x256", "tp-8x256")]
cases += [("llama tp+sp b4x128", "tpsp-4x128"), ("llama tp+sp b8x256", "tpsp-8x256")]
for name, file in cases:
    j = json.load(open(f"{d}/{file}.json"))
    s, l = j["step_seconds"], j["link_seconds"]
    print(f"{name:18} {ms(s['median']):>8} [{ms(s['ci95'][0])}, {ms(s['ci95'][1])}] "
          f"{ms(j['predicted_step_seconds']):>7} {100 * j['step_error']:+6.1f}%   "
          f"{ms(l['median']):>7} [{ms(l['ci95'][0])}, {ms(l['ci95'][1])}] {ms(j['predicted_link_seconds']):>6} "
          f"{100 * j['link_error']:+6.1f}% {ms(j['compute_seconds']['median']):>8} {ms(j['wait_seconds']['median']):>6}")
print(f"\n{'pipeline (2 stages)':18} {'step ms [95%]':>26} {'pred':>7} {'err':>7}   {'bubble+transfers ms [95%]':>26} "
      f"{'pred':>6} {'err':>7}   stages alone ms")
for m in (4, 8):
    j = json.load(open(f"{d}/pp-m{m}.json"))
    s, o = j["step_seconds"], j["overhead_seconds"]
    alone = ", ".join(ms(st["passes_seconds"]["median"]) for st in j["per_stage"])
    print(f"{'llama pp m=' + str(m):18} {ms(s['median']):>8} [{ms(s['ci95'][0])}, {ms(s['ci95'][1])}] "
          f"{ms(j['predicted_step_seconds']):>7} {100 * j['step_error']:+6.1f}%   "
          f"{ms(o['median']):>8} [{ms(o['ci95'][0])}, {ms(o['ci95'][1])}] {ms(j['predicted_overhead_seconds']):>6} "
          f"{100 * j['overhead_error']:+6.1f}%   {alone}")
PY
