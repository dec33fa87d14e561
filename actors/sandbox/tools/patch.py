"""modify_file's unified-diff form: the hunks of one file, checked headers, exact context.

:func:`parse` reads the diff and refuses it before any file is touched when it is not
a plain text diff of the one file ``path``:

- ``---``/``+++`` (and ``diff --git``) headers are optional; when present they must
  name ``path`` (with or without git's ``a/``/``b/`` prefix; a tab and timestamp after
  the name are allowed; git's C-quoted names are unquoted). A header naming a path
  outside the workspace is ACODE-SBX-002; one naming another file, a second file
  section, or a line that is neither header nor hunk after the first header is
  ACODE-SBX-009 naming it. Lines before the first header are commentary and ignored.
- ``--- /dev/null`` creates the file: only when it does not exist, and every hunk must
  then only add lines. ``+++ /dev/null`` (deletion) is refused: modify_file never
  deletes a file.
- git's extended headers that would do more than change text are refused, naming the
  header: ``rename``/``copy from|to``, ``old mode``/``new mode``, ``deleted file mode``,
  ``similarity``/``dissimilarity index``, ``GIT binary patch``, ``Binary files``, and
  ``new file mode`` other than ``100644`` (a symlink ``120000``, a gitlink, an
  executable bit modify_file would not set). ``index`` lines are ignored.

Hunks. ``@@ -l,n +l,n @@`` counts delimit a hunk's body when they are right; models
miscount, so a body also runs on over further ``' '``/``-``/``+`` lines and stops early at
the next ``@@`` or header. A bare ``@@ @@`` (no numbers) is accepted: the hunk is looked
for after the previous one. A blank line inside a body is an empty context line
(editors strip the lone space). ``\\ No newline at end of file`` marks the line before it.

:func:`apply` places each hunk where its context and removed lines match *exactly*:
at the stated line (shifted by the offset the previous hunk was found at), else the
nearest position that matches, never before the end of the previous hunk. A hunk that
matches nowhere fails the whole diff (nothing is written) with ACODE-SBX-009 naming the
hunk and quoting the closest region of the file. Line endings: lines are compared
without their terminator; context lines keep theirs, added lines take the file's style
(the majority one in a mixed file, LF in a file without newlines), and the diff's own
CRLFs are ignored. The end of the file keeps or loses its final newline as the
``\\ No newline`` markers say, and keeps what it had when they say nothing.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from actors.sandbox.confinement.confine import quote
from actors.sandbox.tools.edits import region_hint
from protocol.errors import PathEscapeError, SandboxError

__all__ = ["Hunk", "Patch", "apply", "parse"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_BARE_HUNK = re.compile(r"^@@(?: @@)?(?:\s.*)?$")
_REFUSED = ("rename from", "rename to", "copy from", "copy to", "old mode", "new mode", "deleted file mode",
            "similarity index", "dissimilarity index", "GIT binary patch", "Binary files")
_DEV_NULL = "/dev/null"


@dataclass
class Hunk:
    header: str
    old_start: int | None  # 1-based, as stated; None for a bare "@@ @@"
    ops: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", line without terminator)
    old_no_newline: bool = False
    new_no_newline: bool = False

    @property
    def old(self) -> list[str]:
        return [text for op, text in self.ops if op != "+"]

    @property
    def new(self) -> list[str]:
        return [text for op, text in self.ops if op != "-"]


@dataclass
class Patch:
    hunks: list[Hunk]
    creates: bool  # "--- /dev/null": the file must not exist yet


def _refuse(message: str) -> SandboxError:
    return SandboxError(message, code="ACODE-SBX-009")


def _header_name(line: str) -> str:
    """The path of a ``---``/``+++`` header: before a tab (timestamps), C-unquoted as git quotes."""
    name = line[4:].split("\t", 1)[0].rstrip()
    if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
        raw = codecs.escape_decode(name[1:-1].encode("utf-8", "surrogateescape"))[0]
        name = bytes(raw).decode("utf-8", "surrogateescape")
    return name


def _refused_header(line: str) -> bool:
    return line.startswith(_REFUSED) or (line.startswith("new file mode ")
                                         and line.rstrip() != "new file mode 100644")


class _Headers:
    """The headers seen so far, each checked against the target ``rel`` as it comes."""

    def __init__(self, rel: str, relative: Callable[[str], str]):
        self.rel = rel
        self.relative = relative
        self.names = 0  # "---" and "+++" lines
        self.creates = False
        self.new_file_mode = False

    def _names_target(self, line: str, name: str) -> None:
        stripped = name[2:] if name[:2] in ("a/", "b/") else name  # git's prefix, as "git apply" (-p1) reads it
        for candidate in (stripped, name):
            try:
                if self.relative(candidate) == self.rel:
                    return
            except PathEscapeError:
                pass
        try:
            self.relative(stripped)
        except PathEscapeError as exc:
            raise PathEscapeError(f"diff header {quote(line)} names a path outside the workspace; a diff may "
                                  f"only change {quote(self.rel)}, the path of this call") from exc
        raise _refuse(f"diff header {quote(line)} names another file than {quote(self.rel)}; modify_file applies "
                      "a diff to its own path only: send one call per file")

    def _second_section(self, line: str, number: int) -> SandboxError:
        return _refuse(f"line {number} of the diff ({quote(line)}) starts a second file section; modify_file "
                       f"takes a diff of one file, {quote(self.rel)}")

    def check(self, line: str, number: int, hunks_seen: bool) -> None:
        if line.startswith(("--- ", "+++ ")):
            if self.names >= 2 or hunks_seen:
                raise self._second_section(line, number)
            self.names += 1
            name = _header_name(line)
            if name != _DEV_NULL:
                self._names_target(line, name)
            elif line.startswith("+++"):
                raise _refuse(f"diff header {quote(line)} deletes the file; modify_file does not delete files")
            else:
                self.creates = True
        elif line.startswith("diff --git "):
            if self.names or hunks_seen:
                raise self._second_section(line, number)
            rest = line[len("diff --git "):]
            if rest not in (f"a/{self.rel} b/{self.rel}", f"{self.rel} {self.rel}"):
                self._names_target(line, rest.split(" ", 1)[0])  # outside (-002) or another file (-009)
                raise _refuse(f"diff header {quote(line)} does not name {quote(self.rel)} twice; send "
                              f"'diff --git a/{self.rel} b/{self.rel}' or leave the line out")
        elif line.startswith("new file mode "):
            self.new_file_mode = True
        # "index …" lines carry blob ids only: nothing to check


def _is_header(lines: list[str], i: int) -> bool:
    line = lines[i]
    return line.startswith(("diff --git ", "@@")) or (
        line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "))


def _more_body(lines: list[str], i: int) -> bool:
    """Past a hunk's stated counts: does ``lines[i]`` still belong to it? (Models miscount.)"""
    while i < len(lines) and lines[i] == "":
        i += 1  # blank lines belong to the hunk only when body lines follow them
    return i < len(lines) and not _is_header(lines, i) and lines[i][0] in " -+\\"


def _body(lines: list[str], i: int, hunk: Hunk, counts: tuple[int, int] | None) -> int:
    """Read the body of ``hunk`` from ``lines[i]``; return the index after it."""
    old = new = 0
    last = " "
    while i < len(lines):
        line = lines[i]
        if line.startswith("\\"):  # "\ No newline at end of file", for the line before it
            hunk.old_no_newline |= last != "+"
            hunk.new_no_newline |= last != "-"
            i += 1
            continue
        within = counts is not None and (old < counts[0] or new < counts[1])
        if within and line and line[0] not in " -+":
            break  # the counts were too large: "@@" or a header comes early
        if not within and not _more_body(lines, i):
            break
        op, text = (line[0], line[1:]) if line else (" ", "")
        hunk.ops.append((op, text))
        old += op != "+"
        new += op != "-"
        last = op
        i += 1
    return i


def parse(diff: str, rel: str, relative: Callable[[str], str]) -> Patch:
    """Check and read ``diff`` for the workspace-relative target ``rel``; ``relative`` is
    :meth:`Workspace.relative` (lexical confinement of header paths)."""
    lines = diff.replace("\r\n", "\n").split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    headers = _Headers(rel, relative)
    hunks: list[Hunk] = []
    started = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _refused_header(line):
            what = "a binary patch" if "inary" in line else "a rename, copy, mode change or deletion"
            raise _refuse(f"diff header {quote(line)} is refused: it asks for {what}, and modify_file only "
                          f"changes the text of {quote(rel)}")
        numbers = _HUNK.match(line)
        if numbers or _BARE_HUNK.match(line):
            started = True
            counts = None
            hunk = Hunk(line, None)
            if numbers:
                old_start, old_count, _, new_count = numbers.groups()
                counts = (1 if old_count is None else int(old_count), 1 if new_count is None else int(new_count))
                hunk.old_start = int(old_start)
            i = _body(lines, i + 1, hunk, counts)
            hunks.append(hunk)
            continue
        if line.startswith(("--- ", "+++ ", "diff --git ", "index ", "new file mode ")):
            started = True
            headers.check(line, i + 1, bool(hunks))
        elif started:
            raise _refuse(f"line {i + 1} of the diff ({quote(line)}) is neither a hunk line nor a header; "
                          "send a unified diff: '@@ -l,n +l,n @@' hunks of ' ', '-' and '+' lines")
        i += 1
    if not hunks:
        raise _refuse(f"the diff for {quote(rel)} has no hunk ('@@ -l,n +l,n @@' followed by its lines); send "
                      "the change as a unified diff, or use edits")
    if headers.new_file_mode and not headers.creates:
        raise _refuse(f"the diff says 'new file mode' but does not start from '--- /dev/null'; {quote(rel)} is "
                      "either new (--- /dev/null) or changed, not both")
    if headers.creates and any(hunk.old for hunk in hunks):
        raise _refuse(f"the diff creates {quote(rel)} (--- /dev/null) but a hunk has context or removed lines; "
                      "a new file's hunks only add lines")
    return Patch(hunks, headers.creates)


def _split(text: str) -> list[tuple[str, str]]:
    """``(content, ending)`` per line; endings are ``"\\r\\n"``, ``"\\n"`` or ``""`` (last line)."""
    parts = text.split("\n")
    lines = [(p[:-1], "\r\n") if p.endswith("\r") else (p, "\n") for p in parts[:-1]]
    if parts[-1]:
        lines.append((parts[-1], ""))
    return lines


def _newline(lines: list[tuple[str, str]]) -> str:
    crlf = sum(ending == "\r\n" for _, ending in lines)
    lf = sum(ending == "\n" for _, ending in lines)
    return "\r\n" if crlf > lf else "\n"


def _locate(contents: list[str], old: list[str], hint: int, low: int) -> int | None:
    """The position nearest ``hint`` (not before ``low``) where ``old`` matches exactly."""
    high = len(contents) - len(old)
    if high < low:
        return None
    if not old:
        return min(max(hint, low), len(contents))
    hint = min(max(hint, low), high)
    first = old[0]
    for distance in range(max(hint - low, high - hint) + 1):
        for at in (hint - distance, hint + distance) if distance else (hint,):
            if low <= at <= high and contents[at] == first and contents[at:at + len(old)] == old:
                return at
    return None


def apply(text: str, patch: Patch, rel: str) -> str:
    """``text`` with every hunk of ``patch`` applied, or SandboxError (ACODE-SBX-009)."""
    lines = _split(text)
    contents = [content for content, _ in lines]
    newline = _newline(lines)
    out: list[tuple[str, str]] = []
    cursor = offset = 0
    for number, hunk in enumerate(patch.hunks, 1):
        old = hunk.old
        if hunk.old_start is None:
            hint = cursor
        else:
            hint = (hunk.old_start - 1 if old else hunk.old_start) + offset
        at = _locate(contents, old, hint, cursor)
        if at is None:
            where = f"hunk {number} of {len(patch.hunks)} ({quote(hunk.header, 80)})"
            shown = "\n".join(old)
            after = f" after hunk {number - 1}" if number > 1 else ""
            raise _refuse(f"{where} does not apply to {rel}: its context and removed lines were not found{after}; "
                          "no hunk was applied; read the file again and make the diff from its current text; "
                          f"{region_hint(text, shown) if old else 'it has no context lines'}")
        if hunk.old_start is not None:
            offset = at - (hunk.old_start - 1 if old else hunk.old_start)
        out.extend(lines[cursor:at])
        region: list[tuple[str, str]] = []
        source = at
        for op, content in hunk.ops:
            if op == " ":
                region.append(lines[source])
                source += 1
            elif op == "-":
                source += 1
            else:
                region.append((content, newline))
        cursor = at + len(old)
        if cursor == len(lines) and region:  # this hunk ends the file: its final newline
            content, ending = region[-1]
            if hunk.new_no_newline:
                ending = ""
            elif hunk.old_no_newline:
                ending = newline  # the diff adds the missing final newline
            elif lines and lines[-1][1] == "":
                ending = ""  # the file had none and the diff does not say to add one
            region[-1] = (content, ending)
        out.extend(region)
    out.extend(lines[cursor:])
    last = len(out) - 1  # every line but the last ends with a newline, whatever it had before
    return "".join(content + (ending if i == last else ending or newline)
                   for i, (content, ending) in enumerate(out))
