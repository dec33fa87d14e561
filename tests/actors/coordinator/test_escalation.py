"""The escalation ladder in the session machine: failures pause (never fail), each pause
says how it goes on, a human resumes any paused or failed session, with overrides."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.coordinator import escalation, human, machine
from protocol.errors import ErrorInfo
from protocol.plans.plan import Question, TaskPlan
from protocol.plans.results import (
    CriterionVerdict,
    ExecutionReport,
    FileChange,
    ReviewerAnswer,
    StageResult,
    StepRecord,
    VerifierAnswer,
    WorkspaceChanges,
)
from protocol.plans.stages import STAGES
from protocol.sessions.events import SessionFinished, SessionPaused, SettingsChanged, StageFinished, Transitioned
from protocol.sessions.session import Clarification, SessionSettings, SessionSnapshot, SettingsOverride
from tests.actors.coordinator.stage_results import NOW
from tests.actors.coordinator.stage_results import ok as _ok
from tests.actors.coordinator.stage_results import result as _result

UNREACHABLE = ("ollama at http://127.0.0.1:9 is unreachable (connection refused) after 4 attempts; "
               "start it with `ollama serve`, or fix base_url")


def _new(**fields: object) -> SessionSnapshot:
    return machine.create("s1", "task", "/w", SessionSettings(**fields), NOW).snapshot  # type: ignore[arg-type]




def _fail(snap: SessionSnapshot, code: str, message: str = "it went wrong", **fields: object) -> StageResult:
    return _result(snap, ok=False, summary=message, error=ErrorInfo(code=code, message=message), **fields)


def _at(stage: str, **fields: object) -> SessionSnapshot:
    snap = _new(**fields)
    while snap.stage != stage:
        snap = machine.on_result(snap, _ok(snap), NOW).snapshot
    return snap


def _step_failure(snap: SessionSnapshot, code: str) -> StageResult:
    steps = [StepRecord(session_id="s1", visit=snap.visit, task="T1", step="S1", status="completed"),
             StepRecord(session_id="s1", visit=snap.visit, task="T2", step="S1", status="failed", code=code),
             StepRecord(session_id="s1", visit=snap.visit, task="T3", step="S1", status="blocked")]
    return _fail(snap, code, "step T2/S1 failed: it would not; task aborted: T2; blocked by it: T3/S1",
                 execution=ExecutionReport(steps=steps))


def test_an_unreachable_model_server_pauses_model_unavailable_with_the_fix_and_resume_retries() -> None:
    snap = _at("executor")
    decision = machine.on_result(snap, _fail(snap, "ACODE-LLM-005", UNREACHABLE), NOW)
    paused = decision.snapshot
    assert (paused.status, paused.exit_code, paused.stage) == ("paused", 22, "executor")
    assert paused.pause is not None
    assert (paused.pause.kind, paused.pause.resume) == ("model_unavailable", "retry")
    assert paused.pause.fix == "start it with `ollama serve`, or fix base_url"
    assert paused.pause.command == "acode resume s1"
    resumed = human.resume(paused, NOW).snapshot
    assert (resumed.status, resumed.stage, resumed.visit, resumed.attempt) == ("running", "executor", 1, 2)


def test_model_error_codes_map_to_pause_kinds_through_one_table() -> None:
    kinds = {code: escalation.rule_for(code).kind for code in
             ("ACODE-LLM-005", "ACODE-LLM-006", "ACODE-LLM-012", "ACODE-LLM-013", "ACODE-LLM-014",
              "ACODE-LLM-015", "ACODE-PLAN-004", "ACODE-NEW-999")}
    assert kinds == {"ACODE-LLM-005": "model_unavailable", "ACODE-LLM-006": "model_unavailable",
                     "ACODE-LLM-012": "escalation", "ACODE-LLM-013": "escalation",
                     "ACODE-LLM-014": "model_unavailable", "ACODE-LLM-015": "model_unavailable",
                     "ACODE-PLAN-004": "invalid_plan", "ACODE-NEW-999": "escalation"}
    snap = _at("planner")
    missing = "model 'qwen' is not pulled on Ollama at http://127.0.0.1:11434; run: ollama pull qwen"
    paused = machine.on_result(snap, _fail(snap, "ACODE-LLM-006", missing), NOW).snapshot
    assert paused.pause is not None and paused.pause.fix == "run: ollama pull qwen"


def test_a_step_outcome_sets_seed_004s_exit_code_and_names_the_step() -> None:
    expected = {"ACODE-EXEC-001": (30, "acode resume s1"), "ACODE-EXEC-003": (31, "acode resume s1 --max-turns 20"),
                "ACODE-EXEC-004": (32, "acode resume s1"), "ACODE-EXEC-006": (34, "acode resume s1 --step-timeout 240"),
                "ACODE-EXEC-008": (30, "acode resume s1")}
    for code, (exit_code, command) in expected.items():
        snap = _at("executor")
        decision = machine.on_result(snap, _step_failure(snap, code), NOW)
        paused = decision.snapshot
        assert paused.status == "paused" and paused.exit_code == exit_code, code
        assert paused.pause is not None and (paused.pause.task, paused.pause.step) == ("T2", "S1")
        assert paused.pause.command == command
        event = decision.events[-1]
        assert isinstance(event, SessionPaused) and event.exit_code == exit_code and event.task == "T2"


def test_resuming_a_failed_step_revisits_the_executor_keeping_the_visit_it_replaces() -> None:
    snap = _at("executor")
    paused = machine.on_result(snap, _step_failure(snap, "ACODE-EXEC-001"), NOW).snapshot
    decision = human.resume(paused, NOW)
    resumed = decision.snapshot
    assert (resumed.status, resumed.stage, resumed.visit, resumed.attempt) == ("running", "executor", 2, 1)
    assert resumed.kept_steps == ["T1/S1"] and resumed.exit_code is None and resumed.pause is None
    [moved] = [e for e in decision.events if isinstance(e, Transitioned)]
    assert (moved.source, moved.target) == ("executor", "executor")
    done = machine.on_result(resumed, _ok(resumed), NOW).snapshot
    assert done.stage == "verifier"


def test_an_unusable_answer_is_retried_afresh_up_to_the_stage_retry_limit_then_pauses() -> None:
    snap = _at("verifier", stage_retry_limit=2)
    for retry in (1, 2):
        decision = machine.on_result(snap, _fail(snap, "ACODE-LLM-003", "the verdict did not decode"), NOW)
        snap = decision.snapshot
        assert (snap.status, snap.stage, snap.visit, snap.retries) == ("running", "verifier", retry + 1, retry)
        [moved] = [e for e in decision.events if isinstance(e, Transitioned)]
        assert moved.reason.startswith(f"stage retry {retry} of 2, afresh")
    paused = machine.on_result(snap, _fail(snap, "ACODE-LLM-003"), NOW).snapshot
    assert paused.status == "paused" and paused.exit_code == 22


def test_an_invalid_plan_pauses_and_resume_plans_again_afresh() -> None:
    snap = _at("planner")
    paused = machine.on_result(snap, _fail(snap, "ACODE-PLAN-004", "3 problems"), NOW).snapshot
    assert paused.pause is not None and paused.pause.kind == "invalid_plan" and paused.exit_code == 22
    resumed = human.resume(paused, NOW).snapshot
    assert (resumed.stage, resumed.visit, resumed.status) == ("planner", 2, "running")


def test_resume_overrides_change_the_settings_from_then_on_and_are_recorded() -> None:
    snap = _at("executor")
    paused = machine.on_timeout(machine.on_timeout(machine.on_timeout(snap, NOW).snapshot, NOW).snapshot,
                                NOW).snapshot
    assert paused.exit_code == 20 and paused.pause is not None
    assert paused.pause.command == "acode resume s1 --executor-timeout 600"
    overrides = SettingsOverride(stage_timeouts={"executor": 60.0}, max_turns_per_step=20, cycle_limit=5)
    decision = human.resume(paused, NOW, overrides=overrides)
    settings_ = decision.snapshot.settings
    assert settings_.stage_timeouts["executor"] == 60.0 and settings_.stage_timeouts["planner"] == 300.0
    assert settings_.max_turns_per_step == 20 and settings_.cycle_limits == {"verify": 5, "review": 5}
    [changed] = [e for e in decision.events if isinstance(e, SettingsChanged)]
    assert changed.changes[0] == "executor_timeout: 300s -> 60s"
    assert "max_turns_per_step: 10 -> 20" in changed.changes
    assert decision.snapshot.attempt == paused.attempt + 1 and decision.snapshot.visit == 1  # retried, replayed


def test_the_same_verify_failure_twice_pauses_early_timestamps_and_temp_paths_aside() -> None:
    snap = _at("verifier")
    first = "FAILED test_x at 2026-11-23 18:02:11 in /tmp/pytest-7/test0 (0.52s)"
    second = "FAILED test_x at 2026-11-23 18:09:40 in /tmp/pytest-9/test1 (0.61s)"

    def verdict(evidence: str) -> StageResult:
        return _result(snap, verification=VerifierAnswer(passed=False, summary="A1 failed", criteria=[
            CriterionVerdict(label="A1", passed=False, evidence=evidence)]))

    snap = machine.on_result(snap, verdict(first), NOW).snapshot
    assert snap.stage == "executor"
    snap = machine.on_result(snap, _ok(snap), NOW).snapshot
    paused = machine.on_result(snap, verdict(second), NOW).snapshot
    assert paused.status == "paused" and paused.exit_code == 22 and paused.cycles == {"verify": 1}
    assert paused.pause is not None and paused.pause.code == "ACODE-ORCH-008"
    assert paused.pause.message.startswith("the same failure twice: A1 failed")
    resumed = human.resume(paused, NOW).snapshot
    assert resumed.stage == "executor" and resumed.failure_print == ""


def test_a_different_failure_is_progress_and_cycles_on() -> None:
    snap = _at("verifier")
    for evidence in ("2 tests failed", "1 test failed"):
        snap = machine.on_result(snap, _result(snap, verification=VerifierAnswer(passed=False, criteria=[
            CriterionVerdict(label="A1", passed=False, evidence=evidence)])), NOW).snapshot
        assert snap.status == "running" and snap.stage == "executor"
        snap = machine.on_result(snap, _ok(snap), NOW).snapshot


def test_normalise_drops_what_differs_between_two_runs_of_one_check() -> None:
    assert escalation.normalise("at 12:01:02.5 took 3.2s in /tmp/x-1/a.py pid 4411, 0x7f3a") == \
        "at <time> took <duration> in <tmp> pid <n>, <addr>"


def test_resume_gives_a_fresh_round_of_attempts_and_timeouts() -> None:
    snap = _at("executor", stage_retry_limit=3)
    for _ in range(3):  # three rounds of timeouts, each resumed by a human
        for _ in range(3):
            snap = machine.on_timeout(snap, NOW).snapshot
            assert snap.status == "running"
        snap = machine.on_timeout(snap, NOW).snapshot
        assert snap.status == "paused" and snap.exit_code == 20
        snap = human.resume(snap, NOW).snapshot
        assert snap.status == "running"
    for _ in range(machine.MAX_ATTEMPTS - 1):
        snap = machine.on_lost(snap, "lost", NOW).snapshot
        assert snap.status == "running"
    lost = machine.on_lost(snap, "lost", NOW).snapshot
    assert lost.status == "paused" and lost.pause is not None and lost.pause.code == "ACODE-ORCH-004"
    assert human.resume(lost, NOW).snapshot.status == "running"


def test_only_an_unrecoverable_workspace_error_fails_a_session_and_a_human_resumes_it() -> None:
    snap = _at("executor")
    failed = machine.on_result(snap, _fail(snap, "ACODE-ORCH-009", "the workspace /w is gone"), NOW).snapshot
    assert (failed.status, failed.exit_code, failed.stage) == ("failed", 1, "executor")
    resumed = human.resume(failed, NOW).snapshot
    assert (resumed.status, resumed.stage, resumed.visit, resumed.error) == ("running", "executor", 2, None)


CODES = sorted({*escalation.RULES, "ACODE-LLM-002", "ACODE-ORCH-006", "ACODE-NET-002"})
INPUTS = st.one_of(
    st.sampled_from(["ok", "lost", "timeout", "recover", "cycle", "questions"]),
    st.tuples(st.just("fail"), st.sampled_from(CODES), st.booleans()),
)


def _resume(snap: SessionSnapshot) -> SessionSnapshot:
    answers = [Clarification(label="Q1", question="which?", answer="this")] \
        if snap.pause is not None and snap.pause.kind == "needs_input" else None
    return human.resume(snap, NOW, answers).snapshot


@settings(max_examples=300, deadline=None)
@given(inputs=st.lists(INPUTS, max_size=60), limits=st.tuples(st.integers(0, 3), st.integers(0, 3)),
       retry_limit=st.integers(0, 3))
def test_no_sequence_of_results_timeouts_and_losses_fails_a_session_and_every_pause_resumes(
        inputs: list[object], limits: tuple[int, int], retry_limit: int) -> None:
    snap = _new(cycle_limits={"verify": limits[0], "review": limits[1]}, stage_retry_limit=retry_limit)
    settings_at_start = snap.settings
    for item in inputs:
        if snap.status == "completed":
            break
        if snap.status == "paused":
            assert snap.pause is not None and snap.pause.command
            assert snap.exit_code in (20, 21, 22, 24, 25, 30, 31, 32, 33, 34)
            snap = _resume(snap)  # every paused state has a resume transition
            assert snap.status == "running"
            continue
        assert snap.stage is not None and snap.status == "running"
        if item == "lost":
            decision = machine.on_lost(snap, "lost", NOW)
        elif item == "timeout":
            decision = machine.on_timeout(snap, NOW)
        elif item == "recover":
            decision = machine.recover(snap, NOW)
        elif item == "cycle" and snap.stage == "verifier":
            decision = machine.on_result(snap, _result(snap, verification=VerifierAnswer(
                passed=False, criteria=[CriterionVerdict(label="A1", passed=False, evidence="same")])), NOW)
        elif item == "cycle" and snap.stage == "reviewer":
            decision = machine.on_result(snap, _result(snap, review=ReviewerAnswer(decision="replan")), NOW)
        elif item == "questions" and snap.stage == "planner":
            decision = machine.on_result(snap, _result(snap, plan=TaskPlan(
                goal="g", status="needs_clarification", version=1, questions=[Question(label="Q1", question="?")])),
                NOW)
        elif isinstance(item, tuple):
            _, code, retryable = item
            error = ErrorInfo(code=code, message=f"{code} happened", retryable=retryable)
            decision = machine.on_result(snap, _result(snap, ok=False, error=error), NOW)
        else:
            decision = machine.on_result(snap, _ok(snap), NOW)
        for event in decision.events:
            if isinstance(event, Transitioned):
                assert (event.source, event.target) in machine.ALLOWED
        snap = decision.snapshot
        assert snap.settings == settings_at_start, "only a human changes a limit"
        assert snap.status != "failed", "only a human or the workspace ends a session"
        assert snap.status != "cancelled"
        if snap.status == "completed":
            assert all(snap.visits.get(s) for s in STAGES)


NO_DIFF = ("the workspace's changes since the session's baseline cannot be computed: the workspace /w is no longer a "
           "git work tree (ACODE-SBX-018); so the work can be neither verified nor reviewed, and the session cannot "
           "complete; put back what is missing (a moved or replaced .git, the baseline in acode's home), then "
           "`acode resume s1` compares again, or `acode cancel s1` ends the session")


def test_a_diff_that_cannot_be_computed_pauses_the_session_and_a_resume_takes_it_afresh() -> None:
    for stage in ("verifier", "reviewer"):
        snap = _at(stage)
        paused = machine.on_result(snap, _fail(snap, "ACODE-ORCH-012", NO_DIFF), NOW).snapshot
        assert (paused.status, paused.exit_code, paused.stage) == ("paused", 22, stage)  # never completed
        assert paused.pause is not None
        assert (paused.pause.kind, paused.pause.code, paused.pause.resume) == ("escalation", "ACODE-ORCH-012",
                                                                               "revisit")
        assert paused.pause.fix.startswith("put back what is missing") and "`acode cancel s1`" in paused.pause.fix
        assert paused.pause.command == "acode resume s1"
        resumed = human.resume(paused, NOW + 2)
        assert (resumed.snapshot.stage, resumed.snapshot.visits[stage]) == (stage, 2)  # a new visit: a fresh diff


def test_the_changes_a_stage_saw_are_kept_and_the_last_goes_with_the_end_of_the_session() -> None:
    seen = WorkspaceChanges(files=[FileChange(status="deleted", path="old.txt")], total=1, at=NOW)
    last = WorkspaceChanges(files=[FileChange(status="deleted", path="old.txt"),
                                   FileChange(status="modified", path="data.txt")], total=2, at=NOW + 1)
    snap = _at("verifier")
    verified = machine.on_result(snap, _result(snap, verification=VerifierAnswer(passed=True), changes=seen), NOW)
    assert verified.snapshot.changes == seen
    assert [e.changes for e in verified.events if isinstance(e, StageFinished)] == [seen]
    snap = verified.snapshot
    done = machine.on_result(snap, _result(snap, review=ReviewerAnswer(decision="approve"), changes=last), NOW)
    assert done.snapshot.status == "completed" and done.snapshot.changes == last
    [finished] = [e for e in done.events if isinstance(e, SessionFinished)]
    assert finished.changes == last
