"""The executor stage against a real broker, persistence and sandbox, with a scripted model.

What a small local model gets wrong (calls written as text, broken JSON, unknown tools,
bad arguments, finishing too early) is corrected and costs turns; results are cut and
fenced; a failed step blocks only what depends on it.
"""

from __future__ import annotations

import json
from typing import Any

from actors.stages.execution import executor
from protocol.sessions.events import StepFinished, ToolCalled
from protocol.sessions.session import Feedback, FeedbackItem
from tests.actors.stages.conftest import Run, Stack


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def done(summary: str = "done") -> dict[str, Any]:
    return call("step_complete", summary=summary)


def text(content: str) -> dict[str, Any]:
    return {"content": content}


def step(label: str, action: str = "write_file", **more: Any) -> dict[str, Any]:
    return {"label": label, "title": f"step {label}", "action": action, **more}


def plan(*steps: dict[str, Any], tasks: list[dict[str, Any]] | None = None, **task: Any) -> dict[str, Any]:
    tasks = tasks or [{"label": "T1", "title": "the task", "steps": list(steps), **task}]
    return {"goal": "the goal", "status": "ready", "tasks": tasks}


def tool_messages(run: Run, request: int) -> list[tuple[str, str]]:
    """(role, content) of what came after the model's last answer in request ``request``."""
    messages = run.spy.requests[request].messages
    last_answer = max(i for i, m in enumerate(messages) if m.role == "assistant")
    return [(m.role, m.content) for m in messages[last_answer + 1:]]


def test_tool_calls_written_as_text_run_fenced_bare_as_a_list_and_with_string_arguments(stack: Stack) -> None:
    fenced = '```json\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "alpha\\n"}}\n```'
    bare = 'Writing b.txt: {"tool": "write_file", "args": "{\\"path\\": \\"b.txt\\", \\"content\\": \\"beta\\\\n\\"}"}'
    listed = json.dumps([{"function": {"name": "read_file", "arguments": {"path": "a.txt"}}},
                         {"name": "step_complete", "arguments": {"summary": "wrote both"}}])
    run = stack.stage("executor", [text(fenced), text(bare), text(listed)], plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "a.txt").read_text() == "alpha\n"
    assert (run.workspace / "b.txt").read_text() == "beta\n"
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.summary, record.turns, record.tool_calls) == ("completed", "wrote both", 3, 3)
    assert record.files_changed == ["a.txt", "b.txt"]
    # results of calls written as text come back in one user message, never as tool messages
    [(role, content)] = tool_messages(run, 1)
    assert role == "user" and content.startswith(
        "Result of your write_file call text_0:\nwrite_file: ok\n<<untrusted write_file result")
    assert all(m.role != "tool" for r in run.spy.requests for m in r.messages)


def test_invalid_json_in_a_call_gets_a_precise_correction_and_the_corrected_call_runs(stack: Stack) -> None:
    broken = '{"name": "write_file", "arguments": {"path": "a.py", "content": print("hi")}}'  # beyond repair
    good = '{"name": "write_file", "arguments": {"path": "a.py", "content": "print(\\"hi\\")\\n"}}'
    run = stack.stage("executor", [text(broken), text(good), done("wrote a.py")], plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    [(role, content)] = tool_messages(run, 1)
    assert role == "user"
    assert content.startswith("error: your tool call is not valid JSON: Expecting value at line 1 column 65")
    assert "(ACODE-EXEC-007)" in content
    assert (run.workspace / "a.py").read_text() == 'print("hi")\n'
    assert result.execution.steps[0].turns == 3  # type: ignore[union-attr]


def test_an_unknown_tool_is_answered_with_the_available_ones_and_the_model_recovers(stack: Stack) -> None:
    run = stack.stage("executor", [call("delete_file", path="a.txt"), call("write_file", path="a.txt", content="x"),
                                   done()], plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert tool_messages(run, 1) == [("tool", (
        "error: tool 'delete_file' is not available; call one of: read_file, write_file, modify_file, "
        "create_directory, list_directory, search_code, run_terminal, step_complete, step_failed (ACODE-SBX-001)"))]
    assert run.spy.requests[1].messages[-1].tool_call_id == "call_0_0"
    assert (run.workspace / "a.txt").read_text() == "x"


def test_bad_arguments_are_answered_with_the_validation_error_and_the_signature(stack: Stack) -> None:
    run = stack.stage("executor", [call("write_file", path="a.txt"), call("write_file", path="a.txt", content="x"),
                                   done()], plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert tool_messages(run, 1) == [("tool", (
        "error: invalid arguments for write_file: Object missing required field `content`; it takes "
        "write_file(path: string, content: string) (ACODE-EXEC-007)"))]


def test_corrections_count_against_the_turns_and_running_out_fails_the_step_with_exec_003(stack: Stack) -> None:
    responses = [text('{"name": "read_file", "arguments": {"path": '), call("nope"), text("I think it is done.")]
    run = stack.stage("executor", responses, plan(step("S1", "read_file")), max_turns_per_step=3,
                      step_retry_limit=1)

    result = executor.run(run.ctx)

    assert not result.ok
    assert result.error is not None and result.error.code == "ACODE-EXEC-003"
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.code, record.tool_calls) == ("failed", 3, "ACODE-EXEC-003", 0)
    assert record.summary.startswith("no step_complete after 3 turns (ACODE-EXEC-003)")
    assert len(run.spy.requests) == 3  # no fourth turn
    assert tool_messages(run, 2)[0][1].startswith("error: tool 'nope' is not available")
    assert tool_messages(run, 1)[0][1].startswith("error: your tool call is not valid JSON")


def test_step_complete_without_a_write_is_pushed_back_once_and_accepted_the_second_time(stack: Stack) -> None:
    responses = [done("read it"), done("nothing to write"), done("really nothing to write")]
    run = stack.stage("executor", responses, plan(step("S1", "read_file"), step("S2", "write_file")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    s1, s2 = result.execution.steps  # type: ignore[union-attr]
    assert (s1.status, s1.turns) == ("completed", 1)  # a read step needs no write
    assert (s2.status, s2.turns, s2.summary) == ("completed", 2, "really nothing to write")
    [(role, content)] = tool_messages(run, 2)
    assert role == "tool" and content.startswith(
        "step_complete refused once: step S2 is a write_file step but no file was written or changed in it.")


def test_a_long_tool_result_is_cut_to_the_budget_with_a_note_and_fenced(stack: Stack) -> None:
    lines = "".join(f"line {i:05d} of a long file\n" for i in range(400))  # 10,800 characters
    run = stack.stage("executor", [call("read_file", path="big.txt"), done()], plan(step("S1", "read_file")),
                      files={"big.txt": lines}, tool_result_tokens=100)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    [(role, content)] = tool_messages(run, 1)
    assert role == "tool" and content.startswith(f"read_file: ok\n<<untrusted read_file result {run.ctx.fence.nonce}>>")
    assert "characters (~" in content and "tokens) cut here;" in content
    assert "1\tline 00000 of a long file" in content and "400\tline 00399 of a long file" in content  # head, tail
    assert "line 00200" not in content
    assert len(content) < 400 + 400  # 100 tokens of output, the note and the fence


def test_a_failed_step_blocks_its_dependents_while_independent_steps_still_run(stack: Stack) -> None:
    tasks = [
        {"label": "T1", "title": "first", "steps": [step("S1"), step("S2", depends_on=["S1"]), step("S3")]},
        {"label": "T2", "title": "after T1", "depends_on": ["T1"], "steps": [step("S1")]},
        {"label": "T3", "title": "independent", "steps": [step("S1")]},
    ]
    responses = [call("step_failed", reason="the library is missing"),
                 call("write_file", path="c.txt", content="c"), done("wrote c.txt"),
                 call("write_file", path="d.txt", content="d"), done("wrote d.txt")]
    run = stack.stage("executor", responses, plan(tasks=tasks), step_retry_limit=1)

    result = executor.run(run.ctx)

    assert not result.ok and result.error is not None and result.error.code == "ACODE-EXEC-001"
    statuses = [(r.task, r.step, r.status, r.summary) for r in result.execution.steps]  # type: ignore[union-attr]
    assert statuses == [
        ("T1", "S1", "failed", "the library is missing"),
        ("T1", "S2", "blocked", "it depends on T1/S1, which failed"),
        ("T1", "S3", "completed", "wrote c.txt"),
        ("T2", "S1", "blocked", "it depends on T1/S1, which failed"),
        ("T3", "S1", "completed", "wrote d.txt"),
    ]
    assert result.error.message == ("step T1/S1 failed: the library is missing; task aborted: T1; "
                                    "blocked by it: T1/S2, T2/S1")
    assert sorted(p.name for p in run.workspace.iterdir()) == ["c.txt", "d.txt"]
    finished = [(e.task, e.step, e.status) for e in run.events() if isinstance(e, StepFinished)]
    assert ("T2", "S1", "blocked") in finished and len(finished) == 5

    # a retried attempt (after a crash) skips every recorded step and asks the model nothing
    asked = len(run.spy.requests)
    again = executor.run(run.ctx)
    assert [r.status for r in again.execution.steps] == [r.status for r in result.execution.steps]  # type: ignore[union-attr]
    assert len(run.spy.requests) == asked


def test_the_step_message_holds_the_criteria_the_task_files_fenced_and_the_verifier_feedback(stack: Stack) -> None:
    feedback = Feedback(source="verifier", summary="A1 failed: `python -m unittest -q` exited 1 (expected 0)",
                        items=[FeedbackItem(label="A1", problem="criterion not met",
                                            detail="`python -m unittest -q` exited 1 (expected 0); output: "
                                                   "AssertionError: 'Bye' != 'Goodbye'")])
    the_plan = plan(step("S1", "modify_file"), resources={"read": ["greet.py"], "write": ["greet.py", "new.py"]},
                    acceptance=[{"label": "A1", "description": "the tests pass",
                                 "check": {"command": "python -m unittest -q"}}])
    run = stack.stage("executor", [call("step_failed", reason="stop here")], the_plan,
                      files={"greet.py": "def greet():\n    return 'Bye'\n"}, feedback=feedback, visit=2,
                      step_retry_limit=1)

    executor.run(run.ctx)

    system, step_message = run.spy.requests[0].messages
    nonce = run.ctx.fence.nonce
    assert system.role == "system" and "no pipes, &&" in system.content and nonce in system.content
    content = step_message.content
    assert "Your step, S1: step S1" in content and "Action: modify_file" in content
    assert "- A1: the tests pass (checked by running `python -m unittest -q`)" in content
    assert (f"Current content of greet.py (line numbers are not part of it):\n<<untrusted file greet.py {nonce}>>\n"
            "     1\tdef greet():\n     2\t    return 'Bye'\n" in content)
    assert "Current content of new.py: none, the file does not exist yet" in content
    assert f"<<untrusted evidence A1 {nonce}>>\n`python -m unittest -q` exited 1 (expected 0); output: " in content
    assert "This step runs again because the verifier found problems" in content
    # the context reads are journaled calls under the step's own keys, not counted as the model's
    keys = [e.key for e in run.events() if isinstance(e, ToolCalled)]
    assert [k.rsplit(":", 1)[1] for k in keys] == ["ctx-agents-md", "ls", "ctx0", "ctx1"]
    assert all(":ctx" in k for k in keys)


def test_a_step_that_never_calls_a_tool_fails_with_the_ignored_tools_diagnosis(stack: Stack) -> None:
    from protocol.sessions.events import TurnAnswered

    run = stack.stage("executor", [text("I will write it."), text("Done, I think."), text("Yes.")],
                      plan(step("S1")), max_turns_per_step=3)
    result = executor.run(run.ctx)  # the server's fault, not the step's: no further try, the stage fails
    assert not result.ok and result.error is not None and result.error.code == "ACODE-LLM-015"
    assert "no tool call in 3 turn(s) of step T1/S1" in result.error.message and "--jinja" in result.error.message
    assert [(r.task, r.step, r.status) for r in result.execution.steps] == [("T1", "S1", "failed")]  # type: ignore[union-attr]
    turns = [e for e in run.events() if isinstance(e, TurnAnswered)]
    assert [(t.turn, t.tool_calls) for t in turns] == [(1, 0), (2, 0), (3, 0)]
    assert all(t.correction.startswith("No tool call found") for t in turns)


def test_turns_with_calls_are_events_without_a_correction(stack: Stack) -> None:
    from protocol.sessions.events import TurnAnswered

    run = stack.stage("executor", [call("write_file", path="a.txt", content="a\n"), done()], plan(step("S1")))
    assert executor.run(run.ctx).ok
    turns = [e for e in run.events() if isinstance(e, TurnAnswered)]
    assert [(t.turn, t.tool_calls, t.correction) for t in turns] == [(1, 1, ""), (2, 1, "")]
    # what a trace's model call needs: which model, how long (the scripted model does not stream)
    assert [(t.provider, t.model, t.replayed, t.first_token_ms) for t in turns] \
        == [("scripted", "scripted", False, 0.0)] * 2
    assert all(t.duration_ms >= 0 for t in turns)


def test_a_steps_start_and_finish_are_stamped_when_they_happen_not_when_their_held_write_lands(
        stack: Stack) -> None:
    """``acode show``'s step timing (issue 29 part 3): ``step_started`` is held until the
    stage's next write, after the model's slow first answer; its time is the step's start."""
    from protocol.sessions.events import StepStarted, TurnAnswered

    slow = {**call("write_file", path="a.txt", content="a\n"), "delay_s": 0.3}
    run = stack.stage("executor", [slow, done()], plan(step("S1")))
    assert executor.run(run.ctx).ok
    events = run.events()
    started = next(e for e in events if isinstance(e, StepStarted))
    first = next(e for e in events if isinstance(e, TurnAnswered))
    finished = next(e for e in events if isinstance(e, StepFinished))
    assert started.at <= first.at - 0.3 < finished.at
    assert finished.at - started.at >= 0.3
