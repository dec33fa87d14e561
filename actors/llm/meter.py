"""How far one model answer has got while the model is still writing it.

A :class:`Meter` belongs to one model call. The provider that streams the answer moves it
(:meth:`Meter.chunk` for each piece of text or tool call that arrives, :meth:`Meter.counted`
when the server itself reports how many output tokens it has produced); the stage actor's
loop thread reads it twice a second to publish a progress message (see
``actors.stages.progress``). Nothing here is durable: a meter lives as long as its call.

Tokens are counted from the stream: Ollama sends one NDJSON chunk per token and
OpenAI-compatible servers (llama.cpp, LM Studio, vLLM) one SSE delta per token, so the
chunks seen so far are the output tokens so far. A server that reports a running count in
the stream (``usage`` in a chunk) overrides the chunk count; its count wins from then on.
A model that does not stream (the scripted one) leaves the count at 0: only the seconds
advance.

The meter also says whether the server is still at work, for a deadline that would cut
the call (:mod:`actors.stages.request.callwatch`): :meth:`Meter.hear` marks each piece of the
body as it arrives (``heard``, and ``first_heard`` for the first), whatever it holds, and
the provider sets what it expects before then: ``expect_first_s``, how long the prompt may
take before the first piece (its estimated processing time at the model's measured speed,
:mod:`actors.llm.pace`, else the provider's first-token timeout; 0: not known), and
``stall_s``, the gap in a stream that means the server has stopped.

Reads and writes come from several threads (the HTTP helper thread writes; the loop
thread and the call watch read); each is one attribute assignment of an int, a float or a
str, which needs no lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

__all__ = ["Counted", "Meter"]

Counted = Literal["chunks", "server"]


class Meter:
    """One model call's progress: output tokens so far and since when (``time.monotonic``)."""

    def __init__(self, *, call_site: str = "", clock: Callable[[], float] = time.monotonic):
        self.call_site = call_site
        self.clock = clock
        self.started = clock()
        self.tokens = 0
        self.counted_by: Counted = "chunks"
        self.finished: float | None = None  # when the call ended (answered, failed or cancelled)
        self.attempt_started = self.started  # when the current attempt (a retry's) was sent
        self.first_heard: float | None = None  # the attempt's first piece of the answer's body arrived
        self.heard: float | None = None  # its latest piece arrived
        self.expect_first_s = 0.0  # how long the prompt may take before the first piece (0: not known)
        self.stall_s = 0.0  # a silence this long in a stream means the server stopped (0: unknown)

    def hear(self) -> None:
        """A piece of the answer's body arrived from the server (text or not)."""
        now = self.clock()
        if self.first_heard is None:
            self.first_heard = now
        self.heard = now

    def waiting(self, now: float) -> bool:
        """Whether the server is, by all it has shown, still at work on the answer: it sent
        a piece within ``stall_s``, or it has sent nothing yet and the prompt's expected
        processing time has not run out. A provider that sets neither (one that does not
        stream) is never taken to be at work."""
        if self.heard is not None:
            return self.stall_s > 0 and now - self.heard < self.stall_s
        return self.expect_first_s > 0 and now - self.attempt_started < self.expect_first_s

    def chunk(self, pieces: int = 1) -> None:
        """``pieces`` more pieces of the answer arrived (ignored once the server counts)."""
        if self.counted_by == "chunks":
            self.tokens += pieces

    def counted(self, tokens: int) -> None:
        """The server's own count of the output tokens so far."""
        if tokens > 0:
            self.counted_by = "server"
            self.tokens = tokens

    def restart(self) -> None:
        """A retried attempt starts its answer from nothing (the seconds keep running)."""
        self.tokens = 0
        self.counted_by = "chunks"
        self.attempt_started = self.clock()
        self.first_heard = self.heard = None

    def finish(self) -> None:
        if self.finished is None:
            self.finished = self.clock()

    def elapsed(self) -> float:
        """Seconds since the call began, up to its end once it has ended."""
        end = self.finished if self.finished is not None else self.clock()
        return max(0.0, end - self.started)
