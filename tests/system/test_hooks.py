"""Hooks as a user sets them up: a script in ``$ACODE_HOME/config.yml`` that hears every
pause (an approval, a plan review, an escalation), and hooks on every point that fire
once per occurrence, in order, while the executor is killed mid-step and replayed. One
``acode up`` for the module; the scripted model plays the model."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.policy.hooks import POINTS
from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import CLI, REPO, Acode, read_until, running, wait_exit

pytestmark = pytest.mark.system

TASK, PLAN = w.TWO_FILES, w.TWO_FILES_PLAN
#: A hook script: one line per run, the point and what it is about.
NOTE = ("import json, sys; d = json.load(sys.stdin); p = d['hook_point']; "
        "key = {'on_pause': 'kind', 'session_end': 'status'}.get(p) or ('step' if 'step' in d else 'stage'); "
        "what = (d.get('path') or d.get('command')) if 'tool' in d else ''; "
        "open(sys.argv[1], 'a').write(f\"{p} {d[key]} {what}\".strip() + '\\n')")


@pytest.fixture(scope="module")
def acode() -> Iterator[Acode]:
    with running("acode-hooks-") as acode:
        yield acode


def _config(acode: Acode, log: Path, points: tuple[str, ...]) -> None:
    hook = {"action": "script", "run": [sys.executable, "-c", NOTE, str(log)]}
    (acode.home / "config.yml").write_text(json.dumps({"hooks": {point: [hook] for point in points}}))


def _script(path: Path, executor: list[dict[str, Any]], *, delay: float = 0.0) -> Path:
    if delay:
        executor = [executor[0], {**executor[1], "delay_s": delay}, *executor[2:]]
    approve = {"json": {"decision": "approve", "summary": "done", "issues": []}}
    path.write_text(json.dumps({"version": 1, "responses": {"planner": [{"json": PLAN}], "executor": executor,
                                                            "reviewer": [approve]}}))
    return path


def _write(name: str) -> list[dict[str, Any]]:
    return w.write_step(name, f"{name}\n")


def _recorded(acode: Acode, point: str) -> bool:
    listed = acode("sessions", "--json")
    sessions = json.loads(listed.stdout) if listed.returncode == 0 else []
    if not sessions:
        return False
    shown = acode("show", sessions[0]["id"], "--json")
    return any(e["type"] == "hook_ran" and e["point"] == point for e in json.loads(shown.stdout)["events"])


def _run(acode: Acode, root: Path, script: Path, *flags: str) -> Any:
    ws = root / "ws"
    ws.mkdir(parents=True)
    return acode("run", TASK, "--workspace", str(ws), "--provider", "scripted", "--script", str(script), "--json",
                 *flags, timeout=120)


def test_on_pause_hears_an_approval_a_plan_review_and_an_escalation(acode: Acode, tmp_path: Path) -> None:
    log = tmp_path / "pauses.log"
    _config(acode, log, ("on_pause",))
    full = [*_write("a.txt"), *_write("b.txt")]
    review = _run(acode, tmp_path / "review", _script(tmp_path / "r.yaml", full), "--approve-plan")
    assert review.returncode == 22, review.stderr
    asked = _run(acode, tmp_path / "ask", _script(tmp_path / "a.yaml", full), "--autonomy", "0")
    assert asked.returncode == 33, asked.stderr
    stuck = _run(acode, tmp_path / "stuck", _script(tmp_path / "s.yaml", _write("a.txt")))  # no answer for S2
    assert stuck.returncode == 22, stuck.stderr
    wait_until(lambda: log.exists() and len(log.read_text().splitlines()) == 3, timeout=30)
    assert log.read_text().splitlines() == ["on_pause plan_review", "on_pause awaiting_approval",
                                            "on_pause escalation"]


def test_every_point_fires_once_per_occurrence_in_order_across_a_killed_executor(acode: Acode,
                                                                                 tmp_path: Path) -> None:
    log = tmp_path / "points.log"
    _config(acode, log, POINTS)
    script = _script(tmp_path / "s.yaml", [*_write("a.txt"), *_write("b.txt")], delay=3.0)
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = acode.start("run", TASK, "--workspace", str(ws), "--provider", "scripted", "--script", str(script),
                       "--json")
    wait_until(lambda: _recorded(acode, "post_tool"), timeout=60)  # S1's write and its hooks are done and
    acode.kill("executor")  # recorded; the model thinks about the step's end (a kill while a hook runs: below)
    code, _, err = wait_exit(proc, timeout=120)
    assert code == 0, err
    wait_until(lambda: log.read_text().splitlines()[-1:] == ["session_end completed"], timeout=30)
    assert log.read_text().splitlines() == [
        "session_start planner",
        "stage_start planner", "stage_end planner",
        "stage_start executor",
        "step_start T1/S1", "pre_tool T1/S1 a.txt", "post_tool T1/S1 a.txt", "step_end T1/S1",
        "step_start T1/S2", "pre_tool T1/S2 b.txt", "post_tool T1/S2 b.txt", "step_end T1/S2",
        "stage_end executor",
        "stage_start verifier", "pre_tool verify/A1 cat a.txt b.txt", "stage_end verifier",
        "stage_start reviewer", "stage_end reviewer",
        "session_end completed"]


def test_a_hook_running_when_the_executor_is_killed_is_not_run_again(acode: Acode, tmp_path: Path) -> None:
    log = tmp_path / "post.log"
    slow = NOTE + "; __import__('time').sleep(3 if what == 'a.txt' else 0)"  # noted, then busy while the kill lands
    (acode.home / "config.yml").write_text(json.dumps({"hooks": {"post_tool": [
        {"action": "script", "run": [sys.executable, "-c", slow, str(log)]}]}}))
    ws = tmp_path / "ws"
    ws.mkdir()
    script = _script(tmp_path / "s.yaml", [*_write("a.txt"), *_write("b.txt")])
    proc = acode.start("run", TASK, "--workspace", str(ws), "--provider", "scripted", "--script", str(script),
                       "--json")
    wait_until(lambda: log.exists() and "post_tool T1/S1 a.txt" in log.read_text(), timeout=60)
    acode.kill("executor")  # while the hook sleeps: its intent is stored, its result is not
    code, out, err = wait_exit(proc, timeout=120)
    assert code == 0, err
    assert log.read_text().splitlines() == ["post_tool T1/S1 a.txt", "post_tool T1/S2 b.txt"]  # once each
    session = json.loads(out.splitlines()[-1])["session"]["id"]
    events = json.loads(acode("show", session, "--json").stdout)["events"]
    first = [e for e in events if e["type"] == "hook_ran" and e["occurrence"].endswith("T1/S1:t1:c0")]
    assert len(first) == 1 and "its outcome is unknown" in first[0]["failed"]


def test_a_confirm_hook_asks_on_a_terminal_and_yes_goes_on(acode: Acode, tmp_path: Path) -> None:
    confirm = {"action": "confirm", "message": "the executor is about to start: go on?"}
    (acode.home / "config.yml").write_text(json.dumps({"hooks": {"stage_start": [
        {**confirm, "condition": 'stage == "executor"'}]}}))
    ws = tmp_path / "ws"
    ws.mkdir()
    script = _script(tmp_path / "s.yaml", [*_write("a.txt"), *_write("b.txt")])
    main, child = pty.openpty()
    proc = subprocess.Popen([*CLI, "--home", str(acode.home), "run", TASK, "--workspace", str(ws), "--provider",
                             "scripted", "--script", str(script)], env=acode.env, cwd=REPO, stdin=child,
                            stdout=child, stderr=child, close_fds=True)
    acode.running.append(proc)  # type: ignore[arg-type]  # killed by the fixture if the test fails
    os.close(child)
    try:
        shown = read_until(main, "go on? [y/N]: ")
        assert "paused (hook): hook stage_start[0] at stage_start: the executor is about to start" in shown
        assert not (ws / "a.txt").exists()  # the stage waited for the hook
        os.write(main, b"y\n")
        read_until(main, "completed (exit 0)")
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(main)
    assert (ws / "b.txt").read_text() == "b.txt\n"
