#!/usr/bin/env bash
# Set up .venv (first run only) and run the whole test suite. Extra arguments go to pytest.
# The suite runs in ACODE_TEST_WORKERS pytest-xdist workers (default 3; 0 runs it in this
# process), a file per worker at a time (--dist loadfile: a module's shared actor set stays in
# one worker). Most of a system test's time is spent waiting for processes, so 3 workers on 2
# cores take less than half the time of one. Naming -n yourself overrides the default.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
workers="${ACODE_TEST_WORKERS:-3}"
for arg in "$@"; do
  case "$arg" in -n|-n*|--numprocesses*) workers=0 ;; esac
done
if [ "$workers" != 0 ]; then
  set -- -n "$workers" --dist loadfile "$@"
fi
exec .venv/bin/python -m pytest "$@"
