"""The checkpoints of one workspace: taken before every call that may change it, restorable, kept outside it.

A store lives in acode's home (the caller passes the directory, e.g.
``<home>/checkpoints/<key>``), never in the workspace: a session's commands can ``mv
.git``, ``update-ref -d`` or ``gc --prune=now`` the workspace's repository, but cannot
reach the store. Its format is git's own, a bare repository written by Python
(:mod:`actors.sandbox.workspace.objects`), so ``git --git-dir=<store> log``, ``show``,
``ls-tree -r`` and ``fsck`` read it; no ``git`` process runs on the take or the restore,
so no setting, hook, filter or fsmonitor of the workspace's repository can run::

    <store>/objects/ab/cdef…   loose objects: blobs, trees, one commit per checkpoint
    <store>/objects/pack/      packs: a large take's objects, and loose ones repacked as deltas
    <store>/checkpoints.log    one JSON line per checkpoint, oldest first (the listing)
    <store>/HEAD               the newest checkpoint's id (``git log`` starts there)
    <store>/cache.msgpack      the stat cache (:mod:`actors.sandbox.workspace.scan`)
    <store>/refs/, lock

A checkpoint is a commit whose tree is the workspace (:mod:`~actors.sandbox.workspace.scan`
says what it covers) and whose message carries the caller's :class:`Meta` as JSON. It has
no parent commit: retention drops old checkpoints, and a kept commit whose parent was
dropped would be a broken history to git (``fsck``, ``log``). The order lives in the log
instead, one appended line per take (id, parent, at, took_ms, files changed, meta):
listing needs one read and no ref per checkpoint, gc rewrites it with one rename, and the
same facts (the parent aside: the previous one by time) are in every commit message, so a
lost log could be rebuilt from the objects (nothing does that yet).

Restoring is :mod:`actors.sandbox.workspace.restore`'s: planned, journaled, resumable.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection
from typing import Literal

import msgspec

from actors.paths import tree_bytes
from actors.sandbox.workspace import restore as _restore
from actors.sandbox.workspace.objects import DIR, REPACK_FROM, Objects, commit_tree, encode_commit, locked, unescape
from actors.sandbox.workspace.restore import Plan, Step
from actors.sandbox.workspace.scan import Cache, Scope, scan
from protocol.errors import NotFoundError

__all__ = ["Checkpoint", "Checkpoints", "Collected", "Kind", "Meta", "Record"]

_LOG = "checkpoints.log"
_CACHE = "cache.msgpack"
_SHOWN = 50  # changed paths kept in a log line (the count is always there)
_DAY = 86_400


Kind = Literal["start", "before", "after", "restore"]


class Meta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the caller says about a checkpoint: the session, where it is, and the call it
    precedes (``kind``: ``before`` a call; ``after`` it, which tells what the call itself
    changed; ``start``, when the session began; ``restore``, just before an undo)."""

    session: str
    stage: str = ""
    task: str = ""
    step: str = ""
    call: str = ""
    key: str = ""
    kind: Kind = "before"


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the log: a checkpoint as ``acode checkpoints`` lists it."""

    id: str
    parent: str | None
    at: float  # wall-clock seconds
    took_ms: float
    files: int  # changed since the previous checkpoint
    changed: list[str]  # the first of them
    skipped: int
    meta: Meta
    roots: list[str] = []  # the git directories outside the workspace it covers (scan.Scope.roots)


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Checkpoints.take` answers."""

    id: str
    took_ms: float
    changed: list[str]  # files and symlinks new, changed or deleted since the previous take
    skipped: list[str]  # over the size cap, or unreadable
    hashed: int  # files read (the rest came from the stat cache)
    roots: list[str] = []


class Collected(msgspec.Struct, frozen=True, kw_only=True):
    dropped: int  # checkpoints
    deleted: int  # objects
    kept: int  # checkpoints


class Checkpoints:
    """The checkpoint store at ``store`` of the workspace at ``workspace``."""

    def __init__(self, store: str, workspace: str, *, scope: Scope | None = None):
        self.root = os.path.abspath(store)
        self.workspace = os.path.abspath(workspace)
        self.scope = scope or Scope()
        inside = os.path.relpath(self.root, self.workspace)
        if not inside.startswith(".."):  # a store in the workspace never checkpoints itself
            self.scope = msgspec.structs.replace(self.scope, exclude=(*self.scope.exclude, inside))
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        self.objects = Objects(self.root)
        self._memo: tuple[tuple[int, int, int], Cache] | None = None  # the cache file's identity, its contents
        if not os.path.exists(os.path.join(self.root, "HEAD")):
            self._write(b"HEAD", b"ref: refs/heads/checkpoints\n")

    # -- taking -------------------------------------------------------------------------

    def take(self, meta: Meta) -> Checkpoint:
        """Record the workspace as it is now, before the call ``meta`` names."""
        with locked(self.root):
            began, start = time.time_ns(), time.monotonic()
            old = self._cache()
            with self.objects.batch():
                seen = scan(self.workspace, self.scope, self.objects, old, began)
            changed = sorted(seen.changed)
            parent = self._head()
            took_ms = round((time.monotonic() - start) * 1000, 1)
            at = began / 1e9
            names = [os.fsdecode(path) for path in changed]
            skipped = [os.fsdecode(path) for path in seen.skipped]
            roots = list(self.scope.roots)
            message = json.dumps({**msgspec.to_builtins(meta), "at": at, "took_ms": took_ms,
                                  "files": len(names), "skipped": skipped, "roots": roots})
            oid = self.objects.put(b"commit", encode_commit(
                seen.tree, int(at), f"checkpoint before {meta.call or 'a call'} ({meta.session})\n\n{message}"))
            record = Record(id=oid, parent=parent, at=at, took_ms=took_ms, files=len(names),
                            changed=names[:_SHOWN], skipped=len(skipped), meta=meta, roots=roots)
            with open(os.path.join(self.root, _LOG), "a", encoding="utf-8") as log:
                log.write(json.dumps(msgspec.to_builtins(record)) + "\n")
            self._write(b"HEAD", oid.encode() + b"\n")
            seen.cache.pending = [*old.pending, *self.objects.pending]
            self.objects.pending = []
            if len(seen.cache.pending) >= REPACK_FROM:
                self.objects.repack(seen.cache.pending)
                seen.cache.pending = []
            self._save_cache(seen.cache)
        return Checkpoint(id=oid, took_ms=took_ms, changed=names, skipped=skipped, hashed=seen.hashed, roots=roots)

    # -- reading ------------------------------------------------------------------------

    def records(self) -> list[Record]:
        """Every checkpoint, oldest first."""
        try:
            with open(os.path.join(self.root, _LOG), encoding="utf-8") as log:
                return [msgspec.convert(json.loads(line), Record) for line in log if line.strip()]
        except FileNotFoundError:
            return []

    def find(self, ref: str) -> Record:
        """The checkpoint whose id is or starts with ``ref`` (4 characters at least)."""
        found = [record for record in self.records() if len(ref) >= 4 and record.id.startswith(ref)]
        if len(found) != 1:
            raise NotFoundError(f"checkpoint {ref!r} {'is ambiguous' if found else 'not found'} in {self.root}; "
                                f"`acode checkpoints SESSION` lists them")
        return found[0]

    def changed_since(self, checkpoint: str) -> list[str]:
        """Files and symlinks that differ now from checkpoint ``checkpoint`` (new, changed, deleted)."""
        record = self.find(checkpoint)
        todo = _restore.plan(self.objects, self.workspace, self._scope(record), record.id, cache=self._cache())
        return sorted({*todo.write, *todo.delete})

    def between(self, old: str, new: str) -> list[str]:
        """Files and symlinks that differ between checkpoints ``old`` and ``new`` (full ids);
        a subtree whose id is the same in both is not entered."""
        found: list[str] = []
        stack = [(b"", commit_tree(self.objects.read(old)[1]), commit_tree(self.objects.read(new)[1]))]
        while stack:
            base, left, right = stack.pop()
            if left == right:
                continue
            a = {unescape(name): (mode, oid) for mode, name, oid in self.objects.read_tree(left)} if left else {}
            b = {unescape(name): (mode, oid) for mode, name, oid in self.objects.read_tree(right)} if right else {}
            for name in a.keys() | b.keys():
                path = base + b"/" + name if base else name
                one, two = a.get(name), b.get(name)
                if one == two:
                    continue
                subtrees = [entry[1] if entry is not None and entry[0] == DIR else "" for entry in (one, two)]
                if any(subtrees):
                    stack.append((path, subtrees[0], subtrees[1]))
                if any(entry is not None and entry[0] != DIR for entry in (one, two)):
                    found.append(os.fsdecode(path))
        return sorted(found)

    def size_bytes(self) -> int:
        return tree_bytes(self.root)

    # -- restoring ----------------------------------------------------------------------

    def plan_restore(self, checkpoint: str, *, leave: Collection[str] = ()) -> Plan:
        """What :meth:`restore` would write and delete; changes nothing."""
        record = self.find(checkpoint)
        return _restore.plan(self.objects, self.workspace, self._scope(record), record.id, leave=leave,
                             cache=self._cache())

    def restore(self, checkpoint: str, *, journal_dir: str, leave: Collection[str] = (),
                on_step: Step | None = None) -> Plan:
        """The workspace back to checkpoint ``checkpoint``, ``leave`` untouched; journaled in
        ``journal_dir``, so :func:`~actors.sandbox.workspace.restore.resume` completes it after a kill."""
        record = self.find(checkpoint)
        return _restore.restore(self.objects, self.workspace, self._scope(record), record.id,
                                journal_dir=journal_dir, leave=leave, cache=self._cache(), on_step=on_step)

    def _scope(self, record: Record) -> Scope:
        """What a comparison with ``record`` walks: the git directories outside the workspace
        it has, not those the workspace points at now."""
        return msgspec.structs.replace(self.scope, roots=tuple(record.roots))

    # -- retention ----------------------------------------------------------------------

    def gc(self, keep_days: float, *, now: float | None = None) -> Collected:
        """Drop checkpoints older than ``keep_days`` and every loose object no kept one reaches."""
        with locked(self.root):
            cutoff = (time.time() if now is None else now) - keep_days * _DAY
            records = self.records()
            kept = [record for record in records if record.at >= cutoff]
            marked = self.objects.reachable(record.id for record in kept)
            deleted = self.objects.prune(marked)
            self._write(_LOG.encode(), "".join(json.dumps(msgspec.to_builtins(record)) + "\n"
                                               for record in kept).encode())
            self._write(b"HEAD", kept[-1].id.encode() + b"\n" if kept else b"ref: refs/heads/checkpoints\n")
            cache = self._cache()  # a cached id whose object went must be read and stored again
            cache.keep(marked)
            self._save_cache(cache)
        return Collected(dropped=len(records) - len(kept), deleted=deleted, kept=len(kept))

    def tree(self, checkpoint: str) -> str:
        """The tree id of a checkpoint."""
        return commit_tree(self.objects.read(self.find(checkpoint).id)[1])

    # -- the store's own files ------------------------------------------------------------

    def _cache(self) -> Cache:
        """The stat cache; decoded again only when another writer (a gc, another process) replaced it."""
        try:
            with open(os.path.join(self.root, _CACHE), "rb") as file:
                info = os.fstat(file.fileno())
                identity = (info.st_ino, info.st_mtime_ns, info.st_size)
                if self._memo is not None and self._memo[0] == identity:
                    return self._memo[1]
                cache = msgspec.msgpack.decode(file.read(), type=Cache)
        except (FileNotFoundError, msgspec.DecodeError):
            return Cache()  # no cache, or a damaged one: every file is read again
        self._memo = (identity, cache)
        return cache

    def _save_cache(self, cache: Cache) -> None:
        self._write(_CACHE.encode(), msgspec.msgpack.encode(cache))
        info = os.stat(os.path.join(self.root, _CACHE))
        self._memo = ((info.st_ino, info.st_mtime_ns, info.st_size), cache)

    def _head(self) -> str | None:
        with open(os.path.join(self.root, "HEAD"), "rb") as file:
            head = file.read().strip().decode()
        return None if head.startswith("ref:") else head

    def _write(self, name: bytes, data: bytes) -> None:
        final = os.path.join(os.fsencode(self.root), name)
        temp = final + b".tmp"
        with open(temp, "wb") as file:
            file.write(data)
        os.rename(temp, final)
