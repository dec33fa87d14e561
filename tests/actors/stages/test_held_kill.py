"""kill -9 of persistence in the window a stage's held writes open (actors.stages.request.context).

The executor holds back its turn's event, the model's answer (placed by the stage, without a
claim), and the read that follows (run ``held``: the sandbox writes nothing and answers the
call's event); the step's finish carries them all, one group commit. Killed after that
transaction's writes ran and before its commit, persistence keeps none of it and answers
nobody; the stage resends to the restarted persistence, and the turn, the answer, the read
and the step land once, in the stage's order. A replay then reads the journaled bytes,
though the file has changed since, and is answered the recorded answer.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import msgspec
import structlog

from actors.llm.provider import ChatMessage, ModelRequest
from actors.persistence.service import FAULT_KILL_BEFORE_COMMIT
from actors.stages.request.context import StageContext
from broker.threads import ThreadClients
from protocol import codec
from protocol.basics.ids import new_id
from protocol.messages import Commit, GetEvents, RunStage
from protocol.plans.results import StepRecord
from protocol.sessions.events import Event, StepFinished, ToolCalled, TurnAnswered
from protocol.sessions.session import ScriptedProvider, SessionSettings, SessionSnapshot
from tests.harness import Harness, wait_until


def _context(harness: Harness, clients: ThreadClients, workspace: Path, session_id: str,
             attempt: int = 1) -> StageContext:
    script = msgspec.json.encode({"version": 1, "responses": {"executor": [{"content": "read a.txt"}]}}).decode()
    settings = SessionSettings(provider=ScriptedProvider(script_yaml=script, script_name=f"held-{session_id}"))
    request = RunStage(session_id=session_id, stage="executor", visit=1, attempt=attempt, task="read",
                       workspace=str(workspace), settings=settings)
    return StageContext(request, clients=clients, cancel=threading.Event(), log=structlog.get_logger())


def test_a_step_carrying_the_held_turn_and_read_killed_before_its_commit_lands_once_after_the_restart(
        harness: Harness, home: Path) -> None:
    workspace = home / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    harness.start("broker")
    harness.start("persistence")
    harness.start("sandbox")
    clients = ThreadClients(harness.ctx, harness.endpoints.broker, sender="test-held")
    try:
        session_id = new_id()
        ctx = _context(harness, clients, workspace, session_id)
        ctx.persistence(Commit(session_id=session_id, snapshot=SessionSnapshot(
            id=session_id, task="read", workspace=str(workspace), stage="executor", settings=ctx.request.settings,
            created_at=time.time(), updated_at=time.time())))
        request = ModelRequest(stage="executor", call_site="T1/S1/turn1",
                               messages=[ChatMessage(role="user", content="go")])
        assert ctx.model.complete(request).content == "read a.txt"
        turn = TurnAnswered(id=new_id(), session_id=session_id, at=time.time(), visit=1, task="T1", step="S1",
                            turn=1, tool_calls=1)
        ctx.commit([turn])  # held
        key = f"{session_id}:t1:c0"
        read = ctx.tool(key, "read_file", {"path": "a.txt"})  # held too: nothing written yet
        assert read.ok and read.output.endswith("alpha\n")
        assert not [e for e in _events(clients, session_id) if isinstance(e, TurnAnswered | ToolCalled)]

        harness.stop("persistence")
        victim = harness.start("persistence", env={FAULT_KILL_BEFORE_COMMIT: "1"})  # its first group dies
        done: list[bool] = []
        finished = StepFinished(id=new_id(), session_id=session_id, at=time.time(), visit=1, task="T1", step="S1",
                                status="completed")
        record = StepRecord(session_id=session_id, visit=1, task="T1", step="S1", status="completed", turns=1,
                            tool_calls=1)

        def finish() -> None:
            try:
                ctx.commit([finished], step=record)
                done.append(True)
            finally:
                ctx.release_thread()

        writer = threading.Thread(target=finish)
        writer.start()
        wait_until(lambda: victim.poll() is not None, 20, what="persistence killed before the group's commit")
        assert "killing persistence before committing a group" in harness.log("persistence")
        assert not done  # nobody was answered
        harness.start("persistence")  # the stage resends its commit, carrying what it held
        writer.join(60)
        assert not writer.is_alive() and done

        events = _events(clients, session_id)
        kinds = [(type(e), e.id) for e in events if isinstance(e, TurnAnswered | ToolCalled | StepFinished)]
        assert [k for k, _ in kinds] == [TurnAnswered, ToolCalled, StepFinished]  # once, in order
        assert kinds[0][1] == turn.id and kinds[2][1] == finished.id
        assert [e.seq for e in events] == list(range(1, len(events) + 1))

        (workspace / "a.txt").write_text("beta\n")  # what the replay reads is what the stage read
        replay = _context(harness, clients, workspace, session_id, attempt=2)
        replay.model.provider = None  # type: ignore[assignment]  # a replay that asked the model would fail
        assert replay.model.complete(request).content == "read a.txt" and replay.model.replayed == 1
        again = replay.tool(key, "read_file", {"path": "a.txt"})
        assert again.replayed and again.output.endswith("alpha\n")
        assert replay.tool(f"{session_id}:t2:c0", "read_file", {"path": "a.txt"}).output.endswith("beta\n")
    finally:
        clients.close()


def _events(clients: ThreadClients, session_id: str) -> list[Event]:
    return list(clients.call("persistence", GetEvents(session_id=session_id), timeout=10,
                             decoder=codec.PERSISTENCE_REPLY).events)
