"""A content manifest: the baseline of a workspace that is not a git work tree.

The workspace is walked as the tree tools walk it (:func:`actors.sandbox.workspace.snapshot.walk`:
``.gitignore`` files honoured, ``.git`` skipped, symlinks recorded as links and never
followed). Each file's bytes are copied, content-addressed, into the session's store
under acode's home, never inside the workspace::

    <store>/manifest.msgpack     {path bytes: [mode, size, sha256, stored, at]} (msgpack: a
                                 file name need not be UTF-8, and JSON could not hold it)
    <store>/pack                 the bytes of every stored file and symlink target, one after
                                 another, each content once (0600); ``at`` is its offset

One file for all the contents, not one per content: a baseline of a small workspace costs
two file creations instead of one per file (a store written before the pack has
``<store>/objects/<sha256>`` files and items without ``at``, and still diffs).

Caps keep a big workspace from filling the disk: a file over :data:`MAX_STORED_FILE_BYTES`
(1 MB) is recorded by its hash only, and so is every file once the store holds
:data:`MAX_STORED_TOTAL_BYTES`; its diff then says the baseline's content is not
available instead of showing one. Symlink targets are always stored (they are short).

The diff is git's format, made with :mod:`difflib` (``a/`` and ``b/`` paths, 3 lines of
context, ``\\ No newline at end of file``): new and deleted files, mode changes
(``old mode``/``new mode``), symlinks (mode 120000, the target as content), a change of
type as a deletion plus an addition, "Binary files … differ" for a NUL byte in the
first 8000 bytes (git's rule), and exact renames (same content and mode) as
``rename from``/``rename to`` (empty files aside). Files over 1 MB on either side get no text diff.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import msgspec

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.workspace import ignore, snapshot
from actors.sandbox.workspace.gitsnap import Change

__all__ = ["MAX_STORED_FILE_BYTES", "MAX_STORED_TOTAL_BYTES", "Item", "Manifest", "diff", "load", "record"]

MAX_STORED_FILE_BYTES = 1_000_000
MAX_STORED_TOTAL_BYTES = 64_000_000
_MAX_DIFF_BYTES = MAX_STORED_FILE_BYTES


class Item(msgspec.Struct, frozen=True, array_like=True):
    mode: str  # "100644", "100755" or "120000"
    size: int
    sha256: str
    stored: bool
    at: int = -1  # the offset of a stored content in the pack; -1: in objects/ (a store made before the pack)


Manifest = dict[str, Item]
_DECODER = msgspec.msgpack.Decoder(dict[bytes, Item])
_FILE = "manifest.msgpack"
_PACK = "pack"


@dataclass
class _Store:
    """The pack being written: each content once, at the offset :meth:`put` answers."""

    pack: BinaryIO
    total: int = 0
    size: int = 0
    offsets: dict[str, int] = field(default_factory=dict)

    def put(self, digest: str, data: bytes) -> int:
        self.total += len(data)
        at = self.offsets.get(digest)
        if at is None:
            at = self.offsets[digest] = self.size
            self.pack.write(data)
            self.size += len(data)
        return at


def _read(entry: snapshot.Entry, keep_up_to: int) -> tuple[int, str, bytes | None] | None:
    """``(size, sha256, bytes or None)`` of a file or a link's target; the bytes only when
    there are at most ``keep_up_to`` of them. None when it is gone."""
    if entry.is_link:
        target = snapshot.read_link(entry)
        return None if target is None else (len(target), hashlib.sha256(target).hexdigest(), target)
    fd = snapshot.open_file(entry)
    if fd is None:
        return None
    digest, size, kept = hashlib.sha256(), 0, bytearray()
    try:
        while chunk := os.read(fd, snapshot.CHUNK):  # no buffered file object: a few small files, read once
            digest.update(chunk)
            size += len(chunk)
            if size <= keep_up_to:
                kept += chunk
    finally:
        os.close(fd)
    return size, digest.hexdigest(), bytes(kept) if size <= keep_up_to else None


def record(ws: Workspace, store_dir: str) -> tuple[Manifest, int]:
    """Walk the workspace into ``store_dir``; the manifest and how many files were kept as hash only."""
    manifest: Manifest = {}
    unstored = 0
    # Written in place: the manifest, replaced after it, is what makes a pack count (a
    # record cut short is made again whole, and the baseline record is made after both).
    fd = os.open(os.path.join(store_dir, _PACK), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as pack:
        store = _Store(pack)
        for entry in snapshot.walk(ws):
            read = _read(entry, MAX_STORED_FILE_BYTES)
            if read is None:
                continue
            size, digest, data = read
            if data is not None and (entry.is_link or store.total + size <= MAX_STORED_TOTAL_BYTES):
                manifest[entry.path] = Item(entry.mode, size, digest, True, store.put(digest, data))
            else:
                unstored += 1
                manifest[entry.path] = Item(entry.mode, size, digest, False)
    tmp = os.path.join(store_dir, f"{_FILE}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(msgspec.msgpack.encode({os.fsencode(path): item for path, item in manifest.items()}))
    os.replace(tmp, os.path.join(store_dir, _FILE))
    return manifest, unstored


def load(store_dir: str) -> Manifest | None:
    try:
        with open(os.path.join(store_dir, _FILE), "rb") as f:
            return {os.fsdecode(path): item for path, item in _DECODER.decode(f.read()).items()}
    except (OSError, msgspec.DecodeError):
        return None


def _current(ws: Workspace, base: Manifest, rules: ignore.Rules | None = None) -> Manifest:
    """The workspace now: what its ``.gitignore`` files show, what the baseline's recorded
    ``rules`` show, and the baseline's own files still there (an ignore rule added since
    hides nothing)."""
    manifest: Manifest = {}

    def add(walk: Iterator[snapshot.Entry]) -> None:
        for entry in walk:
            if entry.path not in manifest:
                read = _read(entry, 0)
                if read is not None:
                    manifest[entry.path] = Item(entry.mode, read[0], read[1], False)

    left_out: list[str] = []
    add(snapshot.walk(ws, left_out=left_out))
    # The recorded rules' walk finds what today's rules hide; when they hid nothing, the
    # first walk saw every file already, so the second is not made.
    if rules is not None and left_out:
        add(snapshot.walk(ws, rules))
    add(snapshot.entries(ws, (path for path in sorted(base, key=posixpath.split) if path not in manifest)))
    return manifest


def _changes(base: Manifest, now: Manifest) -> list[Change]:
    changes = []
    added = [p for p in now if p not in base]
    deleted = [p for p in base if p not in now]
    by_content: dict[tuple[str, str], list[str]] = {}
    for path in deleted:
        if base[path].size:  # as git: empty files are never taken for renames of each other
            by_content.setdefault((base[path].mode, base[path].sha256), []).append(path)
    renamed: set[str] = set()
    for path in added:
        olds = by_content.get((now[path].mode, now[path].sha256))
        if olds:
            old = olds.pop(0)
            renamed.add(old)
            changes.append(Change("R100", path, old))
        else:
            changes.append(Change("A", path))
    changes += [Change("D", p) for p in deleted if p not in renamed]
    for path, item in base.items():
        other = now.get(path)
        if other is not None and (other.mode, other.sha256) != (item.mode, item.sha256):
            link_changed = (item.mode == "120000") != (other.mode == "120000")
            changes.append(Change("T" if link_changed else "M", path))
    return sorted(changes, key=lambda c: c.path)


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


class _Sides:
    """The two contents of one change: the baseline's from the store, the workspace's read now."""

    def __init__(self, ws: Workspace, store_dir: str, base: Manifest, now: Manifest):
        self.ws, self.store_dir, self.base, self.now = ws, store_dir, base, now

    def old(self, path: str) -> bytes | str:
        """The baseline's bytes of ``path``, or why they are not available."""
        item = self.base[path]
        if not item.stored:
            return (f"the baseline kept only the hash of this {item.size}-byte file" +
                    (" (files over 1 MB are not stored)" if item.size > MAX_STORED_FILE_BYTES
                     else " (the baseline store was full)"))
        try:
            if item.at < 0:
                with open(os.path.join(self.store_dir, "objects", item.sha256), "rb") as f:
                    return f.read()
            with open(os.path.join(self.store_dir, _PACK), "rb") as f:
                f.seek(item.at)
                data = f.read(item.size)
        except OSError:
            data = b""
        if len(data) != item.size or hashlib.sha256(data).hexdigest() != item.sha256:
            return "the baseline's copy of this file is missing from acode's store"
        return data

    def new(self, path: str) -> bytes | str:
        for entry in snapshot.entries(self.ws, [path]):
            read = _read(entry, _MAX_DIFF_BYTES)
            if read is not None:
                return read[2] if read[2] is not None else f"the file is {read[0]} bytes, over the 1 MB diff limit"
        return "the file changed while the diff was made"


def _body(old: bytes | str | None, new: bytes | str | None, a: str, b: str) -> str:
    """The content part of one file's diff; None stands for an absent side (/dev/null)."""
    for side in (old, new):
        if isinstance(side, str):
            return f"[content not shown: {side}]\n"
    before, after = old or b"", new or b""
    assert isinstance(before, bytes) and isinstance(after, bytes)
    if before == after:
        return ""
    if snapshot.is_binary(before) or snapshot.is_binary(after):
        return f"Binary files {a} and {b} differ\n"
    out = []
    for line in difflib.unified_diff(_lines(before.decode("utf-8", "replace")),
                                     _lines(after.decode("utf-8", "replace")), a, b, n=3):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _added(sides: _Sides, path: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode {sides.now[path].mode}\n"
            + _body(None, sides.new(path), "/dev/null", f"b/{path}"))


def _deleted(sides: _Sides, path: str) -> str:
    return (f"diff --git a/{path} b/{path}\ndeleted file mode {sides.base[path].mode}\n"
            + _body(sides.old(path), None, f"a/{path}", "/dev/null"))


def _patch(sides: _Sides, change: Change) -> str:
    path = change.path
    match change.status[0]:
        case "A":
            return _added(sides, path)
        case "D":
            return _deleted(sides, path)
        case "T":
            return _deleted(sides, path) + _added(sides, path)
        case "R":
            return (f"diff --git a/{change.old} b/{path}\nsimilarity index 100%\n"
                    f"rename from {change.old}\nrename to {path}\n")
        case _:
            old, new = sides.base[path], sides.now[path]
            head = f"diff --git a/{path} b/{path}\n"
            if old.mode != new.mode:
                head += f"old mode {old.mode}\nnew mode {new.mode}\n"
            if old.sha256 == new.sha256:
                return head
            return head + _body(sides.old(path), sides.new(path), f"a/{path}", f"b/{path}")


def diff(ws: Workspace, store_dir: str, base: Manifest, limit: int,
         rules: ignore.Rules | None = None) -> tuple[list[Change], str, int]:
    """The changes since ``base``, the first ``limit`` bytes of their diff and its total size;
    ``rules`` are the baseline's recorded ignore rules."""
    now = _current(ws, base, rules)
    changes = _changes(base, now)
    sides = _Sides(ws, store_dir, base, now)
    parts: list[str] = []
    kept = total = 0
    for change in changes:
        text = _patch(sides, change)
        size = len(text.encode("utf-8", "surrogateescape"))
        total += size
        if kept <= limit:
            parts.append(text)
            kept += size
    return changes, "".join(parts), total
