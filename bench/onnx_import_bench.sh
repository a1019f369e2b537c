#!/usr/bin/env bash
# ONNX import benchmark (issue 4's target: under 100 ms for the ~1,000-node graph without its
# weight payloads). Exports ResNet-50 and an 8-layer transformer encoder (984 nodes at opset
# 13) once, with embedded and with external weights, then reports:
#  - in-process time of import + analysis (google-benchmark, build/bench/onnx_import_bench);
#  - the whole CLI (`neural-cost analyze FILE --dim batch=1`): best and median wall time of 7
#    runs (including about 1 ms to start GNU time) and peak resident memory, with and without
#    --structure-only.
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
/usr/bin/python3 - "$bin" "$dir" <<'PY'
import os, statistics, subprocess, sys, time
import onnx
binary, folder = sys.argv[1], sys.argv[2]
print(f"{'file':30} {'mode':15} {'nodes':>6} {'best ms':>8} {'median ms':>9} {'peak MiB':>8}")
for file in ["resnet50.onnx", "resnet50_external.onnx", "transformer_1k.onnx", "transformer_1k_external.onnx"]:
    path = os.path.join(folder, file)
    nodes = len(onnx.load(path, load_external_data=False).graph.node)
    for mode in ["full", "structure-only"]:
        args = [binary, "analyze", path, "--dim", "batch=1", "-o", os.devnull]
        if mode == "structure-only":
            args.append("--structure-only")
        walls, peaks = [], []
        for _ in range(7):
            # GNU time reports the peak memory (a child of this Python would inherit its high-water mark)
            start = time.perf_counter()
            run = subprocess.run(["/usr/bin/time", "-f", "%M", *args], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            walls.append((time.perf_counter() - start) * 1e3)
            if run.returncode != 0:
                sys.exit(f"{' '.join(args)} failed: {run.stderr}")
            peaks.append(int(run.stderr.split()[-1]) / 1024)
        print(f"{file:30} {mode:15} {nodes:6} {min(walls):8.1f} {statistics.median(walls):9.1f} {max(peaks):8.1f}")
PY
