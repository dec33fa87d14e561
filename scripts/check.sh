#!/usr/bin/env bash
# Every check CI runs, in its order: ruff (lint), mypy (types, strict), the imports (no
# circle, no import from a lower layer to a higher one: tests/test_layers.py, read with ast),
# then the whole test suite through scripts/test.sh. Extra arguments go to pytest; --no-tests
# stops after the static checks (seconds, not minutes). Sets up .venv first, as
# scripts/test.sh does.
#
# Formatting is not checked: the code predates `ruff format` and keeps its own layout
# (reformatting all of it would collide with every change in flight).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"

tests=1
if [ "${1:-}" = "--no-tests" ]; then
  tests=0
  shift
fi

failed() {
  echo >&2
  echo "check failed: $1" >&2
  echo "run it locally: $2" >&2
  exit 1
}

echo "== ruff check"
.venv/bin/ruff check . \
  || failed "ruff found the lint errors above" ".venv/bin/ruff check .   (safe fixes: .venv/bin/ruff check --fix .)"
echo "== mypy (strict; settings in pyproject.toml)"
.venv/bin/mypy \
  || failed "mypy found the type errors above" ".venv/bin/mypy   (or scripts/check.sh --no-tests for the static checks)"
echo "== imports (circles and layers)"
.venv/bin/python -m pytest -q -p no:xdist -p no:cacheprovider tests/test_layers.py \
  || failed "an import closes a circle or reaches up a layer (above)" \
            ".venv/bin/python -m pytest -p no:xdist tests/test_layers.py   (the layers: LAYERS in that file)"

if [ "$tests" = 1 ]; then
  echo "== tests"
  exec scripts/test.sh "$@"
fi
