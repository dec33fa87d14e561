"""The tree tools: list_directory and search_code (and its several-query form, search_code_terms).

Both walk the workspace with directory fds: the start directory is opened through
:class:`~actors.sandbox.confinement.confine.Workspace`, and every child is opened relative to its
parent's fd with ``O_NOFOLLOW``, so a walk never leaves the tree it started in, never
descends into a symlinked directory and never reads through a symlinked file (a link
swapped in mid-walk makes that one open fail; the walk skips it). FIFOs, sockets and
devices are listed but never opened. ``.git`` and acode's home (wherever it lies, found by
its inode: :mod:`actors.sandbox.confinement.protected`) are skipped, and so is whatever the
project's ``.gitignore`` files ignore (:mod:`actors.sandbox.workspace.ignore`); a final line
``[N entries ignored by .gitignore]`` says how much was left out, so the model does not
take the listing for the whole tree. Output is sorted by name at every level and capped
(1000 entries, 200 matches, the request's byte limit) with a marker saying so.

search_code is literal by default (``str`` containment, no regex engine). With
``regex=true`` the query is compiled by the ``regex`` module in its ``V0`` mode, which
accepts Python ``re`` syntax, because ``regex`` takes a ``timeout``: the whole search
has a time budget (:data:`SEARCH_BUDGET_S`, 5 s), each match call gets what is left of
it, and a catastrophic pattern such as ``(a+)+$`` on a long line of ``a`` stops the
search with the matches found so far, a marker, and ACODE-SBX-016. The budget also
bounds the walk itself. Files over 5 MB and binary files (a NUL byte) are skipped.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from actors.sandbox.confinement import protected
from actors.sandbox.confinement.confine import Workspace, quote
from actors.sandbox.tools.output import Outcome, truncate
from actors.sandbox.workspace import ignore
from protocol.calls.tools import ListDirectory, SearchCode, SearchCodeTerms
from protocol.errors import ErrorInfo, SandboxError

__all__ = ["MAX_ENTRIES", "MAX_MATCHES", "SEARCH_BUDGET_S", "list_directory", "query_header", "search_code",
           "search_code_terms"]

MAX_ENTRIES = 1000
MAX_MATCHES = 200
SEARCH_BUDGET_S = 5.0
_MAX_FILE_BYTES = 5_000_000
_MAX_LINE_CHARS = 300
_SKIP = frozenset({".git"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass
class _Tally:
    ignored: int = 0
    skip: frozenset[tuple[int, int]] = frozenset()  # (st_dev, st_ino) of acode's home: never walked nor listed


def _join(base: str, name: str) -> str:
    return name if base == "." else f"{base}/{name}"


def _entries(fd: int, skip: frozenset[tuple[int, int]]) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as it:
        return sorted((e for e in it if e.name not in _SKIP and not (skip and _hidden(e, skip))),
                      key=lambda e: e.name)


def _hidden(entry: os.DirEntry[str], skip: frozenset[tuple[int, int]]) -> bool:
    """Whether ``entry`` is acode's home: its inode (free from the directory read) first,
    the device (an lstat) only when that matches."""
    if not any(entry.inode() == ino for _, ino in skip):
        return False
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return True  # gone, or not ours to tell: left out
    return (info.st_dev, info.st_ino) in skip


def _walk(fd: int, rel: str, depth: int | None, rules: ignore.Rules,
          tally: _Tally) -> Iterator[tuple[str, str, int]]:
    """``(kind, rel, dir_fd)`` for each entry below ``fd`` that ``rules`` do not ignore
    (kind: dir, file, link, other), depth first in name order; ``dir_fd`` is the entry's
    parent, open while it is yielded. Ignored entries are counted in ``tally``."""
    rules = rules.below(fd, rel)
    for entry in _entries(fd, tally.skip):
        path = _join(rel, entry.name)
        if entry.is_symlink():
            kind = "link"
        elif entry.is_dir(follow_symlinks=False):
            kind = "dir"
        elif entry.is_file(follow_symlinks=False):
            kind = "file"
        else:
            kind = "other"
        if rules.ignored(path, kind == "dir"):
            tally.ignored += 1
            continue
        yield kind, path, fd
        if kind == "dir" and (depth is None or depth > 1):
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # vanished or swapped for a link since scandir saw it
            try:
                yield from _walk(child, path, None if depth is None else depth - 1, rules, tally)
            finally:
                os.close(child)


def _notes(tally: _Tally, ignored_start: str | None, rel: str, partial: bool, done: str) -> list[str]:
    notes = []
    if ignored_start is not None:
        notes.append(f"[{rel} is ignored by .gitignore ({ignored_start}); {done} in full because it was named]")
    if tally.ignored:
        entries = "entry" if tally.ignored == 1 else "entries"
        notes.append(f"[{tally.ignored} {entries} ignored by .gitignore{' in the part walked' if partial else ''}]")
    return notes


def _with_notes(text: str, notes: list[str], max_bytes: int) -> str:
    """``text`` capped so that it and the notes after it fit ``max_bytes`` (the notes are short)."""
    tail = "".join("\n" + note for note in notes)
    return truncate(text, max(max_bytes - len(tail.encode()), 0)) + tail


def list_directory(ws: Workspace, args: ListDirectory, max_bytes: int) -> Outcome:
    """Workspace-relative paths, directories with a trailing ``/`` and symlinks with ``@``;
    at most :data:`MAX_ENTRIES` entries and ``max_bytes``."""
    rel = ws.relative(args.path)
    fd = protected.open_for_read(ws, args.path, os.O_RDONLY | os.O_DIRECTORY)
    lines: list[str] = []
    more = False
    tally = _Tally(skip=protected.hidden_ids(ws))
    try:
        rules, ignored_start = ignore.for_start(ws, rel)
        for kind, path, _ in _walk(fd, rel, args.depth, rules, tally):
            if len(lines) == MAX_ENTRIES:
                more = True
                break
            lines.append(path + {"dir": "/", "link": "@"}.get(kind, ""))
    finally:
        os.close(fd)
    if more:
        lines.append(f"[… truncated: more than {MAX_ENTRIES} entries; list a subdirectory or use a "
                     "smaller depth]")
    if lines:
        output = "\n".join(lines)
    else:
        output = f"[{rel} is an empty directory]" if not tally.ignored else f"[{rel} has only ignored entries]"
    notes = _notes(tally, ignored_start, rel, more, "listed")
    return Outcome(output=_with_notes(output, notes, max_bytes), path=rel)


# -- search_code --------------------------------------------------------------------------------


Matcher = Callable[[str, float], bool]  # (line, seconds left) -> whether it matches; TimeoutError past them


def _matcher(query: str, use_regex: bool) -> Matcher:
    if not use_regex:
        return lambda line, _left: query in line
    import regex  # at the first regex search: the sandbox at rest does without it (~1.5 MB)

    try:
        pattern = regex.compile(query, flags=regex.V0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise SandboxError(f"query {quote(query)} is not a valid regular expression ({exc}); fix it "
                           "or search literally with regex=false", code="ACODE-SBX-007") from exc
    return lambda line, left: pattern.search(line, timeout=left) is not None


def _text_of(fd: int) -> str | None:
    """The text of an open regular file, or None to skip it (special, too large, binary)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE_BYTES:
        return None
    # os.read, not open(): a buffered file object costs more than reading a small file does
    chunks, left = [], _MAX_FILE_BYTES + 1
    while left > 0:
        chunk = os.read(fd, min(left, max(info.st_size + 1, 65_536)))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
        if _MAX_FILE_BYTES + 1 - left == info.st_size:
            break  # read all fstat saw: no further read to meet the end (a file that grew or shrank reads on)
    data = b"".join(chunks)
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


@dataclass
class _Query:
    """One query of a search and what it found so far; ``done`` once capped or stopped."""

    text: str
    matches_line: Matcher
    matches: list[str] = field(default_factory=list)
    more: bool = False
    stopped: str | None = None  # where the time budget ran out
    ignored: int | None = None  # the walk's ignored count when this query was done early

    @property
    def done(self) -> bool:
        return self.more or self.stopped is not None

    def scan(self, path: str, lines: list[str], use_regex: bool, deadline: float,
             clock: Callable[[], float]) -> None:
        for number, line in enumerate(lines, 1):
            left = deadline - clock() if use_regex else 1.0
            try:
                if left <= 0:
                    raise TimeoutError
                if not self.matches_line(line, left):
                    continue
            except TimeoutError:
                self.stopped = f"{path}:{number}"
                return
            if len(self.matches) == MAX_MATCHES:
                self.more = True
                return
            self.matches.append(f"{path}:{number}: {_shorten(line)}")


def _search(ws: Workspace, queries: list[str], path: str, use_regex: bool, max_bytes: int, budget_s: float,
            clock: Callable[[], float]) -> tuple[str, list[Outcome]]:
    """Every query over one walk of the tree: each file is read once and tried against
    each query not yet done. Each query's outcome is exactly what a search for it alone
    would give (same matches, caps, notes), except that the time budget is shared."""
    found = [_Query(query, _matcher(query, use_regex)) for query in queries]
    rel = ws.relative(path)
    fd = protected.open_for_read(ws, path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    deadline = clock() + budget_s
    tally = _Tally(skip=protected.hidden_ids(ws))
    ignored_start = None
    files: Iterator[tuple[str, int]]
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            rules, ignored_start = ignore.for_start(ws, rel)
            files = ((p, dir_fd) for kind, p, dir_fd in _walk(fd, rel, None, rules, tally) if kind == "file")
        else:
            files = iter([(rel, -1)])
        for file_path, dir_fd in files:
            active = [q for q in found if not q.done]
            if not active:
                break
            if clock() >= deadline:
                for query in active:
                    query.stopped, query.ignored = file_path, tally.ignored
                break
            text = _text_of(fd) if dir_fd == -1 else _read_text(dir_fd, file_path.rsplit("/", 1)[-1])
            if not text:
                continue
            lines: list[str] | None = None
            for query in active:
                if not use_regex and query.text not in text:
                    continue
                if lines is None:
                    lines = _lines(text)
                query.scan(file_path, lines, use_regex, deadline, clock)
                if query.done:
                    query.ignored = tally.ignored
    finally:
        os.close(fd)
    return rel, [_outcome(q, rel, tally.ignored if q.ignored is None else q.ignored, ignored_start, use_regex,
                          max_bytes, budget_s) for q in found]


def _outcome(query: _Query, rel: str, ignored: int, ignored_start: str | None, use_regex: bool, max_bytes: int,
             budget_s: float) -> Outcome:
    matches, found = list(query.matches), len(query.matches)
    if query.more:
        matches.append(f"[… truncated: more than {MAX_MATCHES} matches; narrow the query or the path]")
    if query.stopped:
        matches.append(f"[… search stopped at {query.stopped}: the {budget_s:g} s time budget ran out; the matches "
                       "above are partial]")
    output = "\n".join(matches) if matches else f"no matches for {quote(query.text)} in {rel}"
    notes = _notes(_Tally(ignored), ignored_start, rel, query.done, "searched")
    outcome = Outcome(output=_with_notes(output, notes, max_bytes), path=rel)
    if query.stopped is None:
        return outcome
    hint = ("simplify the regex (nested quantifiers such as (a+)+ backtrack exponentially) or narrow the path"
            if use_regex else "narrow the path")
    error = ErrorInfo(code="ACODE-SBX-016",
                      message=f"search_code for {quote(query.text)} in {rel} ran out of its {budget_s:g} s time "
                              f"budget at {query.stopped}, with {found} match{'es' if found != 1 else ''} found so "
                              f"far (in the output); {hint}")
    return Outcome(output=outcome.output, path=rel, error=error)


def search_code(ws: Workspace, args: SearchCode, max_bytes: int, *, budget_s: float = SEARCH_BUDGET_S,
                clock: Callable[[], float] = time.monotonic) -> Outcome:
    """``path:line: text`` for each matching line of the text files under ``path``; at most
    :data:`MAX_MATCHES` matches, ``max_bytes`` and ``budget_s`` seconds."""
    _, (outcome,) = _search(ws, [args.query], args.path, args.regex, max_bytes, budget_s, clock)
    return outcome


def query_header(number: int, count: int) -> str:
    """The line before each query's part of a :func:`search_code_terms` output."""
    return f"[query {number} of {count}]"


def search_code_terms(ws: Workspace, args: SearchCodeTerms, max_bytes: int, *, budget_s: float = SEARCH_BUDGET_S,
                      clock: Callable[[], float] = time.monotonic) -> Outcome:
    """search_code for several queries in one walk of the tree (the planner's context
    preparation searches for each of the task's terms). The output is, for each query in
    order, :func:`query_header` on a line of its own and then what search_code would answer
    for that query alone (each capped at ``max_bytes``). The time budget is shared: if it runs
    out, every query not done by then is partial, and the error (ACODE-SBX-016) names the first."""
    rel, outcomes = _search(ws, list(args.queries), args.path, args.regex, max_bytes, budget_s, clock)
    count = len(outcomes)
    output = "\n".join(f"{query_header(n, count)}\n{o.output}" for n, o in enumerate(outcomes, 1))
    error = next((o.error for o in outcomes if o.error is not None), None)
    return Outcome(output=output, path=rel, error=error)
