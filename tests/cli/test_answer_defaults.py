"""Defaults the user chose (``acode answer --defaults``) reach the planner as the user's
choice, never as "no answer came in time", which only the clarification timeout says."""

from __future__ import annotations

from acode.inputs import collect_answers
from actors.coordinator.orchestrator import default_answers
from actors.stages.planning import gather
from protocol.plans.plan import Question, TaskPlan

PLAN = TaskPlan(goal="greet", status="needs_clarification", questions=[
    Question(label="Q1", question="Which greeting?", options=["hello", "bonjour"]),
    Question(label="Q2", question="Which file name?", default="greet.txt"),
    Question(label="Q3", question="Anything else?")])


def test_defaults_the_user_chose_are_told_to_the_planner_as_the_users_choice() -> None:
    chosen = collect_answers(PLAN, ["Q1=2"], defaults=True)

    assert [(c.answer, c.defaulted, c.timed_out) for c in chosen[:2]] == [("bonjour", False, False),
                                                                           ("greet.txt", True, False)]
    assert chosen[2].answer.startswith("the user left this to you: choose the most reasonable option")
    told = gather._render_clarifications(chosen)
    assert "no answer came in time" not in told and "in time" not in chosen[2].answer
    assert "Answer: greet.txt (the default: the user chose the defaults)" in told


def test_defaults_taken_when_the_wait_ran_out_say_so() -> None:
    taken = default_answers(PLAN)

    assert all(c.defaulted and c.timed_out for c in taken)
    told = gather._render_clarifications(taken)
    assert "Answer: hello (the default: no answer came in time)" in told
    assert "Answer: no answer was given in time" in told
