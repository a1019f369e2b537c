#!/usr/bin/env bash
# Builds the ONNX importer's libFuzzer target with clang (ASan + UBSan, LibTorch off) in
# BUILD_DIR and fuzzes it, seeded with the test fixtures and 60 models of ONNX's node-test
# corpus (copied into a fresh corpus folder every time). Exit status non-zero when the fuzzer
# finds a crash, leak or sanitizer report; the reproducer is left in BUILD_DIR/artifacts/.
#
# Usage: tests/fuzz/run_fuzz.sh BUILD_DIR RUNS [SEED_DIR...]     RUNS inputs from random seed 1
#                                                                 (what CTest runs: about 40 s)
#        tests/fuzz/run_fuzz.sh BUILD_DIR 300s [SEED_DIR...]     explore for 300 seconds
# A seeded run is not fully reproducible (coverage feedback varies between runs), so a CTest
# run can still meet a new bug: run the timed form to look for them, and add what it finds to
# the fixtures.
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build=$1 budget=$2
shift 2
command -v clang++ >/dev/null || { echo "run_fuzz.sh: clang++ is missing (bash scripts/install-deps.sh)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNEURALCOST_FUZZ=ON -DNEURALCOST_WITH_LIBTORCH=OFF -DNEURALCOST_BUILD_TESTS=OFF \
  -DNEURALCOST_BUILD_BENCHMARKS=OFF > "$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
build=$(cd "$build" && pwd)
cmake --build "$build" --target onnx_import_fuzz > "$build.build.log" 2>&1 || { tail -40 "$build.build.log" >&2; exit 1; }
corpus="$build/corpus"
rm -rf "$corpus"
mkdir -p "$corpus" "$build/artifacts"
for dir in "$@"; do
  find "$dir" -maxdepth 1 -name '*.onnx' -size -64k -exec cp {} "$corpus/" \;
done
testdata=/usr/share/libonnx-testdata/data/node
if [ -d "$testdata" ]; then
  find "$testdata" -name model.onnx | sort | awk 'NR % 15 == 1' | head -60 | while read -r f; do
    cp "$f" "$corpus/$(basename "$(dirname "$f")").onnx"
  done
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if [[ "$budget" == *s ]]; then
  limits=(-max_total_time="${budget%s}")
else
  limits=(-runs="$budget" -seed=1 -max_total_time=600)
fi
cd "$build"  # the target writes its input file here
"$build/tests/fuzz/onnx_import_fuzz" "$corpus" "${limits[@]}" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/" 2>&1 | tail -40
