"""The small profile's review by checks, over the stand-in server (issue 25).

In the benchmark Qwen2.5-Coder-1.5B solved HumanEval/0 in acode's first answer, the
test passed, and then the same model, asked to review, answered request_changes ("the
function is not implemented correctly") and sent the work back, where it broke it. Under a
profile whose review style is ``checks`` a change whose criteria all passed, one at least
by running its command, is approved by those checks, without asking the model; anything
else is the model's to review, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from actors.stages.judging import reviewer
from protocol.plans.results import CriterionVerdict, StageResult, VerifierAnswer
from protocol.sessions.profiles import profile_for
from protocol.sessions.session import OpenAIProvider
from tests.actors.stages.conftest import Run, Stack
from tests.modelserver import Json, ModelServer

MODEL = "qwen2.5-coder-1.5b-instruct"
# the real model's answer to the review of its own passing solution
REJECTION = Json({"decision": "request_changes",
                  "summary": "The changes do not address the task requirements. The `has_close_elements` function is "
                             "not implemented correctly and does not pass the test.",
                  "issues": [{"problem": "The function `has_close_elements` is not implemented correctly.",
                              "suggestion": "Iterate through the list and check the threshold."}]})


def plan(checked: bool = True) -> dict[str, Any]:
    criteria: list[dict[str, Any]] = [{"label": "A1", "description": "test_solution.py passes",
                                       "check": {"command": "python -m pytest -q test_solution.py"}}]
    if not checked:
        criteria = [{"label": "A1", "description": "the function is right"}]
    return {"goal": "Implement `has_close_elements` in solution.py so that test_solution.py passes.",
            "status": "ready", "tasks": [{"label": "T1", "title": "the task", "acceptance": criteria,
                                          "steps": [{"label": "S1", "title": "implement", "action": "modify_file"}],
                                          "resources": {"write": ["solution.py"]}}]}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(models=[MODEL, "qwen2.5-coder-32b"]) as running:
        yield running


def _stage(stack: Stack, server: ModelServer, the_plan: dict[str, Any], *, passed: bool = True,
           model: str = MODEL, **provider: Any) -> Run:
    spec = OpenAIProvider(base_url=server.openai_url, model=model, num_ctx=8_192, **provider)
    run = stack.stage("reviewer", [], the_plan, files={"solution.py": "x = 1\n"}, provider=spec,
                      profile=profile_for(model))
    verdicts = [CriterionVerdict(label="A1", passed=passed, evidence="`python -m pytest -q test_solution.py` exited 0")]
    previous = StageResult(session_id=run.ctx.request.session_id, stage="verifier", visit=1, attempt=1, ok=True,
                           verification=VerifierAnswer(passed=passed, criteria=verdicts))
    run.ctx.request = msgspec.structs.replace(run.ctx.request, previous=previous)
    return run


def test_a_change_whose_checks_all_passed_is_approved_without_asking_the_small_model(
        stack: Stack, server: ModelServer) -> None:
    server.queue(REJECTION)
    run = _stage(stack, server, plan())

    result = reviewer.run(run.ctx)

    assert result.review is not None and result.review.decision == "approve"
    assert result.summary.startswith("approved by the checks: every criterion passed (A1; "
                                     "`python -m pytest -q test_solution.py` ran)")
    assert server.chats == []
    assert result.changes is not None  # the diff was still taken: nothing is approved unseen by the record


@pytest.mark.parametrize("case", ["judged by the model", "a bigger model reviews", "the default profile"])
def test_otherwise_the_model_reviews(stack: Stack, server: ModelServer, case: str) -> None:
    server.queue(REJECTION)
    if case == "judged by the model":  # no criterion was decided by a command
        run = _stage(stack, server, plan(checked=False))
    elif case == "a bigger model reviews":
        run = _stage(stack, server, plan(), stage_models={"reviewer": "qwen2.5-coder-32b"})
    else:
        run = _stage(stack, server, plan(), model="qwen2.5-coder-32b")

    result = reviewer.run(run.ctx)

    assert result.review is not None and result.review.decision == "request_changes"
    assert len(server.chats) == 1
