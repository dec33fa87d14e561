"""The broker: routes requests to services by name and forwards the live event stream.

Majordomo-style, with credit: a worker registers ``READY(service, capacity)``; the broker
sends it at most ``capacity`` requests at once, round-robin across a service's workers,
and queues the rest until a worker frees up or the request's deadline passes. Workers
and the broker exchange heartbeats; a worker silent for ``liveness`` intervals is
dropped, and each request it held is answered ``worker lost`` (ACODE-NET-002) so the
client can resend at once instead of waiting for its deadline. A READY from a newer
epoch of the same instance replaces the old registration the same way.

The broker decodes only the frame shape and the envelope (for ids and deadlines);
bodies pass through as bytes. It keeps no state worth saving: after a restart, workers
re-register (they are told to when the broker does not know them) and clients resend.

A second pair of sockets, XSUB (publishers connect) and XPUB (subscribers connect),
forwards the event stream both ways (messages down, subscriptions up).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import zmq

from broker import wire
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import ErrorInfo, ProtocolError
from protocol.messages import Envelope, Error, WorkerInfo
from protocol.transport import frames

__all__ = ["Broker"]


@dataclass
class _Queued:
    id: str
    client: bytes
    header: bytes
    body: bytes
    expires: float  # monotonic


@dataclass
class _Worker:
    route: bytes
    service: str
    info: WorkerInfo
    expires: float
    credit: int
    in_flight: dict[str, bytes] = field(default_factory=dict)  # request id -> client route
    carried: set[str] = field(default_factory=set)  # busy when it registered (e.g. across a broker restart)


@dataclass
class _Service:
    name: str
    workers: deque[bytes] = field(default_factory=deque)
    queue: deque[_Queued] = field(default_factory=deque)


class Broker:
    """Broker state machine over three sockets; driven by an actor's :class:`Loop`."""

    def __init__(self, actor: Any, *, frontend: str, events_in: str, events_out: str):
        self.actor = actor
        self.log = actor.log
        spec = actor.spec
        self.interval = spec.heartbeat_interval
        self.liveness = spec.liveness
        self.clock = actor.loop.clock
        self.router = actor.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.router.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self.router.bind(frontend)
        self.xsub = actor.socket(zmq.XSUB)
        self.xsub.bind(events_in)
        self.xpub = actor.socket(zmq.XPUB)
        self.xpub.bind(events_out)
        self.services: dict[str, _Service] = {}
        self.workers: dict[bytes, _Worker] = {}
        self.rejected = 0
        actor.loop.add_reader(self.router, self._on_router)
        actor.loop.add_reader(self.xsub, self._forward_events)
        actor.loop.add_reader(self.xpub, self._forward_subscriptions)
        actor.loop.every(self.interval, self._heartbeat)

    # -- event stream --------------------------------------------------------------------

    def _forward_events(self) -> None:
        for _ in range(1000):
            parts = wire.recv(self.xsub)
            if parts is None:
                return
            wire.send(self.xpub, parts)  # XPUB drops for a subscriber that is not reading; it never blocks

    def _forward_subscriptions(self) -> None:
        for _ in range(1000):
            parts = wire.recv(self.xpub)
            if parts is None:
                return
            wire.send(self.xsub, parts)

    # -- requests and workers --------------------------------------------------------------

    def _on_router(self) -> None:
        for _ in range(1000):  # bounded so timers and the event stream get their turn
            parts = wire.recv(self.router)
            if parts is None:
                return
            route, rest = parts[0], parts[1:]
            try:
                self._dispatch(route, rest)
            except ProtocolError as exc:
                self.rejected += 1
                self.log.warning("frame_rejected", error=str(exc), peer=route.hex(),
                                 rejected_total=self.rejected)

    def _dispatch(self, route: bytes, parts: list[bytes]) -> None:
        split = frames.parse(parts)
        command = split.command
        if command == frames.REQUEST:
            self._on_request(route, split.address, split.header, split.body)
        elif command == frames.REPLY:
            self._on_reply(route, split.address, split.header, split.body)
        elif command == frames.READY:
            self._on_ready(route, split.address, split.header)
        elif command == frames.HEARTBEAT:
            worker = self.workers.get(route)
            if worker is None:
                self._send(route, [frames.MAGIC, frames.DISCONNECT])  # please register again
            else:
                worker.expires = self.clock() + self.interval * self.liveness
        elif command == frames.DISCONNECT:
            self._drop_worker(route, "worker disconnected")

    def _on_request(self, client: bytes, service_name: bytes, header: bytes, body: bytes) -> None:
        envelope = codec.ENVELOPE.decode(header)  # undecodable: no id to answer, dropped and logged
        try:
            codec.check_version(envelope)
        except ProtocolError as exc:
            self._reply_error(client, service_name, envelope.id, exc.code, exc.message)
            raise
        try:
            name = service_name.decode("ascii")
        except UnicodeDecodeError:
            name = ""
        if not name or len(name) > 64:
            self._reply_error(client, service_name, envelope.id, "ACODE-PROTO-004",
                              f"service name {service_name[:64]!r} is not valid")
            return
        now = self.clock()
        remaining = envelope.deadline_ms / 1000 - time.time() if envelope.deadline_ms else 3600.0
        if remaining <= 0:
            return  # already expired: the client has given up on it
        service = self.services.get(name) or self.services.setdefault(name, _Service(name))  # made once
        for worker in self.workers.values():  # a resend of something a worker holds
            if envelope.id in worker.in_flight:
                worker.in_flight[envelope.id] = client
                return
        for queued in service.queue:  # a resend of something still queued
            if queued.id == envelope.id:
                queued.client = client
                return
        service.queue.append(_Queued(envelope.id, client, header, body, now + remaining))
        self._pump(service)

    def _on_reply(self, route: bytes, client: bytes, header: bytes, body: bytes) -> None:
        worker = self.workers.get(route)
        envelope = codec.decode_envelope(header)
        if worker is None:
            # We restarted since this worker registered; deliver if we can, then re-register it.
            self._send(client, [frames.MAGIC, frames.REPLY, b"", header, body])
            self._send(route, [frames.MAGIC, frames.DISCONNECT])
            return
        request_id = envelope.correlation_id or ""
        target = worker.in_flight.pop(request_id, None)
        if target is not None:
            worker.credit += 1
            client = target
        elif request_id in worker.carried:
            # A request it was already working on when it registered with us: the client
            # route is stale (the client resends), but the worker's capacity is free again.
            worker.carried.discard(request_id)
            worker.credit += 1
        worker.expires = self.clock() + self.interval * self.liveness
        self._send(client, [frames.MAGIC, frames.REPLY, worker.service.encode(), header, body])
        self._pump(self.services[worker.service])

    def _on_ready(self, route: bytes, service_name: bytes, info_bytes: bytes) -> None:
        info = codec.WORKER_INFO.decode(info_bytes)
        name = service_name.decode("ascii", errors="replace")
        for other in list(self.workers.values()):
            if other.route != route and other.info.instance == info.instance:
                if other.info.epoch > info.epoch:
                    self.log.warning("stale_worker_refused", instance=info.instance,
                                     epoch=info.epoch, current_epoch=other.info.epoch)
                    self._send(route, [frames.MAGIC, frames.DISCONNECT])
                    return
                self._drop_worker(other.route, f"replaced by epoch {info.epoch}")
        existing = self.workers.get(route)
        if existing is not None and existing.service != name:
            self._drop_worker(route, "re-registered for another service")
            existing = None
        expires = self.clock() + self.interval * self.liveness
        if existing is None:
            worker = _Worker(route, name, info, expires, max(0, info.capacity - len(info.busy)),
                             carried=set(info.busy))
            self.workers[route] = worker
            service = self.services.setdefault(name, _Service(name))
            service.workers.append(route)
            self.log.info("worker_registered", service=name, instance=info.instance,
                          epoch=info.epoch, capacity=info.capacity)
        else:
            existing.info = info
            existing.expires = expires
            existing.carried = set(info.busy) - set(existing.in_flight)
            existing.credit = max(0, info.capacity - len(existing.carried) - len(existing.in_flight))
            service = self.services[name]
        self._pump(service)

    def _pump(self, service: _Service) -> None:
        """Hand queued requests to workers with credit, round-robin."""
        now = self.clock()
        while service.queue and service.workers:
            request = service.queue[0]
            if request.expires <= now:
                service.queue.popleft()
                continue
            for _ in range(len(service.workers)):
                route = service.workers[0]
                service.workers.rotate(-1)
                worker = self.workers[route]
                if worker.credit > 0:
                    break
            else:
                return  # every worker is at capacity
            service.queue.popleft()
            worker.credit -= 1
            worker.in_flight[request.id] = request.client
            if not self._send(route, [frames.MAGIC, frames.REQUEST, request.client, request.header,
                                      request.body]):
                self._drop_worker(route, "unreachable")

    def _drop_worker(self, route: bytes, reason: str) -> None:
        worker = self.workers.pop(route, None)
        if worker is None:
            return
        service = self.services.get(worker.service)
        if service is not None and route in service.workers:
            service.workers.remove(route)
        self.log.info("worker_dropped", service=worker.service, instance=worker.info.instance,
                      epoch=worker.info.epoch, reason=reason, in_flight=len(worker.in_flight))
        for request_id, client in worker.in_flight.items():
            self._reply_error(client, worker.service.encode(), request_id, "ACODE-NET-002",
                              f"{worker.info.instance} ({reason}) while handling request "
                              f"{request_id}; resend it", retryable=True)
        if service is not None:
            self._pump(service)

    def _heartbeat(self) -> None:
        now = self.clock()
        for route, worker in list(self.workers.items()):
            if worker.expires <= now:
                self._drop_worker(route, "missed heartbeats")
            else:
                self._send(route, [frames.MAGIC, frames.HEARTBEAT])
        for service in self.services.values():
            while service.queue and service.queue[0].expires <= now:
                service.queue.popleft()

    # -- sending ---------------------------------------------------------------------------

    def _reply_error(self, client: bytes, service: bytes, request_id: str | None, code: str,
                     message: str, *, retryable: bool = False) -> None:
        if request_id is None:
            return  # nothing to correlate an answer with
        header = Envelope(id=new_id(), correlation_id=request_id, sender="broker",
                          epoch=self.actor.spec.epoch)
        body = Error(error=ErrorInfo(code=code, message=message, retryable=retryable))
        self._send(client, [frames.MAGIC, frames.REPLY, service, codec.encode(header),
                            codec.encode(body)])

    def _send(self, route: bytes, message: list[bytes]) -> bool:
        try:
            if wire.send(self.router, [route, *message]):
                return True
            self.log.debug("send_dropped", peer=route.hex(), error="queue full")
            return False
        except zmq.ZMQError as exc:  # EHOSTUNREACH (peer gone) or EAGAIN (peer not reading)
            self.log.debug("send_dropped", peer=route.hex(), error=exc.strerror)
            return False
