"""The hooks a stage runs (pre_tool, post_tool, step_start, step_end) in the executor,
against a real broker, persistence and sandbox and real hook scripts: what the model
sees, what is recorded, and a replay that reads the record instead of running the hook."""

from __future__ import annotations

import sys
from pathlib import Path

from actors import hooks
from actors.stages.execution import executor
from protocol.policy.hooks import HookSettings, HookSpec
from protocol.sessions.events import HookRan, HookStarted, ToolCalled
from tests.actors.stages.conftest import Stack
from tests.actors.stages.test_executor import call, done, plan, step, tool_messages


def script(code: str, **more: object) -> HookSpec:
    return HookSpec(action="script", run=[sys.executable, "-c", code], **more)  # type: ignore[arg-type]


def counted(log: Path, code: str = "") -> str:
    """A hook's code that notes each run in ``log``, then runs ``code``."""
    return f"open({str(log)!r}, 'a').write('ran\\n')\n{code}"


def test_a_pre_tool_hook_that_exits_2_blocks_the_call_and_the_model_reads_why(stack: Stack, tmp_path: Path) -> None:
    log = tmp_path / "log"
    deny = script(counted(log, "import sys; print('a.txt is frozen', file=sys.stderr); sys.exit(2)"),
                  condition='path == "a.txt"')
    run = stack.stage("executor", [call("write_file", path="a.txt", content="x"),
                                   call("write_file", path="b.txt", content="y"), done()], plan(step("S1")),
                      hooks=HookSettings(pre_tool=[deny]))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert not (run.workspace / "a.txt").exists() and (run.workspace / "b.txt").read_text() == "y"
    [(role, said)] = tool_messages(run, 1)
    assert role == "tool" and said.startswith(
        "your pre_tool hook denied this: hook pre_tool[0]: a.txt is frozen (ACODE-EXEC-012); the call was not run")
    events = run.events()
    assert [(e.point, e.decision, e.exit_code) for e in events if isinstance(e, HookRan)] == [("pre_tool", "deny", 2)]
    assert [e.target for e in events if isinstance(e, ToolCalled) and e.counted] == ["b.txt"]
    assert log.read_text() == "ran\n"  # the condition kept it from b.txt

    again, spy = run.again()  # the stage dispatched again: the record answers, the hook does not run
    assert executor.run(again).ok
    assert log.read_text() == "ran\n" and spy.requests == []


def test_a_pre_tool_hook_that_hangs_is_killed_and_the_call_denied(stack: Stack) -> None:
    hang = script("import time; time.sleep(60)", timeout=0.5)
    run = stack.stage("executor", [call("write_file", path="a.txt", content="x"), done()], plan(step("S1")),
                      hooks=HookSettings(pre_tool=[hang]))

    executor.run(run.ctx)

    assert not (run.workspace / "a.txt").exists()
    [(_, said)] = tool_messages(run, 1)
    assert "denied this: hook pre_tool[0]: the hook failed:" in said and "did not finish within 0.5s (killed)" in said


def test_a_step_start_hook_adds_context_and_a_post_tool_note_follows_the_result(stack: Stack) -> None:
    context = script('print(\'{"decision": "modify_context", "context": "indent with tabs"}\')')
    note = script('print(\'{"context": "the linter says: fine"}\')')
    run = stack.stage("executor", [call("write_file", path="a.txt", content="x"), done()], plan(step("S1")),
                      hooks=HookSettings(step_start=[context], post_tool=[note]))

    assert executor.run(run.ctx).ok

    assert any("indent with tabs" in m.content for m in run.spy.requests[0].messages)  # fenced, as steering
    [said] = [content for role, content in tool_messages(run, 1) if role == "tool"]
    assert "wrote 1 bytes to a.txt\n[note from your post_tool hook] the linter says: fine\n<<end" in said
    assert said.startswith("write_file: ok\n<<untrusted write_file result")  # inside the result's fence


def test_a_step_end_hook_that_pauses_ends_the_stage_and_a_replay_goes_on_past_it(stack: Stack, tmp_path: Path) -> None:
    log = tmp_path / "log"
    pause = script(counted(log, "import sys; print('look at S1 first', file=sys.stderr); sys.exit(2)"),
                   condition='step == "T1/S1"')
    run = stack.stage("executor", [call("write_file", path="a.txt", content="x"), done(),
                                   call("write_file", path="b.txt", content="y"), done()],
                      plan(step("S1"), step("S2")), hooks=HookSettings(step_end=[pause]))

    result = executor.run(run.ctx)

    assert not result.ok and result.error is not None and result.error.code == "ACODE-ORCH-014"
    assert "hook step_end[0] at step_end paused the session: look at S1 first" in result.error.message
    assert not (run.workspace / "b.txt").exists()

    again, _ = run.again()  # resumed by a human: S1 is done, its hook's pause was acted on
    resumed = executor.run(again)
    assert resumed.ok, resumed.summary
    assert (run.workspace / "b.txt").read_text() == "y" and log.read_text() == "ran\n"


def test_a_hook_whose_intent_was_recorded_but_not_its_result_is_not_run_again(stack: Stack, tmp_path: Path) -> None:
    """The stage was killed while the hook ran: the replay finds the intent alone, fails the
    hook closed (outcome unknown) and does not run it a second time."""
    log = tmp_path / "log"
    run = stack.stage("executor", [call("write_file", path="a.txt", content="x"), done()], plan(step("S1")),
                      hooks=HookSettings(pre_tool=[script(counted(log))]))
    session = run.ctx.session_id
    key = f"{session}:e1:T1/S1:t1:c0"  # the write's key, as the executor makes it
    run.ctx.commit([HookStarted(id=hooks.started_id(session, "pre_tool", key, 0), session_id=session, at=1.0,
                                point="pre_tool", hook="pre_tool[0]", occurrence=key)])
    again, _ = run.again()  # dispatched again: its replay index holds the intent

    executor.run(again)

    assert not log.exists() and not (run.workspace / "a.txt").exists()
    [ran] = [e for e in run.events() if isinstance(e, HookRan)]
    assert ran.decision == "deny" and "its outcome is unknown" in ran.failed
