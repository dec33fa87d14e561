"""The TaskPlan contract: decoding, structural validation, ids and versions, dependency order."""

from __future__ import annotations

import graphlib
import uuid
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import PlanError
from protocol.plans.plan import (
    Criterion,
    PlanProblem,
    PlanStep,
    PlanTask,
    Question,
    Resources,
    TaskPlan,
    carry_completed,
    finalize,
    ordered_steps,
    problems,
    repair,
    validate,
    with_status,
)

#: The example TaskPlan of issue 2 ("Contracts"), verbatim.
ISSUE_EXAMPLE = """
{"goal": "…", "status": "ready",
 "tasks": [{"label": "T1", "title": "…", "description": "…", "complexity": 3,
            "depends_on": [],
            "resources": {"read": [], "write": ["hello.py"], "directories": [], "commands": ["python hello.py"]},
            "acceptance": [{"label": "A1", "description": "prints hello",
                            "check": {"command": "python hello.py", "expect_exit": 0, "expect_output": "hello"}}],
            "steps": [{"label": "S1", "title": "…", "description": "…", "action": "write_file",
                       "expected_output": "…", "depends_on": []}]}]}
"""


def step(label: str, *deps: str) -> PlanStep:
    return PlanStep(label=label, title=f"do {label}", action="read_file", depends_on=list(deps))


def task(label: str, *deps: str, steps: list[PlanStep] | None = None, **extra: Any) -> PlanTask:
    return PlanTask(label=label, title=f"task {label}", depends_on=list(deps),
                    steps=[step("S1")] if steps is None else steps, **extra)


def plan(*tasks: PlanTask, **extra: Any) -> TaskPlan:
    return TaskPlan(goal="make it work", tasks=list(tasks), **extra)


def _plan_error(draft: TaskPlan) -> PlanError:
    with pytest.raises(PlanError) as info:
        validate(draft)
    return info.value


def _is_uuid7(value: str) -> bool:
    parsed = uuid.UUID(value)
    return parsed.version == 7 and str(parsed) == value


# --- decoding ----------------------------------------------------------------------------


def test_the_example_plan_of_the_issue_decodes_validates_and_finalizes() -> None:
    draft = msgspec.json.decode(ISSUE_EXAMPLE, type=TaskPlan)
    validate(draft)
    final = finalize(draft, version=1)
    (only,) = final.tasks
    assert (only.label, only.complexity, only.resources.write) == ("T1", 3, ["hello.py"])
    assert only.acceptance[0].check is not None
    assert only.acceptance[0].check.expect_output == "hello"
    assert [s.label for s in only.steps] == ["S1"]
    assert final.version == 1


@pytest.mark.parametrize("complexity", [1, 2, 3, 5, 8, 13, 21, 34])
def test_a_fibonacci_complexity_decodes(complexity: int) -> None:
    raw = {"goal": "g", "tasks": [{"label": "T1", "title": "t", "complexity": complexity}]}
    assert msgspec.json.decode(msgspec.json.encode(raw), type=TaskPlan).tasks[0].complexity == complexity


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("complexity", 4, "$.tasks[0].complexity"),
        ("complexity", 0, "$.tasks[0].complexity"),
        ("complexity", 55, "$.tasks[0].complexity"),
        ("label", "", "$.tasks[0].label"),
        ("label", "T" * 65, "$.tasks[0].label"),
        ("status", "done", "$.tasks[0].status"),
    ],
)
def test_a_task_field_out_of_its_contract_fails_to_decode(field: str, value: Any, path: str) -> None:
    raw = {"goal": "g", "tasks": [{"label": "T1", "title": "t", field: value}]}
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(msgspec.json.encode(raw), type=TaskPlan)
    assert str(info.value).endswith(f"- at `{path}`")


def test_an_unknown_step_action_fails_to_decode() -> None:
    raw = {"goal": "g", "tasks": [{"label": "T1", "title": "t",
                                   "steps": [{"label": "S1", "title": "s", "action": "delete_file"}]}]}
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(msgspec.json.encode(raw), type=TaskPlan)
    assert str(info.value) == "Invalid enum value 'delete_file' - at `$.tasks[0].steps[0].action`"


# --- validation --------------------------------------------------------------------------


def test_a_plan_needing_clarification_may_have_questions_and_no_tasks() -> None:
    validate(TaskPlan(goal="g", status="needs_clarification",
                      questions=[Question(label="Q1", question="which file?", options=["a.py", "b.py"])]))


@pytest.mark.parametrize(
    ("draft", "problem"),
    [
        (plan(), "a ready plan needs at least one task"),
        (plan(status="needs_clarification"), "status is needs_clarification but there are no questions"),
        (plan(task("T1"), task("T2"), task("T1")), "task label 'T1' is used more than once"),
        (plan(task("T1", steps=[step("S1"), step("S2"), step("S1")])),
         "step label 'S1' is used more than once in task T1"),
        (plan(task("T1"), task("T2", "T1", "T9")), "task T2 depends on unknown task 'T9'"),
        (plan(task("T1", steps=[step("S1", "S0")])), "step T1/S1 depends on unknown step 'S0'"),
        (plan(task("T1", steps=[step(f"S{i}") for i in range(26)]),
              task("T2", steps=[step(f"S{i}") for i in range(25)])),
         "the plan has 51 steps; at most 50 are allowed"),
        (plan(task("T1", resources=Resources(read=[f"r{i}.py" for i in range(60)],
                                             write=[f"w{i}.py" for i in range(41)]))),
         "the plan names 101 files; at most 100 are allowed"),
        (plan(task("T1", acceptance=[Criterion(label="A1", description="x")]),
              task("T2", acceptance=[Criterion(label="A1", description="y")])),
         "criterion label 'A1' is used more than once"),
    ],
    ids=["no-tasks", "no-questions", "dup-task", "dup-step", "unknown-task", "unknown-step", "51-steps",
         "101-files", "dup-criterion"],
)
def test_a_structural_problem_is_plan_004_naming_the_offender(draft: TaskPlan, problem: str) -> None:
    err = _plan_error(draft)
    assert err.code == "ACODE-PLAN-004"
    assert err.message == f"invalid plan: {problem}; fix the plan and answer again"


def test_every_structural_problem_is_reported_at_once() -> None:
    draft = plan(task("T1"), task("T1"), task("T2", "T9", steps=[step("S1"), step("S1"), step("S2", "S7")]))
    assert _plan_error(draft).message == (
        "invalid plan: task label 'T1' is used more than once; task T2 depends on unknown task 'T9'; "
        "step label 'S1' is used more than once in task T2; step T2/S2 depends on unknown step 'S7'; "
        "fix the plan and answer again")


def test_fifty_steps_are_allowed() -> None:
    validate(plan(task("T1", steps=[step(f"S{i}") for i in range(50)])))


def test_a_step_may_not_depend_on_a_step_of_another_task() -> None:
    draft = plan(task("T1", steps=[step("S1")]), task("T2", "T1", steps=[step("S2", "S1")]))
    assert "step T2/S2 depends on unknown step 'S1'" in _plan_error(draft).message


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        (plan(task("T1", "T2"), task("T2", "T1")), "tasks depend on each other in a cycle: T1 -> T2 -> T1"),
        (plan(task("T1", "T3"), task("T2", "T1"), task("T3", "T2")),
         "tasks depend on each other in a cycle: T1 -> T3 -> T2 -> T1"),
        (plan(task("T0"), task("T1", "T0", "T2"), task("T2", "T0", "T3"), task("T3", "T1")),
         "tasks depend on each other in a cycle: T1 -> T2 -> T3 -> T1"),
        (plan(task("T1", "T1")), "tasks depend on each other in a cycle: T1 -> T1"),
        (plan(task("T1", steps=[step("S1", "S2"), step("S2", "S1")])),
         "steps depend on each other in a cycle: T1/S1 -> T1/S2 -> T1/S1"),
        (plan(task("T1"), task("T2", steps=[step("S1"), step("S2", "S3"), step("S3", "S2")])),
         "steps depend on each other in a cycle: T2/S2 -> T2/S3 -> T2/S2"),
    ],
    ids=["two-tasks", "three-tasks", "behind-a-dag", "self", "two-steps", "second-task"],
)
def test_a_dependency_cycle_is_plan_005_naming_its_members(draft: TaskPlan, message: str) -> None:
    err = _plan_error(draft)
    assert err.code == "ACODE-PLAN-005"
    assert err.message == message


@st.composite
def _task_graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    """A random directed graph over T0..Tn-1 (cycles allowed)."""
    labels = [f"T{i}" for i in range(draw(st.integers(1, 7)))]
    return {label: draw(st.lists(st.sampled_from(labels), max_size=3, unique=True)) for label in labels}


@settings(max_examples=200, deadline=None)
@given(graph=_task_graphs())
def test_validate_reports_a_cycle_exactly_when_the_task_graph_has_one(graph: dict[str, list[str]]) -> None:
    draft = plan(*(task(label, *deps) for label, deps in graph.items()))
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError:
        err = _plan_error(draft)
        assert err.code == "ACODE-PLAN-005"
        members = err.message.removeprefix("tasks depend on each other in a cycle: ").split(" -> ")
        assert members[0] == members[-1]
        assert len(set(members[:-1])) == len(members) - 1
        assert all(later in graph[earlier] for earlier, later in zip(members, members[1:], strict=False))
    else:
        validate(draft)


# --- finalize ----------------------------------------------------------------------------


def test_finalize_gives_uuid7_ids_to_the_plan_tasks_and_steps_and_keeps_labels() -> None:
    draft = plan(task("T1", steps=[step("S1"), step("S2", "S1")]), task("T2", "T1"))
    final = finalize(draft, version=3)
    ids = [final.id, *(t.id for t in final.tasks), *(s.id for t in final.tasks for s in t.steps)]
    assert all(_is_uuid7(i) for i in ids)
    assert len(set(ids)) == len(ids) == 6
    assert [(t.label, [s.label for s in t.steps]) for t in final.tasks] == [("T1", ["S1", "S2"]), ("T2", ["S1"])]
    assert final.version == 3
    assert _without_ids(final) == draft  # nothing else changes


def _without_ids(p: TaskPlan) -> TaskPlan:
    replace = msgspec.structs.replace
    tasks = [replace(t, id="", steps=[replace(s, id="") for s in t.steps]) for t in p.tasks]
    return replace(p, id="", version=0, tasks=tasks)


def test_finalize_refuses_an_invalid_draft() -> None:
    with pytest.raises(PlanError) as info:
        finalize(plan(task("T1", "T2"), task("T2", "T1")), version=1)
    assert info.value.code == "ACODE-PLAN-005"


def test_finalize_keeps_tasks_completed_in_the_previous_plan_with_their_ids() -> None:
    first = finalize(plan(task("T1"), task("T2", "T1")), version=1)
    done_t1 = msgspec.structs.replace(first.tasks[0], status="completed")
    previous = msgspec.structs.replace(first, tasks=[done_t1, first.tasks[1]])
    second = finalize(plan(task("T1"), task("T2", "T1"), task("T3", "T2")), version=2, previous=previous)
    t1, t2, t3 = second.tasks
    assert (t1.id, t1.status) == (done_t1.id, "completed")
    assert t2.status == "pending"
    assert t2.id != first.tasks[1].id  # only completed work is carried over
    assert t3.status == "pending"
    assert second.id != first.id
    assert second.version == 2
    assert [t.label for t, _ in ordered_steps(second)] == ["T2", "T3"]


# --- dependency order --------------------------------------------------------------------


@st.composite
def _dag_plans(draw: st.DrawFn) -> TaskPlan:
    """Tasks and steps that only depend on earlier ones (so acyclic), then shuffled."""
    tasks = []
    task_labels: list[str] = []
    for t in range(draw(st.integers(1, 6))):
        step_labels: list[str] = []
        steps = []
        for s in range(draw(st.integers(0, 5))):
            deps = draw(st.lists(st.sampled_from(step_labels), unique=True)) if step_labels else []
            steps.append(step(f"S{s}", *deps))
            step_labels.append(f"S{s}")
        deps = draw(st.lists(st.sampled_from(task_labels), unique=True)) if task_labels else []
        status = draw(st.sampled_from(["pending", "pending", "completed"]))
        tasks.append(task(f"T{t}", *deps, steps=draw(st.permutations(steps)), status=status))
        task_labels.append(f"T{t}")
    return plan(*draw(st.permutations(tasks)))


@settings(max_examples=120, deadline=None)
@given(draft=_dag_plans())
def test_ordered_steps_puts_every_pending_step_after_its_dependencies(draft: TaskPlan) -> None:
    validate(draft)
    order = [(t.label, s.label) for t, s in ordered_steps(draft)]
    position = {key: index for index, key in enumerate(order)}
    by_label = {t.label: t for t in draft.tasks}
    pending = [t for t in draft.tasks if t.status == "pending"]
    assert sorted(order) == sorted((t.label, s.label) for t in pending for s in t.steps)
    for t in pending:
        for s in t.steps:
            here = position[(t.label, s.label)]
            assert all(position[(t.label, dep)] < here for dep in s.depends_on)
            for dep_task in t.depends_on:
                assert all(position[(dep_task, d.label)] < here
                           for d in by_label[dep_task].steps if by_label[dep_task].status == "pending")


def test_ordered_steps_keeps_the_model_order_of_independent_work() -> None:
    draft = plan(task("T3", steps=[step("S2"), step("S1")]), task("T1", steps=[step("S9"), step("S3")]))
    assert [(t.label, s.label) for t, s in ordered_steps(draft)] == [
        ("T3", "S2"), ("T3", "S1"), ("T1", "S9"), ("T1", "S3")]


def test_ordered_steps_moves_a_task_after_the_task_it_depends_on() -> None:
    draft = plan(task("T2", "T1", steps=[step("S1")]), task("T1", steps=[step("S2", "S1"), step("S1")]))
    assert [(t.label, s.label) for t, s in ordered_steps(draft)] == [("T1", "S1"), ("T1", "S2"), ("T2", "S1")]


# --- paths, several cycles, problems in one list -------------------------------------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/etc/passwd", "is absolute; name it relative to the workspace root"),
        ("\\\\server\\share", "is absolute; name it relative to the workspace root"),
        ("C:\\Users\\x", "is absolute; name it relative to the workspace root"),
        ("../outside.py", "leads outside the workspace; name a path inside it"),
        ("src/../../outside.py", "leads outside the workspace; name a path inside it"),
        ("..", "leads outside the workspace; name a path inside it"),
        ("src\\..\\..\\x", "leads outside the workspace; name a path inside it"),
        ("a\0b.py", "contains a NUL byte"),
        ("  ", "is empty"),
        ("~/notes.txt", "starts with '~', which nothing expands; name it relative to the workspace root"),
    ],
)
def test_a_resource_path_outside_the_workspace_is_named_with_its_field(path: str, problem: str) -> None:
    draft = plan(task("T1", resources=Resources(write=[path])))
    assert _plan_error(draft).message == (f"invalid plan: task T1 resources.write path {path!r} {problem}; "
                                          "fix the plan and answer again")


@pytest.mark.parametrize("path", ["src/app.py", "./src/app.py", "src/../app.py", ".", "a/b/../../c", "..hidden"])
def test_a_path_inside_the_workspace_is_fine(path: str) -> None:
    validate(plan(task("T1", resources=Resources(read=[path], write=[path], directories=[path]))))


def test_a_cycle_among_other_problems_is_listed_with_them_under_plan_004() -> None:
    draft = plan(task("T1", "T2", resources=Resources(read=["/abs"])), task("T2", "T1"), task("T2", "T1"))
    err = _plan_error(draft)
    assert err.code == "ACODE-PLAN-004"
    assert err.message == ("invalid plan: task label 'T2' is used more than once; task T1 resources.read path "
                           "'/abs' is absolute; name it relative to the workspace root; tasks depend on each other "
                           "in a cycle: T1 -> T2 -> T1; fix the plan and answer again")


def test_a_task_cycle_and_a_step_cycle_are_both_named() -> None:
    draft = plan(task("T1", "T2", steps=[step("S1", "S2"), step("S2", "S1")]), task("T2", "T1"))
    err = _plan_error(draft)
    assert err.code == "ACODE-PLAN-005"
    assert err.message == ("tasks depend on each other in a cycle: T1 -> T2 -> T1; "
                           "steps depend on each other in a cycle: T1/S1 -> T1/S2 -> T1/S1")


def test_problems_is_empty_for_a_valid_plan_and_lists_codes_otherwise() -> None:
    assert problems(plan(task("T1"), task("T2", "T1"))) == []
    assert problems(plan(task("T1", "T1"), task("T2", "T9"))) == [
        PlanProblem("ACODE-PLAN-004", "task T2 depends on unknown task 'T9'"),
        PlanProblem("ACODE-PLAN-005", "tasks depend on each other in a cycle: T1 -> T1")]


# --- re-plans keep completed work ------------------------------------------------------------


def _completed(first: TaskPlan, *labels: str) -> TaskPlan:
    tasks = [msgspec.structs.replace(t, status="completed") if t.label in labels else t for t in first.tasks]
    return msgspec.structs.replace(first, tasks=tasks)


def test_a_completed_task_the_model_left_out_comes_back_first_and_others_may_depend_on_it() -> None:
    previous = _completed(finalize(plan(task("T1"), task("T2", "T1")), version=1), "T1")
    draft = plan(task("T2", "T1", steps=[step("S9")]))
    assert "unknown task" in _plan_error(draft).message  # on its own, T1 is missing
    second = finalize(draft, version=2, previous=previous)
    assert [(t.label, t.status) for t in second.tasks] == [("T1", "completed"), ("T2", "pending")]
    assert second.tasks[0] == previous.tasks[0]  # exactly as it was, ids included
    assert carry_completed(draft, previous).tasks[0] is previous.tasks[0]


def test_a_completed_task_the_model_rewrote_runs_again_and_one_it_kept_stays_completed() -> None:
    previous = _completed(finalize(plan(task("T1", steps=[step("S1")]), task("T2", steps=[step("S1")])),
                                   version=1), "T1", "T2")
    second = finalize(plan(task("T1", steps=[step("S1"), step("S2")]), task("T2", steps=[step("S1")])), version=2,
                      previous=previous)
    assert [(t.label, t.status) for t in second.tasks] == [("T1", "pending"), ("T2", "completed")]
    assert [s.label for s in second.tasks[0].steps] == ["S1", "S2"]  # the re-plan's change wins
    assert second.tasks[1] == previous.tasks[1]  # unchanged: exactly as it was, ids included


def test_with_status_marks_exactly_the_named_tasks_completed() -> None:
    first = finalize(plan(task("T1"), task("T2")), version=1)
    marked = with_status(first, ["T2", "T9"])
    assert [(t.label, t.status) for t in marked.tasks] == [("T1", "pending"), ("T2", "completed")]
    assert with_status(first, []) is first
    assert [t.status for t in with_status(marked, ["T1"]).tasks] == ["completed", "pending"]


def test_the_model_cannot_mark_its_own_tasks_completed_or_choose_ids() -> None:
    draft = plan(task("T1", status="completed", id="mine", steps=[msgspec.structs.replace(step("S1"), id="x")]))
    final = finalize(draft, version=1)
    assert final.tasks[0].status == "pending"
    assert _is_uuid7(final.tasks[0].id) and _is_uuid7(final.tasks[0].steps[0].id)


# --- repair: what acode fixes itself ---------------------------------------------------------------


def _t(label: str, *deps: str, steps: list[dict[str, Any]] | None = None,
       criteria: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    return {"label": label, "title": f"task {label}", "depends_on": list(deps),
            "steps": steps if steps is not None else [{"label": "S1", "title": "do", "action": "write_file"}],
            "acceptance": [{"label": c, "description": f"{label} {c}"} for c in criteria], **extra}


def _s(label: str, *deps: str) -> dict[str, Any]:
    return {"label": label, "title": f"step {label}", "action": "modify_file", "depends_on": list(deps)}


def _draft(*tasks: dict[str, Any], **extra: Any) -> TaskPlan:
    return msgspec.convert({"goal": "g", "tasks": list(tasks), **extra}, TaskPlan)


def test_a_valid_plan_is_left_exactly_as_it_is() -> None:
    plan = _draft(_t("T1", criteria=("A1",)), _t("T2", "T1", steps=[_s("S1"), _s("S2", "S1")], criteria=("A2",)))
    assert repair(plan) == (plan, [])


def test_criterion_labels_used_twice_are_renumbered_across_the_plan_in_order() -> None:
    plan, notes = repair(_draft(_t("T1", criteria=("A1", "A2")), _t("T2", criteria=("A1", "A2"))))
    assert [c.label for c in plan.criteria()] == ["A1", "A2", "A3", "A4"]
    assert [c.description for c in plan.criteria()] == ["T1 A1", "T1 A2", "T2 A1", "T2 A2"]
    assert notes == ["acode renumbered the criterion labels (the model used 'A1', 'A2' more than once)"]
    assert problems(plan) == []


def test_a_completed_tasks_criteria_keep_their_labels_and_the_others_skip_them() -> None:
    draft = _draft(_t("T1", criteria=("A1",), status="completed"), _t("T2", criteria=("A1", "A1")))
    plan, _ = repair(draft)
    assert [[c.label for c in t.acceptance] for t in plan.tasks] == [["A1"], ["A2", "A3"]]
    assert plan.tasks[0] is draft.tasks[0]


def test_step_labels_used_twice_are_renumbered_and_other_dependencies_follow() -> None:
    plan, notes = repair(_draft(_t("T1", steps=[_s("S1"), _s("S1"), _s("S5"),
                                                 _s("S2", "S5")])))
    assert [(s.label, s.depends_on) for s in plan.tasks[0].steps] == [
        ("S1", []), ("S2", []), ("S3", []), ("S4", ["S3"])]
    assert notes == ["acode renumbered the step labels of task T1 (the model used 'S1' more than once)"]


def test_a_dependency_on_a_label_used_twice_cannot_be_read_and_stays_a_problem() -> None:
    plan, notes = repair(_draft(_t("T1", steps=[_s("S1"), _s("S1"), _s("S2", "S1")])))
    assert notes == [] and problems(plan)[0].message == "step label 'S1' is used more than once in task T1"


def test_a_step_depending_on_its_own_task_or_itself_loses_that_dependency() -> None:
    plan, notes = repair(_draft(_t("T1", steps=[_s("S1", "T1"), _s("S2", "S2", "S1"), _s("S3", "T1/S2")])))
    assert [s.depends_on for s in plan.tasks[0].steps] == [[], ["S1"], ["S2"]]
    assert notes == ["acode dropped step T1/S1's dependency on its own task T1",
                     "acode dropped the dependency of step T1/S2 on itself",
                     "acode read step T1/S3's dependency 'T1/S2' as step S2"]


def test_a_step_depending_on_another_task_makes_its_task_depend_on_that_task() -> None:
    plan, notes = repair(_draft(_t("T1"), _t("T2", steps=[_s("S1", "T1"), _s("S2", "T1/S1", "S1")])))
    assert plan.tasks[1].depends_on == ["T1"]
    assert [s.depends_on for s in plan.tasks[1].steps] == [[], ["S1"]]
    assert len(notes) == 2 and problems(plan) == []
    assert [f"{t.label}/{s.label}" for t, s in ordered_steps(finalize(plan, version=1))] == ["T1/S1", "T2/S1",
                                                                                           "T2/S2"]


def test_a_task_depending_on_a_step_label_depends_on_the_one_task_holding_it() -> None:
    plan, notes = repair(_draft(_t("T1", steps=[_s("S7")]), _t("T2", "S7"), _t("T3", "T1/S7")))
    assert [t.depends_on for t in plan.tasks] == [[], ["T1"], ["T1"]]
    assert notes == ["acode read task T2's dependency 'S7' as task T1",
                     "acode read task T3's dependency 'T1/S7' as task T1"]


def test_unknown_and_ambiguous_dependencies_stay_problems() -> None:
    plan, notes = repair(_draft(_t("T1"), _t("T2", "S1"), _t("T3", "T9", steps=[_s("S1", "S4")])))
    assert notes == []
    assert [p.message for p in problems(plan)] == [
        "task T2 depends on unknown task 'S1'", "task T3 depends on unknown task 'T9'",
        "step T3/S1 depends on unknown step 'S4'"]


def test_a_dependency_that_is_not_even_shaped_like_a_label_is_dropped_a_mistyped_label_stays() -> None:
    # Qwen2.5-Coder-1.5B, told the session's MCP tools, put the tool call in the step's
    # depends_on three answers running; "S01" and "step 4" still look like labels: typos
    plan, notes = repair(_draft(_t("T1", "write the notes first.", steps=[
        _s("S1", "mcp__notes__lookup(acode)"), _s("S2", "S01"), _s("S3", "step 4")])))
    assert notes == [
        "acode dropped step T1/S1's dependency 'mcp__notes__lookup(acode)', which names no step or task and is "
        "not a label",
        "acode dropped task T1's dependency 'write the notes first.', which names no task or step and is not a label"]
    assert plan.tasks[0].depends_on == [] and plan.tasks[0].steps[0].depends_on == []
    assert [p.message for p in problems(plan)] == ["step T1/S2 depends on unknown step 'S01'",
                                                   "step T1/S3 depends on unknown step 'step 4'"]


def test_a_repair_that_would_make_a_cycle_is_not_made() -> None:
    draft = _draft(_t("T1", steps=[_s("S1", "T2")]), _t("T2", "T1"))
    assert repair(draft) == (draft, [])
    assert [p.message for p in problems(draft)] == ["step T1/S1 depends on unknown step 'T2'"]


def test_a_task_without_steps_gets_one_doing_the_task() -> None:
    plan, notes = repair(_draft(_t("T1", steps=[], description="add farewell()",
                                   resources={"write": ["greet.py"]})))
    [step] = plan.tasks[0].steps
    assert (step.label, step.title, step.description, step.action) == ("S1", "task T1", "add farewell()",
                                                                       "modify_file")
    assert notes == ["acode gave task T1, which had no steps, one step doing the task"]


def test_needs_clarification_without_questions_but_with_tasks_is_ready() -> None:
    plan, notes = repair(_draft(_t("T1"), status="needs_clarification"))
    assert plan.status == "ready" and problems(plan) == [] and len(notes) == 1


def test_duplicate_task_labels_are_not_repaired() -> None:
    draft = _draft(_t("T1", criteria=("A1",)), _t("T1", criteria=("A1",)))
    assert repair(draft) == (draft, [])
