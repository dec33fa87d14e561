"""Stage answers for session-machine tests: a result for the stage a snapshot is in."""

from __future__ import annotations

from protocol.plans.plan import PlanTask, TaskPlan
from protocol.plans.results import ReviewerAnswer, StageResult, VerifierAnswer
from protocol.sessions.session import SessionSnapshot

__all__ = ["NOW", "PLAN", "ok", "result"]

NOW = 1_000.0
PLAN = TaskPlan(goal="g", tasks=[PlanTask(label="T1", title="t")], version=1)


def result(snap: SessionSnapshot, **fields: object) -> StageResult:
    """The answer to the snapshot's current dispatch: ``ok`` unless ``fields`` say otherwise."""
    assert snap.stage is not None
    return StageResult(session_id=snap.id, stage=snap.stage, visit=snap.visit, attempt=snap.attempt,
                       **{"ok": True, **fields})  # type: ignore[arg-type]


def ok(snap: SessionSnapshot) -> StageResult:
    """A successful answer that moves the session on: a plan, a passed verification, an approval."""
    match snap.stage:
        case "planner":
            return result(snap, plan=PLAN)
        case "verifier":
            return result(snap, verification=VerifierAnswer(passed=True))
        case "reviewer":
            return result(snap, review=ReviewerAnswer(decision="approve"))
    return result(snap)
