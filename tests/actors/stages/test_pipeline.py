"""The per-call pipeline in seed 002's order, against a real broker, persistence and sandbox:
the checkpoint step labels the call, and the sandbox's checkpoint before it is journaled."""

from __future__ import annotations

from typing import Any

from actors.stages.calls.pipeline import CallPipeline
from protocol.messages import EventList, GetEvents
from protocol.plans.results import ModelToolCall, ToolResult
from protocol.policy.checkpoints import CallSite
from protocol.sessions.events import CheckpointTaken, ToolCalled
from tests.actors.stages.conftest import Stack
from tests.actors.stages.test_executor import plan, step

SEED_002 = ["budget", "autonomy", "anomaly", "checkpoint", "execute", "budget_update"]


class _Watched(CallPipeline):
    """The real steps, each noted as it is entered."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.entered: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name in SEED_002:
            object.__getattribute__(self, "entered").append(name)
        return object.__getattribute__(self, name)


def test_a_call_passes_the_steps_in_the_seeds_order_and_the_sandbox_checkpoints_it(stack: Stack) -> None:
    run = stack.stage("executor", [], plan(step("S1")))
    pipeline = _Watched(run.ctx)
    call = ModelToolCall(id="c0", name="write_file", arguments={"path": "a.txt", "content": "a\n"})
    passed = pipeline.run("k-write", call, task="T1", step="S1")
    assert pipeline.entered == SEED_002
    assert isinstance(passed.result, ToolResult) and passed.result.ok
    assert pipeline.checkpoint(call, task="T1", step="S1") == CallSite(stage="executor", task="T1", step="S1",
                                                                       counted=True)

    page = run.ctx.persistence(GetEvents(session_id=run.ctx.request.session_id))
    assert isinstance(page, EventList)
    mine = [e for e in page.events if isinstance(e, (CheckpointTaken, ToolCalled)) and e.key == "k-write"]
    assert [type(e) for e in mine] == [CheckpointTaken, ToolCalled]  # taken before the call, in one commit
    assert isinstance(mine[1], ToolCalled) and mine[1].counted  # a model's call: the budget-update step counted it
    assert run.ctx.spending.used().tool_calls == 1
    taken = mine[0]
    assert isinstance(taken, CheckpointTaken)
    assert (taken.stage, taken.task, taken.step, taken.tool, taken.target) == ("executor", "T1", "S1", "write_file",
                                                                              "a.txt")
