"""The whole pipeline against a stand-in model server speaking the real wire formats.

acode runs as a user runs it (``acode up``, ``acode run``, the CLI as subprocesses) with the
model configured as ``ollama`` or ``openai`` pointing at :class:`tests.modelserver.ModelServer`
on 127.0.0.1; every stage's HTTP request crosses the loopback interface, streaming
included. What the server received is how the tests see what acode asked.

A session's model settings are resolved by ``acode run`` (the CLI sends them with the
session), so the tests that only run sessions of their own share one acode for the module
(``shared``), each with its own server and settings; the others start their own, for what
they check of acode itself (an actor killed, a stage timeout from the config, doctor, the
small profile).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.coordinator.actor import mcp_installed
from tests.harness import wait_until
from tests.modelserver import (
    Json,
    ModelServer,
    Received,
    Stall,
    Status,
    Text,
    TextToolCalls,
    ToolCalls,
)
from tests.system.conftest import Acode

pytestmark = pytest.mark.system

CHECK = "python check.py"
CHECK_PY = """import pathlib, sys
text = pathlib.Path("greet.txt").read_text() if pathlib.Path("greet.txt").exists() else ""
print("greeting ok" if text == "hello\\n" else f"greet.txt holds {text!r}, expected 'hello'")
sys.exit(0 if text == "hello\\n" else 1)
"""


def plan(*, depends: bool = False, label: str = "T1", goal: str = "greet.txt says hello") -> Json:
    """A one-task plan: write greet.txt; A1 is a real check, A2 is judged by the verifier's model."""
    steps: list[dict[str, Any]] = [{"label": "S1", "title": "write greet.txt", "action": "write_file",
                                    "expected_output": "greet.txt"}]
    if depends:  # S1 and S2 depend on each other: a cycle the planner must refuse
        steps[0]["depends_on"] = ["S2"]
        steps.append({"label": "S2", "title": "look at it", "action": "read_file", "depends_on": ["S1"]})
    return Json({"goal": goal, "status": "ready", "tasks": [{
        "label": label, "title": "greet", "complexity": 1,
        "resources": {"write": ["greet.txt"], "commands": [CHECK]},
        "acceptance": [{"label": "A1", "description": "greet.txt says hello",
                        "check": {"command": CHECK, "expect_exit": 0}},
                       {"label": "A2", "description": "nothing else changed"}],
        "steps": steps}]})


def write(content: str = "hello\n") -> ToolCalls:
    return ToolCalls([("write_file", {"path": "greet.txt", "content": content})])


def done(summary: str = "wrote greet.txt") -> ToolCalls:
    return ToolCalls([("step_complete", {"summary": summary})])


VERDICT = Json({"passed": True, "summary": "A2 holds", "criteria": [{"label": "A2", "passed": True,
                                                                      "evidence": "only greet.txt changed"}]})
APPROVE = Json({"decision": "approve", "summary": "greet.txt is right", "issues": []})


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _configure(acode: Acode, server: ModelServer, kind: str = "ollama", **extra: str) -> None:
    acode.env.update({
        "ACODE_MODEL__PROVIDER": kind,
        "ACODE_MODEL__MODEL": "test-model",
        "ACODE_MODEL__BASE_URL": server.url if kind == "ollama" else server.openai_url,
        "ACODE_MODEL__BACKOFF_INITIAL": "0.05",
        "ACODE_MODEL__BACKOFF_MAX": "0.2",
        **extra,
    })


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "w"
    root.mkdir()
    (root / "check.py").write_text(CHECK_PY)
    return root


def _run(acode: Acode, workspace: Path, *args: str, task: str = "make greet.txt say hello") -> tuple[int, str]:
    result = acode("run", task, "--workspace", str(workspace), *args, timeout=180)
    return result.returncode, result.stdout + result.stderr


def _session_id(output: str) -> str:
    return output.split("session ", 1)[1].split(":", 1)[0]


def _stages(server: ModelServer) -> list[str | None]:
    return [r.stage for r in server.chats]


def _text(received: Received) -> str:
    return json.dumps(received.messages)


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_clean_run_over_each_wire_format(shared: Acode, server: ModelServer, tmp_path: Path, kind: str) -> None:
    _configure(shared, server, kind)
    server.by_stage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    assert "completed (exit 0)" in out
    assert _stages(server) == ["planner", "executor", "executor", "verifier", "reviewer"]
    path = "/api/chat" if kind == "ollama" else "/v1/chat/completions"
    assert {r.path for r in server.chats} == {path}
    planner = server.chats[0].body
    assert planner["stream"] is True and planner["model"] == "test-model"
    if kind == "ollama":
        assert "TaskPlan" in json.dumps(planner["format"]) and planner["options"]["num_ctx"] == 8192
    else:
        assert planner["response_format"]["type"] == "json_schema"
    executor = server.chats[1].body
    assert "write_file" in {t["function"]["name"] for t in executor["tools"]}
    reviewer = _text(server.chats[-1])
    assert "+hello" in reviewer, "the reviewer sees the exact diff since the session began"
    assert server.unanswered == []


def test_text_tool_calls_bad_json_an_unknown_tool_a_500_and_a_stalled_stream_are_all_survived(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama", ACODE_MODEL__IDLE_TIMEOUT="1")
    server.by_stage(
        planner=[Status(500), plan()],  # the 500 is retried by the provider
        executor=[
            TextToolCalls([("write_file", {"path": "greet.txt", "content": "hello\n"})], style="json"),
            Text('```json\n{"name": "step_complete", "arguments": {"summary": "done"\n```'),  # broken JSON
            ToolCalls([("delete_everything", {})]),  # no such tool
            done(),
        ],
        verifier=[VERDICT],
        reviewer=[Stall('{"decision": "approve", "summary": "ok", "issues": []}', chunks=1, seconds=30), APPROVE],
    )
    started = time.monotonic()
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    assert (tmp_path / "w" / "greet.txt").read_text() == "hello\n"
    executor = [r for r in server.chats if r.stage == "executor"]
    assert len(executor) == 4
    assert "not valid JSON" in _text(executor[2]) or "Expecting" in _text(executor[2]), "bad JSON is corrected"
    assert "delete_everything" in _text(executor[3]) and "not available" in _text(executor[3])
    assert [r.stage for r in server.chats].count("planner") == 2  # the 500, then the plan
    assert [r.stage for r in server.chats].count("reviewer") == 2  # the stall, then the answer
    assert server.early_closes >= 1, "the stalled stream was closed by the idle timeout"
    assert time.monotonic() - started < 60


def test_a_missing_model_pauses_the_session_saying_how_to_pull_it(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    server.models = ["other-model"]
    server.by_stage(planner=[plan()])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 22, out
    assert "paused (model_unavailable)" in out and "ACODE-LLM-006" in out
    assert "  fix: run: ollama pull test-model" in out
    assert len(server.chats) == 1, "a missing model is not retried"


def test_a_cyclic_plan_is_sent_back_and_the_corrected_plan_runs(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "openai")
    server.by_stage(planner=[plan(depends=True), plan()], executor=[write(), done()], verifier=[VERDICT],
                    reviewer=[APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    planner = [r for r in server.chats if r.stage == "planner"]
    assert len(planner) == 2
    assert "S1" in _text(planner[1]) and "cycle" in _text(planner[1]).lower()
    shown = json.loads(shared("plan", "show", _session_id(out), "--json").stdout)
    assert shown["version"] == 1 and [s["label"] for s in shown["tasks"][0]["steps"]] == ["S1"]


def test_a_clarification_is_answered_with_acode_answer(shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    questions = Json({"goal": "greet", "status": "needs_clarification", "questions": [
        {"label": "Q1", "question": "Which word should greet.txt hold?", "options": ["hello", "hi"]}]})
    server.by_stage(planner=[questions, plan()], executor=[write(), done()], verifier=[VERDICT],
                    reviewer=[APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 22, out
    assert "Which word should greet.txt hold?" in out
    answered = shared("answer", _session_id(out), "--answer", "Q1=1", timeout=180)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    planner = [r for r in server.chats if r.stage == "planner"]
    assert len(planner) == 2 and "Which word should greet.txt hold?" in _text(planner[1])
    assert "hello" in _text(planner[1])


def test_a_verify_failure_is_fixed_on_the_next_cycle(shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    server.by_stage(planner=[plan()], executor=[write("goodbye\n"), done(), write("hello\n"), done("fixed it")],
                    verifier=[VERDICT, VERDICT], reviewer=[APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    assert "(verify cycle 1)" in out
    executor = [r for r in server.chats if r.stage == "executor"]
    assert len(executor) == 4
    cycle_two = _text(executor[2])
    assert "A1" in cycle_two and CHECK in cycle_two and "goodbye" in cycle_two, "the failure's evidence reaches it"


def test_a_reviewer_replan_produces_plan_version_2(shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, "ollama")
    replan = Json({"decision": "replan", "summary": "A2 is not met", "issues": [
        {"criterion": "A2", "problem": "greet.txt lacks a trailing farewell", "suggestion": "add one"}]})
    server.by_stage(planner=[plan(), plan(goal="greet.txt says hello, revised")],
                    executor=[write(), done(), done("already right")],
                    verifier=[VERDICT, VERDICT], reviewer=[replan, APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    assert "(review cycle 1)" in out
    planner = [r for r in server.chats if r.stage == "planner"]
    assert len(planner) == 2 and "greet.txt lacks a trailing farewell" in _text(planner[1])
    session_id = _session_id(out)
    v2 = json.loads(shared("plan", "show", session_id, "--version", "2", "--json").stdout)
    assert v2["version"] == 2 and v2["goal"] == "greet.txt says hello, revised"
    assert v2["tasks"][0]["status"] == "pending" or v2["tasks"][0]["status"] == "completed"


def test_an_executor_killed_mid_answer_is_replayed_from_recorded_answers(
        acode: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(acode, server, "ollama")
    acode.up()
    server.by_stage(planner=[plan()],
                    executor=[write(), Stall("", chunks=0, seconds=60), done()],
                    verifier=[VERDICT], reviewer=[APPROVE])
    proc = acode.start("run", "make greet.txt say hello", "--workspace", str(_workspace(tmp_path)))
    wait_until(lambda: sum(r.stage == "executor" for r in server.chats) >= 2, timeout=60,
               what="the executor's second turn to reach the server")
    executor_pid = next(a["pid"] for a in acode.status()["actors"] if a["instance"] == "executor")
    os.kill(executor_pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, out + err
    executor = [r for r in server.chats if r.stage == "executor"]
    first_turns = [r for r in executor if len(r.messages) == 2]  # system + step: turn 1 of the step
    assert len(first_turns) == 1, "turn 1 was answered from the record after the restart, not asked again"
    assert len(executor) == 3  # turn 1, the stalled turn 2, turn 2 again after the restart
    assert (tmp_path / "w" / "greet.txt").read_text() == "hello\n"


def test_a_timed_out_stage_closes_its_model_request(acode: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(acode, server, "ollama")
    acode.env["ACODE_ORCHESTRATION__PLANNER_TIMEOUT"] = "2"
    acode.up()
    server.by_stage(planner=[Stall("", chunks=0, seconds=60), plan()], executor=[write(), done()],
                    verifier=[VERDICT], reviewer=[APPROVE])
    started = time.monotonic()
    code, out = _run(acode, _workspace(tmp_path))
    assert code == 0, out
    assert "retrying, attempt 2" in out
    assert server.early_closes >= 1, "the abandoned attempt's HTTP request was closed"
    assert time.monotonic() - started < 40, "the stalled request did not hold the planner for its 60 s"


def test_doctor_checks_server_model_probes_sandbox_and_actors(acode: Acode, server: ModelServer,
                                                              tmp_path: Path) -> None:
    _configure(acode, server, "ollama")
    server.responder = lambda request: (ToolCalls([("record_number", {"number": 7})]) if request.body.get("tools")
                                        else Json({"answer": 5}))
    down = acode("doctor", "-w", str(tmp_path))
    assert down.returncode == 1 and "FAIL  actors" in down.stdout and "acode up --detach" in down.stdout
    acode.up()
    result = acode("doctor", "-w", str(tmp_path), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert all(c["ok"] for c in checks.values()), checks
    assert {"config", "server", "model test-model", "tool calls test-model", "structured output test-model",
            "sandbox", "actors"} <= set(checks)
    # the coordinator, broker, persistence, sandbox, four stages; and mcp with the MCP SDK installed
    assert checks["actors"]["detail"].startswith(f"{8 + mcp_installed()} ready")
    acode.env["ACODE_MODEL__MODEL"] = "missing-model"
    missing = acode("doctor", "-w", str(tmp_path))
    assert missing.returncode == 1 and "ollama pull missing-model" in missing.stdout
    assert missing.stderr == "", "the doctor prints its lines, not the providers' logs"


def test_a_small_model_solves_a_one_file_task_in_one_answer(acode: Acode, tmp_path: Path) -> None:
    """The small profile end to end (issue 25): a plan derived without a model call, the file
    answered whole in one code block and checked by acode, approved by its passing check.
    Qwen2.5-Coder-1.5B solved none of the benchmark's tasks in the tool loop; this is the
    shape of its answer when it solves one."""
    with ModelServer(models=["qwen2.5-coder-1.5b-instruct"]) as small:
        _configure(acode, small, "openai", ACODE_MODEL__MODEL="qwen2.5-coder-1.5b-instruct")
        acode.up()
        small.queue(Text('Here it is:\n```python\nprint("hello")\n```'))
        workspace = _workspace(tmp_path)
        code, out = _run(acode, workspace, task="Create hello.py that prints hello")
        chats = small.chats
    assert code == 0, out
    assert (workspace / "hello.py").read_text() == 'print("hello")\n'
    [asked] = chats  # planned, written, verified and reviewed with one model answer
    assert "tools" not in asked.body and asked.messages[-1]["content"].endswith(
        "Answer with the complete new hello.py in one ```python code block.")
    assert "approved by the checks" in out, out
