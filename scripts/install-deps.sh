#!/usr/bin/env bash
# Installs what neural-cost builds and tests with, from Debian 12 packages. Idempotent: it only
# calls apt-get when a package is missing. Versions are Debian 12's (bookworm):
#   cmake 3.25, ninja 1.11, g++ 12, nlohmann-json 3.11.2, CLI11 2.1.2, fmt 9.1.0,
#   GoogleTest 1.12.1, google-benchmark 1.7.1, python3-jsonschema 4.10 (schema tests),
#   libtorch-dev 1.13.1 (the LibTorch backend) with OpenBLAS (libopenblas0-pthread) as the BLAS
#   that LibTorch's generic libblas.so.3 resolves to: without it Debian falls back to the
#   unoptimised reference BLAS, and every measured matmul would be meaningless;
#   libonnx-dev 1.12 (the ONNX importer), libonnx-testdata (its corpus test), python3-onnx
#   (to generate test fixtures), python3-torch 1.13.1 and python3-torchvision 0.14.1 (to export
#   the validation networks), clang 14 with libclang-rt-14-dev (libFuzzer, for the importer's
#   fuzz target), clang-format-14 (the `format` test), libopenblas-pthread-dev 0.3.21 and
#   libdnnl-dev 2.6.3 (the GEMM ceilings of `hardware calibrate`), libjs-vega 5.22 (Vega's modules, inlined into the HTML report) and
#   chromium (the report's headless-browser test).
set -euo pipefail

packages=(cmake ninja-build g++ ccache pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libbenchmark-dev python3 python3-jsonschema
          libtorch-dev libopenblas0-pthread libonnx-dev libonnx-testdata python3-onnx
          python3-torch python3-venv python3-torchvision clang libclang-rt-14-dev clang-format-14 libopenblas-pthread-dev libdnnl-dev libjs-vega chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
