#!/usr/bin/env bash
# Set up .venv (first run only) and run `acode demo`: the shipped example, end to end.
# Uses a private acode home under /tmp unless ACODE_HOME is set, so it never touches ~/.acode.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
export ACODE_HOME="${ACODE_HOME:-${TMPDIR:-/tmp}/acode-demo-home}"
exec "$root/.venv/bin/acode" demo "$@"
