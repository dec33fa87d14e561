"""acode's own files are private to the user who runs it; the workspace keeps its usual modes.

acode's home holds every task, plan, file content a tool read, command output and model
answer: the user's code. So everything acode creates beneath its home is made private when
it is created (directories 0700, files 0600), whatever the user's umask:

- every acode process (the CLI and each actor) calls :func:`enter` first, which sets the
  process umask to 077 and remembers the umask the user had. The first acode process of a
  tree records it in ``ACODE_USER_UMASK``; its children inherit that, so an actor started
  by the coordinator still knows the user's umask although its own is 077.
- what acode writes into the **workspace** is the user's, not acode's: the sandbox gives a
  new file ``0666 & ~user umask`` and a new directory ``0777 & ~user umask``
  (:func:`workspace_mode`), and runs commands and git with the user's umask
  (:func:`user_umask`), exactly as if the user had made them.

A home made by an earlier version, or by hand, may be looser: :func:`secure_home` (called by
``acode up`` and the coordinator) tightens every path beneath it and reports each change,
and refuses a home or database that belongs to another user (ACODE-CFG-004), as the socket
directory already is refused.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ConfigError

__all__ = ["PRIVATE_UMASK", "USER_UMASK_ENV", "Tightened", "describe", "enter", "secure_home", "user_umask",
           "workspace_mode"]

PRIVATE_UMASK = 0o077
USER_UMASK_ENV = "ACODE_USER_UMASK"
_DIR_MODE, _FILE_MODE = 0o700, 0o600


def _parse(raw: str | None) -> int | None:
    try:
        value = int(raw or "", 8)
    except ValueError:
        return None
    return value if 0 <= value <= 0o777 else None


def enter() -> int:
    """Make this process create private files (umask 077); the user's umask, remembered in
    ``ACODE_USER_UMASK`` for this process's children. Calling it twice is harmless."""
    found = os.umask(PRIVATE_UMASK)
    user = _parse(os.environ.get(USER_UMASK_ENV))
    if user is None:
        user = found
        os.environ[USER_UMASK_ENV] = f"{user:03o}"
    return user


def user_umask() -> int:
    """The umask the user runs acode with (for what acode writes into the workspace)."""
    user = _parse(os.environ.get(USER_UMASK_ENV))
    if user is not None:
        return user
    current = os.umask(0)  # a process that never called enter(): its own umask is the user's
    os.umask(current)
    return current


def workspace_mode(*, directory: bool) -> int:
    """The mode a new workspace file or directory gets: what the user's umask would give it."""
    return (0o777 if directory else 0o666) & ~user_umask()


@dataclass(frozen=True)
class Tightened:
    """One path :func:`secure_home` made private: its mode before and after."""

    path: Path
    old: int
    new: int

    def __str__(self) -> str:
        return f"{self.path} was {self.old:04o}, now {self.new:04o}"


def _refuse_foreign(path: Path, info: os.stat_result, what: str) -> None:
    if info.st_uid != os.getuid():
        raise ConfigError(
            f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}); acode keeps your code "
            "and model answers there, so it must be yours alone: use your own home (--home or ACODE_HOME), "
            f"or have its owner hand it over (chown -R {os.getuid()} {path})", code="ACODE-CFG-004")


def secure_home(home: Path) -> list[Tightened]:
    """Create ``home`` private if missing; refuse it (or its database) when another user owns it;
    make every directory beneath it 0700 and every file 0600 (symlinks are not followed, and
    sockets are left to their own directory's check). Returns each path it changed."""
    try:
        home.mkdir(mode=_DIR_MODE, parents=True)
    except FileExistsError:
        pass  # judged below, whatever it is
    info = home.lstat()
    if stat.S_ISLNK(info.st_mode):  # a home reached through a symlink: judge where it leads
        info = home.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"acode home {home} is not a directory; remove it or use another home (--home or "
                          "ACODE_HOME)", code="ACODE-CFG-004")
    _refuse_foreign(home, info, "acode home")
    database = home / "acode.db"
    try:
        _refuse_foreign(database, database.lstat(), "acode database")
    except FileNotFoundError:
        pass
    changed: list[Tightened] = []
    _tighten(home, info, changed)
    for root, dirs, files in os.walk(home):
        for name in (*dirs, *files):
            path = Path(root) / name
            try:
                entry = path.lstat()
            except FileNotFoundError:
                continue  # removed while we walked (a log rotated, a session's scratch)
            _tighten(path, entry, changed)
    return changed


def _tighten(path: Path, info: os.stat_result, changed: list[Tightened]) -> None:
    if stat.S_ISDIR(info.st_mode):
        want = _DIR_MODE
    elif stat.S_ISREG(info.st_mode):
        want = _FILE_MODE
    else:
        return  # symlinks, sockets, fifos: nothing to read through them that the directory does not guard
    old = stat.S_IMODE(info.st_mode)
    if old & ~want == 0:
        return  # already private (a stricter mode, such as 0400, is kept)
    if info.st_uid != os.getuid():
        _refuse_foreign(path, info, "path in the acode home")
    new = old & want
    os.chmod(path, new)
    changed.append(Tightened(path, old, new))


def describe(path: Path) -> str:
    """``0700 owner root`` for ``path``, or why it cannot be said."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = f"uid {info.st_uid}"
    return f"{stat.S_IMODE(info.st_mode):04o} owner {owner}"
