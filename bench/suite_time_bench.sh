#!/usr/bin/env bash
# The test suite's time against an earlier tree's, in one session on one machine (issue 11: "the
# test suite at least 30 % faster on this machine with no coverage lost"; this VM's speed varies
# 2x between sessions, so only runs taken side by side compare). Builds BASE (default f16959f,
# the commit issue 11 was filed at) in a git worktree beside the repository, with this checkout's
# .venv, then runs each tree's whole CTest suite ROUNDS times (default 1), alternating which goes
# first, and prints each run's wall time and the per-test comparison (bench/suite_time_compare.py).
# The load average is printed before and after each run: a figure taken with load above the CPU
# count from anything but the suite itself is noise. Takes ~15 min for the base build (ccache
# cold) plus ~25 min per round on 2 vCPUs.
# Usage: bench/suite_time_bench.sh [BASE] [ROUNDS] [FIRST: base (default) or head, the tree
#        that goes first in odd rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-f16959f}
rounds=${2:-1}
first=${3:-base}
case "$first" in base) second=head ;; head) second=base ;; *) echo "error: FIRST must be base or head" >&2; exit 1 ;; esac
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS must be a positive integer (got '$rounds')" >&2; exit 1; }
[ -x build/tools/neural-cost/neural-cost ] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
[ -x .venv/bin/python3 ] || { echo "no .venv: bash scripts/build.sh makes it" >&2; exit 1; }
rev=$(git rev-parse --short "$base^{commit}" 2>/dev/null) || { echo "error: '$base' is not a commit" >&2; exit 1; }
tree="${TMPDIR:-/tmp}/neuralcost-suite-$rev"
out="${TMPDIR:-/tmp}/neuralcost-suite-runs"
mkdir -p "$out"
if [ ! -d "$tree" ]; then
  git worktree add --detach "$tree" "$rev" >/dev/null
  ln -s "$PWD/.venv" "$tree/.venv"
fi
echo "base $rev in $tree: building"
cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out/base-configure.log" 2>&1 \
  || { cat "$out/base-configure.log"; exit 1; }
cmake --build "$tree/build" --parallel > "$out/base-build.log" 2>&1 || { tail -30 "$out/base-build.log"; exit 1; }
cmake --build build --parallel > "$out/head-build.log" 2>&1 || { tail -30 "$out/head-build.log"; exit 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
run() {  # NAME TREE
  local t0 t1
  t0=$(date +%s.%N)
  echo "$1: start, load $(load)"
  ctest --test-dir "$2/build" --parallel "$(nproc)" --output-junit "$out/$1.xml" > "$out/$1.out" 2>&1 || true
  t1=$(date +%s.%N)
  echo "$1: $(grep -E 'tests passed' "$out/$1.out"), wall $(echo "$t1 - $t0" | bc | cut -d. -f1) s, load after $(load)"
}
base_runs=() head_runs=()
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order="$first $second"; else order="$second $first"; fi
  for side in $order; do
    if [ "$side" = base ]; then run "base$round" "$tree"; base_runs+=("$out/base$round.xml")
    else run "head$round" .; head_runs+=("$out/head$round.xml"); fi
  done
done
join() { local IFS=,; echo "$*"; }
/usr/bin/python3 bench/suite_time_compare.py "$(join "${base_runs[@]}")" "$(join "${head_runs[@]}")"
echo "runs' output and JUnit files: $out; remove the base tree with: git worktree remove --force $tree"
