"""One session's lines from every actor's log, merged in time order (``acode logs --session``).

Each actor instance appends JSON lines to ``$ACODE_HOME/run/logs/<instance>.log``, rotated
to ``<instance>.log.1`` … ``.<keep>`` past its size limit (``actors.logrotate``); a line
written for a session carries its ``session_id`` and its ``trace_id`` (``actors.logs``,
``broker.tracing``). This module reads the files, the rotated ones too (a session's early
lines may have been rotated out of the live file), nothing else: it works with acode down,
on any past session whose lines are still there.

The session is named by its id, or a unique prefix of it, or of its trace id (the same 32
hex digits without the dashes, for a UUID). A line belongs to it when it names the session
or carries its trace id; lines that are not JSON (a crash's last words on stderr) are left
out. A file is read once: a line is decoded only when its bytes hold what was given. The
lines are ordered by their timestamp (UTC, microseconds; one clock for every actor of the
machine), lines of the same instant in the order of their files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from actors.logrotate import logs_by_instance
from protocol.basics.printable import printable
from protocol.basics.tracing import trace_id
from protocol.errors import CliError

__all__ = ["LogLine", "SessionLog", "render", "session_lines"]

# shown in the header, or known from the file's name, or the same on every line of a session
_QUIET = ("timestamp", "instance", "actor", "pid", "session_id", "trace_id", "event", "level")


@dataclass(frozen=True)
class LogLine:
    instance: str  # the log file's actor instance
    fields: dict[str, Any]

    @property
    def timestamp(self) -> str:
        return str(self.fields.get("timestamp", ""))


@dataclass(frozen=True)
class SessionLog:
    session_id: str  # "" if no line of the trace names its session
    trace_id: str
    lines: list[LogLine]


def session_lines(logs: Path, given: str, instance: str | None = None) -> SessionLog:
    """The session ``given`` names (an id, or a unique prefix of its id or trace id) and its
    lines from every log in ``logs`` (``instance``'s alone, if given), in time order."""
    given = given.strip().lower()
    if not given:
        raise CliError("the session id is empty; give a session id or a prefix of one (`acode sessions`)",
                       code="ACODE-CLI-003")
    files = [(name, path) for name, paths in logs_by_instance(logs).items() for path in paths
             if instance is None or name == instance]  # each instance's oldest file first
    nodash = given.replace("-", "")
    found = [(line, _trace_of(line)) for line in _candidates(files, given)]
    traces = {trace for line, trace in found if _names(line, trace, given, nodash)}
    if not traces:
        raise CliError(f"no line of a session starting with {given!r} in the logs in {logs}; "
                       "list the sessions with `acode sessions`", code="ACODE-CLI-002")
    if len(traces) > 1:
        raise CliError(f"{len(traces)} sessions in the logs start with {given!r}; give more characters",
                       code="ACODE-CLI-002")
    [trace] = traces
    lines = [line for line, of in found if of == trace]
    session_ids = {str(line.fields["session_id"]) for line in lines if line.fields.get("session_id")}
    lines.sort(key=lambda line: line.timestamp)  # stable: one instant keeps the files' order
    return SessionLog(min(session_ids) if session_ids else "", trace, lines)


def _candidates(files: list[tuple[str, Path]], given: str) -> Iterator[LogLine]:
    """The JSON lines of ``files`` (an instance and one of its files) whose bytes hold
    ``given`` (or it without dashes)."""
    needles = {given.encode(), given.replace("-", "").encode()}
    decode = msgspec.json.Decoder().decode
    for instance, path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # removed or unreadable since the listing: its lines are not there to show
        for raw in data.splitlines():
            if not any(needle in raw for needle in needles):
                continue
            try:
                fields = decode(raw)
            except (msgspec.DecodeError, UnicodeDecodeError):
                continue
            if isinstance(fields, dict):
                yield LogLine(instance, fields)


def _trace_of(line: LogLine) -> str:
    """The trace ``line`` belongs to: its session's, or the one it carries ("" if none)."""
    session_id = line.fields.get("session_id")
    if isinstance(session_id, str) and session_id:
        return trace_id(session_id)
    trace = line.fields.get("trace_id")
    return trace if isinstance(trace, str) else ""


def _names(line: LogLine, trace: str, given: str, nodash: str) -> bool:
    """Whether ``line`` says its session is the one ``given`` names: the line names a
    session whose id or trace id starts with it, or carries exactly the trace id given."""
    session_id = line.fields.get("session_id")
    if isinstance(session_id, str) and session_id:
        return session_id.lower().startswith(given) or trace.startswith(nodash)
    return bool(trace) and trace == nodash


def render(line: LogLine, width: int) -> str:
    """One line for a terminal: time, instance, level if not info, event, then its key-values."""
    fields = line.fields
    level = str(fields.get("level", "info"))
    head = f"{line.timestamp.replace('T', ' ').removesuffix('Z')}  {line.instance:<{width}}  " \
           f"{'' if level == 'info' else level.upper() + ' '}{fields.get('event', '')}"
    rest = " ".join(f"{key}={_shown(value)}" for key, value in fields.items() if key not in _QUIET)
    return printable(f"{head} {rest}".rstrip(), lines=False)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return text if text and " " not in text and "=" not in text else msgspec.json.encode(text).decode()
