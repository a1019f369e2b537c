#!/usr/bin/env bash
# Configures and builds neural-cost into build/ (Ninja, RelWithDebInfo, ccache when present);
# everything, or only $NEURALCOST_BUILD_TARGET when set (scripts/main.sh: neuralcost_main_job).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# the Python frameworks of the worker backends (jax, tensorflow, torch), pinned, in .venv
bash scripts/python-env.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
rm -f build-configure.log
cmake --build build --parallel ${NEURALCOST_BUILD_TARGET:+--target "$NEURALCOST_BUILD_TARGET"}
