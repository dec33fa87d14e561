"""One HTTP exchange on a helper thread, watched for cancellation and silence.

A blocking read cannot be interrupted from another thread by closing the socket (on
Linux ``close()`` does not wake a thread blocked in ``poll``/``recv`` on it), but
``shutdown(SHUT_RDWR)`` does: the read returns at once, and the server sees the client
leave, so a model nobody listens to can stop generating. So the exchange runs on a helper
thread and the caller watches three things: the ``cancel`` event, the deadline for the
first byte of the answer, and the idle gap between two chunks. When one fires it shuts the
socket down and raises :class:`Interrupted` at once, even if the helper is still stuck
connecting (it notices when the connection opens).

The socket comes from httpcore's ``trace`` hook when a connection opens, so the HTTP
client must not reuse connections (``max_keepalive_connections=0``). The same hook checks
the connected peer is local unless remote servers are allowed: a name may resolve to
another address than the one checked before the call.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal, TypeVar

from actors.llm.locality import is_local_address

__all__ = ["Exchange", "Interrupted", "run_watched"]

T = TypeVar("T")
TICK = 0.05  # how often the caller looks at ``cancel`` (seconds)
JOIN = 0.2  # how long an interrupted helper may take to notice its socket was shut down


class Interrupted(Exception):
    """The watcher ended the exchange: ``reason`` is cancelled, first_token or idle."""

    def __init__(self, reason: Literal["cancelled", "first_token", "idle"]):
        super().__init__(reason)
        self.reason = reason


class Exchange:
    """What the helper thread and the watching caller share about one exchange."""

    def __init__(self, *, first_token_s: float, idle_s: float, allow_remote: bool):
        self.idle_s = idle_s
        self.allow_remote = allow_remote
        self.deadline = time.monotonic() + first_token_s
        self.answered = False  # response headers have arrived (set by the helper's work)
        self.started = False  # a first chunk of the body has arrived
        self.abort: str | None = None  # why the exchange was ended from outside ("remote", "cancelled", ...)
        self.peer = ""
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: remember a new connection's socket and check its peer."""
        if event != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            self._sock = sock
            aborted = self.abort is not None
        if aborted:
            _shutdown(sock)
            return
        if not self.allow_remote:
            try:
                peer = str(sock.getpeername()[0])
            except OSError:
                return
            if not is_local_address(peer):
                self.peer = peer
                self.stop("remote")

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.abort is None:
                self.abort = reason
            sock = self._sock
        if sock is not None:
            _shutdown(sock)

    def watch(self, chunks: Iterable[bytes], heard: Callable[[], None] | None = None) -> Iterator[bytes]:
        """The body's chunks; each one moves the deadline to ``idle_s`` from now (and is
        ``heard``: the call's meter learns the server is still at work)."""
        for chunk in chunks:
            if chunk:
                self.started = True
                self.deadline = time.monotonic() + self.idle_s
                if heard is not None:
                    heard()
                yield chunk


def run_watched(work: Callable[[Exchange], T], *, cancel: threading.Event, first_token_s: float, idle_s: float,
                allow_remote: bool, name: str) -> T:
    """``work(exchange)`` on a helper thread; its result or exception, or :class:`Interrupted`."""
    exchange = Exchange(first_token_s=first_token_s, idle_s=idle_s, allow_remote=allow_remote)
    done = threading.Event()
    outcome: list[T] = []  # the result, or nothing when ``failure`` holds the exception
    failure: list[BaseException] = []

    def helper() -> None:
        try:
            outcome.append(work(exchange))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
            failure.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=helper, name=name, daemon=True)
    thread.start()
    while not done.wait(max(0.0, min(TICK, exchange.deadline - time.monotonic()))):
        if cancel.is_set():
            reason: Literal["cancelled", "first_token", "idle"] = "cancelled"
        elif time.monotonic() >= exchange.deadline:
            reason = "idle" if exchange.started else "first_token"
        else:
            continue
        exchange.stop(reason)
        thread.join(JOIN)
        raise Interrupted(reason)
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the peer or by the helper
