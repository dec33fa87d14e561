"""Finished work stays finished, the reviewer's three decisions, prompts that fit, the seeds' configs.

Real processes (``acode up``, ``acode run`` as subprocesses), the scripted model or the
stand-in model server. The scripted model holds exactly the answers a run may use: a
step run once more than it should would ask for an answer that is not there and fail
the session (ACODE-LLM-002), so an exit 0 is itself a count of the model requests.
The tests share one acode for the module (``shared``): every setting they change is a
session's, resolved by ``acode run``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.modelserver import Json, ModelServer, ToolCalls
from tests.system import workloads as w
from tests.system.conftest import Acode

pytestmark = pytest.mark.system

SEED_CONFIGS = Path(__file__).parents[1] / "cli" / "seed_configs"


def _task(label: str, path: str, content: str, after: list[str] | None = None) -> dict[str, Any]:
    """A task writing ``path`` with ``content``; its criterion checks exactly that."""
    check = f"python check.py {path} {content}"
    return {"label": label, "title": f"write {path}", "complexity": 1, "depends_on": after or [],
            "resources": {"write": [path], "commands": [check]},
            "acceptance": [{"label": f"A{label[1:]}", "description": f"{path} says {content}",
                            "check": {"command": check, "expect_exit": 0}}],
            "steps": [{"label": "S1", "title": f"write {path}", "action": "write_file"}]}


CHECK_PY = """import pathlib, sys
path, want = sys.argv[1], sys.argv[2]
text = pathlib.Path(path).read_text() if pathlib.Path(path).exists() else None
print(f"{path} ok" if text == want + "\\n" else f"{path} holds {text!r}, expected {want!r}")
sys.exit(0 if text == want + "\\n" else 1)
"""


def _workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "check.py").write_text(CHECK_PY)
    return root


def _plan(*tasks: dict[str, Any], goal: str = "three files") -> dict[str, Any]:
    return {"json": {"goal": goal, "status": "ready", "tasks": list(tasks)}}


def _write(path: str, content: str) -> dict[str, Any]:
    return w.call("write_file", path=path, content=content + "\n")


def _run(acode: Acode, workspace: Path, script: Path) -> tuple[int, str, str]:
    result = acode("run", "write the files", "--workspace", str(workspace), "--provider", "scripted",
                   "--script", str(script), timeout=180)
    return result.returncode, result.stdout, result.stderr


def _show(acode: Acode, session_id: str) -> dict[str, Any]:
    result = acode("show", session_id, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _session_id(stdout: str) -> str:
    return stdout.split("session ", 1)[1].split(":", 1)[0]


def _started(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["visit"], f"{e['task']}/{e['step']}") for e in events if e["type"] == "step_started"]


def test_a_verify_failure_on_one_task_of_three_runs_only_that_tasks_steps_again(shared: Acode, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "w")
    (workspace / ".agent").mkdir()
    shutil.copy(SEED_CONFIGS / "000_orchestration.yml", workspace / ".agent" / "config.yml")  # the seed's sample
    responses: dict[str, list[dict[str, Any]]] = {
        "planner": [_plan(_task("T1", "a.txt", "alpha"), _task("T2", "b.txt", "beta"), _task("T3", "c.txt", "gamma"))],
        "executor": [_write("a.txt", "alpha"), w.done("a"), _write("b.txt", "wrong"), w.done("b"),
                     _write("c.txt", "gamma"), w.done("c"),
                     _write("b.txt", "beta"), w.done("b fixed")],  # the second visit: T2 only
        "verifier": [], "reviewer": [{"json": {"decision": "approve", "summary": "all three", "issues": []}}],
    }
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 0, out + err
    assert "[VERIFIER]  rework (criteria): A2 failed: the steps of T2 run again; kept 2 step(s)" in out
    shown = _show(shared, _session_id(out))
    events = shown["events"]
    assert _started(events) == [(1, "T1/S1"), (1, "T2/S1"), (1, "T3/S1"), (2, "T2/S1")]
    chosen = [(e["rule"], e.get("rerun", []), e.get("kept", []), e.get("completed_tasks", []))
              for e in events if e["type"] == "rework_chosen"]
    assert chosen == [("criteria", ["T2/S1"], ["T1/S1", "T3/S1"], ["T1", "T3"]),
                      ("passed", [], ["T2/S1"], ["T1", "T2", "T3"])]
    executor = [e for e in events if e["type"] == "stage_finished" and e["stage"] == "executor"]
    assert executor[1]["summary"] == "1 step(s) done, 2 kept from earlier, 3 file(s) changed so far"
    assert [t["status"] for t in shown["plan"]["tasks"]] == ["completed"] * 3
    plan_text = shared("plan", "show", _session_id(out)).stdout
    assert "T1 [completed] write a.txt" in plan_text and "T3 [completed] write c.txt" in plan_text


def test_a_replan_keeps_the_untouched_completed_task_completed_and_runs_only_the_changed_one(
        shared: Acode, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "w")
    responses: dict[str, list[dict[str, Any]]] = {
        "planner": [_plan(_task("T1", "a.txt", "alpha"), _task("T2", "b.txt", "beta")),
                    _plan(_task("T1", "a.txt", "alpha"), _task("T2", "b.txt", "BETA"))],
        "executor": [_write("a.txt", "alpha"), w.done("a"), _write("b.txt", "beta"), w.done("b"),
                     _write("b.txt", "BETA"), w.done("b in capitals")],  # after the re-plan: T2 only
        "verifier": [],
        "reviewer": [{"json": {"decision": "replan", "summary": "b.txt must shout",
                               "issues": [{"criterion": "A2", "problem": "beta is not BETA"}]}},
                     {"json": {"decision": "approve", "summary": "good", "issues": []}}],
    }
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 0, out + err
    session_id = _session_id(out)
    shown = _show(shared, session_id)
    assert _started(shown["events"]) == [(1, "T1/S1"), (1, "T2/S1"), (2, "T2/S1")]
    plan = shown["plan"]
    assert plan["version"] == 2
    assert plan["change_summary"] == "tasks added: none; removed: none; changed: T2; unchanged: T1"
    v2 = shared("plan", "show", session_id, "--version", "2", "--json")
    assert [t["status"] for t in json.loads(v2.stdout)["tasks"]] == ["completed", "completed"]
    v1 = json.loads(shared("plan", "show", session_id, "--version", "1", "--json").stdout)
    assert [(t["label"], t["status"]) for t in v1["tasks"]] == [("T1", "completed"), ("T2", "pending")]
    assert (workspace / "b.txt").read_text() == "BETA\n"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _configure(acode: Acode, server: ModelServer, **extra: str) -> None:
    acode.env.update({"ACODE_MODEL__PROVIDER": "ollama", "ACODE_MODEL__MODEL": "test-model",
                      "ACODE_MODEL__BASE_URL": server.url, "ACODE_MODEL__BACKOFF_INITIAL": "0.05",
                      "ACODE_MODEL__BACKOFF_MAX": "0.2", **extra})


def _one_task_plan(path: str = "a.txt", content: str = "alpha") -> Json:
    return Json(_plan(_task("T1", path, content), goal=f"{path} says {content}")["json"])


def _tool(name: str, **arguments: Any) -> ToolCalls:
    return ToolCalls([(name, arguments)])


def test_request_changes_goes_to_the_executor_then_the_reviewer_approves_seeing_the_history(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _workspace(tmp_path / "w")
    changes = Json({"decision": "request_changes", "summary": "one naming fix",
                    "issues": [{"criterion": "", "problem": "notes.txt is badly named",
                                "suggestion": "write the note to NOTES.md instead"}]})
    server.by_stage(
        planner=[_one_task_plan()],
        executor=[_tool("write_file", path="a.txt", content="alpha\n"), _tool("step_complete", summary="a"),
                  _tool("write_file", path="NOTES.md", content="alpha notes\n"),
                  _tool("step_complete", summary="NOTES.md written")],
        reviewer=[changes, Json({"decision": "approve", "summary": "good now", "issues": []})])
    result = shared("run", "write a.txt", "--workspace", str(workspace), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[REVIEWER]  -> executor (review cycle 1): one naming fix" in out
    assert "[EXECUTOR]  review1/S1 Make the changes the reviewer asked for" in out
    assert [r.stage for r in server.chats] == ["planner", "executor", "executor", "reviewer", "executor",
                                               "executor", "reviewer"]
    step = json.dumps(server.chats[4].messages)
    assert "notes.txt is badly named" in step and "the reviewer found problems" in step
    second_review = json.dumps(server.chats[-1].messages)
    assert "Earlier cycles of this session, oldest first" in second_review
    assert "review cycle 1 (reviewer -> executor): one naming fix" in second_review
    assert (workspace / "NOTES.md").read_text() == "alpha notes\n"
    shown = _show(shared, _session_id(out))
    moves = [(e["source"], e["target"], e.get("cycle_kind")) for e in shown["events"] if e["type"] == "transitioned"]
    assert ("reviewer", "executor", "review") in moves and moves[-1] == ("reviewer", "completed", None)
    assert shown["session"]["cycles"] == {"review": 1}


def test_a_100_kb_diff_is_trimmed_to_the_reviewers_budget_with_a_note(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server, ACODE_MODEL__NUM_CTX="16384", ACODE_SANDBOX__OUTPUT_LIMIT_BYTES="400000")
    workspace = _workspace(tmp_path / "w")
    big = "".join(f"line {n:06d} of a large generated file, to make the diff large\n" for n in range(1_700))
    assert len(big) > 100_000
    server.by_stage(
        planner=[_one_task_plan()],
        executor=[_tool("write_file", path="a.txt", content="alpha\n"),
                  _tool("write_file", path="big.txt", content=big), _tool("step_complete", summary="both")],
        reviewer=[Json({"decision": "approve", "summary": "fine", "issues": []})])
    result = shared("run", "write a.txt", "--workspace", str(workspace), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    review = server.chats[-1]
    assert review.stage == "reviewer"
    sent = sum(len(m.get("content") or "") for m in review.messages)
    budget = (16_384 - 16_384 // 8) * 15 // 100  # 2,150 tokens
    assert sent <= budget * 4 + 300, sent  # the budget, and the closing note
    text = json.dumps(review.messages, ensure_ascii=False)
    assert "[… the changes to big.txt (" in text  # the largest file goes first, named
    assert f"are left out here to fit the reviewer's prompt budget of {budget:,} tokens" in text
    assert "parts of the diff were left out" in text
    assert "+alpha" in text and "A  big.txt" in text  # a.txt's change and the whole file list stay
    detail = shared("show", _session_id(result.stdout)).stdout
    assert f"of {budget:,} tokens budgeted" in detail


def test_a_prompt_that_cannot_fit_its_stages_budget_pauses_the_session_with_orch_005(
        shared: Acode, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "w")
    (workspace / ".agent").mkdir()
    (workspace / ".agent" / "config.yml").write_text("orchestration:\n  token_budget: {planner: 1}\n")
    responses: dict[str, list[dict[str, Any]]] = {"planner": [_plan(_task("T1", "a.txt", "alpha"))],
                                                  "executor": [], "verifier": [], "reviewer": []}
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 22, out + err  # a pause (escalation), not an end: raise the budget and resume
    assert "paused (escalation): planner failed: " in out
    assert "the planner's prompt needs at least" in out and "(ACODE-ORCH-005)" in out
    assert "its budget is 286 tokens (1% of the model's 32,768-token context less 4,096 for the answer); raise " \
           "model.num_ctx or orchestration.token_budget.planner" in " ".join(out.split())
