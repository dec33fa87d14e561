"""The planner's questions: the session pauses (exit 22), `acode answer` resumes it with the
answers, the next plan is made with them; unanswered questions fall back to defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.system import workloads as w
from tests.system.conftest import Acode

pytestmark = pytest.mark.system

QUESTIONS = {"json": {
    "goal": "greet", "status": "needs_clarification",
    "questions": [
        {"label": "Q1", "question": "Which greeting?", "options": ["hello", "bonjour"], "free_text": False},
        {"label": "Q2", "question": "Which file name?", "default": "greet.txt"},
    ],
}}


def _greeting_plan() -> dict:  # type: ignore[type-arg]
    return w.plan(steps=[{"label": "S1", "title": "write the greeting", "action": "write_file"}],
                  checks=[{"label": "A1", "description": "file written", "check": {"command": "true"}}],
                  goal="write the greeting")


def _responses() -> dict:  # type: ignore[type-arg]
    return {
        "planner": [QUESTIONS, _greeting_plan()],
        "executor": [w.call("write_file", path="greet.txt", content="bonjour\n"), w.done("wrote it")],
        "verifier": [],
        "reviewer": [{"json": {"decision": "approve", "summary": "ok", "issues": []}}],
    }


def _session_id(stdout: str) -> str:
    return stdout.split("session ", 1)[1].split(":", 1)[0]


def test_questions_pause_the_session_and_answers_resume_it_into_a_second_plan(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", _responses())
    result = acode("run", "greet someone", "--workspace", str(workspace), "--provider", "scripted",
                   "--script", str(script))
    assert result.returncode == 22, result.stdout + result.stderr
    assert "Which greeting?" in result.stdout and "acode answer" in result.stdout
    session_id = _session_id(result.stdout)

    shown = acode("plan", "show", session_id[:8])
    assert shown.returncode == 0, shown.stderr
    assert "Q1. Which greeting?" in shown.stdout and "2) bonjour" in shown.stdout
    assert "default: greet.txt" in shown.stdout

    refused = acode("answer", session_id, "--answer", "Q1=3")
    assert refused.returncode == 1 and "ACODE-CLI-005" in refused.stderr and "1 to 2" in refused.stderr
    refused = acode("answer", session_id, "--answer", "Q1=salut")
    assert refused.returncode == 1 and "takes one of its options" in refused.stderr
    refused = acode("answer", session_id, "--answer", "Q9=1")
    assert refused.returncode == 1 and "no question 'Q9'" in refused.stderr
    refused = acode("resume", session_id)
    assert refused.returncode == 1 and "ACODE-CLI-004" in refused.stderr and "acode answer" in refused.stderr

    answered = acode("answer", session_id, "-a", "Q1=2", "--defaults")
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "resumed: 2 answer(s) given" in answered.stdout
    session = json.loads(acode("show", session_id, "--json").stdout)["session"]
    assert session["status"] == "completed"
    assert session["clarifications"] == [
        {"label": "Q1", "question": "Which greeting?", "answer": "bonjour", "defaulted": False, "timed_out": False},
        {"label": "Q2", "question": "Which file name?", "answer": "greet.txt", "defaulted": True, "timed_out": False},
    ]
    v2 = json.loads(acode("plan", "show", session_id, "--json").stdout)
    assert (v2["version"], v2["status"]) == (2, "ready")
    v1 = json.loads(acode("plan", "show", session_id, "--version", "1", "--json").stdout)
    assert v1["status"] == "needs_clarification"
    assert (workspace / "greet.txt").read_text() == "bonjour\n"

    again = acode("answer", session_id, "--defaults")
    assert again.returncode == 1 and "not waiting for answers" in again.stderr


def test_unanswered_questions_fall_back_to_their_defaults_after_the_configured_wait(
        acode: Acode, tmp_path: Path) -> None:
    acode.env["ACODE_PLANNER__CLARIFICATION_TIMEOUT"] = "1"
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", _responses())
    result = acode("run", "greet someone", "--workspace", str(workspace), "--provider", "scripted",
                   "--script", str(script), "--detach")
    session_id = result.stdout.strip()
    from tests.harness import wait_until

    def finished() -> bool:
        session = json.loads(acode("show", session_id, "--json").stdout)["session"]
        return session["status"] == "completed"

    wait_until(finished, timeout=60, what="the session to go on with the defaults")
    session = json.loads(acode("show", session_id, "--json").stdout)["session"]
    assert [(c["answer"], c.get("defaulted"), c.get("timed_out")) for c in session["clarifications"]] == [
        ("hello", True, True), ("greet.txt", True, True)]
