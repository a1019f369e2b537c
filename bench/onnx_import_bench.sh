#!/usr/bin/env bash
# ONNX import benchmark (issue 4's target: under 100 ms for the ~1,000-node graph without its
# weight payloads). Exports ResNet-50 and an 8-layer transformer encoder (984 nodes at opset
# 13) once, with embedded and with external weights, then reports:
#  - in-process time of import + analysis (google-benchmark, build/bench/onnx_import_bench);
#  - the whole CLI (`neural-cost analyze FILE --dim batch=1`): best and median wall time of 7
#    runs and peak resident memory (GNU time), with and without --structure-only.
# Usage: bench/onnx_import_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/tools/neural-cost/neural-cost
bench=./build/bench/onnx_import_bench
[ -x "$bin" ] && [ -x "$bench" ] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
dir=build/bench/onnx_fixtures
[ -f "$dir/transformer_1k_external.onnx" ] || /usr/bin/python3 tests/onnx/export_torch_fixtures.py "$dir" --bench
"$bench" --fixtures="$dir" --benchmark_min_time=1
echo
printf '%-28s %-16s %7s %10s %10s %9s\n' file mode nodes "best ms" "median ms" "peak MiB"
for file in resnet50.onnx resnet50_external.onnx transformer_1k.onnx transformer_1k_external.onnx; do
  nodes=$(/usr/bin/python3 -c "import onnx,sys; print(len(onnx.load(sys.argv[1], load_external_data=False).graph.node))" "$dir/$file")
  for mode in full structure-only; do
    flag=$([ "$mode" = structure-only ] && echo --structure-only || true)
    samples=()
    for _ in 1 2 3 4 5 6 7; do
      samples+=("$( { /usr/bin/time -f '%e %M' "$bin" analyze "$dir/$file" --dim batch=1 $flag -o /dev/null; } 2>&1 | tail -1)")
    done
    printf '%s\n' "${samples[@]}" | /usr/bin/python3 -c "
import sys, statistics
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
wall = sorted(r[0] * 1e3 for r in rows)
print(f'%-28s %-16s %7s {wall[0]:10.0f} {statistics.median(wall):10.0f} {max(r[1] for r in rows) / 1024:9.1f}' % ('$file', '$mode', '$nodes'))"
  done
done
