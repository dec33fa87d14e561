"""When a model answer is recorded (actors.llm.recorded): with the stage's next write, and
before anything that depends on it, against real broker, persistence and sandbox processes.

A stage that dies while an answer is pending is stood for by a second context of the same
session (attempt 2) built without the first one ever sending again: what the first one had
only in memory is gone, as after a kill -9 of the stage actor.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from actors.llm.provider import ChatMessage, ModelRequest
from actors.stages.execution import executor
from broker.threads import ThreadClients
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import ModelError
from protocol.messages import GetEvents, Message
from protocol.plans.results import ModelAnswer
from protocol.sessions.events import Event, StepFinished, ToolCalled, TurnAnswered
from tests.actors.stages.conftest import Run, Stack
from tests.harness import wait_until

ANSWERS = [{"content": "first answer"}, {"content": "second answer"}]


def _request(site: str = "T1/S1/turn1") -> ModelRequest:
    return ModelRequest(stage="executor", call_site=site, messages=[ChatMessage(role="user", content="go")])


def _stored(run: Run) -> list[Event]:
    """The session's events as stored (not through the context, which would flush first)."""
    reply = run.stack.clients.call("persistence", GetEvents(session_id=run.ctx.session_id), timeout=10,
                                   decoder=codec.PERSISTENCE_REPLY)
    return list(reply.events)


def _turn(run: Run) -> TurnAnswered:
    request = run.ctx.request
    return TurnAnswered(id=new_id(), session_id=request.session_id, at=1.0, visit=1, task="T1", step="S1", turn=1)


def test_a_pending_answer_is_lost_with_the_stage_and_the_replay_asks_the_model_again(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None)
    assert run.ctx.model.complete(_request()).content == "first answer"  # pending, not yet written
    replay, spy = run.again()
    again = replay.model.complete(_request())
    assert len(spy.requests) == 1 and replay.model.replayed == 0  # nothing depended on it: asked again
    assert again.content == "first answer"  # placed again at seq 0: the script answers the same place


class _Counting(ThreadClients):
    """Broker clients that note each request's service and type, in order."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.sent: list[str] = []

    def call(self, service: str, body: Message, **options: Any) -> Any:
        self.sent.append(f"{service}:{type(body).__name__}")
        return super().call(service, body, **options)


def test_the_answer_and_held_progress_are_written_with_the_next_commit_in_order(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None)
    run.ctx.model.complete(_request())
    turn = _turn(run)
    run.ctx.commit([turn])  # progress alone: held back, nothing sent
    assert turn.id not in [e.id for e in _stored(run)]
    finished = StepFinished(id=new_id(), session_id=run.ctx.session_id, at=1.0, visit=1, task="T1", step="S1",
                            status="completed")
    run.ctx.commit([finished])  # the held turn, the answer and this: one transaction, in that order
    assert [e.id for e in _stored(run)][-2:] == [turn.id, finished.id]
    replay, spy = run.again()
    assert replay.model.complete(_request()).content == "first answer"
    assert spy.requests == [] and replay.model.replayed == 1


def test_held_progress_is_lost_with_the_stage_and_written_again_by_its_replay(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None)
    turn = _turn(run)
    run.ctx.commit([turn])
    replay, _ = run.again()  # the first context is gone with what it held
    assert turn.id not in [e.id for e in _stored(run)]
    replay.commit([turn])  # the replay reports the same turn under the same id
    replay.flush()
    assert [e.id for e in _stored(run)].count(turn.id) == 1


def test_a_read_is_held_and_journaled_with_the_next_write_after_the_turn_before_it(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None, files={"a.txt": "hello\n"})
    run.ctx.model.complete(_request())
    turn = _turn(run)
    run.ctx.commit([turn])
    key = f"{run.ctx.session_id}:k1"
    result = run.ctx.tool(key, "read_file", {"path": "a.txt"})
    assert result.ok, result.error
    assert not [e for e in _stored(run) if isinstance(e, TurnAnswered | ToolCalled)]  # all held
    finished = StepFinished(id=new_id(), session_id=run.ctx.session_id, at=1.0, visit=1, task="T1", step="S1",
                            status="completed")
    run.ctx.commit([finished])
    events = _stored(run)
    assert [type(e).__name__ for e in events][-3:] == ["TurnAnswered", "ToolCalled", "StepFinished"]
    assert events[-3].id == turn.id and isinstance(events[-2], ToolCalled) and events[-2].key == key
    (run.workspace / "a.txt").write_text("changed\n")
    replay, spy = run.again()
    assert replay.model.complete(_request()).content == "first answer" and spy.requests == []
    again = replay.tool(key, "read_file", {"path": "a.txt"})  # journaled: the bytes the stage read
    assert again.replayed and again.output == result.output


def test_a_key_read_again_before_its_result_is_written_gets_the_first_result(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None, files={"a.txt": "hello\n"})
    key = f"{run.ctx.session_id}:k1"
    first = run.ctx.tool(key, "read_file", {"path": "a.txt"})
    (run.workspace / "a.txt").write_text("changed\n")
    again = run.ctx.tool(key, "read_file", {"path": "a.txt"})  # carries the held first result
    assert again.replayed and again.output == first.output
    assert [e.key for e in _stored(run) if isinstance(e, ToolCalled)] == [key]  # one event


def test_answers_wait_for_the_next_write_without_a_claim_each(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None)
    counting = _Counting(stack.harness.ctx, stack.harness.endpoints.broker, sender="test-counting")
    run.ctx.clients = counting
    try:
        run.ctx.model.complete(_request("a"))
        assert run.ctx.model.complete(_request("b")).content == "second answer"  # placed at seq 1
        run.ctx.flush()
    finally:
        counting.close()
    assert counting.sent == ["persistence:GetReplayIndex", "persistence:Commit"], counting.sent
    replay, spy = run.again()
    assert replay.model.complete(_request("a")).content == "first answer"
    assert replay.model.complete(_request("b")).content == "second answer" and spy.requests == []
    with pytest.raises(ModelError, match="this is request 3"):  # a new request is placed after both: seq 2
        replay.model.complete(_request("c"))


def test_a_tool_call_with_side_effects_writes_what_was_held_before_it_runs(stack: Stack) -> None:
    """A side effect may follow the answer: a replay must find the answer it followed."""
    run = stack.stage("executor", ANSWERS, None, files={"a.txt": "hello\n"})
    run.ctx.model.complete(_request())
    turn = _turn(run)
    run.ctx.commit([turn])
    result = run.ctx.tool(f"{run.ctx.session_id}:k1", "write_file", {"path": "b.txt", "content": "x\n"})
    assert result.ok, result.error
    stored = _stored(run)
    assert [e.id for e in stored][-4] == turn.id  # before the start and write checkpoints, and its event
    assert [type(e).__name__ for e in stored][-3:] == ["CheckpointTaken", "CheckpointTaken", "ToolCalled"]
    replay, spy = run.again()
    assert replay.model.complete(_request()).content == "first answer" and spy.requests == []


def test_the_stage_result_writes_the_answer_before_it_is_built(stack: Stack) -> None:
    """The coordinator acts on the result: every answer it follows is on record first."""
    run = stack.stage("executor", ANSWERS, None)
    run.ctx.model.complete(_request())
    result = run.ctx.result(ok=True, summary="done")
    assert result.metrics.model_calls == 1
    replay, spy = run.again()
    assert replay.model.complete(_request()).content == "first answer" and spy.requests == []


def test_an_executor_turn_that_reads_is_one_tool_call(stack: Stack) -> None:
    """The round trips a turn waits for: its tool call alone. The stage knows its claims and
    the steps recorded (one request for the attempt) and places its model requests itself; the answers, the
    turns' events, the reads' results and the step's start ride on the step's finish."""
    responses = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
                 {"tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}]},
                 {"tool_calls": [{"name": "step_complete", "arguments": {"summary": "read both"}}]}]
    plan = {"goal": "read", "status": "ready", "tasks": [{"label": "T1", "title": "read", "steps": [
        {"label": "S1", "title": "read a and b", "action": "read_file"}]}]}
    run = stack.stage("executor", responses, plan, files={"a.txt": "alpha\n", "b.txt": "beta\n"})
    counting = _Counting(stack.harness.ctx, stack.harness.endpoints.broker, sender="test-counting")
    run.ctx.clients = counting
    try:
        result = executor.run(run.ctx)
    finally:
        counting.close()
    assert result.ok, result.summary
    assert counting.sent == ["persistence:GetReplayIndex", "sandbox:RunTool", "sandbox:RunTool",
                             "persistence:Commit"], counting.sent
    kinds = [type(e).__name__ for e in _stored(run)]
    # the step's first message reads AGENTS.md and lists the workspace, in one batch before the first turn
    assert kinds[-9:] == ["StepStarted", "ToolCalled", "ToolCalled", "TurnAnswered", "ToolCalled", "TurnAnswered",
                          "ToolCalled", "TurnAnswered", "StepFinished"], kinds


class _Thinking:
    """A model that answers only when the test lets it."""

    name = "thinking"

    def __init__(self) -> None:
        self.go = threading.Event()

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Any = None) -> Any:
        assert self.go.wait(30), "the test never let the model answer"
        return ANSWERED


ANSWERED = ModelAnswer(content="done thinking")


def test_what_is_held_is_written_while_a_long_model_call_runs(stack: Stack) -> None:
    """``acode run`` shows a step's reads and turns while the model thinks, not at the step's end."""
    run = stack.stage("executor", ANSWERS, None, files={"a.txt": "hello\n"})
    turn = _turn(run)
    run.ctx.commit([turn])
    run.ctx.tool(f"{run.ctx.session_id}:k1", "read_file", {"path": "a.txt"})
    thinking = _Thinking()
    run.ctx.model.provider = thinking
    answers: list[ModelAnswer] = []
    asker = threading.Thread(target=lambda: answers.append(run.ctx.model.complete(_request())))
    asker.start()
    try:
        wait_until(lambda: [type(e) for e in _stored(run) if isinstance(e, TurnAnswered | ToolCalled)]
                   == [TurnAnswered, ToolCalled], 10, what="the held turn and read written during the call")
        assert not answers, "written while the model was still thinking"
    finally:
        thinking.go.set()
        asker.join(10)
        run.ctx.close()
    assert answers == [ANSWERED]


def test_a_quick_model_call_writes_nothing_on_its_own(stack: Stack) -> None:
    run = stack.stage("executor", ANSWERS, None)
    run.ctx.commit([_turn(run)])
    counting = _Counting(stack.harness.ctx, stack.harness.endpoints.broker, sender="test-counting")
    run.ctx.clients = counting
    try:
        run.ctx.model.complete(_request())
        time.sleep(0.3)  # past the call watch's flush delay, had the call still been running
    finally:
        counting.close()
        run.ctx.close()
    assert counting.sent == ["persistence:GetReplayIndex"], counting.sent
