#!/usr/bin/env bash
# Makes the project's Python environment for the framework workers: .venv at the repository
# root, from Debian's python3 and python3-venv, with the pinned frameworks of
# python/requirements.txt from PyPI (about 5 GB: PyPI's torch wheel brings CUDA libraries).
# Does nothing when .venv already has exactly those versions.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${NEURALCOST_VENV:-$root/.venv}"
req="$root/python/requirements.txt"
stamp="$venv/.neuralcost-requirements"
if [[ -x "$venv/bin/python3" && -f "$stamp" ]] && cmp -s "$req" "$stamp"; then
  exit 0
fi
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  echo "python-env: Debian's python3-venv is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
echo "python-env: making $venv with $(grep -v '^#' "$req" | tr '\n' ' ')" >&2
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --progress-bar off --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
