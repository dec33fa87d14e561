"""Supervision with real processes: start-up crash loops, hung actors, restarts of the whole set."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import Acode

pytestmark = pytest.mark.system


def test_an_actor_crashing_at_start_up_is_failed_after_its_restart_intensity_and_its_session_pauses(
        home: Path, tmp_path: Path) -> None:
    acode = Acode(home, env={"ACODE_FAULT_CRASH_ON_START": "reviewer",
                             "ACODE_SUPERVISION__RESTART_INTENSITY": "3"})
    try:
        up = acode.up()
        assert up.returncode == 1
        assert "acode is running DEGRADED: reviewer: exit code 3 4 times in 30s, past the restart intensity " \
               "of 3" in up.stderr
        assert "crashing at start-up as ACODE_FAULT_CRASH_ON_START asks" in up.stderr
        reviewer = acode.actor("reviewer")
        assert reviewer["state"] == "failed" and reviewer["restarts"] == 3 and reviewer["pid"] is None
        assert acode.status()["degraded"] is True
        status_text = acode("status").stdout
        assert "acode DEGRADED" in status_text and "reviewer failed: exit code 3" in status_text

        workspace = w.workspace(tmp_path / "w")
        run = acode("run", w.TASK, "--workspace", str(workspace), "--provider", "scripted", "--script",
                    str(w.script(tmp_path / "s.yaml", w.workload())))

        assert run.returncode == 22, run.stdout + run.stderr
        assert "paused (actor_failed): actor reviewer failed" in run.stdout and "(ACODE-SUP-001)" in run.stdout
        assert (workspace / "b.txt").read_text() == "beta\n"  # the stages before the reviewer did their work
    finally:
        acode.close()


def test_a_hung_actor_is_killed_by_missed_heartbeats_and_restarted(acode: Acode) -> None:
    acode.up()
    before = acode.actor("verifier")
    os.kill(before["pid"], signal.SIGSTOP)  # alive but silent: only heartbeats can tell
    after = acode.wait_restarted("verifier", before["epoch"], timeout=15)
    assert after["pid"] != before["pid"] and after["restarts"] == 1


def test_sessions_interrupted_by_acode_down_resume_at_the_next_acode_up(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", w.workload({"executor": 3.0}))
    session_id = acode("run", w.TASK, "--workspace", str(workspace), "--provider", "scripted", "--script",
                       str(script), "--detach").stdout.strip()
    acode.wait_busy("executor")
    assert acode("down").returncode == 0
    assert acode.status_or_none() is None
    assert acode.up().returncode == 0

    def finished() -> dict | None:  # type: ignore[type-arg]
        shown = json.loads(acode("show", session_id, "--json").stdout)
        return shown if shown["session"]["status"] != "running" else None

    shown = wait_until(finished, timeout=60, interval=0.5, what="recovered session finished")
    assert shown["session"]["status"] == "completed"
    assert (workspace / "log.txt").read_text() == "ran\n"
    reasons = [e["reason"] for e in shown["events"] if e["type"] == "stage_retried"]
    assert reasons == ["recovered after a coordinator restart"]
