"""Session budgets as a user meets them: ``acode run`` with a limit the session crosses,
the pause ``budget_exhausted`` (exit 24) at the call that would have crossed it, the 80%
warning once, and ``acode resume --budget-…`` completing the session from that call; a
kill -9 of the executor mid-session neither resets nor doubles a count. One ``acode up``
for the module; the scripted model plays the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import Acode, last_json, running, shown_json, wait_exit

pytestmark = pytest.mark.system

TASK, PLAN = w.TWO_FILES, w.TWO_FILES_PLAN


@pytest.fixture(scope="module")
def acode() -> Iterator[Acode]:
    with running("acode-budget-") as acode:
        yield acode


def _script(tmp_path: Path, *, delay: float = 0.0) -> Path:
    """Two writes (and a step_complete after each, which ends the step: not a tool call),
    then one verifier check: three tool calls in all. ``delay``: the model takes that long before writing b.txt."""
    write_b: dict[str, Any] = {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}}]}
    if delay:
        write_b["delay_s"] = delay
    script = {"version": 1, "responses": {
        "planner": [{"json": PLAN}],
        "executor": [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
            {"tool_calls": [{"name": "step_complete", "arguments": {"summary": "wrote a.txt"}}]},
            write_b,
            {"tool_calls": [{"name": "step_complete", "arguments": {"summary": "wrote b.txt"}}]}],
        "reviewer": [{"json": {"decision": "approve", "summary": "done", "issues": []}}]}}
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps(script))  # JSON is YAML
    return path


def _run(acode: Acode, tmp_path: Path, *flags: str) -> tuple[Path, Any]:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = acode("run", TASK, "--workspace", str(ws), "--provider", "scripted", "--script", str(_script(tmp_path)),
                "--json", *flags, timeout=180)
    return ws, run


def test_a_spent_tool_call_budget_pauses_at_the_call_and_resume_makes_it(acode: Acode, tmp_path: Path) -> None:
    ws, run = _run(acode, tmp_path, "--budget-tool-calls", "1")
    assert run.returncode == 24, run.stderr
    session = last_json(run.stdout)["session"]
    pause = session["pause"]
    assert (pause["kind"], pause["code"], pause["stage"]) == ("budget_exhausted", "ACODE-ORCH-013", "executor")
    assert "before write_file b.txt (1 of 1 tool calls)" in pause["message"]
    assert pause["command"] == f"acode resume {session['id']} --budget-tool-calls +50%"
    assert (ws / "a.txt").read_text() == "a\n" and not (ws / "b.txt").exists()  # the call that would cross: not made
    shown = shown_json(acode, session["id"])
    assert shown["budget"]["spent"]["tool_calls"] == 1
    warnings = [e for e in shown["events"] if e["type"] == "budget_warning"]
    assert [(w["kind"], w["limit"]) for w in warnings] == [("tool_calls", 1)]
    assert "budget warning: the session has used 100% of its tool_calls budget (1 of 1)" in run.stdout + acode(
        "attach", session["id"]).stdout
    assert "tool calls 1 of 1 (100%)" in acode("show", session["id"]).stdout

    resumed = acode("resume", session["id"], "--budget-tool-calls", "+2", "--json", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert (ws / "b.txt").read_text() == "b\n"
    shown = shown_json(acode, session["id"])
    assert shown["session"]["status"] == "completed" and shown["budget"]["spent"]["tool_calls"] == 3  # and the check
    assert shown["session"]["settings"]["budget"]["tool_calls"] == 3
    warnings = [(e["kind"], e["limit"]) for e in shown["events"] if e["type"] == "budget_warning"]
    assert warnings == [("tool_calls", 1), ("tool_calls", 3)]  # once per limit, the extended one too
    changed = [e["changes"] for e in shown["events"] if e["type"] == "settings_changed"]
    assert changed == [["budget.tool_calls: 1 -> 3"]]


@pytest.mark.parametrize(("flag", "limit", "kind", "extend"), [
    ("--budget-tokens", "1", "tokens", "+100000000"),
    ("--budget-minutes", "0.00001", "wall_minutes", "60"),
])
def test_spent_tokens_or_minutes_pause_before_the_first_model_call_and_resume_completes(
        acode: Acode, tmp_path: Path, flag: str, limit: str, kind: str, extend: str) -> None:
    ws, run = _run(acode, tmp_path, flag, limit)
    assert run.returncode == 24, run.stderr
    session = last_json(run.stdout)["session"]
    assert session["pause"]["kind"] == "budget_exhausted" and session["pause"]["stage"] == "planner"
    assert f"the session's {kind} budget is spent before model call" in session["pause"]["message"]
    assert session["pause"]["command"].endswith(f"{flag} +50%")
    assert not (ws / "a.txt").exists()

    resumed = acode("resume", session["id"], flag, extend, "--json", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert (ws / "a.txt").read_text() == "a\n" and (ws / "b.txt").read_text() == "b\n"


def test_a_bad_extension_is_refused_with_its_code(acode: Acode) -> None:
    refused = acode("resume", "0" * 36, "--budget-tokens", "50%")
    assert refused.returncode == 1 and "ACODE-CLI-003" in refused.stderr and "+50%" in refused.stderr


def test_a_killed_executor_neither_resets_nor_doubles_a_count(acode: Acode, tmp_path: Path) -> None:
    (tmp_path / "calm").mkdir()
    _, run = _run(acode, tmp_path / "calm")
    assert run.returncode == 0, run.stderr
    expected = shown_json(acode, last_json(run.stdout)["session"]["id"])["budget"]["spent"]

    root = tmp_path / "killed"
    root.mkdir()
    ws = root / "ws"
    ws.mkdir()
    proc = acode.start("run", TASK, "--workspace", str(ws), "--provider", "scripted",
                       "--script", str(_script(root, delay=3.0)), "--json")
    wait_until(lambda: (ws / "a.txt").exists(), timeout=60)  # S1 done; the model is thinking about b.txt
    acode.kill("executor")
    code, out, err = wait_exit(proc, timeout=120)
    assert code == 0, err
    spent = shown_json(acode, last_json(out)["session"]["id"])["budget"]["spent"]
    assert (spent["tool_calls"], spent["tokens_in"], spent["tokens_out"]) == (
        expected["tool_calls"], expected["tokens_in"], expected["tokens_out"])


def test_spent_model_time_pauses_before_the_next_live_model_call(acode: Acode, tmp_path: Path) -> None:
    ws, run = _run(acode, tmp_path, "--budget-model-minutes", "0.000001")  # the planner's answer spends it
    assert run.returncode == 24, run.stderr
    session = last_json(run.stdout)["session"]
    assert session["pause"]["stage"] == "executor"
    assert "the session's model_minutes budget is spent before model call" in session["pause"]["message"]
    assert session["pause"]["command"].endswith("--budget-model-minutes +50%")
    resumed = acode("resume", session["id"], "--budget-model-minutes", "0", "--json", timeout=120)  # no limit
    assert resumed.returncode == 0, resumed.stderr
    assert (ws / "b.txt").read_text() == "b\n"
