"""Session budgets without processes: the limits' arithmetic, how a human extends one, how
the coordinator keeps a session's running time, and the stage's budget steps."""

from __future__ import annotations

import threading

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.coordinator import machine, overrides
from actors.stages.request.spending import Spending
from protocol.errors import BudgetExhausted
from protocol.messages import ReplayIndex, RunStage
from protocol.plans.results import ModelAnswer, ToolResult, Usage
from protocol.policy.budget import Budget, BudgetChange, Spent, extended, parse_change, spent_on
from protocol.sessions.events import BudgetWarning, Event
from protocol.sessions.session import SessionSettings, SettingsOverride


@pytest.mark.parametrize(("text", "change"), [
    ("500", BudgetChange(value=500, how="set")),
    ("+500", BudgetChange(value=500, how="add")),
    ("+50%", BudgetChange(value=50, how="percent")),
    (" 2_000_000 ", BudgetChange(value=2_000_000, how="set")),
    ("+1.5", BudgetChange(value=1.5, how="add")),
])
def test_a_change_is_a_new_limit_more_of_it_or_a_share_more(text: str, change: BudgetChange) -> None:
    assert parse_change(text) == change


@pytest.mark.parametrize("text", ["50%", "-5", "+", "ten", "+5%%", ""])
def test_anything_else_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"\(500\), more of it \(\+500\)"):
        parse_change(text)


def test_extending_adds_to_the_limit_and_never_turns_no_limit_into_one() -> None:
    assert extended(500, parse_change("+50%"), whole=True) == 750
    assert extended(3, parse_change("+50%"), whole=True) == 5  # a count rounds up
    assert extended(60, parse_change("+30"), whole=False) == 90
    assert extended(0, parse_change("+100"), whole=True) == 0  # 0 is no limit: more of none is none
    assert extended(0, parse_change("100"), whole=True) == 100


def test_resume_overrides_change_the_budget_and_say_how() -> None:
    settings = SessionSettings(budget=Budget(tokens=1_000, tool_calls=3))
    new, lines = overrides.apply(settings, SettingsOverride(budget={"tokens": parse_change("+50%"),
                                                                     "tool_calls": parse_change("10")}))
    assert (new.budget.tokens, new.budget.tool_calls) == (1_500, 10)
    assert lines == ["budget.tokens: 1,000 -> 1,500", "budget.tool_calls: 3 -> 10"]
    assert overrides.apply(settings, SettingsOverride(budget={"tokens": parse_change("1000")})) == (settings, [])


def test_a_running_session_accrues_running_time_and_not_while_paused_or_acode_was_down() -> None:
    snap = machine.create("s1", "task", "/w", SessionSettings(), 100.0).snapshot
    snap = machine.updated(snap, 130.0, attempt=2)
    assert snap.running_s == 30.0
    paused = machine.pause(snap, "user", "ACODE-ORCH-010", "paused", 140.0).snapshot
    assert paused.running_s == 40.0
    assert machine.updated(paused, 1_000.0).running_s == 40.0  # paused: the clock stands still
    running = msgspec.structs.replace(machine.updated(paused, 1_000.0), status="running")
    assert machine.updated(running, 1_005.0).running_s == 45.0
    recovered = machine.recover(machine.updated(running, 1_005.0), 90_000.0).snapshot
    assert recovered.running_s == 45.0  # acode was down all that time: not the session's


class _Stage:
    """A stage request's budget steps with a fake record (what persistence counted) and clock."""

    def __init__(self, budget: Budget, recorded: Spent = Spent(), running_s: float = 0.0):
        self.now = 0.0
        self.committed: list[Event] = []
        self.flushes = 0
        request = RunStage(session_id="s1", stage="executor", visit=1, attempt=1, task="t", workspace="/w",
                           settings=SessionSettings(budget=budget), running_s=running_s)
        self.spending = Spending(request, index=lambda: ReplayIndex(spent=recorded), commit=self.committed.extend,
                                 flush=self._flush, clock=lambda: self.now)

    def _flush(self) -> None:
        self.flushes += 1


def _answer(tokens_in: int, tokens_out: int) -> ModelAnswer:
    return ModelAnswer(usage=Usage(prompt_tokens=tokens_in, completion_tokens=tokens_out))


def _result(*, replayed: bool = False) -> ToolResult:
    return ToolResult(key="k", tool="write_file", ok=True, replayed=replayed)


def test_a_call_that_would_cross_a_limit_is_refused_after_what_was_held_is_written() -> None:
    stage = _Stage(Budget(tool_calls=3), recorded=Spent(tool_calls=2))
    stage.spending.check_call(where="write_file a.txt")  # 2 + 1 = 3: within
    stage.spending.called(_result())
    with pytest.raises(BudgetExhausted, match=r"tool_calls budget is spent before write_file b.txt \(3 of 3 tool "
                                              r"calls\); extend it with `acode resume` --budget-tool-calls") as raised:
        stage.spending.check_call(where="write_file b.txt")
    assert raised.value.code == "ACODE-ORCH-013" and stage.flushes == 1


def test_replayed_calls_count_nothing_and_live_ones_count_once() -> None:
    stage = _Stage(Budget(tool_calls=10), recorded=Spent(tool_calls=4))
    stage.spending.called(_result(replayed=True))
    stage.spending.called(_result())
    assert stage.spending.used().tool_calls == 5


def test_a_model_call_needs_its_prompt_within_the_tokens_left() -> None:
    stage = _Stage(Budget(tokens=1_000), recorded=Spent(tokens_in=600, tokens_out=100))
    stage.spending.check(300, where="model call plan")  # 700 + 300 = 1,000: within
    with pytest.raises(BudgetExhausted, match="tokens budget is spent before model call plan"):
        stage.spending.check(301, where="model call plan")


def test_time_is_checked_as_spent_running_from_dispatch_and_waiting_for_the_model() -> None:
    stage = _Stage(Budget(wall_minutes=1, model_minutes=1), running_s=50.0)
    stage.now = 9.0
    stage.spending.check(10, where="model call plan")  # 59 s of 60: within
    stage.now = 10.0
    with pytest.raises(BudgetExhausted, match="wall_minutes"):
        stage.spending.check_call(where="write_file a.txt")
    spent = _Stage(Budget(model_minutes=1))
    spent.spending.spent(_answer(0, 0), 60_000.0)
    with pytest.raises(BudgetExhausted, match="model_minutes"):
        spent.spending.check(1, where="model call plan")


def test_no_limit_is_never_crossed() -> None:
    stage = _Stage(Budget(tokens=0, tool_calls=0, wall_minutes=0, model_minutes=0),
                   recorded=Spent(tokens_in=10**11, tool_calls=10**9), running_s=10**8)
    stage.spending.check(10**6, where="model call plan")
    stage.spending.check_call(where="run_terminal make")
    stage.spending.called(_result())
    assert stage.committed == []


def test_the_warning_at_80_percent_is_written_once_per_limit_under_a_stable_id() -> None:
    stage = _Stage(Budget(tokens=1_000))
    stage.spending.spent(_answer(700, 50), 1.0)
    assert stage.committed == []  # 75%
    stage.spending.spent(_answer(40, 10), 1.0)
    stage.spending.spent(_answer(10, 10), 1.0)
    [warning] = stage.committed
    assert isinstance(warning, BudgetWarning) and (warning.kind, warning.used, warning.limit) == ("tokens", 800, 1_000)
    again = _Stage(Budget(tokens=1_000), recorded=Spent(tokens_in=900))  # the stage run again: the same event id
    again.spending.called(_result())
    assert [e.id for e in again.committed] == [warning.id]


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500), st.booleans()), max_size=30))
def test_what_the_checks_allow_never_ends_above_a_limit(calls: list[tuple[int, int, bool]]) -> None:
    """Tokens can overshoot only by an answer's own (unknown) output; calls never overshoot."""
    stage = _Stage(Budget(tokens=2_000, tool_calls=5))
    made = 0
    for prompt, out, is_call in calls:
        try:
            if is_call:
                stage.spending.check_call(where="a call")
                stage.spending.called(_result())
                made += 1
            else:
                stage.spending.check(prompt, where="a turn")
                stage.spending.spent(_answer(prompt, out), 0.0)
        except BudgetExhausted:
            continue
    used = stage.spending.used()
    assert made == used.tool_calls <= 5
    assert spent_on(used, "tokens") <= 2_000 + 500


def test_the_budget_steps_are_thread_safe() -> None:
    stage = _Stage(Budget(tool_calls=0))
    threads = [threading.Thread(target=lambda: [stage.spending.called(_result()) for _ in range(200)])
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stage.spending.used().tool_calls == 800
