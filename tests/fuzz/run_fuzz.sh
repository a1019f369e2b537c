#!/usr/bin/env bash
# Fuzzes a libFuzzer target (ASan + UBSan; built by build_fuzz.sh in BUILD_DIR) from a fresh
# corpus folder: onnx_import (the default) seeded with the given folders' .onnx files and 60
# models of ONNX's node-test corpus; worker_reply (--target worker_reply) seeded with the real
# worker conversations in tests/fuzz/worker_reply_seeds and the given folders' .jsonl files. Exit status non-zero when the fuzzer finds a crash,
# leak or sanitizer report; the reproducer is left in BUILD_DIR/artifacts/.
#
# Usage: tests/fuzz/run_fuzz.sh [--no-build] [--target onnx_import|worker_reply] BUILD_DIR BUDGET [SEED_DIR...]
#   BUDGET  600s   the campaign: explore for 600 seconds from a random seed (not run by CTest;
#                  run it before a release or after changing the importer, and add what it
#                  finds to the fixtures)
#           2000   2000 inputs from seed 1: what CTest's smoke test `onnx_fuzz_smoke` runs
#   --no-build     use the target already in BUILD_DIR (CTest builds it in the fixture
#                  `onnx_fuzz_build`)
# A seeded run is not fully reproducible (coverage feedback varies between runs), so even the
# smoke test can meet a new bug; the campaign is where they are looked for.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_first=1 target=onnx_import
if [ "${1:-}" = "--no-build" ]; then build_first=0; shift; fi
if [ "${1:-}" = "--target" ]; then target=${2:-}; shift 2; fi
case "$target" in
  onnx_import) seed_pattern='*.onnx' ;;
  worker_reply) seed_pattern='*.jsonl' ;;
  *) echo "error: run_fuzz.sh: unknown target '$target' (onnx_import, worker_reply)" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "error: usage: run_fuzz.sh [--no-build] BUILD_DIR RUNS|SECONDSs [SEED_DIR...]" >&2; exit 2; }
build=$1 budget=$2
shift 2
if [[ "$budget" =~ ^[0-9]+s$ ]]; then
  limits=(-max_total_time="${budget%s}")
elif [[ "$budget" =~ ^[0-9]+$ ]]; then
  limits=(-runs="$budget" -seed=1 -max_total_time=600)
else
  echo "error: run_fuzz.sh: budget '$budget' is neither a number of runs nor seconds (600s)" >&2; exit 2
fi
[ "$build_first" = 1 ] && bash "$here/build_fuzz.sh" "$build"
build=$(cd "$build" && pwd)
[ -x "$build/tests/fuzz/${target}_fuzz" ] || { echo "error: no fuzz target ${target}_fuzz in $build (run tests/fuzz/build_fuzz.sh $build)" >&2; exit 1; }
corpus="$build/corpus-$target-$budget"  # a campaign and a smoke test may run at once
rm -rf "$corpus"
mkdir -p "$corpus" "$build/artifacts"
[ "$target" = worker_reply ] && set -- "$here/worker_reply_seeds" "$@"
for dir in "$@"; do
  find "$dir" -maxdepth 1 -name "$seed_pattern" -size -64k -exec cp {} "$corpus/" \;
done
testdata=/usr/share/libonnx-testdata/data/node
if [ "$target" = onnx_import ] && [ -d "$testdata" ]; then
  find "$testdata" -name model.onnx | sort | awk 'NR % 15 == 1' | head -60 | while read -r f; do
    cp "$f" "$corpus/$(basename "$(dirname "$f")").onnx"
  done
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$build"  # the target writes its input file here
"$build/tests/fuzz/${target}_fuzz" "$corpus" "${limits[@]}" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/${target}-" 2>&1 | tail -40
