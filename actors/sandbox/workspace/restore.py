"""Putting a workspace back as a checkpoint has it: planned, journaled, resumable after a kill.

:func:`plan` compares the workspace (walked as a take walks it, :mod:`actors.sandbox.workspace.scan`)
with a checkpoint's tree and answers what a restore would write and delete, changing
nothing. :func:`restore` makes the tree equal to the checkpoint's:

- files and symlinks that are missing or differ (content, or the executable bit) are
  written from the store into a temp file in their directory, then renamed over the
  path (a reader sees the old file or the new one, never half of one);
- files and symlinks the checkpoint does not have are deleted, except what the
  checkpoint never covered (directories in ``skip_dirs``, files over the size cap,
  acode's home), which stays as it is;
- directories the checkpoint has are made (empty ones too: ``.git/refs/tags``), and
  directories it does not have are removed once empty (one still holding what the
  restore leaves alone stays);
- the paths in ``leave`` (a path or a directory: what someone other than the session
  changed since) are not touched, and are listed in the plan.

Every directory is entered relative to its parent's fd with ``O_NOFOLLOW``, so a symlink
a command left where the checkpoint has a directory is replaced, never followed out of
the workspace. A path under :data:`~actors.sandbox.workspace.scan.GITDIRS` ``/<key>`` is
one of the git directories a linked worktree or submodule keeps outside the workspace:
it is entered from that directory (the checkpoint's :attr:`Scope.roots`, as it was
taken), and only what the checkpoint has of it is compared, so a git directory the
workspace points at now but did not then is left alone.

The journal. Before changing anything, :func:`restore` writes (temp, fsync, rename)
``<journal_dir>/restore.json``: the store, the workspace, the scope, the target and the
``leave`` list. A restore is a convergence, not a list of steps: each run compares the
tree as it is with the target, so :func:`resume` after a ``kill -9`` at any point (even
mid-write: a stray ``.acode-restore-*.tmp`` is just a file the checkpoint lacks) runs it
again and ends with the same tree; a second :func:`resume` finds no journal and does
nothing. The journal is removed when the tree is equal to the target.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

import msgspec

from actors.sandbox.workspace.objects import DIR, LINK, Objects, commit_tree, locked
from actors.sandbox.workspace.scan import GITDIRS, Cache, Scope, root_key, scan, virtual

__all__ = ["JOURNAL", "Plan", "Step", "plan", "restore", "resume"]

JOURNAL = "restore.json"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP = ".acode-restore-{pid}.tmp"
# What stops a write where the restore left something alone (a directory still holding a
# `leave` path, or a left file where the checkpoint has a directory): kept, not fatal, or
# the journal could never complete.
_BLOCKED = (errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ELOOP, errno.ENOTEMPTY)

Step = Callable[[str, str], None]  # (action: "write" | "delete", path), after each change


@dataclass
class Plan:
    """What a restore to ``target`` writes and deletes (workspace-relative paths, sorted),
    what it leaves alone though it differs (``left``), and, after a restore, what it could
    not change (``kept``: a path the checkpoint has, blocked by what the restore left alone)."""

    target: str
    write: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    _write: list[tuple[bytes, bytes, str]] = field(default_factory=list, repr=False)
    _delete: list[bytes] = field(default_factory=list, repr=False)
    _mkdir: list[bytes] = field(default_factory=list, repr=False)
    _rmdir: list[bytes] = field(default_factory=list, repr=False)

    @property
    def empty(self) -> bool:
        return not (self._write or self._delete or self._mkdir or self._rmdir)


class _Journal(msgspec.Struct, frozen=True, kw_only=True):
    store: str
    workspace: str
    target: str
    scope: Scope
    leave: list[str]


def _under(path: bytes, roots: frozenset[bytes]) -> bool:
    if not roots:
        return False
    while path:
        if path in roots:
            return True
        path = path.rpartition(b"/")[0]
    return False


def plan(objects: Objects, root: str, scope: Scope, target: str, *, leave: Collection[str] = (),
         cache: Cache | None = None) -> Plan:
    """What :func:`restore` would do now; changes nothing (``cache``: the store's stat cache, for speed)."""
    wanted = objects.flatten(commit_tree(objects.read(target)[1]))
    now = scan(root, scope, None, cache or Cache(), time.time_ns(), flat=True)
    kept = frozenset(os.fsencode(path.strip("/")) for path in leave)
    out = Plan(target)
    for path, (mode, oid) in sorted(wanted.items()):
        if mode == DIR:
            if path not in now.dirs and not _under(path, kept) and not virtual(path):
                out._mkdir.append(path)
        elif now.files.get(path) != (mode, oid):
            (out.left if _under(path, kept) else out.write).append(os.fsdecode(path))
            if not _under(path, kept):
                out._write.append((path, mode, oid))
    for path in sorted(now.files):
        entry = wanted.get(path)
        if entry is None or entry[0] == DIR:
            if _under(path, kept):
                if entry is None:
                    out.left.append(os.fsdecode(path))
            else:
                out.delete.append(os.fsdecode(path))
                out._delete.append(path)
    out._rmdir = sorted((d for d in now.dirs if wanted.get(d, (b"",))[0] != DIR and not _under(d, kept)),
                        key=lambda d: -d.count(b"/"))
    out.left.sort()
    return out


def restore(objects: Objects, root: str, scope: Scope, target: str, *, journal_dir: str,
            leave: Collection[str] = (), cache: Cache | None = None, on_step: Step | None = None) -> Plan:
    """Make the workspace at ``root`` equal to checkpoint ``target`` (see the module docstring).
    A journal left by an interrupted restore is replaced: the new restore converges on its own target."""
    journal = _Journal(store=objects.root, workspace=os.path.abspath(root), target=target, scope=scope,
                       leave=sorted(leave))
    _write_journal(journal_dir, journal)
    return _run(objects, journal, journal_dir, cache, on_step)


def resume(journal_dir: str, *, on_step: Step | None = None) -> Plan | None:
    """Complete the restore whose journal is in ``journal_dir``; None when there is none."""
    try:
        with open(os.path.join(journal_dir, JOURNAL), "rb") as file:
            journal = msgspec.json.decode(file.read(), type=_Journal)
    except FileNotFoundError:
        return None
    return _run(Objects(journal.store), journal, journal_dir, None, on_step)


def _run(objects: Objects, journal: _Journal, journal_dir: str, cache: Cache | None, on_step: Step | None) -> Plan:
    with locked(objects.root):
        todo = plan(objects, journal.workspace, journal.scope, journal.target, leave=journal.leave, cache=cache)
        _apply(objects, journal.workspace, journal.scope, todo, on_step)
    os.unlink(os.path.join(journal_dir, JOURNAL))
    return todo


def _write_journal(journal_dir: str, journal: _Journal) -> None:
    os.makedirs(journal_dir, mode=0o700, exist_ok=True)
    final = os.path.join(journal_dir, JOURNAL)
    temp = final + ".tmp"
    with open(temp, "wb") as file:
        file.write(msgspec.json.encode(journal))
        file.flush()
        os.fsync(file.fileno())
    os.rename(temp, final)
    fd = os.open(journal_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Dirs:
    """Directory fds of the workspace, each opened beneath the root without following a
    link; beneath ``<GITDIRS>/<key>``, beneath the git directory outside it that ``outside`` names."""

    def __init__(self, root_fd: int, outside: dict[bytes, str]):
        self.root = root_fd
        self.outside = outside
        self.open: tuple[bytes, int] | None = None

    def get(self, path: bytes, *, create: bool = False) -> int:
        if self.open is not None and self.open[0] == path:
            return self.open[1]
        self.close()
        parts = path.split(b"/") if path else []
        if parts[:1] == [GITDIRS]:
            fd, parts = self._outside(parts[1] if len(parts) > 1 else b"", create), parts[2:]
        else:
            fd = os.dup(self.root)
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        self.open = (path, fd)
        return fd

    def _outside(self, key: bytes, create: bool) -> int:
        where = self.outside.get(key)
        if where is None:  # not one of the checkpoint's git directories: nothing of it is restored
            raise FileNotFoundError(errno.ENOENT, "no git directory outside the workspace has this key", key)
        try:
            return os.open(where, _DIR_FLAGS)
        except FileNotFoundError:
            if not create:
                raise
            os.mkdir(where, 0o755)  # removed since (a pruned worktree's): made again as it was
            return os.open(where, _DIR_FLAGS)

    def close(self) -> None:
        if self.open is not None:
            os.close(self.open[1])
            self.open = None


@contextlib.contextmanager
def _dirs(root: str, outside: tuple[str, ...]) -> Iterator[_Dirs]:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    dirs = _Dirs(fd, {root_key(path): path for path in outside})
    try:
        yield dirs
    finally:
        dirs.close()
        os.close(fd)


def _apply(objects: Objects, root: str, scope: Scope, todo: Plan, on_step: Step | None) -> None:
    with _dirs(root, scope.roots) as dirs:
        for path in todo._delete:
            head, _, name = path.rpartition(b"/")
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                os.unlink(name, dir_fd=dirs.get(head))
            if on_step is not None:
                on_step("delete", os.fsdecode(path))
        for path in todo._rmdir:
            head, _, name = path.rpartition(b"/")
            try:
                os.rmdir(name, dir_fd=dirs.get(head))
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
        for path in todo._mkdir:
            try:
                dirs.get(path, create=True)
            except OSError as exc:
                if exc.errno not in _BLOCKED:
                    raise
                todo.kept.append(os.fsdecode(path))
        for path, mode, oid in todo._write:
            head, _, name = path.rpartition(b"/")
            try:
                _put(objects, dirs.get(head, create=True), name, mode, oid)
            except OSError as exc:
                if exc.errno not in _BLOCKED:
                    raise
                todo.kept.append(os.fsdecode(path))
                continue
            if on_step is not None:
                on_step("write", os.fsdecode(path))


def _put(objects: Objects, fd: int, name: bytes, mode: bytes, oid: str) -> None:
    data = objects.read(oid)[1]
    temp = _TEMP.format(pid=os.getpid()).encode()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp, dir_fd=fd)
    if mode == LINK:
        os.symlink(data, temp, dir_fd=fd)
    else:
        file = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o777 if mode == b"100755" else 0o666, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(file, view):]
        finally:
            os.close(file)
    try:
        os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        os.unlink(temp, dir_fd=fd)
        raise
