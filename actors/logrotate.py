"""Bounded logs: size-based rotation of ``run/logs/*.log``, the way logrotate does it.

Every actor instance appends JSON lines to ``run/logs/<instance>.log`` (:mod:`actors.spawn`
opens it ``O_APPEND`` as the child's stdout and stderr), the detached coordinator to
``coordinator.log`` (:mod:`cli.daemon`), an MCP server's stderr to ``mcp-<name>.log``
(:mod:`actors.mcp.server`). Nothing ever shortened them, so an acode left running for weeks
filled the disk. Now a log past :attr:`LogLimits.max_bytes` is rotated: its content becomes
``<name>.log.1``, the older ones shift (``.1`` → ``.2`` … up to ``.<keep>``), the oldest
beyond ``keep`` is removed, and the live file starts empty. At most ``keep + 1`` files of
about ``max_mb`` each remain per log (``logs.max_mb``, ``logs.keep`` in the user config).

Two ways, by whether a process may be writing the file:

- :func:`rotate` ``live=False``, before a child is spawned and opens its log (at
  ``acode up`` and at every restart): no process holds the file, so it is renamed, which
  loses nothing.
- :func:`rotate` ``live=True`` (and :func:`rotate_all`, the coordinator's periodic pass),
  while its writer runs: *copytruncate*. The writer keeps its file descriptor, so the live
  file is copied to ``.1`` and then truncated to 0 in place. Every writer of these files
  writes ``O_APPEND``, so its next line lands at the new end (offset 0), not at its old
  offset (which would leave a hole of zeros as long as what was cut). **Caveat** (logrotate's
  own, for copytruncate): a line written after the copy read the end of the file and before
  the truncation is lost. The copy reads to the end and truncates at once, so the window
  is the moment between the last read and ``ftruncate`` (microseconds, or milliseconds on
  a loaded machine: rarely a line of an actor's, which writes a few a second, but a
  writer in a tight loop loses hundreds, see tests/actors/test_logrotate.py); closing it would need the
  writer's cooperation (a lock it takes, or a reopen on a signal), which a child's
  stdout cannot give. A line is never duplicated.

The readers (``acode logs``, :mod:`cli.sessionlogs`) see every generation through
:func:`logs_by_instance`; the supervisor's crash report reads the live file only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import msgspec

__all__ = ["ROTATE_EVERY_S", "LogLimits", "generations", "logs_by_instance", "rotate", "rotate_all"]

ROTATE_EVERY_S = 30.0  # the coordinator's periodic pass: one stat per log file
_MIB = 2**20
_CHUNK = 1 << 20
_NAME = re.compile(r"^(?P<instance>.+)\.log(?:\.(?P<number>[1-9][0-9]*))?$")


class LogLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How large a log grows before it is rotated, and how many rotated files are kept (0:
    none, a log past the limit is emptied). The user config's ``logs`` section."""

    max_mb: Annotated[float, msgspec.Meta(gt=0, le=1_000_000)] = 20.0
    keep: Annotated[int, msgspec.Meta(ge=0, le=100)] = 3

    @property
    def max_bytes(self) -> int:
        return max(1, int(self.max_mb * _MIB))


def generations(path: Path) -> list[Path]:
    """The rotated files of the log ``path`` that exist, oldest first (``.3``, ``.2``, ``.1``);
    the live file itself is not among them."""
    numbered: list[tuple[int, Path]] = []
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return []
    prefix = path.name + "."
    for name in names:
        suffix = name[len(prefix):] if name.startswith(prefix) else ""
        if suffix.isdigit() and not suffix.startswith("0"):
            numbered.append((int(suffix), path.parent / name))
    return [p for _, p in sorted(numbered, reverse=True)]


def logs_by_instance(directory: Path) -> dict[str, list[Path]]:
    """Every log of ``directory`` by its instance (``executor`` for ``executor.log`` and
    ``executor.log.2``), each instance's files oldest first: its rotated ones, then the live one.
    Sorted by instance; an instance whose live file is gone still has its rotated ones."""
    found: dict[str, list[tuple[int, Path]]] = {}
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        number = int(match["number"]) if match["number"] else 0  # the live file is the newest
        found.setdefault(match["instance"], []).append((number, directory / name))
    return {instance: [p for _, p in sorted(files, reverse=True)] for instance, files in sorted(found.items())}


def rotate(path: Path, limits: LogLimits, *, live: bool) -> bool:
    """Rotate the log ``path`` if it is larger than ``limits.max_bytes``; whether it was.
    ``live``: a process may be writing it, so copy and truncate instead of renaming (see
    the module's caveat)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    if size <= limits.max_bytes:
        return False
    if not live:
        _shift(path, limits.keep)
        if limits.keep:
            os.replace(path, _numbered(path, 1))
        else:
            path.unlink()
        return True
    if not limits.keep:
        _shift(path, 0)
        with open(path, "r+b") as handle:
            os.ftruncate(handle.fileno(), 0)
        return True
    staged = path.with_name(f".{path.name}.rotating")  # no reader's name: not *.log, not *.log.N
    with open(path, "r+b") as source:
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "wb") as copy:
            copied = whole = 0  # bytes copied; of those, up to the last newline
            while chunk := source.read(_CHUNK):  # to the end, as it is at the last read...
                copy.write(chunk)
                copied += len(chunk)
                if (end := chunk.rfind(b"\n")) >= 0:
                    whole = copied - len(chunk) + end + 1
            os.ftruncate(source.fileno(), 0)  # ...then cut at once: the lossy window is between the two
            # a line the writer was writing as the copy read it ends the copy torn ("line 666" of
            # "line 6663\n", read as a whole line in CI): it goes with the window's lines
            copy.truncate(whole)
    _shift(path, limits.keep)
    os.replace(staged, _numbered(path, 1))
    return True


def rotate_all(directory: Path, limits: LogLimits) -> list[tuple[Path, OSError | None]]:
    """The coordinator's periodic pass: rotate in place (its writers run on) every live
    ``*.log`` of ``directory`` past the limit. Returns each log that was rotated, with the
    error that kept it from rotating (a full disk...; None: rotated): one log's failure
    does not keep the others from being rotated. A file that goes meanwhile is skipped."""
    done: list[tuple[Path, OSError | None]] = []
    for files in logs_by_instance(directory).values():
        path = files[-1]
        if path.suffix != ".log":
            continue  # only rotated files are left of it
        try:
            if rotate(path, limits, live=True):
                done.append((path, None))
        except FileNotFoundError:
            continue
        except OSError as exc:
            done.append((path, exc))
    return done


def _numbered(path: Path, number: int) -> Path:
    return path.with_name(f"{path.name}.{number}")


def _shift(path: Path, keep: int) -> None:
    """Make room for a new ``.1``: remove every rotated file numbered ``keep`` or more (a
    smaller ``keep`` than before drops the surplus too), then rename each other one up."""
    for old in generations(path):  # oldest (highest number) first, so no rename overwrites
        number = int(old.name.rsplit(".", 1)[1])
        if number >= keep:
            old.unlink(missing_ok=True)
        else:
            os.replace(old, _numbered(path, number + 1))
