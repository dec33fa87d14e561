"""A git object store written and read by Python: loose objects, trees and commits in git's own format.

The checkpoint store (:mod:`actors.sandbox.workspace.checkpoints`) keeps a workspace's
states here. The format is git's, byte for byte, so ``git --git-dir=<store> cat-file -p``,
``ls-tree -r`` and ``fsck`` read it, but no ``git`` process ever writes it: taking a
checkpoint must not run a hook, a filter, an fsmonitor or any other setting of the
workspace's repository, and a subprocess would cost more than the whole take.

- An object is ``zlib(b"<type> <size>\\0" + data)`` at ``objects/ab/cdef…``, named by
  the sha1 of the uncompressed bytes. It is written only when absent (content-addressed)
  and atomically (a temp file in the same fan-out directory, then ``rename``), so a
  killed writer leaves a stray temp file, never a truncated object. zlib level 1: the
  store is written on every tool call and read rarely; git reads any level.
- A tree entry is ``b"<mode> <name>\\0" + <20-byte id>``, sorted by git's rule (a
  directory sorts as ``name/``). Modes are git's: ``100644``, ``100755``, ``120000`` (a
  symlink, its target as the blob) and ``40000`` (a directory; an empty one is the empty
  tree, which git reads, so empty directories such as ``.git/refs/tags`` come back).
- A name git refuses in a tree (``.git`` and the names that are ``.git`` on a
  case-insensitive or HFS+/NTFS file system, as :mod:`actors.sandbox.confinement.protected`
  folds them: git's ``fsck`` calls a tree holding one ``hasDotgit``, and checking it out
  would be refused) is stored with a ``%`` appended, and so is every name that ends in
  ``%``; reading strips one trailing ``%``. A checkpoint therefore shows the repository's
  own directory as ``.git%/`` (``git show <id>:.git%/HEAD``) and passes ``fsck --strict``.
- A commit has a tree, no parent, and a message (see the checkpoint store for why).

A take that writes more than :data:`PACK_FROM` objects (the first one) writes them into one
pack instead (:mod:`actors.sandbox.workspace.packs`): a file creation is most of what a
loose object costs. Every loose object is written with a hint, the path it was taken
from; once :data:`REPACK_FROM` are loose, :meth:`Objects.repack` moves them into one pack,
each tree and blob as a delta against the previous version of its path (a take's trees
differ from the previous ones by an id or two: loose, they are most of a session's
store). Objects are read from either.

Objects are not fsynced: a checkpoint survives the death of any process (the page cache
holds it), not a power cut; fsync per object would cost more than the take's budget.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import zlib
from collections.abc import Iterable, Iterator

from actors.sandbox.confinement import protected
from actors.sandbox.workspace.packs import Pack, PackWriter
from protocol.errors import SandboxError

__all__ = ["DIR", "EMPTY_TREE", "LINK", "PACK_FROM", "REPACK_FROM", "Objects", "TreeEntry", "blob_id",
           "commit_message", "commit_tree", "encode_commit", "encode_tree", "escape", "locked", "tree_key", "unescape"]

DIR = b"40000"
LINK = b"120000"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_LEVEL = 1
PACK_FROM = 64
REPACK_FROM = 256

TreeEntry = tuple[bytes, bytes, str]  # (mode, name, hex id)


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def escape(name: bytes) -> bytes:
    """A file name as a tree entry stores it (see the module docstring)."""
    if name.endswith(b"%"):
        return name + b"%"
    if name.isascii() and b"git" not in name.lower():
        return name
    return name + b"%" if protected.is_protected([os.fsdecode(name)]) == ".git" else name


def unescape(name: bytes) -> bytes:
    return name[:-1] if name.endswith(b"%") else name


def tree_key(entry: TreeEntry) -> bytes:
    """git's order: a directory compares as if its name ended in ``/``."""
    return entry[1] + b"/" if entry[0] == DIR else entry[1]


def encode_tree(entries: Iterable[TreeEntry]) -> bytes:
    """A tree object's data from its entries, named as files are (:func:`escape` is applied here)."""
    stored = [(mode, escape(name), oid) for mode, name, oid in entries]
    return b"".join(b"%s %s\0%s" % (mode, name, bytes.fromhex(oid)) for mode, name, oid in sorted(stored, key=tree_key))


def _parse_tree(data: bytes) -> Iterator[TreeEntry]:
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        yield data[at:space], data[space + 1:nul], data[nul + 1:nul + 21].hex()
        at = nul + 21


class Objects:
    """The ``objects/`` directory of a bare store at ``root`` (made on first use)."""

    def __init__(self, root: str):
        self.root = root
        self.dir = os.path.join(root, "objects")
        self.pack_dir = os.path.join(self.dir, "pack")
        if not os.path.isdir(self.pack_dir):  # the fan-out directories (objects/ab/) are made as needed
            for name in ("refs", "objects/info", "objects/pack"):
                os.makedirs(os.path.join(root, name), mode=0o700, exist_ok=True)
        self.written = 0  # objects this instance wrote (the tests and the benchmark count them)
        self.pending: list[tuple[str, bytes]] = []  # loose objects this instance wrote: (id, hint)
        self._packs: list[Pack] = []
        self._packs_seen: list[str] = []  # the index files they were read from
        self._batch: list[tuple[bytes, bytes, str]] | None = None
        self._batched: set[str] = set()
        self._hints: dict[str, tuple[str, bytes]] = {}
        self._writer: PackWriter | None = None

    # -- packs and batches ----------------------------------------------------------------

    def refresh(self) -> None:
        """Read the pack indexes again if another writer (a take, a gc) changed the packs."""
        seen = sorted(name for name in os.listdir(self.pack_dir) if name.endswith(".idx"))
        if seen != self._packs_seen:
            self._packs = [Pack(os.path.join(self.pack_dir, name[:-4])) for name in seen]
            self._packs_seen = seen

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Objects put inside go into one pack when there are more than :data:`PACK_FROM`, else loose."""
        self.refresh()
        self._batch, self._batched, self._hints = [], set(), {}
        try:
            yield
            if self._writer is not None:
                self._writer.finish()
                self.refresh()
            else:
                for kind, data, oid in self._batch:
                    self._loose(kind, data, oid)
                self.pending.extend(self._hints.get(oid, (oid, b"")) for _, _, oid in self._batch)
        except BaseException:
            if self._writer is not None:
                self._writer.abort()
            raise
        finally:
            self._batch, self._batched, self._hints, self._writer = None, set(), {}, None

    # -- objects ----------------------------------------------------------------------------

    def path(self, oid: str) -> str:
        return os.path.join(self.dir, oid[:2], oid[2:])

    def has(self, oid: str) -> bool:
        return os.path.exists(self.path(oid)) or any(oid in pack.offsets for pack in self._packs)

    def put(self, kind: bytes, data: bytes, oid: str | None = None, hint: bytes = b"") -> str:
        """Store an object unless it is there; its id. ``oid`` when the caller hashed it already;
        ``hint``: what the object is a version of (its path), for :meth:`repack`'s deltas."""
        oid = oid or hashlib.sha1(b"%s %d\0" % (kind, len(data)) + data).hexdigest()
        if oid in self._batched or self.has(oid):
            return oid
        self.written += 1
        if self._batch is None:
            self._loose(kind, data, oid)
            self.pending.append((oid, hint))
            return oid
        self._batched.add(oid)
        if hint:
            self._hints[oid] = (oid, hint)
        if self._writer is None:
            self._batch.append((kind, data, oid))
            if len(self._batch) > PACK_FROM:
                self._writer = PackWriter(self.pack_dir)
                for entry in self._batch:
                    self._writer.add(*entry)
                self._batch = []
        else:
            self._writer.add(kind, data, oid)
        return oid

    def _loose(self, kind: bytes, data: bytes, oid: str) -> None:
        final = self.path(oid)
        temp = f"{final}.{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        try:
            fd = os.open(temp, flags, 0o444)
        except FileNotFoundError:  # the first object of its fan-out directory
            os.makedirs(os.path.dirname(final), mode=0o700, exist_ok=True)
            fd = os.open(temp, flags, 0o444)
        try:
            os.write(fd, zlib.compress(b"%s %d\0" % (kind, len(data)) + data, _LEVEL))
        finally:
            os.close(fd)
        os.rename(temp, final)

    def read(self, oid: str) -> tuple[bytes, bytes]:
        """(type, data) of an object; SandboxError when it is missing or damaged."""
        try:
            kind, data = self._read(oid)
        except (OSError, ValueError, zlib.error) as exc:
            raise SandboxError(f"checkpoint object {oid} cannot be read from {self.root}: {exc}; "
                               f"the checkpoint is damaged, restore an older one",
                               code="ACODE-SBX-018") from exc
        if hashlib.sha1(b"%s %d\0" % (kind, len(data)) + data).hexdigest() != oid:
            raise SandboxError(f"checkpoint object {oid} in {self.root} does not match its id; "
                               f"the checkpoint is damaged, restore an older one", code="ACODE-SBX-018")
        return kind, data

    def _read(self, oid: str) -> tuple[bytes, bytes]:
        try:
            with open(self.path(oid), "rb") as file:
                raw = zlib.decompress(file.read())
        except FileNotFoundError:
            self.refresh()
            for pack in self._packs:
                if oid in pack.offsets:
                    return pack.read(oid)
            raise
        nul = raw.index(b"\0")
        kind, _, size = raw[:nul].partition(b" ")
        if int(size) != len(raw) - nul - 1:
            raise ValueError(f"object {oid} has {len(raw) - nul - 1} bytes, its header says {int(size)}")
        return kind, raw[nul + 1:]

    def read_tree(self, oid: str) -> list[TreeEntry]:
        if oid == EMPTY_TREE:
            return []
        return list(_parse_tree(self.read(oid)[1]))

    def flatten(self, oid: str, prefix: bytes = b"") -> dict[bytes, tuple[bytes, str]]:
        """Every path of a tree (directories too, mode ``40000``), as file names: path -> (mode, id)."""
        found: dict[bytes, tuple[bytes, str]] = {}
        stack = [(prefix, oid)]
        while stack:
            base, tree = stack.pop()
            for mode, stored, child in self.read_tree(tree):
                name = unescape(stored)
                path = base + b"/" + name if base else name
                found[path] = (mode, child)
                if mode == DIR:
                    stack.append((path, child))
        return found

    def reachable(self, commits: Iterable[str]) -> set[str]:
        """Every object the commits reach (themselves, their trees, blobs)."""
        marked: set[str] = set()
        stack: list[tuple[bytes, str]] = [(b"commit", oid) for oid in commits]
        while stack:
            kind, oid = stack.pop()
            if oid in marked:
                continue
            marked.add(oid)
            if kind == b"commit":
                stack.append((b"tree", commit_tree(self.read(oid)[1])))
            elif kind == b"tree":
                stack.extend((b"tree" if mode == DIR else b"blob", child) for mode, _, child in self.read_tree(oid))
        return marked

    def every(self) -> Iterator[str]:
        """The id of every object in the store, loose or packed."""
        for fan in sorted(os.listdir(self.dir)):
            if len(fan) != 2:
                continue
            for name in os.listdir(os.path.join(self.dir, fan)):
                if len(name) == 38:
                    yield fan + name
        self.refresh()
        for pack in self._packs:
            yield from pack.offsets

    def repack(self, pending: list[tuple[str, bytes]]) -> int:
        """Move the loose objects ``pending`` names into one pack, each hinted one as a delta
        against the previous version of its hint in that pack; how many moved."""
        writer = PackWriter(self.pack_dir)
        newest: dict[bytes, tuple[str, bytes]] = {}  # hint -> (id, data) of its last version packed
        moved = []
        try:
            for oid, hint in pending:
                try:
                    with open(self.path(oid), "rb") as file:
                        raw = zlib.decompress(file.read())
                except FileNotFoundError:
                    continue  # packed already, or deleted by a gc
                nul = raw.index(b"\0")
                kind, data = raw[:nul].partition(b" ")[0], raw[nul + 1:]
                previous = newest.get(hint) if hint else None
                if previous is None:
                    writer.add(kind, data, oid)
                else:
                    writer.add_delta(kind, data, oid, previous[1], previous[0])
                if hint:
                    newest[hint] = (oid, data)
                moved.append(oid)
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        self.refresh()
        for oid in moved:
            os.unlink(self.path(oid))
        return len(moved)

    def prune(self, marked: set[str]) -> int:
        """Delete every object not in ``marked``: loose ones, and packs (a pack holding some
        marked objects is written again with those only); how many objects went."""
        deleted = 0
        for fan in sorted(os.listdir(self.dir)):
            if len(fan) != 2:
                continue
            for name in os.listdir(os.path.join(self.dir, fan)):
                if len(name) == 38 and fan + name not in marked:
                    os.unlink(os.path.join(self.dir, fan, name))
                    deleted += 1
                elif name.endswith(".tmp"):
                    os.unlink(os.path.join(self.dir, fan, name))  # left by a killed writer (the lock is held)
        self.refresh()
        for pack in self._packs:
            dropped = pack.offsets.keys() - marked
            if not dropped:
                continue
            if len(dropped) < len(pack.offsets):
                writer = PackWriter(self.pack_dir)
                for oid in pack.offsets:
                    if oid in marked:
                        writer.add(*pack.read(oid), oid)
                writer.finish()
            for extension in (".idx", ".pack"):
                os.unlink(pack.path + extension)
            deleted += len(dropped)
        for name in os.listdir(self.pack_dir):
            if name.startswith("tmp-"):
                os.unlink(os.path.join(self.pack_dir, name))
        self.refresh()
        return deleted


@contextlib.contextmanager
def locked(root: str) -> Iterator[None]:
    """Hold the store's lock (one take, restore or gc at a time; released if the holder dies)."""
    fd = os.open(os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def commit_tree(data: bytes) -> str:
    """The tree id of a commit object's data."""
    first = data.split(b"\n", 1)[0]
    if not first.startswith(b"tree "):
        raise SandboxError(f"checkpoint commit does not start with a tree line: {first[:60]!r}",
                           code="ACODE-SBX-018")
    return first[5:].decode("ascii")


def encode_commit(tree: str, seconds: int, message: str) -> bytes:
    who = b"acode <acode@localhost> %d +0000" % seconds
    return b"tree %s\nauthor %s\ncommitter %s\n\n%s\n" % (tree.encode(), who, who, message.encode())


def commit_message(data: bytes) -> str:
    return data.split(b"\n\n", 1)[1].decode() if b"\n\n" in data else ""
