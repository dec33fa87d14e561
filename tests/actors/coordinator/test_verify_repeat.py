"""The ``verify_repeat`` anomaly in the session machine: the same criteria failing again
after an executor visit that wrote files is an ``anomaly_detected`` event and a note in the
executor's feedback the first time, a pause ``anomaly`` (ACODE-ORCH-017, exit 25) the next;
the same failure with nothing changed stays ORCH-008's; a resume starts the ladder afresh."""

from __future__ import annotations

from actors.coordinator import human, machine
from protocol.plans.results import CriterionVerdict, ExecutionReport, StageResult, StepRecord, VerifierAnswer
from protocol.policy.anomalies import AnomalyThresholds
from protocol.sessions.events import AnomalyDetected
from protocol.sessions.session import SessionSettings, SessionSnapshot
from tests.actors.coordinator.stage_results import NOW
from tests.actors.coordinator.stage_results import ok as _ok
from tests.actors.coordinator.stage_results import result as _result


def _at_verifier(**fields: object) -> SessionSnapshot:
    snap = machine.create("s1", "task", "/w", SessionSettings(**fields), NOW).snapshot  # type: ignore[arg-type]
    while snap.stage != "verifier":
        snap = machine.on_result(snap, _wrote(snap) if snap.stage == "executor" else _ok(snap), NOW).snapshot
    return snap


def _wrote(snap: SessionSnapshot, files: tuple[str, ...] = ("calc.py",)) -> StageResult:
    """The executor's answer: one step of this visit, which wrote ``files``."""
    step = StepRecord(session_id="s1", visit=snap.visit, task="T1", step="S1", status="completed",
                      files_changed=list(files))
    return _result(snap, execution=ExecutionReport(steps=[step], files_changed=list(files)))


def _failed(snap: SessionSnapshot, evidence: str, *labels: str) -> StageResult:
    return _result(snap, verification=VerifierAnswer(passed=False, summary=f"{', '.join(labels)} failed", criteria=[
        CriterionVerdict(label=label, passed=False, evidence=evidence) for label in labels]))


def _anomalies(decision: machine.Decision) -> list[tuple[str, str, str, list[int]]]:
    return [(e.kind, e.response, e.stage, e.turns) for e in decision.events if isinstance(e, AnomalyDetected)]


def test_the_same_criteria_failing_after_changes_are_noted_to_the_executor_then_pause_the_session() -> None:
    snap = _at_verifier(cycle_limits={"verify": 5, "review": 3})
    first = machine.on_result(snap, _failed(snap, "assert -1 == 5", "A1"), NOW)
    assert _anomalies(first) == []
    snap = machine.on_result(first.snapshot, _wrote(first.snapshot), NOW).snapshot  # the executor changed calc.py

    second = machine.on_result(snap, _failed(snap, "assert 6 == 5", "A1"), NOW)  # other evidence: not ORCH-008

    assert _anomalies(second) == [("verify_repeat", "note", "verifier", [1, 2])]
    [event] = [e for e in second.events if isinstance(e, AnomalyDetected)]
    assert event.evidence == ("the same criteria failed at verifications 1, 2 although the workspace changed "
                              "between them: A1")
    snap = second.snapshot
    assert (snap.status, snap.stage) == ("running", "executor")
    assert snap.feedback is not None and snap.feedback.items[-1].label == "anomaly"
    assert snap.feedback.items[-1].problem.startswith("acode noticed verify_repeat: Your changes did not touch")
    assert snap.feedback.items[-1].detail == event.evidence
    for evidence in ("assert 7 == 5",):  # a third failure starts a new chain: nothing yet
        snap = machine.on_result(snap, _wrote(snap), NOW).snapshot
        third = machine.on_result(snap, _failed(snap, evidence, "A1"), NOW)
        assert _anomalies(third) == [] and third.snapshot.stage == "executor"
        snap = third.snapshot
    snap = machine.on_result(snap, _wrote(snap), NOW).snapshot

    fourth = machine.on_result(snap, _failed(snap, "assert 8 == 5", "A1"), NOW)

    assert _anomalies(fourth) == [("verify_repeat", "pause", "verifier", [3, 4])]
    paused = fourth.snapshot
    assert (paused.status, paused.exit_code) == ("paused", 25)
    assert paused.pause is not None and (paused.pause.kind, paused.pause.code, paused.pause.resume) == (
        "anomaly", "ACODE-ORCH-017", "cycle")
    assert paused.pause.message.startswith("the model went off the rails (anomaly verify_repeat): the same criteria "
                                           "failed at verifications 3, 4")
    assert paused.pause.command == "acode resume s1"

    resumed = human.resume(paused, NOW).snapshot  # another round: the ladder starts afresh
    assert (resumed.status, resumed.stage, resumed.verifications, resumed.verify_responses) == (
        "running", "executor", [], [])


def test_the_same_failure_with_nothing_written_is_orch_008_and_other_criteria_are_no_repeat() -> None:
    snap = _at_verifier()
    snap = machine.on_result(snap, _failed(snap, "assert -1 == 5", "A1"), NOW).snapshot
    snap = machine.on_result(snap, _wrote(snap, ()), NOW).snapshot  # the executor wrote nothing
    other = machine.on_result(snap, _failed(snap, "assert 6 == 5", "A1"), NOW)
    assert _anomalies(other) == [], "nothing changed in between: no verify_repeat"

    snap = _at_verifier()
    snap = machine.on_result(snap, _failed(snap, "assert -1 == 5", "A1"), NOW).snapshot
    snap = machine.on_result(snap, _wrote(snap), NOW).snapshot
    moved = machine.on_result(snap, _failed(snap, "no docstring", "A2"), NOW)
    assert _anomalies(moved) == [], "another criterion failing is progress"


def test_a_passed_verification_ends_the_chain_and_the_threshold_is_the_sessions() -> None:
    snap = _at_verifier(anomalies=AnomalyThresholds(verify_repeats=3))
    for evidence in ("one", "two"):
        decision = machine.on_result(snap, _failed(snap, evidence, "A1"), NOW)
        assert _anomalies(decision) == []
        snap = machine.on_result(decision.snapshot, _wrote(decision.snapshot), NOW).snapshot
    assert _anomalies(machine.on_result(snap, _failed(snap, "three", "A1"), NOW)) == [
        ("verify_repeat", "note", "verifier", [1, 2, 3])]
    passed = machine.on_result(snap, _ok(snap), NOW).snapshot
    assert passed.stage == "reviewer" and passed.verifications == []
