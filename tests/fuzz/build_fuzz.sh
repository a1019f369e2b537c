#!/usr/bin/env bash
# Configures and builds the libFuzzer targets (the ONNX importer, a worker's replies) with clang in BUILD_DIR: ASan and
# UBSan on every translation unit, LibTorch, tests and benchmarks off. Optimised for fuzzing,
# not for speed of the tool: -O1 with line tables (enough for the sanitizers' stack traces),
# assertions on. Logs go to BUILD_DIR/fuzz-configure.log and BUILD_DIR/fuzz-build.log.
#
# Usage: tests/fuzz/build_fuzz.sh BUILD_DIR
# CTest runs it as the fixture `onnx_fuzz_build` of the smoke test `onnx_fuzz_smoke`;
# tests/fuzz/run_fuzz.sh runs it before a campaign.
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 1 ] || { echo "error: usage: build_fuzz.sh BUILD_DIR" >&2; exit 2; }
build=$1
command -v clang++ >/dev/null || { echo "error: build_fuzz.sh: clang++ is missing (bash scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$build"
build=$(cd "$build" && pwd)
CC=clang CXX=clang++ cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  "-DCMAKE_CXX_FLAGS_FUZZ=-O1 -gline-tables-only" -DNEURALCOST_FUZZ=ON -DNEURALCOST_WITH_LIBTORCH=OFF \
  -DNEURALCOST_BUILD_TESTS=OFF -DNEURALCOST_BUILD_BENCHMARKS=OFF > "$build/fuzz-configure.log" 2>&1 ||
  { tail -40 "$build/fuzz-configure.log" >&2; echo "error: configuring the fuzz build failed ($build/fuzz-configure.log)" >&2; exit 1; }
cmake --build "$build" --target onnx_import_fuzz worker_reply_fuzz > "$build/fuzz-build.log" 2>&1 ||
  { tail -40 "$build/fuzz-build.log" >&2; echo "error: building the fuzz targets failed ($build/fuzz-build.log)" >&2; exit 1; }
