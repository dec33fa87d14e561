"""The worker side of the broker protocol, shared by every service actor.

A :class:`Worker` registers a service with the broker (READY, with its capacity), keeps
the broker's heartbeat, re-registers when the broker restarts or asks it to, and hands
each request to the actor's ``handle`` function, inline or on a thread pool.

Duplicates are absorbed here: a request id already being handled only updates where
the reply goes; a request id answered recently is answered again from a cache of the
last replies, without running the handler twice. (Across a restart of this process the
cache is gone; handlers are idempotent by id for that case.)

While a handler runs, its request is the current one (:func:`broker.tracing.serving`): the
calls it makes carry its session and trace, and every line it logs has its ``session_id``
and ``trace_id`` (structlog context variables, on the thread that runs the handler).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import structlog
import zmq

from broker import tracing, wire
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError, ProtocolError
from protocol.messages import Ack, Envelope, Error, Message, WorkerInfo
from protocol.transport import frames

__all__ = ["DEFERRED", "Request", "Worker"]

# Returned by a handler that will call Worker.reply() later; never sent (it is known by
# identity), and a Message so that a handler's ``-> Message`` holds for it too.
DEFERRED: Final[Message] = Ack(detail="deferred: the handler replies later")


class Request:
    """One request as the handler sees it."""

    __slots__ = ("envelope", "body", "route")

    def __init__(self, envelope: Envelope, body: bytes, route: bytes):
        self.envelope = envelope
        self.body = body
        self.route = route

    @property
    def id(self) -> str:
        return self.envelope.id


Handler = Callable[[Request], Message]

_bind = structlog.contextvars.bind_contextvars
_unbind = structlog.contextvars.reset_contextvars


class Worker:
    """Serve one service through the broker from an actor's loop."""

    def __init__(self, actor: Any, service: str, handle: Handler, *, capacity: int = 1,
                 threads: int = 0, reply_cache: int = 256, drained: Callable[[], None] | None = None,
                 quick: Callable[[Request], Message | None] | None = None):
        self.actor = actor
        self.service = service
        self.handle = handle
        # with a thread pool: tried first on the loop thread; a request it answers (not None)
        # skips the pool's two thread hand-offs (the sandbox's small reads)
        self.quick = quick
        # called on the loop's thread after every burst of requests has been read off the
        # socket (it would block now): a handler that DEFERRED its requests serves them
        # together here (persistence's group commit)
        self.drained = drained
        self.capacity = capacity
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=service) if threads else None
        self._cache_size = reply_cache
        self._in_flight: dict[str, bytes] = {}  # request id -> reply route
        self._replies: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._socket: zmq.Socket[Any] | None = None
        self._last_heard = 0.0
        self._heartbeat_timer: Any = None
        self._after: dict[str, Callable[[], None]] = {}  # request id -> what runs once its reply is sent

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._connect()
        spec = self.actor.spec
        self._heartbeat_timer = self.actor.loop.every(spec.heartbeat_interval, self._heartbeat)

    def close(self) -> None:
        if self._heartbeat_timer is not None:
            self._heartbeat_timer.cancel()
        if self._socket is not None:
            try:
                self._socket.send_multipart([frames.MAGIC, frames.DISCONNECT], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            self.actor.close_socket(self._socket)
            self._socket = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        while self._after:  # answered but never sent (stopping): the lines are written all the same
            self._run_after(*self._after.popitem())

    def busy(self) -> list[str]:
        return list(self._in_flight)

    def _connect(self) -> None:
        if self._socket is not None:
            self.actor.close_socket(self._socket)
        self._socket = self.actor.socket(zmq.DEALER)
        self._socket.connect(self.actor.spec.endpoints.broker)
        self.actor.loop.add_reader(self._socket, self._on_readable)
        self._last_heard = self.actor.loop.clock()
        self._send_ready()

    def _send_ready(self) -> None:
        info = WorkerInfo(instance=self.actor.spec.instance, pid=os.getpid(),
                          epoch=self.actor.spec.epoch, capacity=self.capacity, busy=self.busy())
        self._send([frames.MAGIC, frames.READY, self.service.encode(), codec.encode(info)])

    def _send(self, message: list[bytes]) -> None:
        assert self._socket is not None
        if not wire.send(self._socket, message):
            self.actor.log.warning("worker_send_dropped", service=self.service)

    def _heartbeat(self) -> None:
        spec = self.actor.spec
        if self.actor.loop.clock() - self._last_heard > spec.heartbeat_interval * spec.liveness:
            self.actor.log.warning("broker_silent_reconnecting", service=self.service)
            self._connect()
            return
        self._send([frames.MAGIC, frames.HEARTBEAT])

    # -- requests --------------------------------------------------------------------------

    def _on_readable(self) -> None:
        while self._socket is not None:
            parts = wire.recv(self._socket)
            if parts is None:
                if self.drained is not None:
                    self.drained()
                return
            self._last_heard = self.actor.loop.clock()
            try:
                split = frames.parse(parts)
            except ProtocolError as exc:
                self.actor.log.warning("frame_rejected", error=str(exc))
                continue
            if split.command == frames.REQUEST:
                self._on_request(split.address, split.header, split.body)
            elif split.command == frames.DISCONNECT:
                self._send_ready()  # the broker does not know us (it restarted): register again

    def _on_request(self, route: bytes, header: bytes, body: bytes) -> None:
        try:
            envelope = codec.decode_envelope(header)
        except ProtocolError as exc:
            self.actor.log.warning("request_rejected", error=str(exc))
            return
        if envelope.id in self._in_flight:
            self._in_flight[envelope.id] = route  # a resend: answer where it came from last
            return
        cached = self._replies.get(envelope.id)
        if cached is not None:
            self._send([frames.MAGIC, frames.REPLY, route, *cached])
            return
        self._in_flight[envelope.id] = route
        request = Request(envelope, body, route)
        if self._pool is None:
            self._finish(request, self._run(request))
            return
        answered = self._run(request, self.quick) if self.quick is not None else None
        if answered is not None:
            self._finish(request, answered)
        else:
            self._pool.submit(self._run_threaded, request)

    def _run_threaded(self, request: Request) -> None:
        result = self._run(request)
        self.actor.loop.call_soon_threadsafe(lambda: self._finish(request, result))

    def _run(self, request: Request, handle: Callable[[Request], Any] | None = None) -> Any:
        (session_id, trace_id), token = tracing.serving(request.envelope)
        bound = _bind(session_id=session_id, trace_id=trace_id) if session_id else _bind(trace_id=trace_id)
        try:
            return (handle or self.handle)(request)
        except AcodeError as exc:
            return Error(error=exc.info())
        except Exception as exc:  # noqa: BLE001 - a handler bug answers, it does not kill the actor
            self.actor.log.exception("handler_failed", service=self.service, request_id=request.id)
            return Error(error=AcodeError(
                f"internal error in {self.service}: {type(exc).__name__}: {exc}").info())
        finally:
            _unbind(**bound)
            tracing.done(token)

    def _finish(self, request: Request, result: Message) -> None:
        if result is DEFERRED:
            return
        self.reply(request, result)

    def reply(self, request: Request, body: Message) -> None:
        """Answer ``request`` (from the loop's thread); the reply is cached for resends."""
        route = self._in_flight.pop(request.id, request.route)
        header = Envelope(id=new_id(), correlation_id=request.id,
                          session_id=request.envelope.session_id,
                          trace_id=request.envelope.trace_id, span_id=request.envelope.span_id,
                          sender=self.actor.spec.instance, epoch=self.actor.spec.epoch)
        payload = (codec.encode(header), codec.encode(body))
        self._replies[request.id] = payload
        while len(self._replies) > self._cache_size:
            self._replies.popitem(last=False)
        if self._socket is not None:
            self._send([frames.MAGIC, frames.REPLY, route, *payload])
        after = self._after.pop(request.id, None)
        if after is not None:
            self._run_after(request.id, after)

    def after_reply(self, request: Request, then: Callable[[], None]) -> None:
        """Run ``then`` on the loop's thread once ``request``'s reply is sent (or at
        :meth:`close`, if it never is): a handler's closing log line, which the requester
        need not wait for. Called by the handler, from any thread, before it returns."""
        self._after[request.id] = then

    def _run_after(self, request_id: str, then: Callable[[], None]) -> None:
        try:
            then()
        except Exception:  # noqa: BLE001 - the reply is out: a line that fails must not stop the loop
            self.actor.log.exception("after_reply_failed", service=self.service, request_id=request_id)
