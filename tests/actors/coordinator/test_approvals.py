"""The machine's approval transitions: a call that waits pauses the session, a decision retries the attempt."""

from __future__ import annotations

import pytest

from actors.coordinator import human, machine
from protocol.calls.autonomy import ApprovalRequest
from protocol.errors import ErrorInfo, TransitionError
from protocol.sessions.events import ApprovalDecided, SessionPaused
from protocol.sessions.session import SessionSettings, SessionSnapshot, SettingsOverride
from tests.actors.coordinator.stage_results import NOW
from tests.actors.coordinator.stage_results import ok as _ok
from tests.actors.coordinator.stage_results import result as _result

ASK = ApprovalRequest(key="s1:e1:T1/S1:t1:c0", call_hash="h", tool="run_terminal", arguments={"command": "rm x"},
                      risk="destructive", rule="run_terminal rm (destructive)", why="destructive calls ask at "
                      "autonomy 2", task="T1", step="S1", target="rm x", argv=["rm", "x"], cwd="/w")


def _waiting(code: str = "ACODE-EXEC-009") -> SessionSnapshot:
    snap = machine.create("s1", "task", "/w", SessionSettings(), NOW).snapshot
    snap = machine.on_result(snap, _ok(snap), NOW).snapshot  # planner -> executor
    failed = _result(snap, ok=False, summary="waits", error=ErrorInfo(code=code, message="needs approval"),
                     approval=ASK)
    return machine.on_result(snap, failed, NOW).snapshot


def test_a_call_that_needs_approval_pauses_awaiting_approval_with_the_call_and_the_command() -> None:
    snap = _waiting()
    assert snap.status == "paused" and snap.pause is not None and snap.pause.kind == "awaiting_approval"
    assert (snap.pause.command, snap.exit_code, snap.approval) == ("acode approve s1", 22, ASK)
    assert (snap.pause.task, snap.pause.step, snap.pause.resume) == ("T1", "S1", "retry")
    assert _waiting("ACODE-EXEC-005").exit_code == 33  # non_interactive_policy: fail


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_a_decision_is_recorded_and_retries_the_attempt_in_one_commit(verdict: str) -> None:
    snap = _waiting()
    decision = human.decide_call(snap, verdict, NOW, always=True, reason="why not", by="acode approve")
    after = decision.snapshot
    assert (after.status, after.stage, after.attempt, after.approval) == ("running", "executor", snap.attempt + 1,
                                                                           None)
    assert decision.dispatch
    recorded = after.approvals[-1]
    assert (recorded.key, recorded.decision, recorded.reason) == (ASK.key, verdict, "why not")
    assert recorded.always == (verdict == "approve")  # a denial makes no rule
    assert isinstance(decision.events[0], ApprovalDecided) and decision.events[0].target == "rm x"


def test_resume_refuses_a_session_waiting_for_a_decision_and_a_stale_decision_is_refused() -> None:
    snap = _waiting()
    with pytest.raises(TransitionError) as info:
        human.resume(snap, NOW)
    assert info.value.code == "ACODE-CLI-004" and "acode approve s1" in info.value.message
    with pytest.raises(TransitionError) as info:
        human.decide_call(snap, "approve", NOW, key="another-call")
    assert "now waits on another call" in info.value.message
    running = human.decide_call(snap, "approve", NOW).snapshot
    with pytest.raises(TransitionError):
        human.decide_call(running, "approve", NOW)


def test_no_resume_override_can_change_the_autonomy_level() -> None:
    assert not {"autonomy", "approvals", "approval_mode"} & set(SettingsOverride.__struct_fields__)
    snap = _waiting()
    decided = human.decide_call(snap, "deny", NOW).snapshot
    assert decided.settings == snap.settings
    assert not any(isinstance(e, SessionPaused) for e in human.decide_call(snap, "deny", NOW).events)
