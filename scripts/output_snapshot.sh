#!/usr/bin/env bash
# Writes the JSON outputs of neural-cost on fixed inputs into OUT_DIR, for a before/after check of
# a change that must not change behaviour (a refactor, a reformat):
#   bash scripts/output_snapshot.sh BINARY OUT_DIR
#   diff -r BEFORE_DIR AFTER_DIR        # empty: no output changed
# What is deterministic is kept whole: analyze (the reference networks, decoders, training,
# parallel steps, serving), hardware, report/cost/compare of the checked-in results files. Of
# profile only the counted half is kept (model, backend, batch, ops, FLOPs and bytes per layer):
# its timings differ from run to run by design. Everything runs on the spec files of tests/inputs,
# never on this machine's calibration.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bash scripts/output_snapshot.sh BINARY OUT_DIR" >&2
  exit 2
fi
bin=$(realpath "$1")
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
spec=$root/tests/inputs/good/test_cpu_2core.json
results=$root/tests/inputs/results
mkdir -p "$out"

run() {  # NAME ARGS...: the JSON of one command, or its error line and exit code
  local name=$1
  shift
  local rc=0 file=$out/$name.json
  case $name in *_md) file=$out/$name.md ;; esac
  "$bin" "$@" > "$file" 2> "$out/$name.err" || rc=$?
  if [ "$rc" -ne 0 ]; then echo "exit $rc" >> "$out/$name.err"; fi
}

run analyze_default analyze --format json
run analyze_all_h100 analyze ff,cnn,rnn,lstm,transformer --batch 1,32 --hardware h100-sxm --format json
run analyze_cnn_spec analyze cnn --hardware "$spec" --format json
run analyze_train analyze transformer --train --hardware a100-sxm-80gb --format json
run analyze_llama_prefill analyze llama-3-8b --hardware h100-sxm --format json
run analyze_llama_decode analyze llama-3-8b --phase decode --context 4096 --batch 8 --hardware h100-sxm --format json
run analyze_llama_generate analyze llama-3-8b --phase generate --prompt 512 --generate 64 --format json
run analyze_mixtral analyze mixtral-8x7b --phase decode --batch 4 --format json
run analyze_dp analyze llama-3-8b --train --batch 1 --prompt 4096 --parallel dp=64 --system dgx-h100 --zero zero3 \
  --format json
run analyze_tp analyze llama-3-70b --phase decode --context 4096 --parallel tp=8 --system dgx-h100 --format json
run analyze_serving analyze llama-3-70b --phase decode --context 4096 --memory-budget 80GB --format json
run hardware_list hardware list --format json
run hardware_systems hardware systems --format json
run report_md report "$results/study.json" --format md
run cost cost "$results/after.jsonl" --price-per-hour 3.5 --format json
run compare compare "$results/before.jsonl" "$results/after.jsonl" --format json

# profile: the counted half only
if "$bin" profile --model ff,transformer --backend libtorch,torch,jax,tensorflow --batch 2 --budget 0.05 --hardware "$spec" \
  --format json > "$out/profile.raw" 2> "$out/profile.err"; then
  python3 - "$out/profile.raw" > "$out/profile_counts.json" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
MEASURED = ("measured_seconds", "profiled_seconds", "waste_seconds", "efficiency", "share", "event")


def counted(rows):
    return [{k: v for k, v in row.items() if k not in MEASURED} for row in rows]


keep = [{"model": r["model"], "backend": r["backend"], "mode": r["mode"], "batch": r["batch"],
         "totals": r["totals"], "ops": counted(r["ops"]), "layers": counted(r.get("layers", []))} for r in runs]
json.dump(keep, sys.stdout, indent=1, sort_keys=True)
EOF
fi
rm -f "$out/profile.raw"
echo "output_snapshot: $(ls "$out"/*.json "$out"/*.md | wc -l) outputs in $out"
