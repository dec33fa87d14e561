"""A test-only ``persistence`` service: the tool-call journal in memory, nothing else.

The real persistence actor is written elsewhere; this one speaks the same protocol over
the same sockets with the semantics the sandbox relies on::

    BeginToolCall   unknown key → record intent (pre_image), answer "new"
                    intent without a result → "pending" with the recorded pre_image
                    result recorded → "done" with it
    FinishToolCall  record the result (first one wins) → Committed
    GetSession      not found (the approval gate then applies the default level)

Anything else is ACODE-PROTO-005. :class:`MemoryJournal` is also used directly by the
journal's unit tests.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors._base import Actor, main
from broker.worker import Request, Worker
from protocol import codec
from protocol.errors import ErrorInfo
from protocol.messages import (
    BeginToolCall,
    Committed,
    Error,
    FinishToolCall,
    GetSession,
    Message,
    PersistenceRequest,
    ToolCallState,
)
from protocol.plans.results import ToolResult
from protocol.sessions.events import Event


class _Entry(msgspec.Struct):
    begin: BeginToolCall
    result: ToolResult | None = None


class MemoryJournal:
    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}
        self.events: list[Event] = []
        self.begins = 0

    def answer(self, request: PersistenceRequest | Message) -> Message:
        match request:
            case BeginToolCall(key=key):
                self.begins += 1
                entry = self.entries.get(key)
                if entry is None:
                    self.entries[key] = _Entry(begin=request)
                    return ToolCallState(state="new", pre_image=request.pre_image)
                if entry.result is None:
                    return ToolCallState(state="pending", pre_image=entry.begin.pre_image)
                return ToolCallState(state="done", pre_image=entry.begin.pre_image, result=entry.result)
            case FinishToolCall(key=key, result=result, event=event):
                entry = self.entries.get(key)
                if entry is None:  # no intent journaled (a read): the result makes the row, as in the store
                    entry = self.entries[key] = _Entry(begin=BeginToolCall(
                        key=key, session_id=request.session_id, tool=result.tool, risk=result.risk))
                elif entry.result is not None:  # the first result stays and is answered, as in the store
                    return Committed(result=entry.result)
                entry.result = result
                self.events.append(event)
                return Committed()
            case GetSession(session_id=session_id):  # the approval gate asks: no session here, defaults apply
                return Error(error=ErrorInfo(code="ACODE-STORE-002", message=f"session {session_id} not found"))
            case _:
                return Error(error=ErrorInfo(code="ACODE-PROTO-005",
                                             message=f"{type(request).__name__} is not handled by this journal"))


class JournalActor(Actor):
    actor = "persistence"

    def on_start(self) -> None:
        self.journal = MemoryJournal()
        self.worker = Worker(self, "persistence", self.handle)  # inline: one thread owns the dict
        self.worker.start()

    def handle(self, request: Request) -> Any:
        return self.journal.answer(codec.PERSISTENCE_REQUEST.decode(request.body))

    def busy(self) -> list[str]:
        worker = getattr(self, "worker", None)
        return worker.busy() if worker is not None else []


if __name__ == "__main__":
    main(JournalActor)
