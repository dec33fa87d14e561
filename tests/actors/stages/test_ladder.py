"""The executor's rungs of the escalation ladder: a step's tries, each from a fresh window
stating what failed; the step timeout; a call repeated three times; a revisit that keeps
the steps the replaced visit completed."""

from __future__ import annotations

import time

from actors.stages.execution import executor
from protocol.sessions.events import StepRetried
from tests.actors.stages.conftest import Stack
from tests.actors.stages.test_executor import call, done, plan, step


def _failed(reason: str) -> dict[str, object]:
    return call("step_failed", reason=reason)


def test_a_step_that_fails_twice_succeeds_on_its_third_try_from_a_fresh_window(stack: Stack) -> None:
    responses = [_failed("the file is locked"), _failed("still locked"),
                 call("write_file", path="a.txt", content="a\n"), done("wrote a.txt")]
    run = stack.stage("executor", responses, plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.summary, record.turns) == ("completed", "wrote a.txt", 4)
    sites = [r.call_site for r in run.spy.requests]
    assert sites == ["T1/S1/turn1", "T1/S1/try2/turn1", "T1/S1/try3/turn1", "T1/S1/try3/turn2"]
    second, third = run.spy.requests[1].messages, run.spy.requests[2].messages
    assert [m.role for m in second] == ["system", "user"], "a fresh window, not the conversation replayed"
    assert "This is try 2 of 3 of this step" in second[1].content and "Try 1 failed: the file is locked" in \
        second[1].content
    assert "Try 2 failed: still locked" in third[1].content
    retried = [(e.attempt, e.of, e.code, e.reason) for e in run.events() if isinstance(e, StepRetried)]
    assert retried == [(2, 3, "ACODE-EXEC-001", "the file is locked"), (3, 3, "ACODE-EXEC-001", "still locked")]


def test_a_step_that_always_fails_is_tried_step_retry_limit_times_then_blocks_its_dependents(stack: Stack) -> None:
    tasks = [{"label": "T1", "title": "first", "steps": [step("S1")]},
             {"label": "T2", "title": "after T1", "depends_on": ["T1"], "steps": [step("S1")]},
             {"label": "T3", "title": "independent", "steps": [step("S1")]}]
    responses = [_failed("no"), _failed("no"), call("write_file", path="c.txt", content="c"), done("wrote c.txt")]
    run = stack.stage("executor", responses, plan(tasks=tasks), step_retry_limit=2)

    result = executor.run(run.ctx)

    assert not result.ok and result.error is not None and result.error.code == "ACODE-EXEC-001"
    statuses = [(r.task, r.status) for r in result.execution.steps]  # type: ignore[union-attr]
    assert statuses == [("T1", "failed"), ("T3", "completed"), ("T2", "blocked")] or \
        statuses == [("T1", "failed"), ("T2", "blocked"), ("T3", "completed")]
    failed = result.execution.steps[0]  # type: ignore[union-attr]
    assert failed.summary == "no (tried 2 times)"
    assert result.error.message.startswith(
        "step T1/S1 failed: no (tried 2 times); task aborted: T1; blocked by it: T2/S1")


def test_the_same_call_three_times_in_a_row_fails_the_try_without_running_the_third(stack: Stack) -> None:
    same = call("run_terminal", command="python -c pass")
    run = stack.stage("executor", [same, same, same], plan(step("S1", "run_command")), step_retry_limit=1)

    result = executor.run(run.ctx)

    assert not result.ok and result.error is not None and result.error.code == "ACODE-EXEC-008"
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert record.tool_calls == 2 and record.code == "ACODE-EXEC-008"
    assert "called run_terminal 'python -c pass' with the same arguments 3 times in a row" in record.summary


def test_a_try_past_the_step_timeout_fails_with_exec_006(stack: Stack) -> None:
    slow = {**call("read_file", path="a.txt"), "delay_s": 0.4}
    run = stack.stage("executor", [slow, done("never reached")], plan(step("S1", "read_file")),
                      files={"a.txt": "a"}, step_timeout_s=0.2, step_retry_limit=1)

    result = executor.run(run.ctx)

    assert not result.ok and result.error is not None and result.error.code == "ACODE-EXEC-006"
    assert len(run.spy.requests) == 1
    assert "the step took more than 0.2s" in result.execution.steps[0].summary  # type: ignore[union-attr]


def test_a_model_answer_still_coming_at_the_step_deadline_is_abandoned_and_the_next_try_starts(
        stack: Stack) -> None:
    stalled = {**call("read_file", path="a.txt"), "delay_s": 30}
    run = stack.stage("executor", [stalled, call("read_file", path="a.txt"), done("read it")],
                      plan(step("S1", "read_file")), files={"a.txt": "a"}, step_timeout_s=0.5, step_retry_limit=2)
    started = time.monotonic()

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert time.monotonic() - started < 10, "the stalled answer was not waited for"
    assert [r.call_site for r in run.spy.requests] == ["T1/S1/turn1", "T1/S1/try2/turn1", "T1/S1/try2/turn2"]
    [retried] = [e for e in run.events() if isinstance(e, StepRetried)]
    assert retried.code == "ACODE-EXEC-006" and "the step took more than 0.5s" in retried.reason


def test_a_revisit_keeps_the_steps_the_failed_visit_completed_and_retries_the_failed_one(stack: Stack) -> None:
    tasks = [{"label": "T1", "title": "first", "steps": [step("S1")]},
             {"label": "T2", "title": "second", "steps": [step("S1")]}]
    round_one = [call("write_file", path="a.txt", content="a"), done("wrote a.txt"), _failed("the model gave up")]
    first = stack.stage("executor", round_one, plan(tasks=tasks), step_retry_limit=1)
    assert not executor.run(first.ctx).ok

    # the scripted model numbers a session's requests: the second round's answers come after the first's
    again = stack.stage("executor", [*round_one, call("write_file", path="b.txt", content="b"), done("wrote b.txt")],
                        plan(tasks=tasks), session_id=first.ctx.session_id, workspace=first.workspace, visit=2,
                        kept_steps=["T1/S1"], step_retry_limit=1)
    result = executor.run(again.ctx)

    assert result.ok, result.summary
    assert [(r.task, r.status, r.visit) for r in result.execution.steps] == [  # type: ignore[union-attr]
        ("T1", "completed", 1), ("T2", "completed", 2)]
    assert result.execution.kept == ["T1/S1"]  # type: ignore[union-attr]
    assert [r.call_site for r in again.spy.requests] == ["T2/S1/turn1", "T2/S1/turn2"], "T1 was not run again"
    assert "An earlier round of this step failed: the model gave up" in again.spy.requests[0].messages[1].content
    assert result.summary == "1 step(s) done, 1 kept from earlier, 2 file(s) changed so far"
