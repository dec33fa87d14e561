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
# Bytecode for acode's packages before anything starts, as an installed acode has it: a system
# test starts dozens of Python processes (CLI commands, coordinator, actors), and where
# PYTHONDONTWRITEBYTECODE is set (CI sandboxes often set it) each would compile every module
# it imports from source, at every start (a fifth of a system test's time on 2 cores).
.venv/bin/python -m compileall -q actors broker cli protocol scripts tests >/dev/null
workers="${ACODE_TEST_WORKERS:-3}"
for arg in "$@"; do
  case "$arg" in -n|-n*|--numprocesses*) workers=0 ;; esac
done
if [ "$workers" != 0 ]; then
  set -- -n "$workers" --dist loadfile "$@"
fi
exec .venv/bin/python -m pytest "$@"
