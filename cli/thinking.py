"""The "thinking…" line: a model at work, shown while ``acode run``/``attach`` follow a session.

The stage actors publish a :class:`~protocol.sessions.progress.ModelProgress` for each model call
twice a second (ephemeral, never stored). :class:`ThinkingLine` shows them:

- on a terminal, one line rewritten in place (``\\r``, then clear to the end of the line)::

      [PLANNER]   thinking… 812 tokens, 14.2 s

  (its text in the column of every other progress line, :class:`cli.progress.Progress`) and
  cleared (:meth:`ThinkingLine.clear`) before the next normal line is printed, and when
  the call ends (``done``);
- off a terminal (a pipe, a log file), a plain line each :data:`OFF_TERMINAL_EVERY`
  seconds of a call (``ACODE_PROGRESS_INTERVAL_S`` changes it), so a log shows a long
  answer is alive without a line per token; an answer quicker than that prints nothing.

Tokens are the output tokens streamed so far (stream chunks, or the server's running count
when it sends one); a model that does not stream shows 0 tokens and the seconds.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from protocol.basics.printable import printable
from protocol.sessions.progress import INTERVAL_ENV, ModelProgress

__all__ = ["INTERVAL_ENV", "OFF_TERMINAL_EVERY", "ThinkingLine", "thinking_text"]

OFF_TERMINAL_EVERY = 10.0  # seconds between two plain progress lines off a terminal
_CLEAR = "\r\x1b[K"  # back to the line's start, erase to its end


def thinking_text(progress: ModelProgress) -> str:
    """``[PLANNER]   thinking… 812 tokens, 14.2 s``: the text starts where a progress line's
    does (``cli.progress``'s stage tag and one space; not imported: a thinking line stays light)."""
    tag = f"[{progress.stage.upper()}]".ljust(11)  # `[PLANNER]   thinking…`, `[EXECUTOR]  thinking…`
    tokens = f"{progress.tokens:,} token{'s' * (progress.tokens != 1)}"
    return f"{tag} thinking… {tokens}, {progress.elapsed_s:.1f} s"


def _interval() -> float:
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return OFF_TERMINAL_EVERY
    return value if value > 0 else OFF_TERMINAL_EVERY


class ThinkingLine:
    """Renders progress messages on ``stream``: in place on a terminal, every few seconds off one."""

    def __init__(self, stream: TextIO | None = None, *, terminal: bool | None = None,
                 every: float | None = None):
        self.stream = stream or sys.stdout
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.every = _interval() if every is None else every
        self.shown = False  # a line is on the terminal, to be cleared before the next
        self._next: dict[tuple[str, int, int, str], float] = {}  # off a terminal: a call's next line, in its seconds

    def show(self, progress: ModelProgress) -> None:
        if self.terminal:
            self._rewrite(progress)
        else:
            self._every(progress)

    def clear(self) -> None:
        """Erase the line (on a terminal), so the next normal line starts clean."""
        if self.shown:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self.shown = False

    def _rewrite(self, progress: ModelProgress) -> None:
        if progress.done:
            self.clear()
            return
        self.stream.write(_CLEAR + printable(thinking_text(progress)))
        self.stream.flush()
        self.shown = True

    def _every(self, progress: ModelProgress) -> None:
        key = (progress.stage, progress.visit, progress.attempt, progress.call_site)
        if progress.done:
            self._next.pop(key, None)
            return
        due = self._next.setdefault(key, self.every)
        if progress.elapsed_s >= due:
            self.stream.write(printable(thinking_text(progress)) + "\n")
            self.stream.flush()
            self._next[key] = progress.elapsed_s - progress.elapsed_s % self.every + self.every
