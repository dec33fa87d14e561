"""Requests to services through the broker: deadlines, resends, replies matched by id.

Delivery is at-least-once. A request keeps its id for its whole life; until a reply comes
or its deadline passes, the same bytes are resent every ``resend_interval`` (the broker
and the worker both drop or absorb duplicates, and handlers are idempotent by id). A
``worker lost`` answer from the broker (ACODE-NET-002) triggers an immediate resend
unless the caller wants to see it (``retry_on_lost=False``: the coordinator re-dispatches
a stage with a new attempt instead).

One client, two ways to drive it:

- in an actor's loop: register :attr:`Client.socket` with :meth:`on_readable`, call
  :meth:`tick` periodically, and pass ``on_reply`` callbacks to :meth:`send`;
- from a worker thread or the CLI: :meth:`call` blocks until the reply (or raises), and
  :meth:`call_all` sends several requests at once and waits for all their replies.

A client is not thread-safe: one per thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from broker import tracing, wire
from protocol import codec
from protocol.basics.ids import new_id, new_span_id
from protocol.codec import TypedDecoder
from protocol.errors import AcodeError, ProtocolError, RequestTimeout, from_info
from protocol.messages import Envelope, Error, Message
from protocol.transport import frames

__all__ = ["Client", "ReplyCallback"]

ReplyCallback = Callable[[Any, AcodeError | None], None]


class _Pending:
    __slots__ = ("id", "service", "frames", "decoder", "deadline", "next_resend", "on_reply",
                 "retry_on_lost", "timeout")

    def __init__(self, *, id: str, service: str, frames: list[bytes], decoder: TypedDecoder[Any],
                 deadline: float, next_resend: float, on_reply: ReplyCallback | None,
                 retry_on_lost: bool, timeout: float):
        self.id = id
        self.service = service
        self.frames = frames
        self.decoder = decoder
        self.deadline = deadline
        self.next_resend = next_resend
        self.on_reply = on_reply
        self.retry_on_lost = retry_on_lost
        self.timeout = timeout


class Client:
    """A DEALER connected to the broker, with a table of pending requests."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, *, sender: str, epoch: int = 0,
                 resend_interval: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 log: Any = None):
        self.sender = sender
        self.epoch = epoch
        self.resend_interval = resend_interval
        self.clock = clock
        self.log = log
        self.socket: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)
        self._pending: dict[str, _Pending] = {}
        self._closed = False

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.socket.close(linger=0)
            self._pending.clear()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def send(self, service: str, body: Message, *, timeout: float, decoder: TypedDecoder[Any],
             on_reply: ReplyCallback | None = None, request_id: str | None = None,
             session_id: str | None = None, trace_id: str | None = None, attempt: int = 1,
             retry_on_lost: bool = True) -> str:
        """Send a request; ``on_reply(reply, error)`` runs once, from :meth:`on_readable`
        or :meth:`tick`. Returns the request id. The envelope names the request's session
        and its trace: ``session_id`` and ``trace_id`` if given, else as
        :func:`broker.tracing.stamp` finds them (the body's session, the request being served)."""
        now = self.clock()
        request_id = request_id or new_id()
        wall_ms = time.time_ns() // 1_000_000
        session_id, trace_id = tracing.stamp(body, session_id, trace_id)
        header = Envelope(id=request_id, session_id=session_id, trace_id=trace_id,
                          span_id=new_span_id(), sender=self.sender, epoch=self.epoch,
                          sent_at_ms=wall_ms, deadline_ms=wall_ms + int(timeout * 1000),
                          attempt=attempt)
        message = [frames.MAGIC, frames.REQUEST, service.encode(), codec.encode(header),
                   codec.encode(body)]
        self._pending[request_id] = _Pending(
            id=request_id, service=service, frames=message, decoder=decoder,
            deadline=now + timeout, next_resend=now + self.resend_interval, on_reply=on_reply,
            retry_on_lost=retry_on_lost, timeout=timeout)
        self._transmit(message)
        return request_id

    def cancel(self, request_id: str) -> None:
        """Forget a request: no more resends, and a late reply is dropped."""
        self._pending.pop(request_id, None)

    def _transmit(self, message: list[bytes]) -> None:
        wire.send(self.socket, message)  # False: the broker is unreachable and the queue full; the resend timer retries

    def on_readable(self) -> None:
        """Drain replies and run their callbacks."""
        while True:
            parts = wire.recv(self.socket)
            if parts is None:
                return
            self._on_reply(parts)

    def _on_reply(self, parts: list[bytes]) -> None:
        try:
            split = frames.parse(parts)
            if split.command != frames.REPLY:
                raise ProtocolError(f"client expected REPLY, got command {split.command!r}",
                                    code="ACODE-PROTO-001")
            header = codec.decode_envelope(split.header)
        except ProtocolError as exc:
            if self.log:
                self.log.warning("reply_rejected", error=str(exc))
            return
        pending = self._pending.get(header.correlation_id or "")
        if pending is None:
            return  # a duplicate, or the answer to a cancelled request
        try:
            reply = pending.decoder.decode(split.body)
        except ProtocolError as exc:
            self._finish(pending, None, exc)
            return
        if isinstance(reply, Error):
            error = from_info(reply.error)
            if error.code == "ACODE-NET-002" and pending.retry_on_lost and self.clock() < pending.deadline:
                pending.next_resend = self.clock() + self.resend_interval
                self._transmit(pending.frames)
                return
            self._finish(pending, None, error)
            return
        self._finish(pending, reply, None)

    def _finish(self, pending: _Pending, reply: Any, error: AcodeError | None) -> None:
        del self._pending[pending.id]
        if pending.on_reply is not None:
            pending.on_reply(reply, error)

    def tick(self) -> None:
        """Resend what is due and fail what is past its deadline."""
        now = self.clock()
        for pending in list(self._pending.values()):
            if now >= pending.deadline:
                self._finish(pending, None, RequestTimeout(
                    f"no reply from {pending.service} within {pending.timeout:g}s; is acode up "
                    "and the service healthy? see `acode status`", code="ACODE-NET-001"))
            elif now >= pending.next_resend:
                pending.next_resend = now + self.resend_interval
                self._transmit(pending.frames)

    def call(self, service: str, body: Message, *, timeout: float, decoder: TypedDecoder[Any],
             **options: Any) -> Any:
        """Send and wait for the reply; raise the error it carries or RequestTimeout."""
        [outcome] = self.call_all(service, [body], timeout=timeout, decoder=decoder, **options)
        if isinstance(outcome, AcodeError):
            raise outcome
        return outcome

    def call_all(self, service: str, bodies: Sequence[Message], *, timeout: float, decoder: TypedDecoder[Any],
                 **options: Any) -> list[Any]:
        """Send every body at once, then wait until each is answered: the replies in the
        order of ``bodies``, each the decoded reply or the :class:`AcodeError` it carried
        (RequestTimeout for one past its deadline). The service works on them side by side
        if it has the capacity; ``options`` apply to each (so not ``request_id``)."""
        boxes: list[list[tuple[Any, AcodeError | None]]] = [[] for _ in bodies]
        ids = [self.send(service, body, timeout=timeout, decoder=decoder, on_reply=_into(box), **options)
               for body, box in zip(bodies, boxes, strict=True)]
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        try:
            while waiting := [pending for request_id in ids if (pending := self._pending.get(request_id))]:
                due = min(min(pending.next_resend, pending.deadline) for pending in waiting)
                if poller.poll(math.ceil(max(0.0, due - self.clock()) * 1000)):
                    self.on_readable()
                self.tick()
        finally:
            for request_id in ids:
                self.cancel(request_id)
        outcomes: list[Any] = []
        for box in boxes:
            if not box:
                outcomes.append(RequestTimeout(f"request to {service} was cancelled", code="ACODE-NET-001"))
            else:
                reply, error = box[0]
                outcomes.append(error if error is not None else reply)
        return outcomes


def _into(box: list[tuple[Any, AcodeError | None]]) -> ReplyCallback:
    """A reply callback that keeps the outcome in ``box``."""
    return lambda reply, error: box.append((reply, error))
