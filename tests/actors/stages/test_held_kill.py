"""kill -9 of persistence in the window a stage's held writes open (actors.stages.context).

The executor holds its turn's event and the model's answer back and the read that follows
carries them: the sandbox journals them with the read's result, one transaction. Killed
after that transaction's writes ran and before its commit, persistence keeps none of it and
answers nobody; the sandbox resends to the restarted persistence, and the turn, the answer
and the read land once, in the stage's order.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import msgspec
import structlog

from actors.llm.provider import ChatMessage, ModelRequest
from actors.persistence.service import FAULT_KILL_BEFORE_COMMIT
from actors.stages.context import StageContext
from broker.threads import ThreadClients
from protocol import codec
from protocol.events import ToolCalled, TurnAnswered
from protocol.ids import new_id
from protocol.messages import Commit, GetEvents, RunStage
from protocol.results import ToolResult
from protocol.session import ScriptedProvider, SessionSettings, SessionSnapshot
from tests.harness import Harness, wait_until


def _context(harness: Harness, clients: ThreadClients, workspace: Path, session_id: str,
             attempt: int = 1) -> StageContext:
    script = msgspec.json.encode({"version": 1, "responses": {"executor": [{"content": "read a.txt"}]}}).decode()
    settings = SessionSettings(provider=ScriptedProvider(script_yaml=script, script_name=f"held-{session_id}"))
    request = RunStage(session_id=session_id, stage="executor", visit=1, attempt=attempt, task="read",
                       workspace=str(workspace), settings=settings)
    return StageContext(request, clients=clients, cancel=threading.Event(), log=structlog.get_logger())


def test_a_read_carrying_the_held_turn_killed_before_its_commit_lands_once_after_the_restart(
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
        ctx.commit([turn])  # held: the read carries it

        harness.stop("persistence")
        victim = harness.start("persistence", env={FAULT_KILL_BEFORE_COMMIT: "1"})  # its first group dies
        results: list[ToolResult] = []

        def read() -> None:
            try:
                results.append(ctx.tool(f"{session_id}:t1:c0", "read_file", {"path": "a.txt"}))
            finally:
                ctx.release_thread()

        reader = threading.Thread(target=read)
        reader.start()
        wait_until(lambda: victim.poll() is not None, 20, what="persistence killed before the group's commit")
        assert "killing persistence before committing a group" in harness.log("persistence")
        assert not results  # nobody was answered
        harness.start("persistence")  # the sandbox resends the read's journal write, carrying the turn
        reader.join(60)
        assert not reader.is_alive() and results and results[0].ok and results[0].output.endswith("alpha\n")

        events = clients.call("persistence", GetEvents(session_id=session_id), timeout=10,
                              decoder=codec.PERSISTENCE_REPLY).events
        kinds = [(type(e), e.id) for e in events if isinstance(e, TurnAnswered | ToolCalled)]
        assert [k for k, _ in kinds] == [TurnAnswered, ToolCalled] and kinds[0][1] == turn.id  # once, in order
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        replay = _context(harness, clients, workspace, session_id, attempt=2)
        replay.model.provider = None  # type: ignore[assignment]  # a replay that asked the model would fail
        assert replay.model.complete(request).content == "read a.txt" and replay.model.replayed == 1
    finally:
        clients.close()
