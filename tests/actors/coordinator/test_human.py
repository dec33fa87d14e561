"""A human's hand on the session state machine: plan review, pause, steer (issue 11), without processes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.coordinator import human, machine
from protocol.errors import ErrorInfo, TransitionError
from protocol.plans.results import StageResult
from protocol.sessions.events import PauseRequested, PlanRecorded, SessionPaused, SessionResumed, StageRetried, Steered
from protocol.sessions.session import MAX_STEERING_NOTES, SessionSettings, SessionSnapshot
from tests.actors.coordinator.stage_results import NOW, PLAN
from tests.actors.coordinator.stage_results import ok as _ok
from tests.actors.coordinator.stage_results import result as _result


def _new(**settings_fields: object) -> SessionSnapshot:
    return machine.create("s1", "task", "/w", SessionSettings(**settings_fields), NOW).snapshot  # type: ignore[arg-type]


def _paused_result(snap: SessionSnapshot) -> StageResult:
    return _result(snap, ok=False, error=ErrorInfo(code="ACODE-ORCH-010",
                                                   message="paused by the user before tool call write_file"))


# -- plan review -------------------------------------------------------------------------------


def test_a_ready_plan_under_review_pauses_plan_review_and_keeps_the_plan() -> None:
    snap = _new(plan_review=True)
    decision = machine.on_result(snap, _ok(snap), NOW)
    new = decision.snapshot
    assert new.status == "paused" and new.stage == "planner" and new.plan_version == 1
    assert new.pause is not None and new.pause.kind == "plan_review" and new.pause.code == "ACODE-ORCH-011"
    assert new.pause.command == "acode approve s1" and new.exit_code == 22
    assert "acode replan s1" in new.pause.message
    assert decision.plan == PLAN, "the plan is recorded with the pause"
    assert [type(e) for e in decision.events][-2:] == [PlanRecorded, SessionPaused]


def test_approve_enters_the_executor_with_the_reviewed_plan() -> None:
    snap = _new(plan_review=True)
    paused = machine.on_result(snap, _ok(snap), NOW).snapshot
    decision = human.approve_plan(paused, NOW + 5)
    new = decision.snapshot
    assert new.status == "running" and new.stage == "executor" and new.plan_version == 1 and new.pause is None
    assert isinstance(decision.events[0], SessionResumed) and "plan v1 approved" in decision.events[0].reason
    assert decision.dispatch


def test_replan_sends_the_plan_back_to_the_planner_with_the_users_feedback() -> None:
    snap = _new(plan_review=True)
    paused = machine.on_result(snap, _ok(snap), NOW).snapshot
    new = human.replan(paused, "use argparse, not click", NOW + 5).snapshot
    assert new.status == "running" and new.stage == "planner" and new.visits["planner"] == 2
    assert new.feedback is not None and new.feedback.source == "user" and new.feedback.target == "planner"
    assert new.feedback.summary == "use argparse, not click"
    assert new.history[-1] == new.feedback, "the reviewer later sees what the user asked for"
    assert new.cycles == {}, "a human's re-plan spends no review cycle"


def test_a_pause_asked_before_the_plan_review_is_answered_by_it_and_approve_goes_on() -> None:
    snap = _new(plan_review=True)
    pending = human.request_pause(snap, NOW + 1)
    assert pending is not None
    review = machine.on_result(pending.snapshot, _ok(pending.snapshot), NOW + 2).snapshot
    assert review.pause is not None and review.pause.kind == "plan_review"
    approved = human.approve_plan(review, NOW + 3)
    assert approved.dispatch and approved.snapshot.pause_requested_at == 0.0, "the user's approve is the go-on"


def test_resume_of_a_plan_under_review_says_to_approve_or_replan() -> None:
    snap = _new(plan_review=True)
    paused = machine.on_result(snap, _ok(snap), NOW).snapshot
    with pytest.raises(TransitionError) as caught:
        human.resume(paused, NOW + 5)
    assert caught.value.code == "ACODE-CLI-008"
    assert "acode approve s1" in caught.value.message and "acode replan s1" in caught.value.message


def test_approve_or_replan_of_a_session_not_under_review_is_refused() -> None:
    snap = _new()
    for act in (lambda s: human.approve_plan(s, NOW), lambda s: human.replan(s, "x", NOW)):
        with pytest.raises(TransitionError) as caught:
            act(snap)
        assert caught.value.code == "ACODE-CLI-004" and "is running, not waiting for a plan review" in str(caught.value)


# -- pause -------------------------------------------------------------------------------------


def test_a_pause_is_recorded_and_a_repeated_one_changes_nothing() -> None:
    snap = _new()
    decision = human.request_pause(snap, NOW + 1)
    assert decision is not None and decision.snapshot.pause_requested_at == NOW + 1
    assert [type(e) for e in decision.events] == [PauseRequested]
    assert decision.snapshot.status == "running" and not decision.dispatch, "the stage at work is told, not redone"
    assert human.request_pause(decision.snapshot, NOW + 2) is None, "a pause on its way: no second event"
    paused = machine.on_result(decision.snapshot, _paused_result(decision.snapshot), NOW + 3).snapshot
    assert human.request_pause(paused, NOW + 4) is None, "a paused session: no second event"


def test_a_stage_stopped_at_a_safe_point_pauses_user_and_resume_retries_the_attempt() -> None:
    snap = _advance_to_executor()
    pending = human.request_pause(snap, NOW + 1)
    assert pending is not None
    decision = machine.on_result(pending.snapshot, _paused_result(pending.snapshot), NOW + 2)
    paused = decision.snapshot
    assert paused.status == "paused" and paused.stage == "executor" and paused.exit_code == 22
    assert paused.pause is not None and paused.pause.kind == "user" and paused.pause.resume == "retry"
    assert paused.pause.code == "ACODE-ORCH-010" and paused.pause.command == "acode resume s1"
    assert paused.pause.message.startswith("paused by the user before tool call write_file in the executor; ")
    resumed = human.resume(paused, NOW + 3)
    new = resumed.snapshot
    assert new.status == "running" and new.stage == "executor" and new.visit == 1 and new.attempt == 2, \
        "the same visit, the next attempt: recorded answers and journaled calls replay"
    assert new.pause_requested_at == 0.0 and resumed.dispatch


def test_a_stage_that_finished_before_the_pause_reached_it_pauses_before_the_next_dispatch() -> None:
    snap = _advance_to_executor()
    pending = human.request_pause(snap, NOW + 1)
    assert pending is not None
    decision = machine.on_result(pending.snapshot, _ok(pending.snapshot), NOW + 2)
    new = decision.snapshot
    assert new.status == "paused" and new.stage == "verifier" and not decision.dispatch
    assert new.pause is not None and new.pause.kind == "user"
    assert new.pause.message.startswith("paused by the user before the verifier (attempt 1); `acode resume s1` ")


@pytest.mark.parametrize("lose", ["lost", "timeout", "recover"])
def test_a_lost_attempt_of_a_session_asked_to_pause_pauses_instead_of_dispatching_again(lose: str) -> None:
    snap = _advance_to_executor()
    pending = human.request_pause(snap, NOW + 1)
    assert pending is not None
    if lose == "lost":
        decision = machine.on_lost(pending.snapshot, "executor died", NOW + 2)
    elif lose == "timeout":
        decision = machine.on_timeout(pending.snapshot, NOW + 2)
    else:
        decision = machine.recover(pending.snapshot, NOW + 2)
    assert decision.snapshot.status == "paused" and decision.snapshot.pause is not None
    assert decision.snapshot.pause.kind == "user" and not decision.dispatch


def test_a_resume_sooner_than_one_second_after_the_pause_is_refused() -> None:
    snap = _advance_to_executor()
    pending = human.request_pause(snap, NOW + 1)
    assert pending is not None
    paused = machine.on_result(pending.snapshot, _paused_result(pending.snapshot), NOW + 1.2).snapshot
    with pytest.raises(TransitionError) as caught:
        human.resume(paused, NOW + 1.5)
    assert caught.value.code == "ACODE-CLI-007"
    assert "paused 0.50s ago" in caught.value.message and "again in 0.50s" in caught.value.message
    assert human.resume(paused, NOW + 2.0).snapshot.status == "running"


def test_a_resume_before_the_stage_stopped_withdraws_the_pause() -> None:
    snap = _advance_to_executor()
    pending = human.request_pause(snap, NOW + 1)
    assert pending is not None
    withdrawn = human.resume(pending.snapshot, NOW + 3)
    assert withdrawn.snapshot.status == "running" and withdrawn.snapshot.pause_requested_at == 0.0
    assert not withdrawn.dispatch, "the stage at work goes on"
    late = machine.on_result(withdrawn.snapshot, _paused_result(withdrawn.snapshot), NOW + 4)
    assert late.snapshot.status == "running" and late.snapshot.attempt == 2 and late.dispatch
    assert any(isinstance(e, StageRetried) for e in late.events), "a stage that stopped anyway is retried"


def test_a_finished_session_cannot_be_paused_or_steered() -> None:
    snap = human.cancel(_new(), "no", NOW).snapshot
    for act in (lambda s: human.request_pause(s, NOW), lambda s: human.steer(s, "x", NOW)):
        with pytest.raises(TransitionError) as caught:
            act(snap)
        assert caught.value.code == "ACODE-CLI-004"


# -- steer -------------------------------------------------------------------------------------


def test_steering_is_kept_in_the_session_with_its_events_id() -> None:
    snap = _new()
    decision = human.steer(snap, "keep the public API", NOW + 1)
    event = decision.events[0]
    assert isinstance(event, Steered) and event.text == "keep the public API" and event.stage == "planner"
    assert [(n.id, n.text) for n in decision.snapshot.steering] == [(event.id, "keep the public API")]
    assert not decision.dispatch and decision.snapshot.attempt == snap.attempt, "the stage at work is not redone"
    later = machine.on_result(decision.snapshot, _ok(decision.snapshot), NOW + 2).snapshot
    assert later.stage == "executor" and later.steering == decision.snapshot.steering, "every later stage gets it"


def test_only_the_latest_steering_notes_are_kept() -> None:
    snap = _new()
    for n in range(MAX_STEERING_NOTES + 3):
        snap = human.steer(snap, f"note {n}", NOW + n).snapshot
    assert len(snap.steering) == MAX_STEERING_NOTES and snap.steering[-1].text.endswith("22")


def _advance_to_executor() -> SessionSnapshot:
    snap = _new()
    return machine.on_result(snap, _ok(snap), NOW).snapshot


# -- any order of inputs -----------------------------------------------------------------------

HUMAN_INPUTS = st.sampled_from(["ok", "fail", "lost", "timeout", "recover", "stopped", "pause", "steer", "resume",
                                "approve", "replan", "cancel"])


@settings(max_examples=500, deadline=None)
@given(inputs=st.lists(HUMAN_INPUTS, max_size=60), review=st.booleans())
def test_no_stage_is_dispatched_while_a_pause_stands_whatever_the_order_of_inputs(
        inputs: list[str], review: bool) -> None:
    snap = _new(plan_review=review)
    now = NOW
    for item in inputs:
        if snap.status in ("completed", "failed", "cancelled"):
            break
        now += 0.6  # some resumes come too soon after their pause (refused), some do not
        decision: machine.Decision | None
        try:
            decision = _input(snap, item, now)
        except TransitionError as exc:  # a human's request the state refuses: answered, nothing changes
            assert exc.code in ("ACODE-CLI-004", "ACODE-CLI-007", "ACODE-CLI-008"), exc
            continue
        if decision is None:
            continue
        new = decision.snapshot
        assert not (decision.dispatch and new.pause_requested_at), "dispatched although the user asked to pause"
        if decision.going_on:
            assert (new.stage, new.visit, new.attempt, new.status) == (snap.stage, snap.visit, snap.attempt,
                                                                      snap.status), "the attempt in flight goes on"
        if snap.pause is not None and snap.pause.kind == "plan_review" and new.status == "running":
            assert item in ("approve", "replan"), f"{item} left a plan review"
        if new.status == "paused" and new.pause is not None and new.pause.kind == "user":
            assert snap.pause_requested_at, "only the user pauses a session as user"
        snap = new


def _input(snap: SessionSnapshot, item: str, now: float) -> machine.Decision | None:
    running = snap.status == "running"
    match item:
        case "pause":
            return human.request_pause(snap, now)
        case "steer":
            return human.steer(snap, "keep it small", now)
        case "resume":
            return human.resume(snap, now)
        case "approve":
            return human.approve_plan(snap, now)
        case "replan":
            return human.replan(snap, "smaller", now)
        case "cancel":
            return human.cancel(snap, "x", now)
        case "lost" if running:
            return machine.on_lost(snap, "lost", now)
        case "timeout" if running:
            return machine.on_timeout(snap, now)
        case "recover" if running:
            return machine.recover(snap, now)
        case "stopped" if running:
            return machine.on_result(snap, _paused_result(snap), now)
        case "fail" if running:
            return machine.on_result(snap, _result(snap, ok=False), now)
        case _ if running:
            return machine.on_result(snap, _ok(snap), now)
    return None
