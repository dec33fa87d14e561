"""The reviewer stage over real broker, persistence and sandbox processes, with the scripted model."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from actors.stages.judging import reviewer
from protocol.errors import ModelError, OrchestrationError
from protocol.sessions.session import Feedback, FeedbackItem
from tests.actors.stages.conftest import Stack

PLAN = {"goal": "the goal", "status": "ready", "tasks": [{
    "label": "T1", "title": "the task", "acceptance": [{"label": "A1", "description": "it works"}],
    "steps": [{"label": "S1", "title": "write it", "action": "write_file"}]}]}


def _answer(decision: str, issues: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"json": {"decision": decision, "summary": f"{decision}!", "issues": issues or []}}


def test_request_changes_is_a_decision_and_the_reviewer_sees_the_earlier_cycles(stack: Stack) -> None:
    run = stack.stage("reviewer", [_answer("request_changes", [{"problem": "rename x", "suggestion": "total"}])],
                      PLAN)
    history = [Feedback(source="verifier", summary="A1 failed: exit 1", target="executor", cycle=1,
                        items=[FeedbackItem(label="A1", problem="criterion not met", detail="exit 1")]),
               Feedback(source="planner", summary="plan v2: tasks added: none; changed: T1")]
    run.ctx.request = msgspec.structs.replace(run.ctx.request, history=history)
    result = reviewer.run(run.ctx)
    assert result.review is not None and result.review.decision == "request_changes"
    prompt = json.dumps([m.content for m in run.spy.requests[0].messages])
    assert "Earlier cycles of this session, oldest first" in prompt
    assert "verify cycle 1 (verifier -> executor): A1 failed: exit 1" in prompt
    assert "re-plan: plan v2: tasks added: none; changed: T1" in prompt
    assert '"request_changes"' in run.spy.requests[0].messages[0].content


def test_request_changes_without_issues_goes_back_once_then_fails(stack: Stack) -> None:
    run = stack.stage("reviewer", [_answer("request_changes"), _answer("request_changes")], PLAN)
    with pytest.raises(ModelError) as caught:
        reviewer.run(run.ctx)
    assert caught.value.code == "ACODE-LLM-003"
    assert "request_changes must list the changes to make, one issue each" in caught.value.message
    assert [r.call_site for r in run.spy.requests] == ["review", "review/retry1"]


def test_a_reviewer_whose_system_prompt_alone_exceeds_its_budget_fails_with_orch_005(stack: Stack) -> None:
    run = stack.stage("reviewer", [_answer("approve")], PLAN, token_budget={"reviewer": 1})
    with pytest.raises(OrchestrationError) as caught:
        reviewer.run(run.ctx)
    assert caught.value.code == "ACODE-ORCH-005"
    assert caught.value.message.startswith("the reviewer's prompt needs at least ")
    assert "but its budget is 286 tokens (1% of the model's 32,768-token context less 4,096 for the answer)" \
        in caught.value.message
    assert run.spy.requests == []  # the model was not asked


def test_the_reviewer_never_approves_when_the_baseline_cannot_be_read(stack: Stack) -> None:
    run = stack.stage("reviewer", [_answer("approve")], PLAN, files={"a.txt": "alpha\n"})
    record = stack.home / "run" / "baselines" / run.ctx.session_id / "baseline.json"
    record.write_text("{not json")

    with pytest.raises(OrchestrationError) as caught:
        reviewer.run(run.ctx)

    assert caught.value.code == "ACODE-ORCH-012"
    assert caught.value.message.startswith(
        f"the workspace's changes since the session's baseline cannot be computed: the baseline record {record} is "
        "unreadable (")
    assert "(ACODE-SBX-018); so the work can be neither verified nor reviewed" in caught.value.message
    assert run.spy.requests == []  # the model was never asked to judge an unseen change


def test_the_reviewers_result_lists_what_commands_did_as_well(stack: Stack) -> None:
    run = stack.stage("reviewer", [_answer("approve")], PLAN, files={"a.txt": "alpha\n", "b.txt": "beta\n"})
    (run.workspace / "a.txt").unlink()
    (run.workspace / "b.txt").write_text("")
    (run.workspace / "b.txt").chmod(0o755)

    result = reviewer.run(run.ctx)

    assert result.review is not None and result.review.decision == "approve"
    assert result.changes is not None and result.changes.total == 2
    assert [(c.status, c.path) for c in result.changes.files] == [("deleted", "a.txt"), ("modified", "b.txt")]


def test_the_reviewer_is_told_where_the_task_wants_the_files_it_names(stack: Stack) -> None:
    run = stack.stage("reviewer", [_answer("approve")], PLAN, task="Create hello.py that prints hello")
    reviewer.run(run.ctx)
    system, user = (m.content for m in run.spy.requests[0].messages)
    assert "every file the task names is at the path it names" in system
    assert "The task names these files, each to be at exactly that path: hello.py" in user
    assert "src/app.py" not in system  # no example path a model copies
