"""Anomalies as a user meets them: a model that runs the same failing test again and again
is noted (a line in ``acode run``), given a fresh window, then the session pauses
``anomaly`` (exit 25) with the evidence and the command that goes on; ``acode resume``
runs the step afresh and the session completes. The session's health shows in ``acode
show`` and ``acode status``; the shipped example (``acode demo``) finds no anomaly. One
``acode up`` for the module; the scripted model plays the model."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system.conftest import Acode, last_json, running, shown_json

pytestmark = pytest.mark.system

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = ("import unittest\n\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n"
         "        self.assertEqual(add(2, 3), 5)\n")
TEST = "python -m unittest test_calc"
PLAN = {"goal": "add() adds", "status": "ready", "tasks": [{
    "label": "T1", "title": "fix add()", "complexity": 2, "depends_on": [],
    "resources": {"read": ["test_calc.py"], "write": ["calc.py"], "commands": [TEST]},
    "acceptance": [{"label": "A1", "description": "the tests pass", "check": {"command": TEST}}],
    "steps": [{"label": "S1", "title": "run the tests and fix calc.py", "action": "modify_file"}]}]}


@pytest.fixture(scope="module")
def acode() -> Iterator[Acode]:
    with running("acode-anomaly-") as acode:
        yield acode


def _run_test(limited: bool) -> dict[str, Any]:
    """The same failing test, in two spellings (the same call three times in a row is EXEC-008's)."""
    arguments: dict[str, Any] = {"command": TEST, **({"timeout_s": 60} if limited else {})}
    return {"tool_calls": [{"name": "run_terminal", "arguments": arguments}]}


def _script(tmp_path: Path) -> Path:
    """Nine runs of the failing test (a note after three, a fresh window after six, the pause
    after nine), then, resumed, the fix."""
    script = {"version": 1, "responses": {
        "planner": [{"json": PLAN}],
        "executor": [*(_run_test(n % 2 == 1) for n in range(9)),
                     {"tool_calls": [{"name": "write_file", "arguments": {"path": "calc.py", "content": FIXED}}]},
                     {"tool_calls": [{"name": "step_complete", "arguments": {"summary": "the test passes"}}]}],
        "reviewer": [{"json": {"decision": "approve", "summary": "fixed", "issues": []}}]}}
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps(script))  # JSON is YAML
    return path


def test_a_model_running_the_same_failing_test_is_noted_then_paused_and_resume_goes_on(
        acode: Acode, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(CALC)
    (ws / "test_calc.py").write_text(TESTS)

    run = acode("run", "The add function is wrong. Make the tests pass.", "--workspace", str(ws),
                "--provider", "scripted", "--script", str(_script(tmp_path)), "--json", timeout=180)

    assert run.returncode == 25, run.stdout + run.stderr
    session = last_json(run.stdout)["session"]
    sid = session["id"]
    pause = session["pause"]
    assert (pause["kind"], pause["code"], pause["stage"], pause["task"], pause["step"]) == (
        "anomaly", "ACODE-EXEC-011", "executor", "T1", "S1")
    assert pause["command"] == f"acode resume {sid}"
    assert "step T1/S1: the model went off the rails (repeated_error, score 80): run_terminal failed 3 times with " \
           "the same error (exit 1, with 2 different arguments; step T1/S1 turns 7, 8, 9)" in pause["message"]
    assert pause["message"].endswith(f"`acode resume {sid}` runs the step afresh")
    shown = shown_json(acode, sid)
    found = [(e["kind"], e["response"], e.get("turns")) for e in shown["events"] if e["type"] == "anomaly_detected"]
    assert ("repeated_error", "note", [1, 2, 3]) in found and ("repeated_error", "fresh_window", [4, 5, 6]) in found
    assert found[-1] == ("repeated_error", "pause", [7, 8, 9])
    retried = [e for e in shown["events"] if e["type"] == "step_retried"]
    assert [e["code"] for e in retried] == ["ACODE-EXEC-013"]
    healths = [e.get("health", 100) for e in shown["events"] if e["type"] == "anomaly_detected"]
    assert healths == sorted(healths, reverse=True) and healths[-1] < 100  # each worse than the one before
    assert 0 < shown["health"] < healths[-1]  # and the pause itself counts
    followed = acode("attach", sid, "--replay", "500")
    assert f"anomaly repeated_error in T1/S1 (score 60, session health {healths[0]}): run_terminal failed 3 " \
           "times with the same error" in followed.stdout
    assert "; a note goes to the model with its next turn" in followed.stdout
    assert "paused (anomaly): executor failed: step T1/S1: the model went off the rails" in followed.stdout
    assert f"(ACODE-EXEC-011); exit 25\n  continue with: acode resume {sid}" in followed.stdout
    text = acode("show", sid).stdout
    assert re.search(rf"^health    {shown['health']} of 100 \(\d+ anomal(y|ies): repeated_error", text, re.M), text
    assert f"{sid[:8]} health: {shown['health']} of 100" in acode("status").stdout

    resumed = acode("resume", sid, "--json", timeout=120)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (ws / "calc.py").read_text() == FIXED
    shown = shown_json(acode, sid)
    assert shown["session"]["status"] == "completed"
    steps = [e for e in shown["events"] if e["type"] == "step_finished"]
    assert [(e["step"], e["status"]) for e in steps] == [("S1", "failed"), ("S1", "completed")]


def test_the_shipped_example_finds_no_anomaly(acode: Acode) -> None:
    demo = acode("demo", timeout=180)
    for kept in re.findall(r"workspace kept at (\S+);", demo.stdout):  # the demo keeps it for a user; not here
        shutil.rmtree(kept, ignore_errors=True)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    [sid] = re.findall(r"`acode show ([0-9a-f-]{36})`", demo.stdout)
    shown = shown_json(acode, sid)
    assert shown["session"]["status"] == "completed"
    assert [e for e in shown["events"] if e["type"] == "anomaly_detected"] == []
    assert shown["health"] == 100
