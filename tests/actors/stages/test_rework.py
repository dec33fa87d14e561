"""What a verification keeps and what the executor runs again (actors/stages/judging/rework.py)."""

from __future__ import annotations

from actors.stages.judging.rework import choose, names_file
from protocol.plans.plan import Criterion, PlanStep, PlanTask, TaskPlan
from protocol.plans.results import CriterionVerdict, ExecutionReport, StepRecord


def _task(label: str, *steps: str, after: list[str] | None = None, criteria: tuple[str, ...] = (),
          chain: bool = False, status: str = "pending") -> PlanTask:
    made = [PlanStep(label=s, title=s, action="write_file", depends_on=[steps[i - 1]] if chain and i else [])
            for i, s in enumerate(steps)]
    return PlanTask(label=label, title=label, depends_on=after or [], steps=made, status=status,  # type: ignore[arg-type]
                    acceptance=[Criterion(label=c, description=c) for c in criteria])


PLAN = TaskPlan(goal="g", version=1, tasks=[
    _task("T1", "S1", "S2", criteria=("A1",)),
    _task("T2", "S1", criteria=("A2",)),
    _task("T3", "S1", "S2", chain=True, criteria=("A3",)),
    _task("T4", "S1", after=["T2"]),
])


def _report(files: dict[str, list[str]] | None = None, failed: tuple[str, ...] = ()) -> ExecutionReport:
    files = files or {}
    steps = [StepRecord(session_id="s", visit=1, task=t.label, step=s.label,
                        status="failed" if f"{t.label}/{s.label}" in failed else "completed",
                        files_changed=files.get(f"{t.label}/{s.label}", []))
             for t in PLAN.tasks for s in t.steps]
    return ExecutionReport(steps=steps)


def _verdicts(*failed: str, evidence: str = "") -> list[CriterionVerdict]:
    labels = ["A1", "A2", "A3", *[f for f in failed if f.startswith("V")]]
    return [CriterionVerdict(label=label, passed=label not in failed, evidence=evidence) for label in labels]


def test_everything_passed_keeps_every_step_and_completes_every_task() -> None:
    rework = choose(PLAN, _verdicts(), _report())
    assert rework.rule == "passed" and rework.rerun == []
    assert rework.completed_tasks == ["T1", "T2", "T3", "T4"] and len(rework.kept) == 6


def test_a_failed_criterion_reruns_its_task_and_the_tasks_after_it_only() -> None:
    rework = choose(PLAN, _verdicts("A2"), _report())
    assert rework.rule == "criteria"
    assert rework.rerun == ["T2/S1", "T4/S1"]
    assert rework.kept == ["T1/S1", "T1/S2", "T3/S1", "T3/S2"]
    assert rework.completed_tasks == ["T1", "T3"]
    assert "A2 failed: the steps of T2 run again" in rework.reason and "T4/S1" in rework.reason


def test_a_workspace_check_reruns_the_steps_whose_files_its_output_names_and_their_dependents() -> None:
    output = "FAILED tests/test_calc.py::test_add - /tmp/ws/src/calc.py:3: AssertionError"
    files = {"T3/S1": ["src/calc.py"], "T1/S1": ["src/a.py"], "T2/S1": ["calc.py.bak"]}
    rework = choose(PLAN, _verdicts("V1", evidence=output), _report(files), "/tmp/ws")
    assert rework.rule == "files"
    assert rework.rerun == ["T3/S1", "T3/S2"]  # S2 comes after S1 in T3
    assert "V1 failed, owned by no task" in rework.reason


def test_a_workspace_check_naming_no_changed_file_reruns_everything() -> None:
    rework = choose(PLAN, _verdicts("V1", evidence="1 test failed"), _report({"T1/S1": ["a.py"]}))
    assert rework.rule == "all" and rework.kept == [] and rework.completed_tasks == []
    assert len(rework.rerun) == 6 and "names no changed file: every step runs again" in rework.reason


def test_steps_that_did_not_complete_always_run_again_and_completed_tasks_are_left_alone() -> None:
    plan = TaskPlan(goal="g", version=2, tasks=[_task("T0", "S1", status="completed"), *PLAN.tasks])
    rework = choose(plan, _verdicts("A1"), _report(failed=("T3/S1",)))
    assert rework.rerun == ["T1/S1", "T1/S2", "T3/S1", "T3/S2"]
    assert "T0/S1" not in rework.rerun + rework.kept and rework.completed_tasks == ["T0", "T2", "T4"]


def test_a_completed_task_whose_own_criterion_fails_now_is_reopened() -> None:
    plan = TaskPlan(goal="g", version=1, tasks=[_task("T0", "S1", criteria=("A0",), status="completed"),
                                                *PLAN.tasks])
    rework = choose(plan, [*_verdicts(), CriterionVerdict(label="A0", passed=False)], _report())
    assert rework.rerun == ["T0/S1"] and "T0" not in rework.completed_tasks
    assert "completed before but failing now: T0" in rework.reason


def test_a_path_is_named_only_as_a_whole_name() -> None:
    assert names_file("error in src/b.txt: bad", "b.txt") is False
    assert names_file("error in /w/b.txt: bad", "b.txt", "/w") is True
    assert names_file("error in ./b.txt: bad", "b.txt") is True
    assert names_file("ab.txt failed", "b.txt") is False
    assert names_file("b.txt.", "b.txt") is True
