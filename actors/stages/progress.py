"""The stage actor's live progress: the model calls in flight, published twice a second.

The stage's worker thread registers each model call's :class:`~actors.llm.meter.Meter`
with :meth:`ProgressBoard.watch` (``RecordedModel`` does it before asking the provider).
The actor's loop thread calls :meth:`ProgressBoard.publish` every :data:`PUBLISH_EVERY`
seconds: one :class:`~protocol.progress.ModelProgress` per call in flight on the event
stream's PUB side (topic = session id), and one last message with ``done`` for a call that
has ended, after which the board forgets it. So a request costs at most two messages a
second, whatever the model's speed, and nothing is written to the database.

The board is the only thing the two threads share; a lock guards its list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import zmq

from actors.llm.meter import Meter
from protocol import codec
from protocol.progress import ModelProgress
from protocol.stages import Stage

__all__ = ["PUBLISH_EVERY", "ProgressBoard"]

PUBLISH_EVERY = 0.5  # seconds: at most two progress messages a second per model call


class ProgressBoard:
    """Model calls in flight on this actor, and where their progress goes."""

    def __init__(self) -> None:
        self._calls: list[tuple[str, Stage, int, Meter]] = []  # (session id, stage, visit, meter)
        self._lock = threading.Lock()

    def watcher(self, session_id: str, stage: Stage, visit: int) -> Callable[[Meter], None]:
        """The ``watch`` callback for one stage request's model (``RecordedModel(watch=...)``)."""
        def watch(meter: Meter) -> None:
            with self._lock:
                self._calls.append((session_id, stage, visit, meter))
        return watch

    def snapshot(self) -> list[ModelProgress]:
        """A progress message for each call; the calls that have ended are reported once
        (``done``) and dropped."""
        with self._lock:
            calls, self._calls = self._calls, [c for c in self._calls if c[3].finished is None]
        out = []
        for session_id, stage, visit, meter in calls:
            out.append(ModelProgress(session_id=session_id, stage=stage, visit=visit,
                                     call_site=meter.call_site[:200], tokens=meter.tokens,
                                     elapsed_s=round(meter.elapsed(), 3), counted_by=meter.counted_by,
                                     done=meter.finished is not None))
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
