"""Broker clients for handler threads: one per thread (a ZeroMQ socket is not thread-safe).

A thread gets its client on first use. :meth:`ThreadClients.close` (from the actor's
loop thread, at stop) closes the clients nobody is using at that moment; a client in
use is closed by its own thread as soon as its call returns, and a call blocked on the
socket is woken by the context's termination (ETERM), which this module translates into
a :class:`~protocol.errors.TransportError`, like every other ZeroMQ error. So the
context can terminate without waiting for idle threads that will never touch it again.
A short-lived helper thread calls :meth:`ThreadClients.release` before it ends, so its
socket is closed then rather than kept until the actor stops. ``resend_interval`` sets the
clients' (the sandbox's MCP calls use one longer than any deadline: sent once, never resent).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import zmq

from broker.client import Client
from protocol.codec import TypedDecoder
from protocol.errors import AcodeError, TransportError
from protocol.messages import Message

__all__ = ["ThreadClients"]


class _Slot:
    __slots__ = ("client", "busy")

    def __init__(self, client: Client):
        self.client = client
        self.busy = False


class ThreadClients:
    def __init__(self, ctx: zmq.Context[Any], endpoint: str, *, sender: str, epoch: int = 0, log: Any = None,
                 resend_interval: float | None = None):
        self._resend = resend_interval  # None: the client's default
        self._ctx = ctx
        self._endpoint = endpoint
        self._sender = sender
        self._epoch = epoch
        self._log = log
        self._lock = threading.Lock()
        self._local = threading.local()
        self._slots: list[_Slot] = []
        self._closed = False

    def call(self, service: str, body: Message, *, timeout: float, decoder: TypedDecoder[Any],
             **options: Any) -> Any:
        """Request and wait (the client resends until ``timeout``); raises the error it gets."""
        [outcome] = self.call_all(service, [body], timeout=timeout, decoder=decoder, **options)
        if isinstance(outcome, AcodeError):
            raise outcome
        return outcome

    def call_all(self, service: str, bodies: Sequence[Message], *, timeout: float, decoder: TypedDecoder[Any],
                 **options: Any) -> list[Any]:
        """Send them all at once and wait for every reply (:meth:`Client.call_all`: each item
        is a reply or the error it carried)."""
        slot = self._acquire(service)
        try:
            return slot.client.call_all(service, bodies, timeout=timeout, decoder=decoder, **options)
        except zmq.ZMQError as exc:
            raise TransportError(f"requests to {service} failed in ZeroMQ: {exc}; this actor is probably "
                                 "stopping, retry the calls") from exc
        finally:
            self._release(slot)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for slot in self._slots:
                if not slot.busy:
                    slot.client.close()

    def release(self) -> None:
        """Close and forget the calling thread's client, if it has one (harmless twice)."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            return
        self._local.slot = None
        with self._lock:
            if slot in self._slots:
                self._slots.remove(slot)
            slot.client.close()

    def _acquire(self, service: str) -> _Slot:
        with self._lock:
            if self._closed:
                raise TransportError(f"cannot call {service}: this actor is stopping; retry the call")
            slot: _Slot | None = getattr(self._local, "slot", None)
            if slot is None:
                client = Client(self._ctx, self._endpoint, sender=self._sender, epoch=self._epoch, log=self._log)
                if self._resend is not None:
                    client.resend_interval = self._resend
                slot = _Slot(client)
                self._local.slot = slot
                self._slots.append(slot)
            slot.busy = True
            return slot

    def _release(self, slot: _Slot) -> None:
        with self._lock:
            slot.busy = False
            if self._closed:
                slot.client.close()
