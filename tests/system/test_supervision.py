"""Supervision with real processes: start-up crash loops, hung actors, restarts of the whole set."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import msgspec
import psutil
import pytest
import zmq

from actors.coordinator.orchestrator import REQUIRED_WAIT_S
from actors.paths import RunPaths
from actors.stages.actor import FAULT_LOST_WRITE
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


def test_children_die_with_a_killed_coordinator_and_the_next_up_carries_on(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    status = acode.status()
    pids = [a["pid"] for a in status["actors"]]
    os.kill(status["pid"], signal.SIGKILL)  # no chance to stop anyone: PR_SET_PDEATHSIG must

    def all_gone() -> bool:
        alive = []
        for pid in pids:
            try:
                alive.append(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
            except psutil.NoSuchProcess:
                continue
        return not any(alive)

    wait_until(all_gone, timeout=10, what="every child of the killed coordinator gone")
    assert acode.up().returncode == 0  # the lock died with it; the stale pid file is ignored
    workspace = w.workspace(tmp_path / "w")
    run = acode("run", w.TASK, "--workspace", str(workspace), "--provider", "scripted", "--script",
                str(w.script(tmp_path / "s.yaml", w.workload())))
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_timed_out_attempt_is_cancelled_in_the_stage_actor_and_never_counts(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", w.workload({"planner": 2.0}))
    run = acode("run", w.TASK, "--workspace", str(workspace), "--provider", "scripted", "--script", str(script),
                "--stage-timeout", "1.5")
    # Each attempt times out at 1.5 s, before the 2 s model answers; the coordinator tells the
    # planner to stop (CancelWork), so no attempt waits out its model and none is accepted.
    assert run.returncode == 20, run.stdout + run.stderr
    assert "[PLANNER]   retrying, attempt 2: planner timed out after 1.5s" in run.stdout
    session_id = run.stdout.split("session ", 1)[1].split(":", 1)[0]
    events = json.loads(acode("show", session_id, "--json").stdout)["events"]
    assert [e for e in events if e["type"] == "stage_finished"] == []
    planner_log = [json.loads(line) for line in (acode.home / "run" / "logs" / "planner.log").read_text().splitlines()]
    cancelled = [e for e in planner_log if e.get("event") == "stage_cancelled"]
    assert len(cancelled) == 3 and all(e["reason"] == "the stage timed out" for e in cancelled)
    finished = [e for e in planner_log if e.get("event") == "stage_finished"]
    assert [(f["attempt"], f["ok"], f["duration_ms"] < 1_950) for f in finished] == [
        (1, False, True), (2, False, True), (3, False, True)]


def test_garbage_on_the_supervision_socket_does_not_disturb_the_coordinator(acode: Acode) -> None:
    acode.up()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)
    try:
        sock.connect(f"ipc://{RunPaths(acode.home).sock_dir / 'supervisor.ipc'}")
        for i in range(100):
            sock.send_multipart([os.urandom(i % 40)])
        sock.send(msgspec.msgpack.encode({"type": "heartbeat", "instance": "planner", "pid": 1, "epoch": 1}))
    finally:
        sock.close()
        ctx.term()
    wait_until(lambda: '"heartbeat_rejected"' in (acode.home / "run/logs/coordinator.log").read_text(),
               what="garbage logged")
    status = acode.status()
    assert all(a["state"] == "ready" for a in status["actors"])
    assert acode.actor("planner")["restarts"] == 0


def test_a_result_whose_last_write_never_lands_is_a_lost_attempt_and_the_session_goes_on(
        home: Path, tmp_path: Path) -> None:
    # The verifier's first result names a write that never comes (the drill stands for a
    # stage killed between handing its last write to its writer thread and the write
    # leaving): the coordinator's transition is refused until it lands, so after
    # REQUIRED_WAIT_S the attempt counts as lost, attempt 2 runs, and the session completes.
    acode = Acode(home, {FAULT_LOST_WRITE: "verifier"})
    try:
        acode.up()
        workspace = w.workspace(tmp_path / "w")
        script = w.script(tmp_path / "s.yaml", w.workload())
        run = acode("run", w.TASK, "--workspace", str(workspace), "--provider", "scripted", "--script", str(script))
        assert run.returncode == 0, run.stdout + run.stderr
        session_id = run.stdout.split("session ", 1)[1].split(":", 1)[0]
        events = json.loads(acode("show", session_id, "--json").stdout)["events"]
        verifier = [e["attempt"] for e in events if e["type"] == "stage_finished" and e["stage"] == "verifier"]
        assert verifier == [2]  # the first attempt's result was never acted on
        log = [json.loads(line) for line in (home / "run" / "logs" / "coordinator.log").read_text().splitlines()]
        missing = [e for e in log if e.get("event") == "stage_writes_missing"]
        assert len(missing) == 1 and missing[0]["session_id"] == session_id
        assert missing[0]["waited_s"] >= REQUIRED_WAIT_S
    finally:
        acode.close()
