"""One thread per stage that watches its model calls in flight.

A model call may take a while (a local model thinks for seconds or minutes), and two
things must happen while the stage's own thread waits for it:

- **its deadline**: the executor gives each call what is left of the step's time
  (``step_timeout_s``; :func:`turn_deadline`); when it passes, or when the stage is
  cancelled, the call's ``stop`` event is set (the provider abandons the request, an HTTP
  request is closed) and :attr:`Watched.expired` says which. A deadline does not cut a
  call that is still at work, by what its :class:`~actors.llm.meter.Meter` has seen: the
  server sent a piece of the answer within its stall gap, or it is still within the
  prompt's estimated processing time (:meth:`Meter.waiting <actors.llm.meter.Meter.waiting>`);
  such a call goes on until it ends, goes silent, or reaches its ``limit`` (at most
  :data:`STRETCH` times the configured time). A silent stream is cut at once;
- **what the stage holds back**: the results of reads, progress events and the last
  answer ride on the stage's next write (:mod:`actors.stages.request.writes`); a call that runs
  :data:`FLUSH_AFTER` seconds gets them written meanwhile (``on_long_call``), so
  ``acode run`` shows the step's tool calls while the model thinks rather than at the
  step's end. A quick call (a fast server, a replay) writes nothing extra.

The thread starts with the first watched call and ticks every :data:`TICK` seconds until the
stage ends (:meth:`CallWatch.close`) or no call has been in flight for :data:`IDLE_EXIT`
seconds (the next call starts it again); registering a call is a list append under a lock,
so a turn no longer pays for starting and joining a thread of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.llm.meter import Meter

__all__ = ["FLUSH_AFTER", "IDLE_EXIT", "STRETCH", "TICK", "CallWatch", "Watched", "turn_deadline"]

TICK = 0.05  # seconds: how late a deadline or a cancel may be noticed
FLUSH_AFTER = 0.2  # seconds a call runs before what the stage holds back is written meanwhile
IDLE_EXIT = 1.0  # seconds without a call in flight before the thread ends
STRETCH = 4.0  # a deadline is never stretched past this many times the configured time


def turn_deadline(started: float, span: float, now: float, expected: float | None,
                  ceiling: float | None = None) -> tuple[float, float]:
    """The deadline and the limit of a call made at ``now`` in a span of ``span`` seconds
    that began at ``started`` (a step's try and ``step_timeout_s``). The deadline is the
    span's end, or later when a normal call (``expected`` seconds, at the model's measured
    pace: :meth:`actors.llm.http.HttpModel.expected_s`) would not fit before it; the limit
    is :data:`STRETCH` spans from ``started``, which no deadline passes and no call
    outlives. Neither is stretched past ``ceiling`` (the stage's own end: a step that ends
    on its own timeout is tried again, a stage timed out is abandoned), nor cut below the
    span's end."""
    deadline = started + span
    limit = started + STRETCH * span
    if ceiling is not None:
        limit = max(deadline, min(limit, ceiling))
    if expected is not None:
        deadline = max(deadline, min(limit, now + expected))
    return deadline, limit


class Watched:
    """One call in flight: ``stop`` is set at its deadline (unless the call is still at
    work, up to ``limit``) or when ``cancel`` is set."""

    __slots__ = ("cancel", "deadline", "expired", "flushed", "limit", "meter", "started", "stop")

    def __init__(self, cancel: threading.Event, deadline: float | None, started: float, *,
                 limit: float | None = None, meter: Meter | None = None):
        self.cancel = cancel
        self.deadline = deadline
        self.limit = limit  # None: the deadline is firm
        self.meter = meter
        self.started = started
        self.stop = threading.Event()
        self.expired = False  # the deadline passed (not a cancel)
        self.flushed = False

    def overdue(self, now: float) -> bool:
        """Past the deadline, and not still at work within the limit."""
        if self.deadline is None or now < self.deadline:
            return False
        if self.limit is None or now >= self.limit or self.meter is None:
            return True
        return not self.meter.waiting(now)


class CallWatch:
    """A stage's live model calls, watched on one thread: the
    :class:`~actors.llm.recorded.CallWatcher` the stage hands its recorded model."""

    def __init__(self, on_long_call: Callable[[], None], *, on_exit: Callable[[], None] | None = None,
                 log: Any = None, clock: Callable[[], float] = time.monotonic, flush_after: float = FLUSH_AFTER):
        """``on_long_call`` runs on the watch's thread; ``on_exit`` too, as it ends (the
        stage releases that thread's broker client there)."""
        self._on_long_call = on_long_call
        self._on_exit = on_exit
        self._log = log
        self._clock = clock
        self._flush_after = flush_after
        self._lock = threading.Lock()
        self._calls: list[Watched] = []
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def call(self, cancel: threading.Event, deadline: float | None = None, *, limit: float | None = None,
             meter: Meter | None = None) -> Iterator[Watched]:
        """Watch one call for as long as the block runs; pass ``watched.stop`` to the provider.
        With a ``limit`` and the call's ``meter``, the deadline spares a call still at work."""
        watched = Watched(cancel, deadline, self._clock(), limit=limit, meter=meter)
        with self._lock:
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, name="acode-call-watch", daemon=True)
                self._thread.start()
            self._calls.append(watched)
        try:
            yield watched
        finally:
            with self._lock:
                self._calls.remove(watched)

    def close(self) -> None:
        """Stop the thread (the stage has ended); harmless twice."""
        self._closed.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        try:
            self._watch()
        finally:
            if self._on_exit is not None:
                self._on_exit()

    def _watch(self) -> None:
        idle_since: float | None = None
        while not self._closed.wait(TICK):
            now = self._clock()
            with self._lock:
                calls = list(self._calls)
                if calls:
                    idle_since = None
                elif idle_since is None:
                    idle_since = now
                elif now - idle_since >= IDLE_EXIT:
                    self._thread = None  # the next call starts another
                    return
            for watched in calls:
                if watched.cancel.is_set() or watched.overdue(now):
                    watched.expired = not watched.cancel.is_set()
                    watched.stop.set()
                if not watched.flushed and now - watched.started >= self._flush_after:
                    watched.flushed = True
                    self._flush()

    def _flush(self) -> None:
        try:
            self._on_long_call()
        except Exception as exc:  # noqa: BLE001 - the stage's own next write carries them and reports
            if self._log is not None:
                self._log.warning("held_writes_not_flushed", error=str(exc))
