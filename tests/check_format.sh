#!/usr/bin/env bash
# The `format` test: every C++ file as clang-format 14 writes it (.clang-format) and every Python
# file as ruff formats and lints it (ruff.toml). A file that differs fails the test, naming it; run
#   clang-format-14 -i FILE        .venv/bin/ruff format . && .venv/bin/ruff check .
# to fix. Usage: bash tests/check_format.sh PYTHON (the interpreter whose environment has ruff).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
python=${1:?usage: check_format.sh PYTHON}
clang_format=$(command -v clang-format-14 || true)
if [ -z "$clang_format" ]; then
  echo "check_format: clang-format-14 is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t cpp < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
else
  mapfile -t cpp < <(find src include tools tests bench python -name build -prune -o \
    \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print)
fi
status=0
log=$(mktemp)
if ! "$clang_format" --dry-run --Werror "${cpp[@]}" 2> "$log"; then
  grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$log" | cut -d: -f1 | sort -u |
    sed 's/^/check_format: not as clang-format-14 writes it: /'
  status=1
fi
rm -f "$log"
"$python" -m ruff format --check . || status=1
"$python" -m ruff check . || status=1
if [ $status -eq 0 ]; then echo "check_format: ${#cpp[@]} C++ files and the Python files are formatted"; fi
exit $status
