"""Compare-and-restore: the protected paths of :mod:`actors.sandbox.confinement.sealed` around one command.

Under every isolation level (bubblewrap too, as defence in depth) the sandbox takes a
:class:`Tripwire` before a command starts and calls :meth:`Tripwire.check` after it has
ended. The record is exact and bounded: each protected file's bytes and mode, each
protected directory's whole tree (names, modes, bytes, symlink targets), and the identity
of each git directory (held open, so a moved one can be found again). Everything is read
through directory fds without following a symlink (``O_NOFOLLOW`` at every step from the
workspace root or the git directory), so a command that swaps a directory for a symlink
to /etc is recorded as the symlink it made, never as what it points at.

After the command, a difference is undone, exactly: a git directory moved away is moved
back (whatever took its name goes), an added entry is removed, a changed or vanished one
is written back with its bytes and mode, a symlink swapped in is replaced by what was
there. The index's gitlinks are watched too: a nested repository newly staged (``git add``
of a directory holding a ``.git``), or one made beneath an existing gitlink, would have
the user's ``git status`` run *its* config, so the index is put back as it was (git
replaces it by a rename, so the old one, held open, is still there) or the new ``.git``
removed. An empty protected directory counts as a missing one (bubblewrap leaves empty
mount points; git and acode read both alike). :meth:`Tripwire.check` returns what
changed, what was restored and what could not be (a file over :data:`MAX_FILE_BYTES`,
beyond :data:`MAX_TOTAL_BYTES` or :data:`MAX_ENTRIES`, is compared by its digest only;
a git directory that was deleted is gone), for the ACODE-SBX-021 message
(:func:`error`): the tool result fails and the session pauses.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field

from actors.sandbox.confinement import gitindex
from actors.sandbox.confinement.confine import quote
from actors.sandbox.confinement.sealed import Sealed, index_links
from actors.sandbox.confinement.visible import inside
from protocol.errors import ErrorInfo

__all__ = ["CODE", "MAX_ENTRIES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "Report", "Tripwire", "error"]

CODE = "ACODE-SBX-021"
MAX_FILE_BYTES = 1 << 20  # kept to restore; a larger file is compared by digest only
MAX_TOTAL_BYTES = 16 << 20
MAX_ENTRIES = 4096
_MAX_DEPTH = 8
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class _File:
    mode: int
    digest: bytes
    data: bytes | None  # None: over the bounds, compared by digest only


@dataclass(frozen=True)
class _Link:
    target: str


@dataclass(frozen=True)
class _Dir:
    mode: int
    children: dict[str, _Node]


@dataclass(frozen=True)
class _Other:
    kind: int  # a FIFO, socket or device node: compared, never recreated


_Node = _File | _Link | _Dir | _Other | None


@dataclass
class _Budget:
    entries: int = MAX_ENTRIES
    bytes: int = MAX_TOTAL_BYTES


@dataclass
class Report:
    """What one command changed among the protected paths."""

    changed: list[str] = field(default_factory=list)  # "'.git/config' changed", ...
    unrestored: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed)


def _read(dir_fd: int, name: str, budget: _Budget, depth: int = 0) -> _Node:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    budget.entries -= 1
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return _Link(os.readlink(name, dir_fd=dir_fd))
    if stat.S_ISREG(info.st_mode):
        fd = os.open(name, _FILE, dir_fd=dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
                return _Other(stat.S_IFMT(os.fstat(fd).st_mode))
            return _contents(fd, mode, budget)
        finally:
            os.close(fd)
    if stat.S_ISDIR(info.st_mode):
        fd = os.open(name, _DIR, dir_fd=dir_fd)
        try:
            children: dict[str, _Node] = {}
            if depth < _MAX_DEPTH:
                for child in sorted(os.listdir(fd)):
                    if budget.entries <= 0:
                        children[child] = _Other(0)  # beyond the bound: its presence is all we know
                        continue
                    children[child] = _read(fd, child, budget, depth + 1)
            return _Dir(stat.S_IMODE(os.fstat(fd).st_mode), children)
        finally:
            os.close(fd)
    return _Other(stat.S_IFMT(info.st_mode))


def _contents(fd: int, mode: int, budget: _Budget) -> _File:
    digest = hashlib.sha256()
    kept = bytearray()
    keep = True
    while chunk := os.read(fd, 1 << 16):
        digest.update(chunk)
        if keep:
            kept += chunk
            if len(kept) > min(MAX_FILE_BYTES, budget.bytes):
                keep = False
                kept.clear()
    if keep:
        budget.bytes -= len(kept)
    return _File(mode, digest.digest(), bytes(kept) if keep else None)


def _empty(node: _Node) -> bool:
    return node is None or (isinstance(node, _Dir) and not node.children)


def _same(a: _Node, b: _Node) -> bool:
    if isinstance(a, _File) and isinstance(b, _File):
        return a.mode == b.mode and a.digest == b.digest
    return a == b


def _open_dir(base: str, parts: list[str]) -> int | None:
    """``base``/``parts`` as a directory fd, no component a symlink; None when it is not one."""
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    for part in parts:
        try:
            child = os.open(part, _DIR, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = child
    return fd


class Tripwire:
    """The protected paths' state before one command; :meth:`check` after it (once)."""

    def __init__(self, sealed: Sealed):
        self.sealed = sealed
        self._anchors: dict[str, tuple[int, int, int]] = {}  # git dir -> (fd held open, dev, ino)
        self._before: dict[str, _Node] = {}
        self._unreadable: set[str] = set()
        self._index: int | None = None  # the index as it was, held open: git replaces it by a rename
        self._links: dict[str, int | None] = {}  # its gitlinks -> what their .git was
        budget = _Budget()
        try:
            if sealed.index:
                with contextlib.suppress(OSError):
                    self._index = os.open(sealed.index, _FILE)
                self._links = self._gitlinks(self._index)
            for gitdir in sealed.gitdirs:
                try:
                    fd = os.open(gitdir, _DIR)
                except OSError:
                    continue
                info = os.fstat(fd)
                self._anchors[gitdir] = (fd, info.st_dev, info.st_ino)
            for path in (*sealed.files, *sealed.dirs):
                self._before[path] = self._state(path, budget)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        anchors, self._anchors = self._anchors, {}
        for fd, _, _ in anchors.values():
            os.close(fd)
        index, self._index = self._index, None
        if index is not None:
            os.close(index)

    def _gitlinks(self, fd: int | None) -> dict[str, int | None]:
        """The index's gitlinks (``fd``: the index open), each with the kind of its ``.git``."""
        if fd is None:
            return {}
        links = index_links(self.sealed.index, hash_bytes=self.sealed.hash_bytes, fd=fd) or []
        return {link: _kind(os.path.join(self.sealed.root, link, ".git")) for link in links}

    def _check_index(self, report: Report) -> None:
        """A gitlink staged over a nested repository, or a repository made beneath an existing
        gitlink, would have the user's git status run that repository's config: undone."""
        try:
            fd: int | None = os.open(self.sealed.index, _FILE)
        except OSError:
            fd = None
        try:
            now = self._gitlinks(fd)
        finally:
            if fd is not None:
                os.close(fd)
        added = [link for link, kind in now.items() if link not in self._links and kind is not None]
        for link in added:
            report.changed.append(f"{quote(link)} staged as a nested repository (git would run its config)")
        if added:
            self._restore_index(report)
        for link, kind in now.items():
            if link in self._links and self._links[link] is None and kind is not None:
                shown = f"{link}/.git"
                report.changed.append(f"{quote(shown)} added beneath a gitlink")
                try:
                    _remove_path(os.path.join(self.sealed.root, shown))
                except OSError as exc:
                    report.unrestored.append(f"{quote(shown)} ({exc.strerror})")

    def _restore_index(self, report: Report) -> None:
        index, shown = self.sealed.index, self.sealed.shown(self.sealed.index)
        data = gitindex.read_fd(self._index) if self._index is not None else None
        try:
            current = os.stat(index, follow_symlinks=False)
            same = self._index is not None and os.fstat(self._index).st_ino == current.st_ino
        except OSError:
            same = False
        if data is None or same:  # rewritten in place: what it was is gone
            report.unrestored.append(f"{quote(shown)} (unstage the nested repository: git rm --cached PATH)")
            return
        temporary = f"{index}.acode-restore"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, index)
        except OSError as exc:
            report.unrestored.append(f"{quote(shown)} ({exc.strerror})")

    def _base(self, path: str) -> tuple[str, list[str]]:
        """Where a no-follow walk to ``path`` starts (the workspace root, or the git directory
        outside it that holds it) and the components from there to its parent."""
        bases = [self.sealed.root, *(d for d in self.sealed.gitdirs if not inside(d, self.sealed.root))]
        base = max((b for b in bases if inside(path, b) and path != b), key=len, default=os.path.dirname(path))
        parts = os.path.relpath(os.path.dirname(path), base).split("/")
        return base, [p for p in parts if p not in ("", ".")]

    def _state(self, path: str, budget: _Budget) -> _Node:
        base, parts = self._base(path)
        fd = _open_dir(base, parts)
        if fd is None:
            return None  # a parent is missing (or is not a directory: the anchors say so)
        try:
            return _read(fd, os.path.basename(path), budget)
        except OSError:
            self._unreadable.add(path)
            return None
        finally:
            os.close(fd)

    def check(self) -> Report:
        """Compare with the record; undo every difference; what changed and what could not be undone."""
        report = Report()
        try:
            lost = [gitdir for gitdir, (fd, dev, ino) in self._anchors.items()
                    if not self._anchor(gitdir, fd, dev, ino, report)]
            budget = _Budget()
            for path, before in self._before.items():
                if any(inside(path, gitdir) for gitdir in lost):
                    continue  # gone with its git directory, which the report names
                after = self._state(path, budget)
                is_dir = path in self.sealed.dirs
                if _same(before, after) or (is_dir and _empty(before) and _empty(after)):
                    continue
                shown = self.sealed.shown(path)
                _describe(shown, before, after, report.changed)
                self._restore(path, before, after, shown, report)
            if self.sealed.index and not lost:
                self._check_index(report)
        finally:
            self.close()
        return report

    def _anchor(self, gitdir: str, fd: int, dev: int, ino: int, report: Report) -> bool:
        """Whether the git directory is (again) where it was: moved back if it was moved."""
        shown = self.sealed.shown(gitdir)
        try:
            info = os.lstat(gitdir)
            if stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) == (dev, ino):
                return True
        except FileNotFoundError:
            pass
        report.changed.append(f"{quote(shown)} moved, removed or replaced")
        try:
            now = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            now = ""
        if not now.startswith("/") or now.endswith(" (deleted)"):
            report.unrestored.append(f"{quote(shown)} (deleted)")
            return False
        try:
            _remove_path(gitdir)
            os.rename(now, gitdir)
        except OSError as exc:
            report.unrestored.append(f"{quote(shown)} (it is now at {now}: {exc.strerror})")
            return False
        return True

    def _restore(self, path: str, before: _Node, after: _Node, shown: str, report: Report) -> None:
        base, parts = self._base(path)
        fd = _open_dir(base, parts)
        if fd is None:
            report.unrestored.append(f"{quote(shown)} (its directory is gone)")
            return
        try:
            _put(fd, os.path.basename(path), before, after, shown, report)
        except OSError as exc:
            report.unrestored.append(f"{quote(shown)} ({exc.strerror or exc})")
        finally:
            os.close(fd)


def _describe(shown: str, before: _Node, after: _Node, out: list[str]) -> None:
    """One phrase per changed path: added, removed, changed, replaced by a symlink, ..."""
    if isinstance(before, _Dir) and isinstance(after, _Dir):
        if before.mode != after.mode:
            out.append(f"{quote(shown)} mode changed")
        for name in sorted(set(before.children) | set(after.children)):
            a, b = before.children.get(name), after.children.get(name)
            if not _same(a, b):
                _describe(f"{shown}/{name}", a, b, out)
        return
    if before is None or _empty(before) and isinstance(after, _Dir):
        if isinstance(after, _Dir):
            for name in sorted(after.children):
                out.append(f"{quote(shown + '/' + name)} added")
        else:
            out.append(f"{quote(shown)} added")
    elif after is None:
        out.append(f"{quote(shown)} removed")
    elif isinstance(after, _Link):
        out.append(f"{quote(shown)} replaced by a symlink to {quote(after.target, 80)}")
    elif type(before) is type(after):
        out.append(f"{quote(shown)} changed")
    else:
        out.append(f"{quote(shown)} replaced")


def _kind(path: str) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except OSError:
        return None


def _remove(dir_fd: int, name: str) -> None:
    """Remove ``name`` in ``dir_fd``, a whole tree if it is a directory; never follows a symlink."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _remove_path(path: str) -> None:
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _remove(fd, os.path.basename(path))
    finally:
        os.close(fd)


def _put(dir_fd: int, name: str, before: _Node, after: _Node, shown: str, report: Report) -> None:
    """Make ``name`` in ``dir_fd`` what ``before`` recorded (it is ``after`` now)."""
    if _same(before, after):
        return
    if isinstance(before, _Dir) and isinstance(after, _Dir):
        fd = os.open(name, _DIR, dir_fd=dir_fd)
        try:
            for child in after.children:
                if child not in before.children:
                    _remove(fd, child)
            for child, was in before.children.items():
                _put(fd, child, was, after.children.get(child), f"{shown}/{child}", report)
            if stat.S_IMODE(os.fstat(fd).st_mode) != before.mode:
                os.fchmod(fd, before.mode)
        finally:
            os.close(fd)
        return
    if before is None and isinstance(after, _Dir):
        _remove(dir_fd, name)
        return
    if isinstance(before, _File) and before.data is None or isinstance(before, _Other):
        report.unrestored.append(f"{quote(shown)} (too large to keep, or not a file)")
        return
    _remove(dir_fd, name)
    match before:
        case None:
            pass
        case _Link(target=target):
            os.symlink(target, name, dir_fd=dir_fd)
        case _File(mode=mode, data=data):
            assert data is not None
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dir_fd)
            try:
                _write_all(fd, data)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        case _Dir(mode=mode, children=children):
            os.mkdir(name, 0o700, dir_fd=dir_fd)
            fd = os.open(name, _DIR, dir_fd=dir_fd)
            try:
                for child, was in children.items():
                    _put(fd, child, was, None, f"{shown}/{child}", report)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def error(command: str, report: Report) -> ErrorInfo:
    """The ACODE-SBX-021 error for a command that changed protected paths."""
    shown = ", ".join(report.changed[:12]) + (f" and {len(report.changed) - 12} more" if len(report.changed) > 12
                                              else "")
    restored = ("they were restored as they were before it ran" if not report.unrestored else
                f"the sandbox restored what it could, but NOT {', '.join(report.unrestored[:6])}: put that back by "
                "hand (from a backup or a clone) before running git in the workspace")
    return ErrorInfo(code=CODE, message=(
        f"command {quote(command)} changed protected paths: {shown}. Commands may not change git's configuration "
        "and hooks or acode's (they would run code outside the sandbox), so " + restored + "; the session pauses: "
        "look at what the command did (acode show), then acode resume or acode cancel"))

