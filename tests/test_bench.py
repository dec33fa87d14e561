"""scripts/bench.py keeps working: a group that starts no actors runs and prints its JSON,
and an unknown group is refused with the list of groups."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scripts" / "bench.py"


def test_the_context_group_prints_its_figures_with_the_load() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--only", "context", "--context-runs", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=110, check=True)
    result = json.loads(done.stdout)
    assert result["groups"] == ["context"]
    figures = result["context"]["context_prep_ms"]
    assert figures["files"] == 2_000 and figures["runs"] == 1 and figures["p50"] > 0
    assert set(result["context"]["loadavg"]) == {"before", "after"}
    assert {"cpus", "cpu", "python"} <= set(result["machine"])


def test_an_unknown_group_is_refused_with_the_groups_there_are() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--only", "w1,nope"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "unknown group(s) nope; choose from w1, memory, concurrency" in done.stderr
