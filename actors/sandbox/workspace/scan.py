"""What a checkpoint sees of a workspace, read fast: one walk, a stat cache, trees built on the way.

A checkpoint (:mod:`actors.sandbox.workspace.checkpoints`) covers every file and symlink
under the workspace root, tracked, untracked and ignored alike, and the repository's own
``.git`` directory as plain files: HEAD, refs, packed-refs, the index, the stash's reflog,
objects and packs are what bring back HEAD, the branches, the tags, the stash and the
index byte for byte, and keep the objects a ``gc --prune=now`` would delete. Left out,
outside any ``.git`` only (git's own files are never capped or skipped):

- directories named in :attr:`Scope.skip_dirs` at any depth (``node_modules``, ``.venv``…:
  generated, large, and rebuilt by the project's own tools);
- files over :attr:`Scope.max_file_bytes`, reported as skipped;
- the paths in :attr:`Scope.exclude` (acode's home and the store, when the workspace holds
  them), never entered.

A linked worktree or a submodule keeps its git directory outside the workspace (its
``.git`` is a file, ``gitdir: <dir>``): HEAD, the index, the refs and the stash live
there. Each such directory in :attr:`Scope.roots` is walked too, as git's own files, and
stands in the checkpoint's tree under :data:`GITDIRS` ``/<key>`` (:func:`root_key`: a hash
of its path), a name the walk of the workspace itself never enters. Those two directories
are virtual: a restore (:mod:`actors.sandbox.workspace.restore`) maps ``<GITDIRS>/<key>/x``
back to ``<root>/x`` and never makes or removes them in the workspace.

Reading follows :mod:`actors.sandbox.workspace.snapshot`'s rules: every entry is looked at
with ``lstat`` in its parent's directory fd, a directory is entered with ``O_NOFOLLOW``, a
file opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` (a link or FIFO
swapped in is refused by the kernel, never followed or waited on), a symlink is recorded
as its target text (mode ``120000``), FIFOs, sockets and devices are left out.

The stat cache. A file whose ``(mtime_ns, size, ino, mode)`` equal the cache's has the
cache's blob id and is not read, except when it is *racy*: its mtime falls within
:data:`RACY_NS` (2 s, the coarsest timestamp a workspace's file system may keep, FAT's)
of the moment the previous walk began, when a write in the same timestamp tick could
have left the stat unchanged; such a file is hashed again (git's racy-clean rule, with
the walk's start standing for the index's mtime). A directory's tree id is kept by path
too: a tree whose bytes hash to the cached id is known to be stored and is not looked up,
so a take with 10 changed files writes their blobs and the trees on their paths only.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field

import msgspec

from actors.sandbox.workspace.objects import DIR, LINK, Objects, encode_tree
from protocol.policy import checkpoints

__all__ = ["DEFAULT_SKIP_DIRS", "GITDIRS", "RACY_NS", "Cache", "Dir", "Scan", "Scope", "Stat", "root_key", "scan",
           "virtual"]

DEFAULT_SKIP_DIRS = frozenset(checkpoints.DEFAULT_SKIP_DIRS)
RACY_NS = 2_000_000_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
GITDIRS = b".acode-gitdirs"  # where the git directories outside the workspace stand in a checkpoint's tree
_REGULAR = b"100644"
_EXECUTABLE = b"100755"


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """What a checkpoint covers (see the module docstring); paths are workspace-relative."""

    max_file_bytes: int = 10 * 1024 * 1024
    skip_dirs: frozenset[str] = DEFAULT_SKIP_DIRS
    exclude: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()  # git directories outside the workspace (absolute, resolved), walked under GITDIRS


def root_key(path: str) -> bytes:
    """The name a git directory outside the workspace has under :data:`GITDIRS`: the same
    for the same path in every checkpoint, so the stat cache and diffs line up."""
    return hashlib.sha1(os.fsencode(path)).hexdigest()[:16].encode()


def virtual(path: bytes) -> bool:
    """Whether ``path`` is :data:`GITDIRS` or one of its ``<key>`` directories (no directory in the workspace)."""
    head, _, _ = path.partition(b"/")
    return head == GITDIRS and path.count(b"/") <= 1


class Stat(msgspec.Struct, frozen=True, array_like=True):
    """A cached entry: a file's stat when it was last read and its blob id (a directory: its tree id)."""

    mtime_ns: int
    size: int
    ino: int
    mode: int
    oid: str


class Dir(msgspec.Struct, frozen=True, array_like=True):
    """A cached directory: its tree id and its entries by name."""

    tree: str
    entries: dict[bytes, Stat]


class Cache(msgspec.Struct, kw_only=True):
    """The stat cache of a store: directory path -> :class:`Dir`, and when the walk that
    filled it began (wall clock, compared with file mtimes)."""

    began_ns: int = 0
    dirs: dict[bytes, Dir] = msgspec.field(default_factory=dict)
    pending: list[tuple[str, bytes]] = msgspec.field(default_factory=list)  # loose objects not yet repacked

    def keep(self, marked: set[str]) -> None:
        """Forget every directory whose entries name an object not in ``marked`` (gc deleted it)."""
        self.dirs = {rel: folder for rel, folder in self.dirs.items()
                     if folder.tree in marked and all(entry.oid in marked for entry in folder.entries.values())}


@dataclass
class Scan:
    """A walk's result: the root tree, the over-cap files, what changed since the cache,
    the new cache; with ``flat``, the files and symlinks (path -> mode, id) and directories."""

    tree: str = ""
    files: dict[bytes, tuple[bytes, str]] = field(default_factory=dict)
    dirs: set[bytes] = field(default_factory=set)
    skipped: list[bytes] = field(default_factory=list)  # over the cap, or unreadable
    changed: list[bytes] = field(default_factory=list)  # new, different or gone since the cache
    cache: Cache = field(default_factory=Cache)
    hashed: int = 0  # files read this walk (the rest came from the stat cache)


@dataclass
class _Walk:
    scope: Scope
    objects: Objects | None  # None: hash without storing (a comparison, not a take)
    old: Cache
    racy_from: int
    out: Scan
    flat: bool
    exclude: dict[bytes, set[bytes]]  # directory -> names never entered

    def directory(self, fd: int, rel: bytes, in_git: bool) -> str:
        old = self.old.dirs.get(rel)
        before = old.entries if old is not None else {}
        now: dict[bytes, Stat] = {}
        clean = old is not None
        out, flat, racy_from = self.out, self.flat, self.racy_from
        excluded = self.exclude.get(rel)
        with os.scandir(fd) as it:
            listed = list(it)
        for item in listed:
            name = item.name
            raw = name.encode("utf-8", "surrogateescape")
            if (excluded and raw in excluded) or (not rel and raw == GITDIRS):
                continue
            prev = before.get(raw)
            if item.is_dir(follow_symlinks=False):  # d_type: no stat for a directory
                if not in_git and name in self.scope.skip_dirs:
                    continue
                path = rel + b"/" + raw if rel else raw
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # gone, or swapped for a link since it was seen
                try:
                    tree = self.directory(child, path, in_git or name == ".git")
                finally:
                    os.close(child)
                if prev is None or prev.oid != tree or not stat.S_ISDIR(prev.mode):
                    clean = False
                    if prev is not None and not stat.S_ISDIR(prev.mode):
                        out.changed.append(path)  # a file or link replaced by a directory
                now[raw] = Stat(0, 0, 0, stat.S_IFDIR, tree)
                if flat:
                    out.dirs.add(path)
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            kind = info.st_mode
            if (prev is not None and prev.mtime_ns == info.st_mtime_ns and prev.size == info.st_size
                    and prev.ino == info.st_ino and prev.mode == kind and info.st_mtime_ns < racy_from
                    and (in_git or info.st_size <= self.scope.max_file_bytes)):
                entry = prev  # the stat cache's hit: a file or link as it was (the cache holds no other kind)
                if flat:
                    out.files[rel + b"/" + raw if rel else raw] = (_kind(kind), entry.oid)
            else:
                if stat.S_ISLNK(kind):
                    mode = LINK
                elif stat.S_ISREG(kind):
                    mode = _EXECUTABLE if kind & stat.S_IXUSR else _REGULAR
                    if not in_git and info.st_size > self.scope.max_file_bytes:
                        out.skipped.append(rel + b"/" + raw if rel else raw)
                        continue
                else:
                    continue  # FIFOs, sockets, devices
                path = rel + b"/" + raw if rel else raw
                oid = self.blob(fd, name, mode, path)
                if oid is None:
                    out.skipped.append(path)
                    continue
                entry = Stat(info.st_mtime_ns, info.st_size, info.st_ino, kind, oid)
                if prev is None or prev.oid != oid or _kind(prev.mode) != mode:
                    clean = False
                    if prev is not None and stat.S_ISDIR(prev.mode):
                        self.gone(path, prev)  # a directory replaced by a file or link: what it held went
                    out.changed.append(path)
                if flat:
                    out.files[path] = (mode, oid)
            now[raw] = entry
        if not rel and self.scope.roots:
            prev = before.get(GITDIRS)
            outside = self.outside(prev)
            if outside is not None:
                clean = clean and prev is not None and prev.oid == outside
                now[GITDIRS] = Stat(0, 0, 0, stat.S_IFDIR, outside)
        if clean and old is not None and len(now) == len(before):
            tree = old.tree
        else:
            for raw in before.keys() - now.keys():
                self.gone(rel + b"/" + raw if rel else raw, before[raw])
            data = encode_tree((DIR if stat.S_ISDIR(entry.mode) else _kind(entry.mode), raw, entry.oid)
                               for raw, entry in now.items())
            tree = hashlib.sha1(b"tree %d\0" % len(data) + data).hexdigest()
            if self.objects is not None and (old is None or old.tree != tree):
                self.objects.put(b"tree", data, tree, b"T" + rel)
        out.cache.dirs[rel] = Dir(tree, now)
        return tree

    def outside(self, prev: Stat | None) -> str | None:
        """The tree of :data:`GITDIRS`: each of :attr:`Scope.roots` that is a directory, walked
        as git's own files under its key; None when none is."""
        entries: dict[bytes, str] = {}
        for root in self.scope.roots:
            key = root_key(root)
            try:
                fd = os.open(root, _DIR_FLAGS)
            except OSError:
                continue  # gone, or not a directory: a restore to this checkpoint leaves it alone
            try:
                entries[key] = self.directory(fd, GITDIRS + b"/" + key, True)
            finally:
                os.close(fd)
        if not entries:
            return None
        data = encode_tree((DIR, key, tree) for key, tree in sorted(entries.items()))
        tree = hashlib.sha1(b"tree %d\0" % len(data) + data).hexdigest()
        if self.objects is not None and (prev is None or prev.oid != tree):
            self.objects.put(b"tree", data, tree, b"T" + GITDIRS)
        self.out.cache.dirs[GITDIRS] = Dir(tree, {key: Stat(0, 0, 0, stat.S_IFDIR, oid)
                                                  for key, oid in entries.items()})
        return tree

    def gone(self, path: bytes, entry: Stat) -> None:
        """A path the cache had and the walk did not find: itself, or every file under it."""
        if not stat.S_ISDIR(entry.mode):
            self.out.changed.append(path)
            return
        folder = self.old.dirs.get(path)
        for raw, child in (folder.entries.items() if folder is not None else ()):
            self.gone(path + b"/" + raw, child)

    def blob(self, fd: int, name: str, mode: bytes, path: bytes) -> str | None:
        data = self.read(fd, name, mode)
        if data is None:
            return None
        self.out.hashed += 1
        oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if self.objects is not None:
            self.objects.put(b"blob", data, oid, b"B" + path)
        return oid

    @staticmethod
    def read(fd: int, name: str, mode: bytes) -> bytes | None:
        if mode == LINK:
            try:
                return os.readlink(os.fsencode(name), dir_fd=fd)
            except OSError:
                return None
        try:
            file = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except OSError:
            return None  # gone, unreadable, or a link or FIFO swapped in
        try:
            if not stat.S_ISREG(os.fstat(file).st_mode):
                return None
            chunks = []
            while chunk := os.read(file, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(file)


def _kind(st_mode: int) -> bytes:
    if stat.S_ISLNK(st_mode):
        return LINK
    return _EXECUTABLE if st_mode & stat.S_IXUSR else _REGULAR


def scan(root: str, scope: Scope, objects: Objects | None, cache: Cache, began_ns: int, *,
         flat: bool = False) -> Scan:
    """Walk the workspace at ``root``; with ``objects``, store every blob and tree it lacks;
    with ``flat``, list every file and directory. ``began_ns`` (wall clock, now) is recorded
    in the new cache for the next walk's racy rule."""
    out = Scan(cache=Cache(began_ns=began_ns))
    exclude: dict[bytes, set[bytes]] = {}
    for path in scope.exclude:
        head, _, name = os.fsencode(path.strip("/")).rpartition(b"/")
        exclude.setdefault(head, set()).add(name)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walk = _Walk(scope, objects, cache, cache.began_ns - RACY_NS, out, flat, exclude)
        out.tree = walk.directory(fd, b"", False)
    finally:
        os.close(fd)
    return out
