"""Several reads sent to the sandbox at once (``StageContext.tools``), against real actors."""

from __future__ import annotations

from protocol.sessions.events import ToolCalled
from tests.actors.stages.conftest import Stack


def test_reads_at_once_are_held_in_the_order_given_and_a_replay_reads_the_journal(stack: Stack) -> None:
    run = stack.stage("planner", [{"content": "ok"}], None, files={"a.txt": "alpha\n", "b.txt": "beta\n"})
    ctx = run.ctx
    sid = ctx.session_id
    calls = [(f"{sid}:b", "read_file", {"path": "b.txt"}), (f"{sid}:ls", "list_directory", {"path": "."}),
             (f"{sid}:a", "read_file", {"path": "a.txt"})]
    try:
        results = ctx.tools(calls)
        assert [r.ok for r in results] == [True, True, True]
        assert results[0].output.endswith("beta\n") and results[2].output.endswith("alpha\n")
        assert "a.txt" in results[1].output and "b.txt" in results[1].output
        assert ctx.tool_calls == 3
        ctx.flush()
        assert [e.key for e in run.events() if isinstance(e, ToolCalled)] == [key for key, _, _ in calls]
    finally:
        ctx.close()

    (run.workspace / "b.txt").write_text("changed\n")
    again = stack.stage("planner", [{"content": "ok"}], None, session_id=sid, workspace=run.workspace)
    try:
        replayed = again.ctx.tools(calls)  # journaled: the first results, not the files as they are now
        assert [r.output for r in replayed] == [r.output for r in results]
        again.ctx.flush()
        assert len([e for e in again.events() if isinstance(e, ToolCalled)]) == 3  # nothing journaled twice
    finally:
        again.ctx.close()
