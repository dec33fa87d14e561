"""What a workspace snapshot sees: its regular files and symlinks, read without following a link.

Both kinds of baseline (:mod:`actors.sandbox.workspace.gitsnap`, :mod:`actors.sandbox.workspace.manifest`)
read the workspace through this module, so they agree on what a file is:

- a regular file, with git's two modes (``100755`` when the owner may execute it,
  otherwise ``100644``);
- a symlink (``120000``), recorded as its target text and never followed: its target
  may be outside the workspace, and a snapshot must not read or copy what is there;
- anything else (directories aside: they are the tree itself) is left out: FIFOs,
  sockets and devices are never opened.

Every entry is looked at with ``fstatat(AT_SYMLINK_NOFOLLOW)`` in a directory fd that
:class:`~actors.sandbox.confinement.confine.Workspace` resolved beneath the root, and a file is opened
relative to that fd with ``O_NOFOLLOW | O_NONBLOCK``, then checked with ``fstat``: a link
or a FIFO swapped in after the look is refused by the kernel, not followed or waited on.

:func:`walk` is the manifest's walk (``.gitignore`` rules from :mod:`actors.sandbox.workspace.ignore`,
``.git`` skipped, symlinked directories not entered); :func:`entries` serves the git
snapshot, whose paths come from ``git ls-files`` and are checked here before use. Both
leave out acode's home when the workspace holds it (:mod:`actors.sandbox.confinement.protected`).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from actors.sandbox.confinement import protected
from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.workspace import ignore
from protocol.errors import SandboxError

__all__ = ["CHUNK", "Entry", "entries", "is_binary", "open_file", "read_link", "walk"]

CHUNK = 1 << 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SNIFF = 8000  # git's own: a NUL byte in the first 8000 bytes makes a file binary


@dataclass(frozen=True)
class Entry:
    """One file or symlink of the workspace; ``dir_fd`` (its parent) is open while it is yielded."""

    path: str  # workspace-relative, "/"-separated
    dir_fd: int
    name: str
    mode: str  # "100644", "100755" or "120000"
    size: int

    @property
    def is_link(self) -> bool:
        return self.mode == "120000"


def _mode(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "120000"
    if stat.S_ISREG(info.st_mode):
        return "100755" if info.st_mode & stat.S_IXUSR else "100644"
    return None


def _entry(path: str, dir_fd: int, name: str) -> Entry | None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None  # gone since it was listed
    mode = _mode(info)
    return None if mode is None else Entry(path, dir_fd, name, mode, info.st_size)


def open_file(entry: Entry) -> int | None:
    """An fd of the regular file ``entry`` names, or None when it is no longer one."""
    try:
        fd = os.open(entry.name, _FILE_FLAGS, dir_fd=entry.dir_fd)
    except OSError:
        return None  # gone, or a link or special file swapped in
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def read_link(entry: Entry) -> bytes | None:
    try:
        return os.readlink(os.fsencode(entry.name), dir_fd=entry.dir_fd)
    except OSError:
        return None


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:_SNIFF]


def _skipped(path: str) -> bool:
    """A path no snapshot records: one naming git's directory, at any depth (a hostile
    index could list ``.git/config``), or one that is not a plain relative path."""
    if path.startswith("/") or posixpath.normpath(path) != path or path in ("", "."):
        return True
    parts = path.split("/")
    return parts[0] == ".." or any(protected.is_protected([part]) == ".git" for part in parts)


def entries(ws: Workspace, paths: Iterable[str]) -> Iterator[Entry]:
    """The files and symlinks among ``paths`` (workspace-relative, as git lists them), in
    the order given; each parent directory is resolved beneath the root once per run of
    paths that share it. Paths that are gone, special or unsafe are left out."""
    current: tuple[str, int] | None = None
    homes = protected.hidden_rels(ws)  # acode's home, when the workspace holds it: never snapshotted
    try:
        for path in paths:
            if _skipped(path) or any(path == home or path.startswith(home + "/") for home in homes):
                continue
            head, name = posixpath.split(path)
            head = head or "."
            if current is None or current[0] != head:
                if current is not None:
                    os.close(current[1])
                    current = None
                try:
                    current = (head, ws.open(head, os.O_RDONLY | os.O_DIRECTORY))
                except SandboxError:
                    continue  # gone, not a directory, or outside the workspace
            entry = _entry(path, current[1], name)
            if entry is not None:
                yield entry
    finally:
        if current is not None:
            os.close(current[1])


def walk(ws: Workspace, rules: ignore.Rules | None = None, *, nested_repos: bool = True,
         left_out: list[str] | None = None) -> Iterator[Entry]:
    """Every file and symlink of the workspace that its ``.gitignore`` files (or ``rules``,
    e.g. those a baseline recorded) do not ignore, depth first in name order; ``.git`` is
    skipped and symlinked directories are not entered, nor, without ``nested_repos``,
    directories holding a ``.git`` of their own (git lists them as one entry). Each path a
    rule ignores (a directory: not entered) is appended to ``left_out``."""
    fd = os.dup(ws.fd)
    try:
        yield from _walk(fd, ".", rules if rules is not None else ignore.Rules(), nested_repos, left_out,
                         protected.hidden_ids(ws))
    finally:
        os.close(fd)


def _walk(fd: int, rel: str, rules: ignore.Rules, nested_repos: bool = True,
          left_out: list[str] | None = None, skip: frozenset[tuple[int, int]] = frozenset()) -> Iterator[Entry]:
    rules = rules.below(fd, rel)
    with os.scandir(fd) as it:
        every = [e.name for e in it]
    if not nested_repos and rel != "." and ".git" in every:
        return
    names = sorted(name for name in every if name != ".git")  # as the tree tools skip it
    for name in names:
        path = name if rel == "." else f"{rel}/{name}"
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        is_dir = stat.S_ISDIR(info.st_mode)
        if is_dir and (info.st_dev, info.st_ino) in skip:
            continue  # acode's home
        if rules.ignored(path, is_dir):
            if left_out is not None:
                left_out.append(path)
            continue
        if is_dir:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # vanished or swapped for a link since it was seen
            try:
                yield from _walk(child, path, rules, nested_repos, left_out, skip)
            finally:
                os.close(child)
            continue
        mode = _mode(info)
        if mode is not None:
            yield Entry(path, fd, name, mode, info.st_size)
