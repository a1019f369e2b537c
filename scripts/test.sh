#!/usr/bin/env bash
# Installs, builds and runs every test (unit, CLI, schema, install/find_package) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
