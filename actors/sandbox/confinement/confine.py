"""Path confinement: every path the model names is resolved beneath the workspace root.

The model choosing paths is untrusted, so a path is checked twice:

1. lexically (:meth:`Workspace.relative`): no NUL byte, at most 4096 bytes, an absolute
   path must lie under the root (compared component by component, never with
   ``startswith``: a sibling ``/w-evil`` is not under ``/w``), and ``..`` may not climb
   above the root. The result is the normalized workspace-relative path results report.
2. by the kernel at open time, relative to an fd of the root, so nothing between the
   check and the open can change the answer. With ``openat2(2)`` and ``RESOLVE_BENEATH |
   RESOLVE_NO_MAGICLINKS`` (Linux 5.6+, called through ctypes) the kernel refuses any
   resolution that leaves the root, atomically: a symlink swapped in mid-call cannot
   leak. Where ``openat2`` is missing (old kernel, seccomp filter) a userspace walk does
   the same job component by component: each directory is opened with ``O_NOFOLLOW``
   relative to the fd of the one before, symlinks are read with ``readlinkat`` and
   expanded by hand, ``..`` pops the stack of fds and may not pop the root, and absolute
   symlink targets are refused, as ``RESOLVE_BENEATH`` refuses them.

Symlinks that stay inside the workspace work; absolute symlinks are refused even when
they point inside (the kernel's rule, kept by the walk so both methods agree).

Writers never open their target by path: :meth:`Workspace.open_parent` returns the
resolved parent directory's fd and a plain final name (a final symlink is followed,
confined, first), and the writer creates, renames and unlinks relative to that fd.
A writer may pass a :data:`Guard`: it is called with each resolved directory fd and the
name about to be created or replaced in it (before every ``mkdir`` of a missing parent,
and for the final target), so a policy such as :mod:`actors.sandbox.confinement.protected` judges
the location the kernel actually resolved, and refuses before anything is created.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import posixpath
import stat
import sys
from collections import deque
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Literal

from actors.private import workspace_mode
from protocol.errors import PathEscapeError, SandboxError

__all__ = ["MAX_PATH_BYTES", "Guard", "Method", "Workspace", "openat2_available", "quote"]

Method = Literal["openat2", "walk"]
#: ``guard(dir_fd, name)``: raise to refuse creating or replacing ``name`` in the resolved
#: directory ``dir_fd``.
Guard = Callable[[int, str], None]
MAX_PATH_BYTES = 4096
_MAX_LINKS = 40  # the kernel's own limit on symlinks followed in one resolution
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_openat2() -> Callable[[int, str, int], int] | None:
    """Return an ``openat2(dir_fd, path, flags)`` confined beneath ``dir_fd``, or None when
    this kernel (or a seccomp filter) does not offer it."""
    number = _SYS_OPENAT2.get(platform.machine())
    if number is None or not sys.platform.startswith("linux"):
        return None
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long

    def openat2(dir_fd: int, path: str, flags: int) -> int:
        how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        encoded = os.fsencode(path)
        for _ in range(16):  # EAGAIN: a concurrent rename made '..' ambiguous; the kernel asks to retry
            fd = syscall(ctypes.c_long(number), ctypes.c_int(dir_fd), ctypes.c_char_p(encoded),
                         ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
            if fd >= 0:
                return int(fd)
            err = ctypes.get_errno()
            if err not in (errno.EAGAIN, errno.EINTR):
                raise OSError(err, os.strerror(err), path)
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)

    probe = os.open("/", _DIR_FLAGS)
    try:
        os.close(openat2(probe, ".", _DIR_FLAGS))
    except OSError:
        return None
    finally:
        os.close(probe)
    return openat2


_OPENAT2 = _load_openat2()


def openat2_available() -> bool:
    return _OPENAT2 is not None


def quote(text: str, limit: int = 200) -> str:
    """``repr`` of a model-given string, shortened so a hostile one cannot flood a message."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _user_mode(name: str, dir_fd: int) -> None:
    """Give a directory we just made the mode the user's umask gives (ours is 077: actors.private)."""
    fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        os.fchmod(fd, workspace_mode(directory=True))
    finally:
        os.close(fd)


class Workspace:
    """An open workspace root; every tool path is resolved beneath its fd. ``close()`` twice is fine."""

    def __init__(self, root: str, *, method: Method | None = None, hidden: tuple[str, ...] = ()):
        if not os.path.isabs(root):
            raise SandboxError(f"workspace {quote(root)} is not an absolute path; the session must name "
                               "its workspace by absolute path", code="ACODE-SBX-004")
        self.root = os.path.normpath(root)
        #: absolute paths no tool may reach even inside the root (acode's home): the rule is
        #: :mod:`actors.sandbox.confinement.protected`'s, which every file and tree tool applies
        self.hidden = tuple(os.path.normpath(h) for h in hidden if os.path.isabs(h))
        try:
            self.fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            what = "does not exist" if exc.errno == errno.ENOENT else (
                "is not a directory" if exc.errno == errno.ENOTDIR else f"cannot be opened ({exc.strerror})")
            raise SandboxError(f"workspace {self.root} {what}; point the session at an existing directory",
                               code="ACODE-SBX-004") from exc
        self._roots: tuple[PurePosixPath, ...] | None = None  # made when an absolute path first arrives
        if method is None:
            method = "openat2" if _OPENAT2 is not None else "walk"
        if method == "openat2" and _OPENAT2 is None:
            os.close(self.fd)
            raise ValueError("openat2 is not available on this system; use method='walk'")
        self.method: Method = method
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.fd)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the lexical check ---------------------------------------------------------------

    def relative(self, path: str) -> str:
        """The normalized workspace-relative form of ``path`` ("." is the root), or PathEscapeError."""
        if "\0" in path:
            raise PathEscapeError(f"path {quote(path)} contains a NUL byte; remove it")
        size = len(path.encode("utf-8", "surrogatepass"))
        if size > MAX_PATH_BYTES:
            raise PathEscapeError(f"path {quote(path, 60)} is {size} bytes long, over the "
                                  f"{MAX_PATH_BYTES}-byte limit; use a shorter path")
        normal = posixpath.normpath(path)
        if normal.startswith("/"):
            pure = PurePosixPath(normal)
            for root in self._absolute_roots():
                if pure.is_relative_to(root):
                    return str(pure.relative_to(root))
            raise self._escape(path)
        if normal == ".." or normal.startswith("../"):
            raise self._escape(path)
        return normal

    def _absolute_roots(self) -> tuple[PurePosixPath, ...]:
        """The root as named and as resolved: an absolute path under either is inside. Made
        when first needed (most calls name relative paths, and ``realpath`` costs a
        ``lstat`` per component)."""
        if self._roots is None:
            self._roots = tuple(dict.fromkeys((PurePosixPath(self.root), PurePosixPath(os.path.realpath(self.root)))))
        return self._roots

    def _escape(self, path: str) -> PathEscapeError:
        return PathEscapeError(f"path {quote(path)} resolves outside the workspace {self.root}; "
                               "use a path inside the workspace")

    # -- resolution ----------------------------------------------------------------------

    def open(self, path: str, flags: int = os.O_RDONLY) -> int:
        """An fd for ``path`` opened with ``flags``; symlinks are followed only while they
        stay inside. The caller owns (and closes) the fd."""
        rel = self.relative(path)
        try:
            return self._open(rel, flags)
        except OSError as exc:
            raise self.error(exc, path) from exc

    def open_parent(self, path: str, *, create: bool = False,
                    guard: Guard | None = None) -> tuple[int, str, str]:
        """``(dir_fd, name, rel)`` for writing ``path``: the resolved parent directory, a
        plain name in it (not a symlink when this returns) and the workspace-relative
        path. ``create`` makes missing parents, inside the workspace only; ``guard`` is
        asked before each of them is made and about the final ``(dir_fd, name)``."""
        rel = self.relative(path)
        if rel == ".":
            raise SandboxError(f"path {quote(path)} is the workspace root itself; name a file inside it",
                               code="ACODE-SBX-004")
        target = rel
        try:
            for _ in range(_MAX_LINKS + 1):
                head, name = posixpath.split(target)
                if name in ("", ".", ".."):
                    raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), target)
                try:
                    dir_fd = self._dirs(head, guard) if create else self._open(head or ".", _DIR_FLAGS)
                except FileNotFoundError:
                    if guard is not None:
                        self._guard_missing(head, guard)  # a refusal says more than "missing"
                    raise
                try:
                    try:
                        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        info = None
                    if info is None or not stat.S_ISLNK(info.st_mode):
                        if guard is not None:
                            guard(dir_fd, name)
                        return dir_fd, name, rel
                    link = os.readlink(name, dir_fd=dir_fd)
                except BaseException:
                    os.close(dir_fd)
                    raise
                os.close(dir_fd)
                if link.startswith("/"):
                    raise OSError(errno.EXDEV, "absolute symlink", target)
                target = posixpath.join(head, link)  # not normalized: the kernel resolves 'x/..'
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
        except OSError as exc:
            raise self.error(exc, path) from exc

    def makedirs(self, path: str, *, guard: Guard | None = None) -> tuple[bool, str]:
        """Create ``path`` and its missing parents; ``(created, rel)``. Resolved as
        :meth:`open_parent` resolves a write (a final symlink inside is followed), so
        ``guard`` is asked before each directory is made, and about the final one even
        when it exists."""
        rel = self.relative(path)
        if rel == ".":
            return False, rel
        dir_fd, name, _ = self.open_parent(path, create=True, guard=guard)
        try:
            try:
                os.mkdir(name, 0o777, dir_fd=dir_fd)  # never follows: a link swapped in stays EEXIST
                _user_mode(name, dir_fd)
                return True, rel
            except FileExistsError:
                os.close(os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd))  # a directory, or ENOTDIR
                return False, rel
        except OSError as exc:
            raise self.error(exc, path) from exc
        finally:
            os.close(dir_fd)

    def _guard_missing(self, head: str, guard: Guard) -> None:
        """Show ``guard`` the deepest existing directory on the way to missing ``head``
        and the first name missing in it."""
        parts = head.split("/")
        for cut in range(len(parts) - 1, -1, -1):
            try:
                fd = self._open("/".join(parts[:cut]) or ".", _DIR_FLAGS)
            except OSError:
                continue
            try:
                guard(fd, parts[cut])
            finally:
                os.close(fd)
            return

    def _open(self, rel: str, flags: int) -> int:
        if self.method == "openat2":
            assert _OPENAT2 is not None
            return _OPENAT2(self.fd, rel, flags)
        return self._walk(rel, flags)

    def _dirs(self, rel: str, guard: Guard | None = None) -> int:
        """Open directory ``rel``, creating each missing component in its resolved parent
        (each one first shown to ``guard``)."""
        fd = os.dup(self.fd)
        prefix = ""
        try:
            for part in (p for p in rel.split("/") if p not in ("", ".")):
                prefix = f"{prefix}/{part}" if prefix else part
                try:
                    child = self._open(prefix, _DIR_FLAGS)
                except FileNotFoundError:
                    if guard is not None:
                        guard(fd, part)
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)  # never follows: a dangling link stays EEXIST
                        _user_mode(part, fd)
                    except FileExistsError:
                        pass
                    child = self._open(prefix, _DIR_FLAGS)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _walk(self, rel: str, flags: int) -> int:
        """``RESOLVE_BENEATH`` in userspace: one ``O_NOFOLLOW`` open per component."""
        stack = [self.fd]
        parts = deque(p for p in rel.split("/") if p not in ("", "."))
        links = 0
        try:
            while parts:
                part = parts.popleft()
                if part == "..":
                    if len(stack) == 1:
                        raise OSError(errno.EXDEV, "'..' leaves the workspace", rel)
                    os.close(stack.pop())
                    continue
                last = not parts
                want = (flags if last else _DIR_FLAGS) | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    fd = os.open(part, want, dir_fd=stack[-1])
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    try:
                        link = os.readlink(part, dir_fd=stack[-1])
                    except OSError:
                        raise exc from None  # not a symlink: the open's own error stands
                    links += 1
                    if link.startswith("/"):
                        raise OSError(errno.EXDEV, "absolute symlink", rel) from None
                    if links > _MAX_LINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel) from None
                    parts.extendleft(reversed([p for p in link.split("/") if p not in ("", ".")]))
                    continue
                if last:
                    return fd
                stack.append(fd)
            return os.open(".", flags | os.O_CLOEXEC, dir_fd=stack[-1])
        finally:
            for fd in stack[1:]:
                os.close(fd)

    # -- errors --------------------------------------------------------------------------

    def error(self, exc: OSError, path: str) -> SandboxError:
        """The tool-level error for an OSError met while resolving or using ``path``."""
        shown = quote(path)
        match exc.errno:
            case errno.EXDEV:
                return self._escape(path)
            case errno.ELOOP:
                return PathEscapeError(f"path {shown} goes through too many symlinks or a /proc magic "
                                       f"link in the workspace {self.root}; use the real path")
            case errno.ENOENT:
                return SandboxError(f"path {shown} does not exist in the workspace {self.root}; check the "
                                    "name with list_directory", code="ACODE-SBX-003")
            case errno.ENOTDIR:
                return SandboxError(f"path {shown} (or a directory on its way) is not a directory in the "
                                    f"workspace {self.root}", code="ACODE-SBX-004")
            case errno.EISDIR:
                return SandboxError(f"path {shown} is a directory; name a file", code="ACODE-SBX-004")
            case errno.ENXIO:
                return SandboxError(f"path {shown} is a socket; only regular files can be read or edited",
                                    code="ACODE-SBX-004")
            case errno.ENAMETOOLONG:
                return PathEscapeError(f"path {shown} has a component too long for the file system; "
                                       "use shorter names")
            case _:
                return SandboxError(f"path {shown} could not be used in the workspace {self.root}: "
                                    f"{exc.strerror or exc}", code="ACODE-EXEC-002")
