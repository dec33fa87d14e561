"""``.gitignore`` for the tree tools: what list_directory and search_code leave out.

Rules are git's, matched by :class:`pathspec.GitIgnoreSpec`: each ``.gitignore`` holds
patterns relative to its own directory; a deeper file's matching pattern (a negation
``!keep.log`` included) wins over a shallower one's, and within a file the last
matching pattern wins; ``dir/`` patterns match directories only (a directory is matched
as ``name/``). As in git, an ignored directory is not entered, so nothing below it can
be re-included. ``.git`` itself is always skipped by the walk (:mod:`actors.sandbox.tools.search`).
Only ``.gitignore`` files count: not ``.git/info/exclude`` nor the user's global excludes,
which belong to one clone, not to the project.

Every ``.gitignore`` is read through a directory fd the walk (or the confined
:meth:`~actors.sandbox.confinement.confine.Workspace.open`) already holds, with ``O_NOFOLLOW |
O_NONBLOCK``: a symlinked, special or vanished one is skipped, never followed. Only its
first :data:`MAX_GITIGNORE_BYTES` are used (cut at the last whole line); a pattern
pathspec cannot compile is skipped.

The directory a call names is always shown, even when ignored: the model asked for it
by name (say ``node_modules``), so :func:`for_start` then turns ignoring off for that
call and the tool says so.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from pathspec import GitIgnoreSpec

from actors.sandbox.confinement.confine import Workspace
from protocol.errors import SandboxError

__all__ = ["MAX_GITIGNORE_BYTES", "NO_RULES", "Rules", "for_start", "read_text", "recorded_rules"]

MAX_GITIGNORE_BYTES = 256 * 1024
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY


def _patterns(dir_fd: int) -> list[str]:
    """The lines of ``.gitignore`` in ``dir_fd``, or none (absent, a link, special, unreadable)."""
    try:
        fd = os.open(".gitignore", _FLAGS, dir_fd=dir_fd)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        data = os.read(fd, MAX_GITIGNORE_BYTES + 1)
    except OSError:
        return []
    finally:
        os.close(fd)
    if len(data) > MAX_GITIGNORE_BYTES:
        data = data[:data.rfind(b"\n", 0, MAX_GITIGNORE_BYTES) + 1]
    return data.decode("utf-8", "replace").splitlines()


def _spec(lines: list[str]) -> GitIgnoreSpec | None:
    lines = [line for line in lines if line.strip() and not line.startswith("#")]
    if not lines:
        return None
    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError:  # one bad pattern: keep the others
        good = []
        for line in lines:
            try:
                GitIgnoreSpec.from_lines([line])
            except ValueError:
                continue
            good.append(line)
        return GitIgnoreSpec.from_lines(good) if good else None


@dataclass(frozen=True)
class Rules:
    """The ``.gitignore`` specs in force in one directory, shallowest first, each with the
    workspace-relative directory its patterns are relative to. ``recorded`` (directory →
    its ``.gitignore`` text) replaces the files on disk: the rules a baseline recorded."""

    specs: tuple[tuple[str, GitIgnoreSpec], ...] = ()
    enabled: bool = True
    recorded: Mapping[str, str] | None = None

    def below(self, dir_fd: int, rel: str) -> Rules:
        """The rules inside directory ``rel`` (open as ``dir_fd``): these plus its ``.gitignore``."""
        if not self.enabled:
            return self
        lines = _patterns(dir_fd) if self.recorded is None else self.recorded.get(rel, "").splitlines()
        spec = _spec(lines)
        return self if spec is None else Rules((*self.specs, (rel, spec)), recorded=self.recorded)

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether the entry at workspace-relative ``rel`` is ignored; deepest decision wins."""
        if not self.enabled:
            return False
        for base, spec in reversed(self.specs):
            below = rel if base == "." else rel[len(base) + 1:]
            decision = spec.check_file(below + "/" if is_dir else below).include
            if decision is not None:
                return decision
        return False


NO_RULES = Rules(enabled=False)


def recorded_rules(gitignores: Mapping[str, str], root: str = "") -> Rules:
    """The rules of a recorded state: ``gitignores`` maps each directory ("." for the root)
    to its ``.gitignore`` text, ``root`` holds patterns below them all (git's
    ``info/exclude`` and ``core.excludesFile``, which a ``.gitignore`` overrides)."""
    spec = _spec(root.splitlines())
    return Rules(((".", spec),) if spec is not None else (), recorded=dict(gitignores))


def read_text(path: str, dir_fd: int | None = None) -> str | None:
    """A rules file's text (regular files only, never followed, at most
    :data:`MAX_GITIGNORE_BYTES`), or None when there is none."""
    try:
        fd = os.open(path, _FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, MAX_GITIGNORE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def for_start(ws: Workspace, rel: str) -> tuple[Rules, str | None]:
    """The rules in force in the directories above ``rel`` (its own ``.gitignore`` is read
    when the walk opens it), and the first of ``rel`` and its ancestors that they ignore,
    if any: then ignoring is off (:data:`NO_RULES`) for this call."""
    rules = Rules()
    if rel == ".":
        return rules, None
    parts = rel.split("/")
    prefix = "."
    for part in parts:
        try:
            fd = ws.open(prefix, _DIR_FLAGS)
        except SandboxError:
            return rules, None  # not a directory, gone, outside: the tool's own open of rel says so
        try:
            rules = rules.below(fd, prefix)
        finally:
            os.close(fd)
        prefix = part if prefix == "." else f"{prefix}/{part}"
        if rules.ignored(prefix, True):
            return NO_RULES, prefix
    return rules, None
