"""The tree tools: list_directory and search_code.

Both walk the workspace with directory fds: the start directory is opened through
:class:`~actors.sandbox.confine.Workspace`, and every child is opened relative to its
parent's fd with ``O_NOFOLLOW``, so a walk never leaves the tree it started in, never
descends into a symlinked directory and never reads through a symlinked file (a link
swapped in mid-walk makes that one open fail; the walk skips it). ``.git`` is skipped.
Output is sorted by name at every level and capped (1000 entries, 200 matches) with a
marker saying so.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

from actors.sandbox.confine import Workspace, quote
from actors.sandbox.output import Outcome, truncate
from protocol.errors import SandboxError
from protocol.tools import ListDirectory, SearchCode

__all__ = ["MAX_ENTRIES", "MAX_MATCHES", "list_directory", "search_code"]

MAX_ENTRIES = 1000
MAX_MATCHES = 200
_MAX_FILE_BYTES = 5_000_000
_MAX_LINE_CHARS = 300
_SKIP = frozenset({".git"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _join(base: str, name: str) -> str:
    return name if base == "." else f"{base}/{name}"


def _entries(fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as it:
        return sorted((e for e in it if e.name not in _SKIP), key=lambda e: e.name)


def _walk(fd: int, rel: str, depth: int | None) -> Iterator[tuple[str, str, int]]:
    """``(kind, rel, dir_fd)`` for each entry below ``fd`` (kind: dir, file, link, other),
    depth first in name order; ``dir_fd`` is the entry's parent, open while it is yielded."""
    for entry in _entries(fd):
        path = _join(rel, entry.name)
        if entry.is_symlink():
            yield "link", path, fd
        elif entry.is_dir(follow_symlinks=False):
            yield "dir", path, fd
            if depth is None or depth > 1:
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # vanished or swapped for a link since scandir saw it
                try:
                    yield from _walk(child, path, None if depth is None else depth - 1)
                finally:
                    os.close(child)
        elif entry.is_file(follow_symlinks=False):
            yield "file", path, fd
        else:
            yield "other", path, fd


def list_directory(ws: Workspace, args: ListDirectory, max_bytes: int) -> Outcome:
    """Workspace-relative paths, directories with a trailing ``/`` and symlinks with ``@``;
    at most :data:`MAX_ENTRIES` entries and ``max_bytes``."""
    rel = ws.relative(args.path)
    fd = ws.open(args.path, os.O_RDONLY | os.O_DIRECTORY)
    lines: list[str] = []
    more = False
    try:
        for kind, path, _ in _walk(fd, rel, args.depth):
            if len(lines) == MAX_ENTRIES:
                more = True
                break
            lines.append(path + {"dir": "/", "link": "@"}.get(kind, ""))
    finally:
        os.close(fd)
    if more:
        lines.append(f"[… truncated: more than {MAX_ENTRIES} entries; list a subdirectory or use a "
                     "smaller depth]")
    output = "\n".join(lines) if lines else f"[{rel} is an empty directory]"
    return Outcome(output=truncate(output, max_bytes), path=rel)


def _matcher(args: SearchCode) -> re.Pattern[str]:
    if not args.regex:
        return re.compile(re.escape(args.query))
    try:
        return re.compile(args.query)
    except re.error as exc:
        raise SandboxError(f"query {quote(args.query)} is not a valid regular expression ({exc}); fix it "
                           "or search literally with regex=false", code="ACODE-SBX-007") from exc


def _text_of(fd: int) -> str | None:
    """The text of an open regular file, or None to skip it (special, too large, binary)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
        return None
    with open(fd, "rb", closefd=False) as f:
        data = f.read(_MAX_FILE_BYTES + 1)
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def _read_text(dir_fd: int, name: str) -> str | None:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None  # gone, or swapped for a symlink since the walk saw it
    try:
        return _text_of(fd)
    finally:
        os.close(fd)


def _lines(text: str | None) -> list[str]:
    """Lines split on ``\n`` only, so numbers agree with editors and ``read_file``."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _shorten(line: str) -> str:
    line = line.rstrip("\r\n")
    return line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + "…"


def search_code(ws: Workspace, args: SearchCode, max_bytes: int) -> Outcome:
    """``path:line: text`` for each matching line of the text files under ``path``; at most
    :data:`MAX_MATCHES` matches and ``max_bytes``."""
    pattern = _matcher(args)
    rel = ws.relative(args.path)
    fd = ws.open(args.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    matches: list[str] = []
    more = False
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            files = ((path, dir_fd) for kind, path, dir_fd in _walk(fd, rel, None) if kind == "file")
        else:
            files = iter([(rel, -1)])
        for path, dir_fd in files:
            text = _text_of(fd) if dir_fd == -1 else _read_text(dir_fd, path.rsplit("/", 1)[-1])
            for number, line in enumerate(_lines(text), 1):
                if pattern.search(line):
                    if len(matches) == MAX_MATCHES:
                        more = True
                        break
                    matches.append(f"{path}:{number}: {_shorten(line)}")
            if more:
                break
    finally:
        os.close(fd)
    if more:
        matches.append(f"[… truncated: more than {MAX_MATCHES} matches; narrow the query or the path]")
    output = "\n".join(matches) if matches else f"no matches for {quote(args.query)} in {rel}"
    return Outcome(output=truncate(output, max_bytes), path=rel)
