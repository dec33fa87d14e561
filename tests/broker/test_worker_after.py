"""What a handler leaves for after its reply (Worker.after_reply): a closing log line the
requester need not wait for (the sandbox's ``tool_call_answered``, a stage's
``stage_finished``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from broker.worker import Request, Worker
from protocol.basics.ids import new_id
from protocol.messages import Ack, Envelope


class _Log:
    def __init__(self) -> None:
        self.exceptions: list[tuple[str, dict[str, Any]]] = []

    def exception(self, event: str, **fields: Any) -> None:
        self.exceptions.append((event, fields))


def test_what_a_call_leaves_for_after_its_reply_runs_once_and_a_failure_stops_nothing() -> None:
    log = _Log()
    actor = SimpleNamespace(spec=SimpleNamespace(instance="sandbox", epoch=1), log=log)
    worker = Worker(actor, "sandbox", lambda request: Ack())
    requests = [Request(Envelope(id=new_id()), b"", b"route") for _ in range(3)]
    written: list[str] = []

    def fail() -> None:
        raise OSError("no space left on device")

    worker.after_reply(requests[0], lambda: written.append("first"))
    worker.after_reply(requests[1], fail)
    worker.after_reply(requests[2], lambda: written.append("never replied"))
    worker.reply(requests[0], Ack())
    worker.reply(requests[0], Ack())  # a resend's reply writes nothing again
    worker.reply(requests[1], Ack())  # the failure is logged; the loop goes on
    assert written == ["first"]
    assert log.exceptions == [("after_reply_failed", {"service": "sandbox", "request_id": requests[1].id})]
    worker.close()  # a reply never sent: its line is written at close
    assert written == ["first", "never replied"]
    worker.close()
    assert written == ["first", "never replied"]  # once only
