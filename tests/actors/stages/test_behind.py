"""A step's record written behind (``StageContext.commit(wait=False)``), against real actors.

The commit returns before persistence has it, and the next step's held read runs
meanwhile; anything else waits until it is durable, writes land in the order they were
made, and a write that fails fails every write after it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from actors.llm.provider import ChatMessage, ModelRequest
from actors.stages.request.context import StageContext
from actors.stages.request.writes import BEHIND_STEPS
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError
from protocol.messages import GetEvents, GetSteps
from protocol.plans.results import StageResult, StepRecord
from protocol.sessions.events import StepFinished, StepStarted, ToolCalled
from tests.actors.stages.conftest import Run, Stack


def _run(stack: Stack) -> Run:
    return stack.stage("executor", [{"content": "ok"}], None, files={"a.txt": "alpha\n"})


def _finish(ctx: StageContext, step: str, session_id: str | None = None) -> tuple[StepFinished, StepRecord]:
    sid = ctx.session_id
    event = StepFinished(id=new_id(), session_id=sid, at=time.time(), visit=1, task="T1", step=step,
                         status="completed")
    return event, StepRecord(session_id=session_id or sid, visit=1, task="T1", step=step, status="completed")


def test_a_step_written_behind_overlaps_the_next_read_and_is_durable_before_the_next_write(stack: Stack) -> None:
    run = _run(stack)
    ctx = run.ctx
    try:
        sid = ctx.session_id
        assert ctx.tool(f"{sid}:t0", "read_file", {"path": "a.txt"}).ok  # the sandbox's gate learns the session
        persistence = stack.harness.procs["persistence"].pid
        os.kill(persistence, signal.SIGSTOP)
        try:
            finished, record = _finish(ctx, "S1")
            started = time.monotonic()
            ctx.commit([finished], step=record, wait=False)
            assert time.monotonic() - started < 0.2  # not waiting for a persistence that cannot answer
            ctx.commit([StepStarted(id=new_id(), session_id=sid, at=time.time(), visit=1, task="T1", step="S2",
                                    title="next")])  # held
            read = ctx.tool(f"{sid}:t1", "read_file", {"path": "a.txt"})  # held: runs while the step is behind
            assert read.ok and read.output.endswith("alpha\n")

            flushed: list[bool] = []
            flusher = threading.Thread(target=lambda: (ctx.flush(), flushed.append(True), ctx.release_thread()))
            flusher.start()
            time.sleep(0.3)
            assert not flushed  # a write waits for the one behind
        finally:
            os.kill(persistence, signal.SIGCONT)
        flusher.join(30)
        assert flushed
        kinds = [type(e) for e in run.events() if isinstance(e, StepFinished | StepStarted | ToolCalled)]
        assert kinds == [ToolCalled, StepFinished, StepStarted, ToolCalled]  # in the order they were made
    finally:
        ctx.close()


def _behind(ctx: StageContext, step: str) -> None:
    """Finish ``step`` as the executor does: its record written behind."""
    finished, record = _finish(ctx, step)
    ctx.commit([finished], step=record, wait=False)


def _stored(stack: Stack, ctx: StageContext) -> list[str]:
    """The step records persistence holds for the session's first visit, sorted."""
    return sorted(r.step for r in stack.clients.call("persistence", GetSteps(session_id=ctx.session_id, visit=1),
                                                     timeout=10, decoder=codec.PERSISTENCE_REPLY).steps)


def test_every_other_step_is_held_for_the_next_ones_write(stack: Stack) -> None:
    run = _run(stack)
    ctx = run.ctx
    try:
        _behind(ctx, "S1")
        ctx.writes._settle()  # nothing was sent behind: S1 is held
        assert _stored(stack, ctx) == []
        _behind(ctx, "S2")  # S1 goes with it
        ctx.writes._settle()
        assert _stored(stack, ctx) == ["S1", "S2"]
        _behind(ctx, "S3")
        ctx.flush()  # anything that waits for the writes behind writes the held step too
        assert _stored(stack, ctx) == ["S1", "S2", "S3"]
    finally:
        ctx.close()


def test_steps_written_while_one_is_on_its_way_merge_into_the_next_write_up_to_a_bound(stack: Stack) -> None:
    run = _run(stack)
    ctx = run.ctx
    try:
        assert ctx.tool(f"{ctx.session_id}:t0", "read_file", {"path": "a.txt"}).ok
        persistence = stack.harness.procs["persistence"].pid
        os.kill(persistence, signal.SIGSTOP)
        try:
            # S1 is held, S2 takes it on its way (stuck); S3 is held, S4 takes it into the
            # queued write (BEHIND_STEPS - 1 records); S5 is held; S6 would take the
            # queued write past BEHIND_STEPS: it waits for the writes before it.
            assert BEHIND_STEPS == 3
            steps = [f"S{n}" for n in range(1, 7)]
            for step in steps[:-1]:
                started = time.monotonic()
                _behind(ctx, step)
                assert time.monotonic() - started < 0.2, step  # none waited for the write before it
            done: list[bool] = []
            over = threading.Thread(target=lambda: (_behind(ctx, "S6"), done.append(True)))
            over.start()
            time.sleep(0.3)
            assert not done  # past the bound: the next one waits
        finally:
            os.kill(persistence, signal.SIGCONT)
        over.join(30)
        assert done
        ctx.flush()
        assert [e.step for e in run.events() if isinstance(e, StepFinished)] == steps  # in the order made
        assert _stored(stack, ctx) == sorted(steps)
    finally:
        ctx.close()


def test_a_write_behind_that_fails_fails_every_write_after_it_and_nothing_more_is_written(stack: Stack) -> None:
    run = _run(stack)
    ctx, workspace = run.ctx, run.workspace
    try:
        finished, record = _finish(ctx, "S1", session_id=new_id())  # another session's record: refused
        ctx.commit([finished], step=record, wait=False)  # no error yet: nothing waited for it
        behind, behind_record = _finish(ctx, "S3")
        ctx.commit([behind], step=behind_record, wait=False)  # queued behind the failing one: never sent
        later, _ = _finish(ctx, "S2")
        for write in (lambda: ctx.commit([later]), ctx.flush, lambda: ctx.tool(
                f"{ctx.session_id}:w", "write_file", {"path": "b.txt", "content": "x"})):
            with pytest.raises(AcodeError) as caught:
                write()
            assert caught.value.code == "ACODE-PROTO-002" and record.session_id in caught.value.message
        assert not [e for e in stack.clients.call("persistence", GetEvents(session_id=ctx.session_id), timeout=10,
                                                  decoder=codec.PERSISTENCE_REPLY).events
                    if isinstance(e, StepFinished)]  # read past the stage's failed writes
        assert not (workspace / "b.txt").exists()  # no side effect after the failed write
    finally:
        ctx.close()


def test_a_writer_thread_given_to_the_context_sends_its_writes_behind_and_outlives_it(stack: Stack) -> None:
    writer = ThreadPoolExecutor(1, thread_name_prefix="test-writer")  # the stage actor's, kept across requests
    try:
        for step in ("S1", "S2"):  # two requests in a row, one writer
            run = _run(stack)
            ctx = StageContext(run.ctx.request, clients=stack.clients, cancel=threading.Event(),
                               log=run.ctx.log, writer=writer)
            try:
                finished, record = _finish(ctx, step)
                ctx.commit([finished], step=record, wait=False)
                ctx.flush()  # waits for the write behind
            finally:
                ctx.close()
                run.ctx.close()
            assert [e.step for e in run.events() if isinstance(e, StepFinished)] == [step]
        assert writer.submit(lambda: "alive").result(10) == "alive"  # close() left the actor's writer running
    finally:
        writer.submit(stack.clients.release)
        writer.shutdown(wait=True)


def test_a_result_sent_behind_names_the_writes_still_on_their_way_and_they_land(stack: Stack) -> None:
    run = _run(stack)
    ctx = run.ctx
    ctx.result_behind = True  # as in the stage actor
    try:
        sid = ctx.session_id
        assert ctx.tool(f"{sid}:t0", "read_file", {"path": "a.txt"}).ok  # held: its event waits for a write
        held = [e.id for e in ctx.writes._held]
        persistence = stack.harness.procs["persistence"].pid
        os.kill(persistence, signal.SIGSTOP)
        try:
            finished, record = _finish(ctx, "S1")
            ctx.commit([finished], step=record, wait=False)
            started = time.monotonic()
            result = ctx.result(ok=True, summary="done")
            assert time.monotonic() - started < 0.2  # not waiting for a persistence that cannot answer
        finally:
            os.kill(persistence, signal.SIGCONT)
        assert result.requires is not None
        assert result.requires.events == [*held, finished.id]  # every event of the writes on their way
        ctx.flush()
        stored = {e.id for e in run.events()}
        assert set(result.requires.events) <= stored
        assert ctx.result(ok=True, summary="again").requires is None  # nothing on its way any more
    finally:
        ctx.close()


def test_a_result_whose_held_write_has_no_event_waits_for_it_instead(stack: Stack) -> None:
    run = _run(stack)
    ctx = run.ctx
    ctx.result_behind = True
    try:
        request = ModelRequest(stage="executor", call_site="T1/S1/turn1",
                               messages=[ChatMessage(role="user", content="go")])
        assert ctx.model.complete(request).content == "ok"  # its answer held: a write with no event
        persistence = stack.harness.procs["persistence"].pid
        os.kill(persistence, signal.SIGSTOP)
        done: list[StageResult] = []
        finisher = threading.Thread(target=lambda: (done.append(ctx.result(ok=True, summary="done")),
                                                    ctx.release_thread()))
        try:
            finisher.start()
            time.sleep(0.3)
            assert not done  # a requirement could not name the answer: the result waits for it
        finally:
            os.kill(persistence, signal.SIGCONT)
        finisher.join(30)
        assert done and done[0].requires is None
        assert ctx.model.take_pending() == []
    finally:
        ctx.close()
