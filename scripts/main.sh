#!/usr/bin/env bash
# The main job: install, build, and analyze the five reference networks on the built-in default
# hardware (h100-sxm, batch 32, fp32). Extra arguments go to `neural-cost analyze`.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
bash scripts/build.sh > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
exec ./build/tools/neural-cost/neural-cost analyze "$@"
