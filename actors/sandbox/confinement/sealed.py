"""The paths a command may not change, and how bubblewrap and the launcher seal them.

A command that could write git's configuration or hooks would plant code that the
user's own next ``git status`` runs outside every sandbox (``core.fsmonitor``,
``core.pager``, an alias, a hook); one that could write ``.agent/`` or acode's home
would loosen the rules the next session runs under. So, for the workspace's repository,
:func:`find` names before each command:

- ``files``: ``config``, ``config.worktree`` and ``commondir`` (existing or not: one
  planted sends git to another directory's config) of every git directory the workspace
  uses, and the files in the workspace their ``include.path`` names; when the workspace
  is a linked worktree or a submodule, its ``.git`` gitlink file and the ``commondir``
  and ``gitdir`` files of its git directory (rewritten, they point git at a planted
  directory), and the same files of every linked worktree's directory beneath
  ``worktrees/``; the gitlink files of the submodules checked out inside it
  (their ``core.worktree`` names them); ``config.yml`` of acode's home when the workspace
  holds it (``masks``: where the launcher makes the mounts, the whole home is hidden behind
  an empty read-only directory, as bubblewrap hides it behind a tmpfs).
- ``dirs``: ``hooks/`` and ``info/`` of every such git directory, ``.agent/``, and
  where ``core.hooksPath`` (the repository's or the user's) sends git for hooks when that
  lies in the workspace (husky's ``.husky/_``), existing or not (a missing one must not
  be created); ``.git`` itself when the workspace
  has none (a repository planted there would be the one the user's git finds).
- ``gitdirs``: the git directories themselves (``.git``, ``.git/modules/*`` nested, the
  external ones of a linked worktree, and the ``.git`` of every nested repository the
  index holds as a gitlink: :mod:`actors.sandbox.confinement.gitindex`), which bubblewrap pins in
  place; ``index``: the index, whose new gitlinks the tripwire refuses.

The git directories are the workspace's ``.git`` (or what its gitlink names, and that
directory's ``commondir``: :func:`actors.sandbox.confinement.visible.git_dirs`), with every
submodule's beneath ``modules/`` (bounded: :data:`MAX_GITDIRS`).

Under bubblewrap (:func:`bwrap_args`, after the workspace's read-write bind): each
git directory is bound onto itself, so it is a mount point that cannot be renamed,
removed or replaced (``mv .git x`` is EBUSY); each protected file and directory is bound
read-only onto itself; a missing protected directory gets an empty read-only directory
bound there (bubblewrap makes the mount point: an empty directory, which the sandbox
removes again after the command when it is still empty; an empty ``hooks/``, ``info/``
or ``.agent/`` means what a missing one means, so the compare-and-restore of
:mod:`actors.sandbox.confinement.tripwire` counts them as equal). A missing protected file is left
to the tripwire (creating it would change git's view). For a command whose program is
not git (:func:`is_git`: a shell or a script that runs git counts as not git), every git
directory is bound read-only as a whole: a script cannot delete refs, the stash or
objects; git itself keeps writing its index, objects and refs.

Below bubblewrap, in the ``pidns`` mode, the launcher makes the same binds (:func:`binds`)
with mount(2) in the command's own mount namespace. Landlock alone cannot do it: its
rights on a directory hold for everything beneath it, so a rule for the workspace cannot
leave ``.git/config`` out, and splitting it beneath the root's children would take away
creating files at the root. So in the ``subreaper`` mode (no namespaces) only
:mod:`actors.sandbox.confinement.tripwire`'s compare-and-restore protects them; it runs at every
level.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from actors.sandbox.confinement import gitindex, visible
from actors.sandbox.confinement.visible import inside

__all__ = ["MAX_GITDIRS", "PROTECTED", "Sealed", "binds", "bwrap_args", "enforcement", "find", "index_links",
           "is_git"]

MAX_GITDIRS = 64  # submodule git directories looked at, nested ones included
_MAX_DEPTH = 6
_CONFIG_BYTES = 65536


PROTECTED = (".git/config, .git/hooks/, .git/info/ (and those of submodules and linked worktrees, their gitlink "
             "files), .agent/, acode's config.yml when the workspace holds acode's home")


def enforcement(level: str, *, pidns: bool) -> str:
    """How ``level`` (an isolation level; ``pidns``: its commands run in a PID namespace, so
    in a mount namespace of their own too) keeps commands off the protected paths, in one
    line for ``acode doctor``."""
    if level == "bubblewrap":
        return (f"{PROTECTED}: read-only binds in the kernel (.git a mount point, read-only as a whole to "
                "programs other than git), and compare-and-restore after every command")
    if pidns:
        return (f"{PROTECTED}: read-only binds in the kernel (the command's own mount namespace; .git a mount "
                "point, read-only as a whole to programs other than git), and compare-and-restore after every "
                "command")
    return (f"{PROTECTED}: NOT refused by the kernel at the {level} level without a PID namespace; compared "
            "after every command, restored, and the session pauses (ACODE-SBX-021)")


@dataclass(frozen=True)
class Sealed:
    """The protected paths of one workspace (absolute; files and dirs may be missing)."""

    root: str
    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    gitdirs: tuple[str, ...] = ()  # existing directories, the workspace's own first
    masks: tuple[str, ...] = ()  # acode's home inside the workspace: hidden whole where mounts are made
    index: str = ""  # the workspace's git index, whose gitlinks the tripwire watches
    hash_bytes: int = 20  # an object id's size in it (32: SHA-256)

    def shown(self, path: str) -> str:
        """``path`` as a person reads it: workspace-relative when inside."""
        return os.path.relpath(path, self.root) if inside(path, self.root) else path


def is_git(executable: str, root: str) -> bool:
    """Whether a command runs git itself (a ``git`` outside the workspace): only git keeps
    write access to the git directories under bubblewrap."""
    if os.path.basename(executable) != "git":
        return False
    real = os.path.realpath(os.path.join(root, executable))  # a relative one resolves from the workspace
    return not inside(real, os.path.realpath(root))


def _kind(path: str) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except OSError:
        return None


def _small(path: str) -> str:
    """A regular file's text (bounded), never following a final symlink; '' otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, _CONFIG_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _submodules(common: str) -> list[str]:
    """The git directories beneath ``common``/modules (a submodule's name may hold slashes;
    a git directory is one holding HEAD), nested submodules' too, bounded."""
    found: list[str] = []
    todo = [(os.path.join(common, "modules"), 0)]
    while todo and len(found) < MAX_GITDIRS:
        directory, depth = todo.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False) or depth >= _MAX_DEPTH:
                continue
            if _kind(os.path.join(entry.path, "HEAD")) is not None:
                found.append(entry.path)
                todo.append((os.path.join(entry.path, "modules"), depth + 1))
            else:
                todo.append((entry.path, depth + 1))
    return found[:MAX_GITDIRS]


def _config_values(text: str, key: str) -> list[str]:
    """The values of ``key`` (a last name such as ``hookspath``) in git config ``text``,
    read simply: ``name = value`` lines, quotes dropped."""
    found = []
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip().lower() == key:
            found.append(value.split("#")[0].split(";")[0].strip().strip('"'))
    return found


def _includes(config: str) -> list[str]:
    """The files ``config`` includes (``[include]`` and ``[includeIf ...]`` ``path``), resolved
    from its directory as git resolves them: code-running settings can live there too."""
    found, section = [], ""
    for line in _small(config).splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped[1:].split("]")[0].split()[0].split(".")[0].lower() if stripped[1:].strip("] ") else ""
            continue
        name, sep, value = stripped.partition("=")
        if sep and section in ("include", "includeif") and name.strip().lower() == "path":
            value = value.split("#")[0].split(";")[0].strip().strip('"')
            if value:
                found.append(os.path.normpath(os.path.join(os.path.dirname(config), os.path.expanduser(value))))
    return found


def _hooks_paths(root: str, commons: list[str]) -> list[str]:
    """Where ``core.hooksPath`` sends git for hooks (husky: ``.husky/_``), from the repository's
    config and the user's own, resolved from the top of the work tree: hooks there run as
    surely as those in ``.git/hooks``."""
    sources = [os.path.join(common, "config") for common in commons[-1:]]
    home = os.path.expanduser("~")
    sources += [os.path.join(home, ".gitconfig"),
                os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "git", "config")]
    found = []
    for source in sources:
        for value in _config_values(_small(source), "hookspath"):
            if value:
                found.append(os.path.normpath(os.path.join(root, os.path.expanduser(value))))
    return found


def _children(directory: str) -> list[str]:
    """The real subdirectories of ``directory``, sorted; none when it cannot be read."""
    try:
        return sorted(e.path for e in os.scandir(directory) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _worktree_of(gitdir: str) -> str | None:
    """A submodule's checkout, from its git directory's ``core.worktree`` (relative to it)."""
    for line in _small(os.path.join(gitdir, "config")).splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "worktree":
            return os.path.normpath(os.path.join(gitdir, value.strip().strip('"')))
    return None


def find(root: str, *, homes: Iterable[str] = (), hidden: Iterable[str] = ()) -> Sealed:
    """The protected paths of the workspace ``root``; ``homes``: acode's home (and any other
    directory whose ``config.yml`` is acode's), protected when the workspace holds it."""
    root = os.path.normpath(root)
    dotgit = os.path.join(root, ".git")
    files: list[str] = []
    gitdirs: list[str] = []
    commons: list[str] = []
    match _kind(dotgit):
        case stat.S_IFDIR:
            gitdirs.append(dotgit)
            commons.append(dotgit)
        case stat.S_IFREG | stat.S_IFLNK:  # a linked worktree or submodule: its gitlink, and where it points
            files.append(dotgit)
            linked = list(visible.git_dirs(root, hidden=hidden))
            gitdirs += linked
            commons += linked[-1:]  # the commondir when there is one, else the gitdir itself
            if linked:
                files += [os.path.join(linked[0], name) for name in ("commondir", "gitdir")]
        case _:  # no repository yet: none may be planted (with a config or hooks), not even by git init
            return _finish(root, files, [dotgit], [], homes)
    for common in commons:
        gitdirs += [d for d in _submodules(common) if d not in gitdirs]
    index = os.path.join(gitdirs[0], "index") if gitdirs else ""
    sha256 = bool(commons) and "objectformat = sha256" in _small(os.path.join(commons[-1], "config")).lower()
    hash_bytes = 32 if sha256 else 20
    for link in (index_links(index, hash_bytes=hash_bytes) or [])[:MAX_GITDIRS] if index else ():
        nested = os.path.normpath(os.path.join(root, link, ".git"))
        if not inside(nested, root):
            continue
        if _kind(nested) == stat.S_IFDIR and nested not in gitdirs:
            gitdirs.append(nested)  # a nested repository the index makes a submodule: its config runs too
        elif _kind(nested) == stat.S_IFREG:
            files.append(nested)
    for common in commons:  # other linked worktrees' admin directories: the user's git there reads them
        for admin in _children(os.path.join(common, "worktrees"))[:MAX_GITDIRS]:
            files += [os.path.join(admin, name) for name in ("commondir", "config.worktree", "gitdir")]
    dirs: list[str] = [path for path in _hooks_paths(root, commons) if inside(path, root)]
    for gitdir in gitdirs[:MAX_GITDIRS]:
        files += [os.path.join(gitdir, name) for name in ("config", "config.worktree", "commondir")]
        files += [path for path in _includes(os.path.join(gitdir, "config")) if inside(path, root)]
        dirs += [os.path.join(gitdir, "hooks"), os.path.join(gitdir, "info")]
        checkout = _worktree_of(gitdir)
        if checkout is not None and checkout != root and inside(checkout, root):
            files.append(os.path.join(checkout, ".git"))
    return _finish(root, files, dirs, gitdirs[:MAX_GITDIRS], homes, index, hash_bytes)


_PARSED: dict[tuple[str, int, int, int, int], list[str] | None] = {}  # (path, dev, ino, size, mtime_ns) -> links


def index_links(index: str, *, hash_bytes: int = 20, fd: int | None = None) -> list[str] | None:
    """The gitlinks of the index at ``index`` (or open as ``fd``), parsed once per version
    of the file; ``hash_bytes``: 32 in a SHA-256 repository."""
    own = fd is None
    if fd is None:
        try:
            fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
    try:
        info = os.fstat(fd)
        key = (index, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        if key in _PARSED:
            return _PARSED[key]
        data = gitindex.read_fd(fd)
        links = None if data is None else gitindex.gitlinks(data, hash_bytes=hash_bytes)
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[key] = links
        return links
    finally:
        if own:
            os.close(fd)


def _finish(root: str, files: list[str], dirs: list[str], gitdirs: list[str], homes: Iterable[str],
            index: str = "", hash_bytes: int = 20) -> Sealed:
    dirs.append(os.path.join(root, ".agent"))
    masks: list[str] = []
    for home in homes:
        home = os.path.abspath(home)
        if inside(home, root) and home != root:
            files.append(os.path.join(home, "config.yml"))
            if _kind(home) == stat.S_IFDIR:
                masks.append(home)
    return Sealed(root=root, files=tuple(dict.fromkeys(files)), dirs=tuple(dict.fromkeys(dirs)),
                  gitdirs=tuple(dict.fromkeys(gitdirs)), masks=tuple(masks), index=index,
                  hash_bytes=hash_bytes)


def binds(sealed: Sealed, empty: str, *, git: bool, masks: bool = False) -> tuple[list[tuple[str, str, bool]],
                                                                                 list[str]]:
    """The binds sealing ``sealed``, in order, as ``(source, target, writable)``, and the
    missing directories they make as mount points (remove them after the command while
    empty). ``empty``: an empty directory to bind over a missing one (and, with ``masks``,
    over acode's home in the workspace: bubblewrap masks it itself); ``git``: the command
    is git, which keeps its git directories writable."""
    pinned = [d for d in sealed.gitdirs if _kind(d) == stat.S_IFDIR]
    found: list[tuple[str, str, bool]] = [(d, d, git) for d in pinned]  # mount points: never moved or replaced
    made: list[str] = []
    for path in (*sealed.files, *sealed.dirs):
        if not git and any(inside(path, d) for d in pinned):
            continue  # read-only already, with its git directory
        kind = _kind(path)
        if kind == stat.S_IFREG or (kind == stat.S_IFDIR and path in sealed.dirs):
            found.append((path, path, False))
        elif kind is None and path in sealed.dirs and _kind(os.path.dirname(path)) == stat.S_IFDIR:
            found.append((empty, path, False))
            made.append(path)
    if masks:
        found += [(empty, home, False) for home in sealed.masks]
    return found, made


def bwrap_args(sealed: Sealed, empty: str, *, git: bool) -> tuple[list[str], list[str]]:
    """:func:`binds` as bubblewrap's arguments (to follow the workspace's binds)."""
    found, made = binds(sealed, empty, git=git)
    argv: list[str] = []
    for source, target, writable in found:
        argv += ["--bind" if writable else "--ro-bind", source, target]
    return argv, made
