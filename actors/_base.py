"""The run loop every acode process shares, and the Actor lifecycle around it.

An actor's life has three visible phases::

    setup     logging, die-with-parent, ZeroMQ context, signals, supervision channel,
              on_start() (the actor opens its own sockets and resources here)
    loop      poll every reader with a timeout computed from the next timer; timers
              (heartbeats, resends, expiry) run every turn; signals and Stop from the
              coordinator only set a flag and wake the poll
    teardown  on_stop(), close every socket (linger 0), terminate the context

Handlers that fail on bad input answer with an error; an exception that escapes the
loop itself calls on_failure() and the process exits 1, so the supervisor restarts it.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import math
import os
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Literal, assert_never

import msgspec
import zmq

from actors import logs, private
from protocol import codec
from protocol.errors import ProtocolError
from protocol.messages import CancelWork, Heartbeat, PauseWork, SteerWork, Stop
from protocol.sessions.session import SteeringNote
from protocol.transport.spec import ActorSpec

__all__ = ["Actor", "Loop", "Timer", "main"]

Clock = Callable[[], float]


class Timer:
    """A scheduled callback; ``cancel()`` is safe to call twice."""

    __slots__ = ("when", "callback", "cancelled")

    def __init__(self, when: float, callback: Callable[[], None]):
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    """A small poll reactor: readers (ZeroMQ sockets or fds) and timers, one thread."""

    def __init__(self, clock: Clock = time.monotonic, max_wait: float = 1.0):
        self.clock = clock
        self.max_wait = max_wait
        self._poller = zmq.Poller()
        self._readers: dict[Any, Callable[[], None]] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._posted: deque[Callable[[], None]] = deque()
        self._post_r, self._post_w = socket.socketpair()
        self._post_r.setblocking(False)
        self._post_w.setblocking(False)
        self.add_reader(self._post_r.fileno(), self._run_posted)

    def add_reader(self, target: Any, callback: Callable[[], None]) -> None:
        self._poller.register(target, zmq.POLLIN)
        self._readers[target] = callback

    def remove_reader(self, target: Any) -> None:
        if self._readers.pop(target, None) is not None:
            self._poller.unregister(target)

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.call_at(self.clock() + delay, callback)

    def every(self, interval: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` now-ish and then every ``interval`` seconds until cancelled."""
        handle = Timer(0.0, callback)

        def tick() -> None:
            if handle.cancelled:
                return
            callback()
            self.call_later(interval, tick)

        self.call_later(0.0, tick)
        return handle

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop's thread (safe from any thread)."""
        self._posted.append(callback)
        try:
            self._post_w.send(b"\0")
        except BlockingIOError:
            pass  # the loop is already awake with bytes to read

    def _run_posted(self) -> None:
        try:
            while self._post_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        while self._posted:
            self._posted.popleft()()

    def next_timeout(self) -> float:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        if not self._timers:
            return self.max_wait
        return min(self.max_wait, max(0.0, self._timers[0][0] - self.clock()))

    def run_once(self) -> None:
        events = self._poller.poll(math.ceil(self.next_timeout() * 1000))
        for target, _ in events:
            callback = self._readers.get(target)
            if callback is not None:
                callback()
        now = self.clock()
        while self._timers and self._timers[0][0] <= now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback()

    def close(self) -> None:
        self._post_r.close()
        self._post_w.close()


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL us when the parent dies; exit now if it already has."""
    if not parent_pid or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)


class Actor:
    """Base of every acode process. Subclasses set ``actor`` and override the hooks."""

    actor = "actor"
    supervised = True  # False for the coordinator, which is the supervisor

    def __init__(self, spec: ActorSpec, *, clock: Clock = time.monotonic):
        self.spec = spec
        self.loop = Loop(clock)
        self.ctx: zmq.Context[Any] | None = None
        self.log: Any = None
        self.state: Literal["starting", "ready", "stopping"] = "starting"
        self._stop_reason: str | None = None
        self._failure = ""  # what escaped the loop, for the last log line the supervisor reports
        self._signals: list[int] = []
        self._sockets: list[zmq.Socket[Any]] = []
        self._supervisor: zmq.Socket[Any] | None = None

    # -- hooks -----------------------------------------------------------------------------

    def on_start(self) -> None:
        """Open sockets and resources; the actor reports ready when this returns."""

    def on_stop(self) -> None:
        """Release resources (sockets opened with :meth:`socket` close by themselves)."""

    def on_failure(self, exc: BaseException) -> None:
        """Called when an exception escapes the loop, before teardown."""

    def on_cancel(self, request_ids: list[str], reason: str) -> None:
        """The coordinator abandoned these requests; actors with long work override this."""

    def on_pause(self, request_ids: list[str], reason: str) -> None:
        """The user paused these requests' session: stop at the next safe point (stage actors)."""

    def on_steer(self, request_ids: list[str], note: SteeringNote) -> None:
        """The user steered these requests' session: use ``note`` from the next model turn (stage actors)."""

    def busy(self) -> list[str]:
        """Ids of the requests in progress (reported in every heartbeat)."""
        return []

    def info(self) -> dict[str, str]:
        """Facts about this process for ``acode status`` (reported in every heartbeat)."""
        return {}

    # -- helpers for subclasses ------------------------------------------------------------

    def socket(self, kind: int) -> zmq.Socket[Any]:
        """A socket of this actor's context, closed at teardown (linger 0)."""
        assert self.ctx is not None
        sock: zmq.Socket[Any] = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        self._sockets.append(sock)
        return sock

    def close_socket(self, sock: zmq.Socket[Any]) -> None:
        self.loop.remove_reader(sock)
        if sock in self._sockets:
            self._sockets.remove(sock)
        sock.close(linger=0)

    def request_stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
            self.log.info("actor_stopping", reason=reason)

    @property
    def stopping(self) -> bool:
        return self._stop_reason is not None

    # -- lifecycle -------------------------------------------------------------------------

    def run(self) -> int:
        logs.configure(actor=self.actor, instance=self.spec.instance, level=self.spec.log_level)
        self.log = logs.get_logger()
        _die_with_parent(self.spec.parent_pid)
        self.ctx = zmq.Context()
        code = 0
        try:
            self._install_signals()
            if self.supervised:
                self._open_supervision()
            self.on_start()
            self.state = "ready"
            self._heartbeat()
            self.log.info("actor_ready", epoch=self.spec.epoch)
            while self._stop_reason is None:
                self.loop.run_once()
        except Exception as exc:  # noqa: BLE001 - the boundary: log, hook, exit non-zero
            self.log.exception("actor_failed", error=str(exc))
            self._failure = str(exc)
            self.on_failure(exc)
            code = 1
        finally:
            self.state = "stopping"
            self._teardown()
        return code

    def _teardown(self) -> None:
        try:
            self._heartbeat()
            self.on_stop()
        finally:
            for sock in self._sockets:
                sock.close(linger=0)
            self._sockets.clear()
            self.loop.close()
            if self.ctx is not None:
                self.ctx.term()
            self.log.info("actor_stopped", reason=self._stop_reason or f"failure: {self._failure}")

    def _install_signals(self) -> None:
        rsock, wsock = socket.socketpair()
        rsock.setblocking(False)
        wsock.setblocking(False)
        self._signal_pair = (rsock, wsock)
        signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._record_signal)
        self.loop.add_reader(rsock.fileno(), self._on_signal)

    def _record_signal(self, signum: int, frame: Any) -> None:
        self._signals.append(signum)

    def _on_signal(self) -> None:
        try:
            while self._signal_pair[0].recv(64):
                pass
        except BlockingIOError:
            pass
        while self._signals:
            self.request_stop(f"signal {signal.Signals(self._signals.pop()).name}")

    def _open_supervision(self) -> None:
        sock = self.socket(zmq.DEALER)
        sock.setsockopt(zmq.ROUTING_ID, self.spec.instance.encode())
        sock.setsockopt(zmq.SNDHWM, 16)
        sock.connect(self.spec.endpoints.supervisor)
        self._supervisor = sock
        self.loop.add_reader(sock, self._on_supervisor)
        self.loop.every(self.spec.heartbeat_interval, self._heartbeat)

    def _on_supervisor(self) -> None:
        assert self._supervisor is not None
        while True:
            try:
                frames = self._supervisor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                command = codec.SUPERVISOR_DOWN.decode(frames[-1])
            except ProtocolError as exc:
                self.log.warning("supervisor_message_rejected", error=str(exc))
                continue
            match command:
                case Stop(reason=reason):
                    self.request_stop(reason or "asked by the coordinator")
                case CancelWork(request_ids=ids, reason=reason):
                    self.on_cancel(ids, reason)
                case PauseWork(request_ids=ids, reason=reason):
                    self.on_pause(ids, reason)
                case SteerWork(request_ids=ids, note=note):
                    self.on_steer(ids, note)
                case _:
                    assert_never(command)

    def _heartbeat(self) -> None:
        if self._supervisor is None:
            return
        beat = Heartbeat(instance=self.spec.instance, actor=self.actor, pid=os.getpid(),
                         epoch=self.spec.epoch, state=self.state,
                         busy=self.busy(), info=self.info())
        try:
            self._supervisor.send(codec.encode(beat), zmq.NOBLOCK)
        except zmq.Again:
            pass  # the coordinator is not reading; it will notice our silence, not our blocking


def main(actor_type: type[Actor], argv: list[str] | None = None) -> None:
    """``python -m actors.<name> --spec <json>``: decode the spec and run the actor."""
    private.enter()  # what the actor creates in the acode home is private to the user
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--spec":
        print(f"usage: python -m {actor_type.__module__} --spec '<json ActorSpec>'", file=sys.stderr)
        raise SystemExit(2)
    try:
        spec = msgspec.json.decode(args[1], type=ActorSpec)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        print(f"invalid --spec: {exc} (ACODE-CFG-001)", file=sys.stderr)
        raise SystemExit(2) from exc
    fault = os.environ.get("ACODE_FAULT_CRASH_ON_START", "")
    if spec.actor in fault.split(","):
        # Test hook for supervision drills: an actor that always dies during start-up.
        print(f"{spec.actor}: crashing at start-up as ACODE_FAULT_CRASH_ON_START asks", file=sys.stderr)
        raise SystemExit(3)
    raise SystemExit(actor_type(spec).run())

