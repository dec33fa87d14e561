"""What one tool produces, and how its text is kept within the request's byte limit.

Tool functions return an :class:`Outcome`; they raise :class:`~protocol.errors.SandboxError`
for a refusal, and the dispatcher turns both into a :class:`~protocol.plans.results.ToolResult`.
A command that ran but timed out returns an Outcome carrying its partial output *and* an
error, which is why ``error`` lives here rather than only in exceptions.

Caps cut on UTF-8 character boundaries and always say how much was cut, so the model
knows it did not see everything: ``[… truncated: N more bytes]`` (:func:`truncate`), or, for
a stream kept as it comes (:class:`Capture`: a command's output), its head and tail with
``[… truncated: N bytes cut from the middle …]``.
"""

from __future__ import annotations

import re

import msgspec

from protocol.errors import ErrorInfo
from protocol.plans.results import WorkspaceChanges

__all__ = ["Capture", "Outcome", "strip_controls", "truncate", "utf8_start", "utf8_stop"]


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    output: str = ""
    path: str = ""  # workspace-relative path the tool acted on, when it has one
    exit_code: int | None = None
    error: ErrorInfo | None = None
    isolation: str = ""  # run_terminal: what the command ran under
    changes: WorkspaceChanges | None = None  # diff_workspace: the changed files, as data
    sha256: str = ""  # write_file, modify_file: the written text's hash (files.written_digest)

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code in (None, 0)


def utf8_stop(data: bytes | bytearray, end: int) -> int:
    """Largest cut ``<= end`` such that ``data[:cut]`` ends with a whole UTF-8 character."""
    end = min(end, len(data))
    start = end
    while start > 0 and end - start < 3 and (data[start - 1] & 0xC0) == 0x80:
        start -= 1  # back over continuation bytes to the last character's lead byte
    if start == 0:
        return end
    lead = data[start - 1]
    need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
    return end if end - (start - 1) >= need else start - 1


def utf8_start(data: bytes | bytearray, start: int) -> int:
    """Smallest cut ``>= start`` that does not split a UTF-8 character (bytes after it)."""
    for ahead in range(4):
        cut = start + ahead
        if cut >= len(data) or (data[cut] & 0xC0) != 0x80:
            return min(cut, len(data))
    return start


def truncate(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes, with a marker saying how many bytes were cut."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    cut = utf8_stop(data, limit)
    kept = data[:cut].decode("utf-8", "replace")
    return f"{kept}\n[… truncated: {len(data) - cut} more bytes]"


# ESC sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks; ended by BEL or ST
# or cut off), and the two-byte forms; then C1 controls and C0 controls except \t and \n.
# Each alternative is a single pass with no nested repetition, so stripping is linear.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
                      r"|\x9b[0-?]*[ -/]*[@-~]?|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]")


def strip_controls(text: str) -> str:
    """``text`` without terminal escapes and control characters: a command's colours,
    cursor moves and window titles must not reach the model or a user's terminal.
    CRLF becomes LF; a lone CR (a progress bar redrawing its line) becomes LF too."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _ESCAPES.sub("", text)


class Capture:
    """Keeps the first and last ``limit / 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[:-self.tail_cap]

    def text(self) -> str:
        head, tail = self.head, self.tail[-self.tail_cap:]
        if self.total == len(head) + len(tail):
            return strip_controls((head + tail).decode("utf-8", "replace"))
        stop, start = utf8_stop(head, len(head)), utf8_start(tail, 0)
        cut = self.total - stop - (len(tail) - start)
        return (strip_controls(head[:stop].decode("utf-8", "replace"))
                + f"\n[… truncated: {cut} bytes cut from the middle …]\n"
                + strip_controls(tail[start:].decode("utf-8", "replace")))
