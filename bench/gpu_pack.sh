#!/usr/bin/env bash
# Packs a built neural-cost for a GPU machine that cannot build it (no compilers' dependencies there,
# no network): bench/gpu_pack.sh [BUILD_DIR [DEST]] installs BUILD_DIR (default build) into DEST
# (default gpu-carry), drops what needs a framework that does not travel (the LibTorch plugin),
# strips debug information, and copies beside it, into DEST/deps, the shared libraries the tool and
# the CUDA plugin link from this machine's Debian (fmt, ONNX, protobuf, OpenMP, ...), leaving out
# the C and C++ runtimes (the GPU machine's newer ones serve) and the NVIDIA driver and CUDA
# libraries, which must be the GPU machine's own. The CUDA runtime and CUPTI of this toolkit go into
# DEST/deps-cuda, a fallback placed after the machine's own on LD_LIBRARY_PATH.
# bench/gpu_check.sh uses DEST when GPU_CHECK_PREBUILT names it, instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dest=${2:-gpu-carry}
[ -x "$build/tools/neural-cost/neural-cost" ] || { echo "error: no built neural-cost in $build" >&2; exit 1; }
[ -f "$build/src/neuralcost/neuralcost_cuda.so" ] || {
  echo "error: $build has no CUDA plugin (neuralcost_cuda.so): configure it with nvcc on PATH" >&2
  exit 1
}
rm -rf "$dest"
cmake --install "$build" --prefix "$dest" > /dev/null
rm -rf "$dest/include" "$dest/lib/cmake"
find "$dest/lib/neuralcost" -maxdepth 1 -name '*libtorch*' -delete
rm -rf "$dest/lib/neuralcost/torch-timer"  # built against this machine's torch; the worker falls back to hooks
find "$dest" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec strip --strip-debug {} +
mkdir -p "$dest/deps" "$dest/deps-cuda"
skip='^(libc|libm|libpthread|libdl|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcupti|libnvidia-ml|libnvperf_host|libnvperf_target)\.so'
for f in "$dest/bin/neural-cost" "$dest"/lib/libneuralcost.so* "$dest/lib/neuralcost/neuralcost_cuda.so"; do
  [ -L "$f" ] && continue
  LD_LIBRARY_PATH="$dest/lib" ldd "$f" | awk '/=> \// { print $1, $3 }'
done | sort -u | while read -r name path; do
  case "$path" in "$PWD/$dest"/* | "$dest"/*) continue ;; esac
  if [[ $name =~ $skip ]]; then
    [[ $name =~ ^lib(cudart|cupti)\.so ]] && cp -L "$path" "$dest/deps-cuda/$name"
    continue
  fi
  cp -L "$path" "$dest/deps/$name"
done
du -sh "$dest"
ls "$dest/deps" "$dest/deps-cuda"
