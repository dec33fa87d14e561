"""The session state machine, without processes: transitions, cycles, limits, exit codes."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.coordinator import human, machine
from protocol.errors import ErrorInfo, TransitionError
from protocol.plans.plan import Question, TaskPlan
from protocol.plans.results import (
    CriterionVerdict,
    ReviewerAnswer,
    ReviewIssue,
    Rework,
    StageMetrics,
    StageResult,
    VerifierAnswer,
)
from protocol.sessions.events import (
    ReworkChosen,
    SessionFinished,
    SessionPaused,
    StageFinished,
    StageRetried,
    Transitioned,
)
from protocol.sessions.session import OllamaProvider, SessionSettings, SessionSnapshot
from tests.actors.coordinator.stage_results import NOW, PLAN
from tests.actors.coordinator.stage_results import ok as _ok
from tests.actors.coordinator.stage_results import result as _result


def _verify_fail(snap: SessionSnapshot, evidence: str | None = None) -> StageResult:
    evidence = evidence if evidence is not None else f"exit 1 (executor visit {snap.visits.get('executor', 0)})"
    return _result(snap, verification=VerifierAnswer(
        passed=False, summary="A1 failed", criteria=[CriterionVerdict(label="A1", passed=False, evidence=evidence)]))


def _replan(snap: SessionSnapshot) -> StageResult:
    return _result(snap, review=ReviewerAnswer(decision="replan", summary="missing docs",
                                               issues=[ReviewIssue(criterion="A2", problem="no docs")]))


def _new(**settings_fields: object) -> SessionSnapshot:
    return machine.create("s1", "task", "/w", SessionSettings(**settings_fields), NOW).snapshot  # type: ignore[arg-type]


def _advance(snap: SessionSnapshot, until: str) -> SessionSnapshot:
    while snap.stage != until:
        snap = machine.on_result(snap, _ok(snap), NOW).snapshot
    return snap


def test_a_clean_run_visits_every_stage_and_completes_with_exit_0() -> None:
    decision = machine.create("s1", "task", "/w", SessionSettings(), NOW)
    snap = decision.snapshot
    seen = [(e.source, e.target) for e in decision.events if isinstance(e, Transitioned)]
    while snap.status == "running":
        decision = machine.on_result(snap, _ok(snap), NOW)
        snap = decision.snapshot
        seen += [(e.source, e.target) for e in decision.events if isinstance(e, Transitioned)]
    assert seen == [("start", "planner"), ("planner", "executor"), ("executor", "verifier"),
                    ("verifier", "reviewer"), ("reviewer", "completed")]
    assert snap.status == "completed" and snap.exit_code == 0 and snap.stage is None
    assert isinstance(decision.events[-1], SessionFinished)


def test_the_planner_result_carries_the_plan_to_persist() -> None:
    decision = machine.on_result(_new(), _ok(_new()), NOW)
    assert decision.plan == PLAN
    assert decision.snapshot.plan_version == 1 and decision.snapshot.stage == "executor"


def test_a_stage_finished_event_names_the_model_asked_and_counts_its_calls() -> None:
    settings = SessionSettings(provider=OllamaProvider(model="qwen", stage_models={"planner": "big"}))
    snap = machine.create("s1", "task", "/w", settings, NOW).snapshot
    result = msgspec.structs.replace(_ok(snap), metrics=StageMetrics(model_calls=3, replayed_model_calls=1))
    finished = [e for e in machine.on_result(snap, result, NOW).events if isinstance(e, StageFinished)]
    assert [(e.provider, e.model, e.model_calls, e.replayed_model_calls) for e in finished] == [("ollama", "big", 3, 1)]


def test_a_verify_failure_cycles_to_the_executor_with_the_failures_as_feedback() -> None:
    snap = _advance(_new(), "verifier")
    decision = machine.on_result(snap, _verify_fail(snap), NOW)
    new = decision.snapshot
    assert new.stage == "executor" and new.visits["executor"] == 2 and new.cycles == {"verify": 1}
    assert new.feedback is not None and new.feedback.source == "verifier"
    assert new.feedback.items[0].label == "A1" and new.feedback.items[0].detail == "exit 1 (executor visit 1)"
    transition = [e for e in decision.events if isinstance(e, Transitioned)][0]
    assert (transition.cycle_kind, transition.cycle) == ("verify", 1)


def test_a_replan_review_cycles_to_the_planner() -> None:
    snap = _advance(_new(), "reviewer")
    new = machine.on_result(snap, _replan(snap), NOW).snapshot
    assert new.stage == "planner" and new.visits["planner"] == 2 and new.cycles == {"review": 1}
    assert new.feedback is not None and new.feedback.items[0].label == "A2"


def test_the_fourth_cycle_of_one_kind_pauses_with_exit_21() -> None:
    snap = _advance(_new(), "verifier")
    for _ in range(3):
        snap = machine.on_result(snap, _verify_fail(snap), NOW).snapshot
        snap = _advance(snap, "verifier")
    decision = machine.on_result(snap, _verify_fail(snap), NOW)
    paused = decision.snapshot
    assert paused.status == "paused" and paused.exit_code == 21
    assert paused.pause is not None and paused.pause.code == "ACODE-ORCH-003"
    assert "verify cycle limit reached (3 of 3)" in paused.pause.message
    assert isinstance(decision.events[-1], SessionPaused)


def test_resuming_after_the_cycle_limit_makes_the_transition_with_a_fresh_round() -> None:
    snap = _advance(_new(cycle_limits={"verify": 1, "review": 1}), "verifier")
    snap = machine.on_result(snap, _verify_fail(snap), NOW).snapshot
    snap = _advance(snap, "verifier")
    paused = machine.on_result(snap, _verify_fail(snap), NOW).snapshot
    resumed = human.resume(paused, NOW).snapshot
    assert resumed.status == "running" and resumed.stage == "executor" and resumed.cycles["verify"] == 0


def test_timeouts_retry_then_pause_with_exit_20() -> None:
    snap = _new(stage_retry_limit=2)
    for attempt in (2, 3):
        decision = machine.on_timeout(snap, NOW)
        snap = decision.snapshot
        assert snap.attempt == attempt and snap.status == "running"
        assert isinstance(decision.events[-1], StageRetried)
    snap = machine.on_timeout(snap, NOW).snapshot
    assert snap.status == "paused" and snap.exit_code == 20
    assert snap.pause is not None and snap.pause.code == "ACODE-ORCH-002"


def test_a_lost_attempt_is_dispatched_again_with_the_next_attempt_number() -> None:
    decision = machine.on_lost(_new(), "planner exited", NOW)
    assert decision.snapshot.attempt == 2 and decision.dispatch
    assert decision.events[0].reason == "planner exited"  # type: ignore[union-attr]


def test_endless_losses_escalate_to_a_human() -> None:
    snap = _new()
    for _ in range(machine.MAX_ATTEMPTS - 1):
        snap = machine.on_lost(snap, "lost", NOW).snapshot
    snap = machine.on_lost(snap, "lost", NOW).snapshot
    assert snap.status == "paused" and snap.exit_code == 22


def test_a_stage_failure_pauses_the_session_with_its_error_and_the_command_that_continues() -> None:
    snap = _new()
    error = ErrorInfo(code="ACODE-LLM-002", message="no response left for the planner")
    decision = machine.on_result(snap, StageResult(session_id="s1", stage="planner", visit=1, attempt=1,
                                                   ok=False, error=error), NOW)
    paused = decision.snapshot
    assert paused.status == "paused" and paused.exit_code == 22 and paused.stage == "planner"
    assert paused.pause is not None and paused.pause.kind == "escalation" and paused.pause.code == "ACODE-LLM-002"
    assert paused.pause.message == "planner failed: no response left for the planner"
    assert paused.pause.command == "acode resume s1"
    event = decision.events[-1]
    assert isinstance(event, SessionPaused) and event.command == "acode resume s1"


def test_cancel_is_exit_23_and_only_once() -> None:
    snap = human.cancel(_new(), "user asked", NOW).snapshot
    assert snap.status == "cancelled" and snap.exit_code == 23
    with pytest.raises(TransitionError) as info:
        human.cancel(snap, "again", NOW)
    assert info.value.code == "ACODE-CLI-004"


def test_a_needs_clarification_plan_pauses_for_input_with_exit_22() -> None:
    snap = _new()
    plan = TaskPlan(goal="g", status="needs_clarification", version=1,
                    questions=[Question(label="Q1", question="which file?")])
    decision = machine.on_result(snap, _result(snap, plan=plan), NOW)
    assert decision.snapshot.status == "paused" and decision.snapshot.exit_code == 22
    assert "which file?" in decision.snapshot.pause.message  # type: ignore[union-attr]


def test_completion_requires_every_stage_visited() -> None:
    snap = _new()
    forged = snap.__class__(**{**{f: getattr(snap, f) for f in snap.__struct_fields__},
                               "stage": "reviewer", "visits": {"reviewer": 1}})
    with pytest.raises(TransitionError) as info:
        machine.on_result(forged, _ok(forged), NOW)
    assert "never visited: planner, executor, verifier" in info.value.message


INPUTS = st.sampled_from(["ok", "fail", "cycle", "lost", "timeout", "resume", "cancel"])


@settings(max_examples=300, deadline=None)
@given(inputs=st.lists(INPUTS, max_size=80), verify=st.integers(0, 4), review=st.integers(0, 4))
def test_any_sequence_of_inputs_keeps_the_machine_inside_its_whitelist(
        inputs: list[str], verify: int, review: int) -> None:
    snap = _new(cycle_limits={"verify": verify, "review": review})
    for item in inputs:
        if snap.status in ("completed", "failed", "cancelled"):
            break
        if snap.status == "paused":
            decision = human.resume(snap, NOW) if item == "resume" else human.cancel(snap, "x", NOW)
        elif item == "cancel":
            decision = human.cancel(snap, "x", NOW)
        elif item == "lost":
            decision = machine.on_lost(snap, "lost", NOW)
        elif item == "timeout":
            decision = machine.on_timeout(snap, NOW)
        elif item == "fail":
            assert snap.stage is not None  # a running session is always in a stage
            decision = machine.on_result(snap, StageResult(
                session_id="s1", stage=snap.stage, visit=snap.visit, attempt=snap.attempt, ok=False), NOW)
        elif item == "cycle" and snap.stage == "verifier":
            decision = machine.on_result(snap, _verify_fail(snap), NOW)
        elif item == "cycle" and snap.stage == "reviewer":
            decision = machine.on_result(snap, _replan(snap), NOW)
        else:
            decision = machine.on_result(snap, _ok(snap), NOW)
        new = decision.snapshot
        for event in decision.events:
            if isinstance(event, Transitioned):
                assert (event.source, event.target) in machine.ALLOWED
        if new.status == "running":
            assert new.stage is not None and new.attempt >= 1 and new.exit_code is None
            for kind, count in new.cycles.items():
                assert count <= new.settings.cycle_limits[kind]
        if new.status == "completed":
            assert all(new.visits.get(s) for s in ("planner", "executor", "verifier", "reviewer"))
        if new.status in ("completed", "failed", "cancelled"):
            assert new.exit_code == {"completed": 0, "failed": 1, "cancelled": 23}[new.status]
        if new.status == "paused":
            assert new.exit_code in (20, 21, 22) and new.pause is not None
        assert all(new.visits.get(s, 0) >= snap.visits.get(s, 0) for s in snap.visits)
        snap = new


# --- the reviewer's three decisions, finished work, history --------------------------------

def _changes(snap: SessionSnapshot) -> StageResult:
    return _result(snap, review=ReviewerAnswer(decision="request_changes", summary="two names",
                                               issues=[ReviewIssue(problem="rename x", suggestion="call it total")]))


def test_request_changes_goes_back_to_the_executor_as_a_review_cycle_with_its_issues() -> None:
    snap = _advance(_new(), "reviewer")
    decision = machine.on_result(snap, _changes(snap), NOW)
    new = decision.snapshot
    assert new.stage == "executor" and new.visits["executor"] == 2 and new.cycles == {"review": 1}
    assert new.feedback is not None and new.feedback.source == "reviewer" and new.feedback.target == "executor"
    assert [(i.label, i.problem, i.detail) for i in new.feedback.items] == [("issue 1", "rename x", "call it total")]
    moved = [e for e in decision.events if isinstance(e, Transitioned)]
    assert [(e.source, e.target, e.cycle_kind, e.cycle) for e in moved] == [("reviewer", "executor", "review", 1)]
    new = _advance(new, "reviewer")  # executor -> verifier -> reviewer, then approve
    assert machine.on_result(new, _ok(new), NOW).snapshot.status == "completed"


def test_request_changes_past_the_review_cycle_limit_pauses_and_resume_goes_to_the_executor() -> None:
    snap = _advance(_new(cycle_limits={"verify": 3, "review": 0}), "reviewer")
    paused = machine.on_result(snap, _changes(snap), NOW).snapshot
    assert paused.status == "paused" and paused.pause is not None and paused.pause.kind == "cycle_limit"
    resumed = human.resume(paused, NOW).snapshot
    assert resumed.status == "running" and resumed.stage == "executor"


def test_a_verification_records_its_rework_and_the_session_keeps_it_until_the_next_plan() -> None:
    snap = _advance(_new(), "verifier")
    rework = Rework(rule="criteria", reason="A1 failed: the steps of T1 run again", rerun=["T1/S1"],
                    kept=["T2/S1"], completed_tasks=["T2"])
    decision = machine.on_result(snap, _result(snap, verification=_verify_fail(snap).verification, rework=rework),
                                 NOW)
    chosen = [e for e in decision.events if isinstance(e, ReworkChosen)]
    assert [(e.rule, e.rerun, e.kept, e.completed_tasks) for e in chosen] == [
        ("criteria", ["T1/S1"], ["T2/S1"], ["T2"])]
    new = decision.snapshot
    assert (new.stage, new.kept_steps, new.completed_tasks) == ("executor", ["T2/S1"], ["T2"])
    new = _advance(new, "reviewer")
    replanned = machine.on_result(new, _replan(new), NOW).snapshot
    assert replanned.stage == "planner" and replanned.completed_tasks == ["T2"]  # the planner keeps T2
    second = msgspec.structs.replace(PLAN, version=2, change_summary="tasks added: none; changed: T1")
    after = machine.on_result(replanned, _result(replanned, plan=second), NOW).snapshot
    assert (after.kept_steps, after.completed_tasks) == ([], [])  # the new plan carries what is completed


def test_the_history_holds_every_cycle_and_re_plan_for_the_reviewer() -> None:
    snap = _advance(_new(), "verifier")
    snap = machine.on_result(snap, _verify_fail(snap), NOW).snapshot
    snap = _advance(snap, "reviewer")
    snap = machine.on_result(snap, _replan(snap), NOW).snapshot
    second = msgspec.structs.replace(PLAN, version=2, change_summary="tasks added: T2")
    snap = machine.on_result(snap, _result(snap, plan=second), NOW).snapshot
    assert [(h.source, h.target, h.cycle, h.summary) for h in snap.history] == [
        ("verifier", "executor", 1, "A1 failed"), ("reviewer", "planner", 1, "missing docs"),
        ("planner", None, 0, "plan v2: tasks added: T2")]
