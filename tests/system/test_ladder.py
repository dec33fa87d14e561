"""Sessions never dead-end: the escalation ladder and `acode resume`, end to end.

acode runs as a user runs it (CLI subprocesses, every actor a process) against the
stand-in model server on loopback; what the server received is how each test counts the
model requests, so "finished work is not redone" is measured, not assumed. The tests that
only run sessions of their own share one acode for the module (``shared``); the stage timeout
and the vanished workspace (a session left waiting on a stalled answer) start their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.modelserver import Json, ModelServer, Received, Stall, ToolCalls
from tests.system.conftest import Acode, wait_exit
from tests.system.test_models import (
    APPROVE,
    CHECK,
    VERDICT,
    _configure,
    _run,
    _session_id,
    _workspace,
    done,
    plan,
    write,
)

pytestmark = pytest.mark.system

EXISTS = "python exists.py"
EXISTS_PY = "import pathlib, sys\nsys.exit(0 if pathlib.Path(sys.argv[1]).exists() else 1)\n"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def failed(reason: str = "the model cannot do it") -> ToolCalls:
    return ToolCalls([("step_failed", {"reason": reason})])


def write_file(path: str, content: str = "x\n") -> ToolCalls:
    return ToolCalls([("write_file", {"path": path, "content": content})])


def _task(label: str, path: str, *, depends: list[str] | None = None) -> dict[str, Any]:
    command = f"{EXISTS} {path}"
    return {"label": label, "title": f"write {path}", "complexity": 1, "depends_on": depends or [],
            "resources": {"write": [path], "commands": [command]},
            "acceptance": [{"label": f"{label}A", "description": f"{path} exists",
                            "check": {"command": command, "expect_exit": 0}}],
            "steps": [{"label": "S1", "title": f"write {path}", "action": "write_file", "expected_output": path}]}


def three_tasks() -> Json:
    """T2 depends on T1; T3 (greet.txt, checked by check.py and judged A2) stands alone."""
    greet = plan().value["tasks"][0]
    return Json({"goal": "three files", "status": "ready", "tasks": [
        _task("T1", "a.txt"), _task("T2", "b.txt", depends=["T1"]), {**greet, "label": "T3"}]})


def two_steps() -> Json:
    value = plan().value
    steps = [{"label": "S1", "title": "write notes.txt", "action": "write_file", "expected_output": "notes.txt"},
             {"label": "S2", "title": "write greet.txt", "action": "write_file", "expected_output": "greet.txt",
              "depends_on": ["S1"]}]
    task = {**value["tasks"][0], "steps": steps}
    task["resources"] = {**task["resources"], "write": ["notes.txt", "greet.txt"]}
    return Json({**value, "tasks": [task]})


def _step_of(received: Received) -> str:
    """`T1/S2` from the step message the executor's model was sent."""
    user = next(m["content"] for m in received.messages if m["role"] == "user")
    task = user.split("Task ", 1)[1].split(":", 1)[0]
    step = user.split("Your step, ", 1)[1].split(":", 1)[0]
    return f"{task}/{step}"


def _show(acode: Acode, session_id: str) -> dict[str, Any]:
    result = acode("show", session_id, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_server_that_goes_down_pauses_model_unavailable_and_resume_redoes_no_finished_step(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama", ACODE_MODEL__MAX_RETRIES="1")
    server.by_stage(planner=[two_steps()],
                    executor=[write_file("notes.txt"), done("wrote notes.txt"), Stall("", chunks=0, seconds=60)])
    workspace = _workspace(tmp_path)
    proc = shared.start("run", "make greet.txt say hello", "--workspace", str(workspace))
    assert server.wait_for(lambda: sum(r.stage == "executor" for r in server.chats) >= 3, timeout=90)
    port = server.port
    server.close()  # Ollama stops in the middle of S2's first answer

    code, out, err = wait_exit(proc)
    session_id = _session_id(out)
    assert code == 22, out + err
    assert "paused (model_unavailable): executor failed: Ollama at" in out and "(ACODE-LLM-005)" in out
    assert "  fix: start it with `ollama serve`, or fix base_url" in out
    assert f"  continue with: acode resume {session_id}" in out
    shown = shared("show", session_id).stdout
    assert "paused    model_unavailable: executor failed" in shown and f"continue  acode resume {session_id}" in shown
    assert "step      T1/S2" in shown

    with ModelServer(port=port) as back:  # `ollama serve` again
        back.by_stage(executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
        resumed = shared("resume", session_id, timeout=180)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "completed (exit 0)" in resumed.stdout
        assert [r.stage for r in back.chats] == ["executor", "executor", "verifier", "reviewer"]
        assert {_step_of(r) for r in back.chats if r.stage == "executor"} == {"T1/S2"}, "S1 was not redone"
        assert back.unanswered == []
    assert [r.stage for r in server.chats].count("planner") == 1
    assert (workspace / "greet.txt").read_text() == "hello\n" and (workspace / "notes.txt").exists()


def test_a_step_that_fails_twice_and_succeeds_on_its_third_try_completes_without_a_pause(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    server.by_stage(planner=[plan()], executor=[failed("greet.txt is locked"), failed("still locked"), write(), done()],
                    verifier=[VERDICT], reviewer=[APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    assert "paused" not in out
    assert "T1/S1 try 1 of 3 failed: greet.txt is locked; try 2 starts from a fresh window" in out
    assert "T1/S1 try 2 of 3 failed: still locked; try 3 starts from a fresh window" in out
    executor = [r for r in server.chats if r.stage == "executor"]
    assert len(executor) == 4
    third = executor[2].messages
    assert [m["role"] for m in third] == ["system", "user"] and "Try 2 failed: still locked" in third[1]["content"]


def test_a_step_out_of_tries_aborts_its_task_pauses_with_exit_30_and_resume_with_more_turns_completes(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    workspace = _workspace(tmp_path)
    (workspace / "exists.py").write_text(EXISTS_PY)
    server.by_stage(planner=[three_tasks()], executor=[failed("no"), failed("no"), failed("no"), write(), done()])
    code, out = _run(shared, workspace)
    session_id = _session_id(out)
    assert code == 30, out
    assert "T2/S1 blocked: it depends on T1/S1, which failed" in out and "T3/S1 completed" in out
    assert ("paused (escalation): executor failed: step T1/S1 failed: no (tried 3 times); task aborted: T1; "
            "blocked by it: T2/S1") in out
    assert f"continue with: acode resume {session_id}" in out
    first_round = [_step_of(r) for r in server.chats if r.stage == "executor"]
    assert first_round == ["T1/S1", "T1/S1", "T1/S1", "T3/S1", "T3/S1"]
    assert _show(shared, session_id)["session"]["pause"]["task"] == "T1"

    server.responder.add("executor", write_file("a.txt"), done(), write_file("b.txt"), done())  # type: ignore[attr-defined]
    server.responder.add("verifier", VERDICT)  # type: ignore[attr-defined]
    server.responder.add("reviewer", APPROVE)  # type: ignore[attr-defined]
    resumed = shared("resume", session_id, "--max-turns", "20", timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "settings changed by acode resume: max_turns_per_step: 10 -> 20" in resumed.stdout
    assert "2 step(s) done, 1 kept from earlier" in resumed.stdout
    second_round = [_step_of(r) for r in server.chats if r.stage == "executor"][len(first_round):]
    assert second_round == ["T1/S1", "T1/S1", "T2/S1", "T2/S1"], "T3 was not redone"
    assert "An earlier round of this step failed: no (tried 3 times)" in json.dumps(
        [r for r in server.chats if r.stage == "executor"][len(first_round)].messages)
    session = _show(shared, session_id)["session"]
    assert session["status"] == "completed" and session["settings"]["max_turns_per_step"] == 20


def test_a_stage_timeout_pauses_with_exit_20_and_completes_after_resume_with_a_longer_timeout(
        acode: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(acode, server, "ollama", ACODE_ORCHESTRATION__EXECUTOR_TIMEOUT="2",
               ACODE_ORCHESTRATION__STAGE_RETRY_LIMIT="0")
    acode.up()
    slow_write = json.dumps({"name": "write_file", "arguments": {"path": "greet.txt", "content": "hello\n"}})
    server.by_stage(planner=[plan()], executor=[Stall("", chunks=0, seconds=30),
                                                Stall(slow_write, headers=False, seconds=3), done()],
                    verifier=[VERDICT], reviewer=[APPROVE])
    code, out = _run(acode, _workspace(tmp_path))
    session_id = _session_id(out)
    assert code == 20, out
    assert "paused (stage_timeout): executor timed out 1 times (2s each)" in out
    assert f"continue with: acode resume {session_id} --executor-timeout 4" in out

    resumed = acode("resume", session_id, "--executor-timeout", "60", timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "settings changed by acode resume: executor_timeout: 2s -> 60s" in resumed.stdout
    session = _show(acode, session_id)["session"]
    assert session["settings"]["stage_timeouts"]["executor"] == 60 and session["status"] == "completed"
    assert (tmp_path / "w" / "greet.txt").read_text() == "hello\n"


def test_the_same_verify_failure_twice_pauses_early_instead_of_spending_every_cycle(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    server.by_stage(planner=[plan()], executor=[write("goodbye\n"), done(), done("it is right already")],
                    verifier=[VERDICT, VERDICT, VERDICT])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 22, out
    assert "(verify cycle 1)" in out and "(verify cycle 2)" not in out
    assert "paused (escalation): the same failure twice: A1 failed" in out and "(ACODE-ORCH-008)" in out
    assert CHECK in out


def test_only_a_vanished_workspace_fails_a_session_and_acode_resume_continues_it_once_restored(
        acode: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(acode, server, "ollama")
    acode.up()
    slow_plan = Stall(json.dumps(plan().value), headers=False, seconds=3)
    server.by_stage(planner=[slow_plan], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
    workspace = _workspace(tmp_path)
    proc = acode.start("run", "make greet.txt say hello", "--workspace", str(workspace))
    assert server.wait_for(lambda: any(r.stage == "planner" for r in server.chats), timeout=60)
    moved = workspace.rename(tmp_path / "moved")  # gone while the planner thinks

    code, out, err = wait_exit(proc)
    session_id = _session_id(out)
    assert code == 1, out + err
    assert f"failed: the workspace {workspace} is gone" in out and "(ACODE-ORCH-009)" in out
    assert f"  continue with: acode resume {session_id}" in out

    assert f"continue  acode resume {session_id}" in acode("show", session_id).stdout
    moved.rename(workspace)
    # a failed session holds no workspace: another may have taken it meanwhile, and then resume waits its turn
    server.responder.add("planner", Stall("", chunks=0, seconds=60))  # type: ignore[attr-defined]
    other = acode("run", "something else", "--workspace", str(workspace), "--detach").stdout.strip()
    assert server.wait_for(lambda: sum(r.stage == "planner" for r in server.chats) == 2, timeout=60)
    refused = acode("resume", session_id)
    assert refused.returncode == 1 and "(ACODE-CLI-006)" in refused.stderr and f"is held by session {other}" in \
        refused.stderr
    assert acode("cancel", other).returncode == 0
    resumed = acode("resume", session_id, timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    stages = [r.stage for r in server.chats]
    assert stages == ["planner", "planner", "executor", "executor", "verifier", "reviewer"]
    assert (workspace / "greet.txt").read_text() == "hello\n"
