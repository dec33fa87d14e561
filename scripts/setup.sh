#!/usr/bin/env bash
# Create .venv with acode, its test dependencies and the dev tools scripts/check.sh runs
# (ruff, mypy and its stub packages). Needs only Python 3.11+.
# Re-running is cheap: it reinstalls only when pyproject.toml changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      python_bin="$candidate"
      break
    fi
  done
fi
if [ -z "$python_bin" ]; then
  echo "acode needs Python 3.11 or newer; none found on PATH (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  if ! "$python_bin" -m venv .venv; then
    rm -rf .venv
    echo "could not create .venv with $python_bin -m venv; on Debian or Ubuntu install the" >&2
    echo "python3-venv package (sudo apt install python3-venv), then run this again" >&2
    exit 1
  fi
fi
stamp=.venv/.acode-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test,dev]"
  touch "$stamp"
fi
