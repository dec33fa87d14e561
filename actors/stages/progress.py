"""The stage actor's live progress: the model calls in flight, published twice a second.

The stage's worker thread registers each model call's :class:`~actors.llm.meter.Meter`
with :meth:`ProgressBoard.watcher`'s callback (``RecordedModel`` does it before asking the provider).
The actor's loop thread calls :meth:`ProgressBoard.publish` every :data:`PUBLISH_EVERY`
seconds: one :class:`~protocol.sessions.progress.ModelProgress` per call in flight on the event
stream's PUB side (topic = session id) once it has run :data:`QUIET_FOR` seconds, and one
last message with ``done`` for a reported call that has ended, after which the board
forgets it. So a call costs at most two messages a second, whatever the model's speed,
and nothing is written to the database.

The board is the only thing the two threads share; a lock guards its list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from actors.llm.meter import Meter
from protocol import codec
from protocol.plans.stages import Stage
from protocol.sessions.progress import ModelProgress

__all__ = ["PUBLISH_EVERY", "QUIET_FOR", "ProgressBoard"]

PUBLISH_EVERY = 0.5  # seconds: at most two progress messages a second per model call
QUIET_FOR = 0.5  # seconds a call runs before its first message (a quick answer shows no thinking line)


@dataclass
class _Call:
    session_id: str
    stage: Stage
    visit: int
    attempt: int
    meter: Meter
    reported: bool = False  # a progress message went out for it (only the loop thread reads or sets it)


class ProgressBoard:
    """Model calls in flight on this actor, and where their progress goes."""

    def __init__(self) -> None:
        self._calls: list[_Call] = []
        self._lock = threading.Lock()

    def watcher(self, session_id: str, stage: Stage, visit: int, attempt: int = 1) -> Callable[[Meter], None]:
        """The ``watch`` callback for one stage request's model (``RecordedModel(watch=...)``)."""
        def watch(meter: Meter) -> None:
            with self._lock:
                self._calls.append(_Call(session_id, stage, visit, attempt, meter))
        return watch

    def snapshot(self) -> list[ModelProgress]:
        """A progress message for each call that has run :data:`QUIET_FOR` seconds or more;
        a call that has ended is reported once more (``done``) if it was reported at all, and
        dropped (a call that ends between the two looks below may say ``done`` twice:
        harmless). A quick answer sends nothing."""
        with self._lock:
            calls, self._calls = self._calls, [c for c in self._calls if c.meter.finished is None]
        out = []
        for call in calls:
            meter = call.meter
            done = meter.finished is not None
            if not call.reported and (done or meter.elapsed() < QUIET_FOR):
                continue
            call.reported = True
            out.append(ModelProgress(session_id=call.session_id, stage=call.stage, visit=call.visit,
                                     attempt=call.attempt, call_site=meter.call_site[:200], tokens=meter.tokens,
                                     elapsed_s=round(meter.elapsed(), 3), counted_by=meter.counted_by, done=done))
        return out

    def publish(self, sock: zmq.Socket[Any]) -> int:
        """Send the snapshot on ``sock`` (a PUB socket: it drops rather than blocks); the count sent."""
        sent = 0
        for progress in self.snapshot():
            try:
                sock.send_multipart([progress.session_id.encode(), codec.encode(progress)], zmq.NOBLOCK)
                sent += 1
            except zmq.Again:
                break  # past the high-water mark: the next tick says it again
        return sent
