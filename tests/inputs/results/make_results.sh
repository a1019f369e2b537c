#!/usr/bin/env bash
# Regenerates the results fixtures of the report, cost and compare tests with the real CLI
# (the jax and torch workers of .venv; LibTorch not needed):
#   bash tests/inputs/results/make_results.sh build/tools/neural-cost/neural-cost
# study.json: a profile document of ff and cnn in two frameworks, eager and compiled, at batch 1
# and 4, plus a model file that does not exist, whose path holds markup and a script tag (its
# runs fail, and the report must show that path as text). before.jsonl and after.jsonl: ff as
# JSON Lines (a hardware header line, then one run per line: docs/json-schema.md#results-lines),
# measured with 1 and 2 intra-op threads, for compare.
set -euo pipefail
cli=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
common=(--budget 0.2 --layer-runs 3 --format json)
# exit 1: the missing model's runs fail; the document is still written
"$cli" profile --model 'ff,cnn,/nonexistent/<b>bold</b><script>window.ncInjected=1</script>.pt2' --batch 1,4 \
  --backend jax,torch --mode eager,compiled "${common[@]}" --threads 1 -o "$here/study.json" || true
to_lines() {  # profile document -> JSON Lines: {"hardware": ...} then one run per line
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    out.write(json.dumps({"schema_version": 1, "tool": d["tool"], "hardware": d["hardware"]}) + "\n")
    for run in d["runs"]:
        out.write(json.dumps(run) + "\n")' "$1" "$2"
}
for threads in 1 2; do
  name=$([ "$threads" = 1 ] && echo before || echo after)
  "$cli" profile --model ff --batch 1,4 --backend jax,torch --mode eager,compiled "${common[@]}" \
    --threads "$threads" -o "$here/$name.json"
  to_lines "$here/$name.json" "$here/$name.jsonl"
  rm "$here/$name.json"
done
