"""The sandbox's gate learns a session's policy while the planner's calls run.

The planner's calls pass the approval gate without the session's policy (no model chose
them), so the sandbox has its gate read the policy in the background meanwhile
(``ApprovalGate.learn``): the executor's first read, which is gated, then asks persistence
nothing, and is answered at once on the sandbox's loop thread like every later small read.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from protocol import codec
from protocol.messages import RunTool, ToolDone
from protocol.plans.results import ToolResult
from tests.actors.stages.conftest import Stack


def _gated_read_while_persistence_is_stopped(stack: Stack, learn_first: bool) -> bool:
    """Whether a gated held read is answered while persistence cannot answer anything."""
    run = stack.stage("executor", [{"content": "ok"}], None, files={"a.txt": "alpha\n"})
    ctx = run.ctx
    sid = ctx.session_id
    try:
        if learn_first:
            planner = stack.harness.client(sender="planner")
            try:
                reply = planner.call("sandbox", RunTool(
                    key=f"{sid}:p1:ctx:tree", session_id=sid, workspace=str(run.workspace), tool="list_directory",
                    arguments={"path": "."}, held=True), timeout=10, decoder=codec.SANDBOX_REPLY)
                assert isinstance(reply, ToolDone) and reply.result.ok and "a.txt" in reply.result.output
            finally:
                planner.close()
            time.sleep(1.0)  # the gate reads the policy in the background (one local round trip)
        ctx.replay_index()  # the stage's own read of persistence, before it is stopped
        persistence = stack.harness.procs["persistence"].pid
        answered: list[ToolResult] = []

        def read() -> None:
            answered.append(ctx.tool(f"{sid}:t0", "read_file", {"path": "a.txt"}))
            ctx.release_thread()

        reader = threading.Thread(target=read)
        os.kill(persistence, signal.SIGSTOP)
        try:
            reader.start()
            deadline = time.monotonic() + 3.0
            while not answered and time.monotonic() < deadline:
                time.sleep(0.01)
            quick = bool(answered)
        finally:
            os.kill(persistence, signal.SIGCONT)
        reader.join(60)
        assert answered and answered[0].ok and answered[0].output.endswith("alpha\n")
        return quick
    finally:
        ctx.close()


def test_a_session_the_planner_touched_is_known_to_the_gate_before_the_executor_reads(stack: Stack) -> None:
    assert _gated_read_while_persistence_is_stopped(stack, learn_first=True)


def test_a_session_the_gate_never_saw_is_read_from_persistence_at_its_first_gated_call(stack: Stack) -> None:
    assert not _gated_read_while_persistence_is_stopped(stack, learn_first=False)
