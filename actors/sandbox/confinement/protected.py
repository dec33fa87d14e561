"""Protected paths: the file tools never write into ``.git`` or acode's own ``.agent``,
and never reach acode's home at all.

A write target (write_file, modify_file, create_directory) is *protected*, and refused
with ACODE-SBX-013 whether it exists or not, when its location relative to the
workspace root has

- a component that names git's directory (``.git``, at any depth, the entry itself
  included): hooks and ``config`` (``core.fsmonitor``, ``core.sshCommand``, filters,
  aliases) run code the next time anyone runs git, so a write there is code execution;
- ``.agent`` as its first component: acode's own configuration, which the model must
  not rewrite to change the rules it runs under.

Reading stays allowed: a model may look at ``.git/HEAD`` or ``.agent/config.yml``.

acode's home (``ACODE_HOME``, default ``~/.acode``: the user's config and trust store, the
database, logs, baselines) is the sandbox's :attr:`Workspace.hidden
<actors.sandbox.confinement.confine.Workspace.hidden>`. When a workspace contains it (``acode run -w
~``), every file tool refuses it with ACODE-SBX-013 — reads too (:func:`open_for_read`),
since the database holds every session's events — on the path as given
(:func:`check_write`, :func:`open_for_read`) and on the kernel-resolved location (the
write :func:`guard`; for reads the opened fd's ``/proc`` name), so a symlink inside the
workspace pointing at the home gets no further than the home's own path. The tree tools
skip it (:func:`hidden_ids`), and so do the session's baseline snapshots
(:mod:`actors.sandbox.workspace.snapshot`, :func:`hidden_rels`), whose diff the reviewer reads.
Commands see the home masked (:mod:`actors.sandbox.confinement.visible`).

Which names count. Linux is case-sensitive, so ``.GIT`` is not git's directory on ext4,
but a workspace may be (or contain) a case-insensitive mount — vfat, exFAT, ntfs3, CIFS,
HFS+, an ext4 ``+F`` casefold directory — where ``.GIT``/``.Git`` *is* ``.git``. The rule
therefore follows git's own ``verify_path`` (CVE-2014-9390): a name is git's directory
when, after dropping the code points HFS+ ignores (zero-width joiners, bidi marks,
U+FEFF; and, stricter than git, the invisible U+200B and U+2060) and the trailing dots
and spaces NTFS drops, it casefolds to ``.git``, or to
``git~1`` (the NTFS 8.3 short name). ``.agent`` is compared the same way. Refusing these
costs nothing legitimate. Other Unicode tricks (NFC vs NFD, full-width dots) are
different names on every file system Linux mounts, so they are not folded.

How the resolved location is known. The path the model gives is checked lexically first
(after ``normpath``: ``a/../.git/config`` and ``./.git//config`` are caught here, with a
clear message, before any parent directory is created). That is not enough: a symlink
``x -> .git`` makes ``x/hooks/pre-commit`` land in ``.git``. So the rule is applied again
to what the kernel resolved: :func:`guard` is a :data:`~actors.sandbox.confinement.confine.Guard`
that :class:`~actors.sandbox.confinement.confine.Workspace` calls with the resolved directory fd and
the name about to be created or replaced (for every missing parent before its ``mkdir``,
and for the final target). The fd's location is read from ``/proc/self/fd/<fd>``: the
kernel's own name for that open directory — whatever symlinks, ``..`` or bind mounts led
there — compared component by component with the root fd's own ``/proc`` name. The
alternative, comparing ``(st_dev, st_ino)`` of the fd and its ``..`` ancestors with the
inodes of the workspace's ``.git`` and ``.agent``, only knows directories that exist
when the check runs and only those two; the rule covers every ``.git`` at any depth
(nested repositories, submodules, one a symlink makes), which needs names, and walking
``..`` to recover names costs a directory scan per level. ``/proc`` is already a hard
dependency of acode (psutil reads it). When the name cannot be read or does not lie
under the root (``/proc`` not mounted, the workspace renamed mid-call), the write fails
closed with ACODE-EXEC-002. The fd is the one the write then uses, so the answer is about
the directory written into, not a name that could change afterwards.
"""

from __future__ import annotations

import os
import posixpath

from actors.sandbox.confinement.confine import Guard, Workspace, quote
from protocol.errors import SandboxError

__all__ = ["check", "check_write", "guard", "hidden_ids", "hidden_rels", "is_protected", "open_for_read"]

# What HFS+ ignores when it compares names (git's is_hfs_dotgit list), plus two more
# invisible ones (ZERO WIDTH SPACE, WORD JOINER): a name that reads ".git" is refused.
_IGNORABLE = dict.fromkeys(
    [0x200B, 0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), 0x2060, *range(0x206A, 0x2070), 0xFEFF])


def _folded(name: str) -> str:
    return name.translate(_IGNORABLE).rstrip(". ").casefold()


def _is_git(name: str) -> bool:
    return _folded(name) in (".git", "git~1")


def is_protected(parts: list[str]) -> str | None:
    """Which rule the workspace-relative components ``parts`` fall under: ``".git"``,
    ``".agent"`` or None."""
    if any(_is_git(part) for part in parts):
        return ".git"
    if parts and _folded(parts[0]) == ".agent":
        return ".agent"
    return None


def _refusal(path: str, rule: str, where: str) -> SandboxError:
    resolved = "" if where == posixpath.normpath(path) else f" (it resolves to {quote(where)})"
    if rule == ".git":
        why = ("is inside git's .git directory, whose hooks and config run code; the file tools do not write "
               "there (reading is allowed); change the work tree instead, and leave git's state to git")
    else:
        why = ("is inside .agent, acode's own configuration, which the model may not change; ask the user to "
               "edit it if it must change")
    return SandboxError(f"path {quote(path)}{resolved} {why}", code="ACODE-SBX-013")


def check(rel: str, path: str) -> None:
    """The lexical rule on a normalized workspace-relative path (``"."`` is the root)."""
    parts = [] if rel == "." else rel.split("/")
    rule = is_protected(parts)
    if rule is not None:
        raise _refusal(path, rule, rel)


def _location(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _homes(ws: Workspace) -> list[tuple[str, str]]:
    """``(as named, a location)``: acode's home (and its socket directory) as named and as
    the kernel resolves it. A workspace strictly inside the home (``-w ~/.acode/project``)
    keeps its own files, as commands do (:mod:`actors.sandbox.tools.terminal`): the home's own
    files lie outside it, where confinement already keeps every tool."""
    roots = {ws.root, os.path.realpath(ws.root)}
    found = [(h, p) for h in ws.hidden for p in (h, os.path.realpath(h))]
    return list(dict.fromkeys((h, p) for h, p in found if not any(r != p and _inside(r, p) for r in roots)))


def _home_refusal(path: str, home: str, where: str = "") -> SandboxError:
    resolved = f" (it resolves to {quote(where)})" if where and where != path else ""
    return SandboxError(f"path {quote(path)}{resolved} is inside acode's home {home} (acode's own configuration, "
                        "database and logs), which the file tools never read or write; work on the project's "
                        "files, or run acode on a workspace that does not contain its home", code="ACODE-SBX-013")


def _check_home(ws: Workspace, rel: str, path: str) -> None:
    """The path as given, made absolute under the root as named and as resolved."""
    homes = _homes(ws)
    if not homes:
        return
    for root in dict.fromkeys((ws.root, os.path.realpath(ws.root))):
        where = posixpath.normpath(posixpath.join(root, rel))
        for named, home in homes:
            if _inside(where, home):
                raise _home_refusal(path, named, where)


def check_write(ws: Workspace, path: str) -> None:
    """:func:`check` and the home rule on the path as given, before anything is resolved."""
    rel = ws.relative(path)
    check(rel, path)
    _check_home(ws, rel, path)


def open_for_read(ws: Workspace, path: str, flags: int) -> int:
    """``ws.open`` for a reading tool, refusing acode's home on the path as given and on
    where the kernel opened it (whatever symlinks led there)."""
    _check_home(ws, ws.relative(path), path)
    try:
        fd = ws.open(path, flags)
    except SandboxError:
        if ws.hidden:  # "missing", "not a directory", ...: not even that is told about the home
            _check_nearest(ws, ws.relative(path), path)
        raise
    if ws.hidden:
        _check_opened(ws, fd, path)
    return fd


def _check_nearest(ws: Workspace, rel: str, path: str) -> None:
    """The home rule on the deepest part of ``rel`` that opens (a read that failed)."""
    parts = [] if rel == "." else rel.split("/")
    for cut in range(len(parts), -1, -1):
        try:
            # as read_file opens (O_PATH would open a final symlink itself under the walk method)
            fd = ws.open("/".join(parts[:cut]) or ".", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except (SandboxError, OSError):
            continue
        _check_opened(ws, fd, path)
        os.close(fd)
        return


def _check_opened(ws: Workspace, fd: int, path: str) -> None:
    """Closes ``fd`` and refuses when the kernel opened it inside acode's home."""
    try:
        where = _location(fd)
        home = next((named for named, h in _homes(ws) if _inside(where, h)), None)
    except OSError as exc:
        os.close(fd)
        raise SandboxError(f"cannot tell where {quote(path)} resolves ({exc.strerror} reading /proc/self/fd); "
                           "reads are refused until /proc is available", code="ACODE-EXEC-002") from exc
    if home is not None:
        os.close(fd)
        raise _home_refusal(path, home, where)


def hidden_rels(ws: Workspace) -> tuple[str, ...]:
    """acode's home as workspace-relative paths, where it lies inside the root (a snapshot
    leaves those paths out, as git lists them)."""
    rels: dict[str, None] = {}
    for root in dict.fromkeys((ws.root, os.path.realpath(ws.root))):
        for _, home in _homes(ws):
            if home != root and _inside(home, root):
                rels[posixpath.relpath(home, root)] = None
    return tuple(rels)


def hidden_ids(ws: Workspace) -> frozenset[tuple[int, int]]:
    """``(st_dev, st_ino)`` of acode's home, for the tree tools to skip it."""
    ids = set()
    for home in dict.fromkeys(named for named, _ in _homes(ws)):
        try:
            info = os.stat(home)
        except OSError:
            continue
        ids.add((info.st_dev, info.st_ino))
    return frozenset(ids)


def guard(ws: Workspace, path: str) -> Guard:
    """A guard refusing to create or replace anything at a protected resolved location
    (acode's home included); ``path`` is the model's path, for the message."""

    homes = _homes(ws)

    def check_resolved(dir_fd: int, name: str) -> None:
        try:
            root, here = _location(ws.fd), _location(dir_fd)
        except OSError as exc:
            raise SandboxError(f"cannot tell where {quote(path)} resolves ({exc.strerror} reading /proc/self/fd); "
                               "writes are refused until /proc is available", code="ACODE-EXEC-002") from exc
        target = posixpath.join(here, name) if name else here
        for named, home in homes:
            if _inside(target, home):
                raise _home_refusal(path, named, target)
        if here == root:
            parts = []
        elif here.startswith(root.rstrip("/") + "/"):
            parts = here[len(root.rstrip("/")) + 1:].split("/")
        else:
            raise SandboxError(f"cannot tell where {quote(path)} resolves (the directory is not under the "
                               f"workspace {ws.root} any more); try again", code="ACODE-EXEC-002")
        if name:
            parts.append(name)
        rule = is_protected(parts)
        if rule is not None:
            raise _refusal(path, rule, "/".join(parts) or ".")

    return check_resolved
