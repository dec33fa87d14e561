"""What a command may see: the read boundary of run_terminal.

A command sees the session's workspace (read-write), its scratch dir (``HOME`` and
``TMPDIR``, read-write), and read-only:

- the system: ``/usr``, ``/bin``, ``/sbin``, ``/lib*`` (the usr-merge links stay links),
  ``/opt`` unless ``sandbox.read_opt`` is false, and a named list of what programs read in
  ``/etc`` (:data:`ETC`: name resolution, certificates, alternatives, ``passwd``/``group``,
  the dynamic loader's cache, time zone, MIME and magic databases), never all of ``/etc``;
  ``/sys`` only for CPU information (:data:`SYS`);
- the *toolchains*: for every allowlisted executable as it resolves on the command's PATH,
  symlinks and script shebangs are followed (:data:`MAX_HOPS` at most) to the real file,
  and the install prefix of each file on the way is bound (the parent of its ``bin/``).
  Shim managers are recognised by where their files live and their own root is bound
  instead (:data:`MANAGERS`: pyenv, rbenv, asdf, volta, sdkman, rustup), with the
  variable that tells the manager where it lives set in the command's environment, since
  ``HOME`` is the scratch dir there. Version managers without shims (nvm, uv and pipx
  tools, uv's managed pythons, go) need nothing special: their files resolve into their
  own version directory, which is the prefix bound. The PATH is the user's
  (:mod:`actors.sandbox.confinement.toolchain`), never acode's own installation;
- a workspace virtualenv's base interpreter (:func:`python_home`): the venv is in the
  workspace, its ``bin/python`` a symlink to an interpreter outside, whose prefix is bound
  only when it is a Python installation (the venv's files are never followed otherwise);
- the paths the user configured: ``sandbox.read_paths`` (read-only) and
  ``sandbox.write_paths`` (read-write), checked by :func:`check_paths`;
- read-write, the git directories of a workspace that is a linked worktree or a
  submodule (:func:`git_dirs`), which live outside it: as for any repository, a command
  can change what is in ``.git``.

Nothing else: not the home directory, other homes, ``/root`` (beyond a toolchain's own
directory), ``/var``, ``/tmp`` (a command gets a fresh one), ``/run``, other processes.

A toolchain prefix is never the home directory or one of its ancestors, nor a directory
that holds a credential store (:data:`~actors.sandbox.confinement.isolation.CREDENTIALS`: ``~/.ssh``,
``~/.cargo/credentials.toml``, ...) or acode's own home: such a prefix is narrowed to the
directory holding the executable itself, and dropped if even that is unsafe.

How each level enforces it: bubblewrap binds only these paths into an empty root (what is
not bound does not exist; :func:`bwrap_argv`); Landlock grants read rights beneath these paths only (a read
elsewhere fails with EACCES; ``/proc`` is readable, but Landlock's ptrace scoping makes
other processes' ``root``, ``cwd``, ``environ`` and ``fd`` unreadable, and a path through
``/proc/self/cwd/..`` is judged where it lands). The process level cannot confine reads.

:func:`view` computes the boundary once per (PATH, allowlist, configured paths) and caches
it: resolving ~80 names over a PATH is a few thousand ``stat`` calls, paid once.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from actors.sandbox.confinement.isolation import CREDENTIALS
from protocol.errors import ConfigError

__all__ = ["ETC", "MANAGERS", "MAX_HOPS", "SYS", "SYSTEM", "View", "bwrap_argv", "check_paths", "git_dirs", "inside",
           "python_home", "resolve_toolchains", "summary", "view"]

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read in /etc; globs allowed. Not pip.conf, npmrc, gitconfig: they may hold tokens.
ETC = ("resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols", "networks",
       "ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies", "alternatives", "passwd", "group",
       "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "zoneinfo", "mime.types", "magic",
       "magic.mime", "os-release", "lsb-release", "debian_version", "locale.alias", "locale.conf", "python3*",
       "java-*", "fonts", "terminfo", "inputrc")
SYS = ("/sys/devices/system/cpu", "/sys/kernel/mm/transparent_hugepage")
MAX_HOPS = 16  # symlinks and shebangs followed per executable
_SHEBANG_BYTES = 256
# Directories beneath the home that are never bound whole (a prefix there is narrowed to its bin/).
_NEVER_WHOLE = (".local", ".config", ".cache", ".cargo")


@dataclass(frozen=True)
class _Manager:
    name: str
    variable: str  # where the manager looks for its root
    default: str  # beneath the home, when the variable is not set
    bind: tuple[str, ...] = (".",)  # beneath the root; "." is the root itself
    extra_home: tuple[str, ...] = ()  # more directories beneath the home it needs (rustup: ~/.cargo/bin)


MANAGERS = (
    _Manager("pyenv", "PYENV_ROOT", ".pyenv"),
    _Manager("rbenv", "RBENV_ROOT", ".rbenv"),
    _Manager("asdf", "ASDF_DATA_DIR", ".asdf"),
    _Manager("volta", "VOLTA_HOME", ".volta"),
    _Manager("sdkman", "SDKMAN_DIR", ".sdkman"),
    _Manager("rustup", "RUSTUP_HOME", ".rustup"),
)
# rustup's proxies (cargo, rustc, ...) live in ~/.cargo/bin, next to cargo's credentials.
_CARGO_BIN = "CARGO_HOME"


@dataclass(frozen=True)
class View:
    """The paths one command may see, besides its workspace and scratch dir."""

    read: tuple[str, ...]  # read-only: files or directories, absolute, existing
    write: tuple[str, ...] = ()  # read-write: sandbox.write_paths
    links: tuple[tuple[str, str], ...] = ()  # (path, target): /bin -> usr/bin, recreated as links
    env: Mapping[str, str] = field(default_factory=dict)  # PYENV_ROOT and the like
    toolchains: tuple[str, ...] = ()  # the toolchain prefixes among ``read``, for doctor and status


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies beneath it (both absolute, normalized)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _real(path: str) -> str:
    return os.path.realpath(path)


class _Guard:
    """Which directories may be bound whole: not the home or an ancestor of it, not one
    that holds a credential store or acode's own home."""

    def __init__(self, home: str, hidden: Iterable[str]):
        self.home = _real(home)
        self.secret = [_real(os.path.join(home, name)) for name in CREDENTIALS]
        self.secret += [_real(p) for p in hidden]
        self.never_whole = {os.path.join(self.home, name) for name in _NEVER_WHOLE}

    def safe(self, path: str) -> bool:
        real = _real(path)
        if real == "/" or inside(self.home, real) or real in self.never_whole:
            return False
        return not any(inside(secret, real) for secret in self.secret)

    def narrowed(self, prefix: str, fallback: str) -> str | None:
        """``prefix`` when it is safe to bind, else ``fallback`` (the executable's own
        directory) when that is, else None."""
        for candidate in (prefix, fallback):
            if self.safe(candidate):
                return candidate
        return None


def _prefix(directory: str) -> str:
    """The install prefix of a file in ``directory``: the parent of its ``bin/`` or ``sbin/``."""
    return os.path.dirname(directory) if os.path.basename(directory) in ("bin", "sbin") else directory


def _shebang(path: str) -> list[str]:
    """The interpreter line of a script (split), or [] for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SHEBANG_BYTES)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


@dataclass
class _Found:
    binds: dict[str, None] = field(default_factory=dict)  # ordered set
    env: dict[str, str] = field(default_factory=dict)


def _manager_of(path: str, environ: Mapping[str, str], home: str) -> tuple[_Manager, str] | None:
    for manager in MANAGERS:
        root = environ.get(manager.variable) or os.path.join(home, manager.default)
        if inside(path, root) or inside(path, _real(root)):
            return manager, root
    cargo_bin = os.path.join(environ.get(_CARGO_BIN) or os.path.join(home, ".cargo"), "bin")
    if inside(path, cargo_bin) or inside(path, _real(cargo_bin)):
        rustup = MANAGERS[-1]
        return rustup, environ.get(rustup.variable) or os.path.join(home, rustup.default)
    return None


def _follow(start: str, path: str, environ: Mapping[str, str], home: str, guard: _Guard, found: _Found) -> None:
    """Bind what running ``start`` needs: each hop of its symlinks and shebangs."""
    todo = [start]
    hops = 0
    while todo and hops < MAX_HOPS:
        current = todo.pop()
        hops += 1
        manager = _manager_of(current, environ, home)
        if manager is not None:
            kind, root = manager
            if os.path.isdir(root) and guard.safe(root):
                found.binds.setdefault(root)
                found.env.setdefault(kind.variable, root)
            if kind.name == "rustup":
                cargo_bin = os.path.join(environ.get(_CARGO_BIN) or os.path.join(home, ".cargo"), "bin")
                if os.path.isdir(cargo_bin):
                    found.binds.setdefault(cargo_bin)
        directory = os.path.dirname(current)
        if manager is None:
            bound = guard.narrowed(_prefix(directory), directory)
            if bound is not None:
                found.binds.setdefault(bound)
        if os.path.islink(current):
            try:
                target = os.readlink(current)
            except OSError:
                continue  # gone since it was found
            todo.append(os.path.normpath(os.path.join(directory, target)))
            continue
        words = _shebang(current)
        if not words:
            continue
        interpreter = words[0]
        if os.path.basename(interpreter) == "env":
            program = next((w for w in words[1:] if not w.startswith("-")), None)
            located = shutil.which(program, path=path) if program else None
            if located:
                todo.append(located)
        elif os.path.isabs(interpreter):
            todo.append(interpreter)


def resolve_toolchains(names: Iterable[str], path: str, *, environ: Mapping[str, str], home: str,
                       hidden: Iterable[str] = ()) -> tuple[tuple[str, ...], dict[str, str]]:
    """The directories the executables ``names`` need, as they resolve on ``path``, and
    the environment their shim managers need (see the module docstring)."""
    guard = _Guard(home, hidden)
    found = _Found()
    for name in sorted(set(names)):
        located = shutil.which(name, path=path)
        if located is not None:
            _follow(os.path.abspath(located), path, environ, home, guard, found)
    return tuple(found.binds), found.env


def _python_install(prefix: str) -> bool:
    """Whether ``prefix`` is a Python installation: its standard library is there."""
    return any(glob.glob(os.path.join(glob.escape(prefix), lib, "python3*", "os.py")) for lib in ("lib", "lib64"))


def python_home(venv: str, root: str, *, home: str, hidden: Iterable[str] = ()) -> tuple[str, ...]:
    """What a workspace virtualenv's ``bin/python`` needs outside the workspace ``root``:
    the install prefix of each hop of its symlinks (and of ``pyvenv.cfg``'s ``home``, for
    a venv made with ``--copies``), each only when it is a Python installation and safe to
    bind (as a toolchain prefix). The venv is workspace content: it must not be able to
    name an arbitrary directory to be made visible."""
    guard = _Guard(home, hidden)
    real_root = _real(root)
    hops: list[str] = []
    current = os.path.join(venv, "bin", "python")
    for _ in range(MAX_HOPS):
        hops.append(os.path.dirname(current))
        if not os.path.islink(current):
            break
        try:
            current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
        except OSError:
            break
    configured = _pyvenv_home(venv)
    if configured is not None:
        hops.append(configured)
    found: list[str] = []
    for directory in hops:
        prefix = _real(_prefix(directory))
        if inside(prefix, real_root) or not _python_install(prefix) or not guard.safe(prefix):
            continue
        found.append(prefix)
    return tuple(dict.fromkeys(found))


def _pyvenv_home(venv: str) -> str | None:
    """The ``home`` line of a venv's ``pyvenv.cfg`` (the directory of its base interpreter)."""
    text = _small_file(os.path.join(venv, "pyvenv.cfg"))
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and os.path.isabs(value.strip()):
            return os.path.normpath(value.strip())
    return None


def _etc() -> list[str]:
    found: list[str] = []
    for name in ETC:
        found += sorted(glob.glob(os.path.join("/etc", name)))
    return found


def check_paths(key: str, paths: Iterable[str], *, home: str, hidden: Iterable[str] = ()) -> list[str]:
    """``paths`` (the setting ``key``) normalized, or ACODE-CFG-001 naming the key and the
    offending value: each must be absolute and exist, and be neither ``/``, the home
    directory, an ancestor of it, nor hold (or lie in) acode's home or a credential store."""
    guard = _Guard(home, ())
    hidden_real = [_real(p) for p in hidden]
    result = []
    for raw in paths:
        if not os.path.isabs(raw):
            raise ConfigError(f"{key} entry {raw!r} is not an absolute path; give the full path, e.g. "
                              f"/home/you/shared/lib", code="ACODE-CFG-001")
        if not os.path.exists(raw):
            raise ConfigError(f"{key} entry {raw!r} does not exist; create it or remove it from {key}",
                              code="ACODE-CFG-001")
        real = _real(raw)
        if real == "/" or inside(guard.home, real):
            what = "/" if real == "/" else ("the home directory" if real == guard.home else "an ancestor of the home "
                                            "directory")
            raise ConfigError(f"{key} entry {raw!r} is {what}; commands would see everything in it. Name the "
                              "directory they need instead", code="ACODE-CFG-001")
        for secret in hidden_real:
            if inside(secret, real) or inside(real, secret):
                raise ConfigError(f"{key} entry {raw!r} holds or lies in acode's own home or sockets {secret}; "
                                  "commands must not see acode's database. Name another directory",
                                  code="ACODE-CFG-001")
        for secret in guard.secret:
            if inside(secret, real) and os.path.lexists(secret):
                raise ConfigError(f"{key} entry {raw!r} holds the credential store {secret}; name a narrower "
                                  "directory that leaves it out", code="ACODE-CFG-001")
        result.append(os.path.normpath(raw))
    return result


def _system(read_opt: bool) -> tuple[list[str], list[tuple[str, str]]]:
    read: list[str] = []
    links: list[tuple[str, str]] = []
    for path in (*SYSTEM, *(("/opt",) if read_opt else ())):
        if os.path.islink(path):
            target = os.readlink(path)
            if not os.path.isabs(target) and os.path.exists(path):
                links.append((path, target))  # /bin -> usr/bin, as on the host
                continue
        if os.path.exists(path):
            read.append(path)
    read += _etc()
    read += [p for p in SYS if os.path.exists(p)]
    return read, links


@functools.lru_cache(maxsize=64)
def _cached(names: frozenset[str], path: str, environ: tuple[tuple[str, str], ...], home: str,
            hidden: tuple[str, ...], read_paths: tuple[str, ...], write_paths: tuple[str, ...],
            read_opt: bool) -> View:
    env = dict(environ)
    system, links = _system(read_opt)
    toolchains, manager_env = resolve_toolchains(names, path, environ=env, home=home, hidden=hidden)
    tops = [*system, *(link for link, _ in links)]
    toolchains = tuple(p for p in toolchains if not _in_system(p, tops))
    read = _outermost([*system, *toolchains, *read_paths])
    return View(read=tuple(read), write=write_paths, links=tuple(links), env=manager_env,
                toolchains=tuple(p for p in toolchains if p in read))


def _in_system(path: str, system: list[str]) -> bool:
    """Whether ``path`` is already visible through a system directory or link (/usr/local, /bin/...)."""
    return any(inside(path, top) for top in system)


def _outermost(paths: list[str]) -> list[str]:
    """``paths`` once each, without those beneath another (real, not symlinked) directory of the list."""
    kept: list[str] = []
    for path in sorted(dict.fromkeys(paths)):
        if not any(inside(path, parent) and not os.path.islink(parent) and os.path.isdir(parent) for parent in kept):
            kept.append(path)
    return kept


# The environment a toolchain's resolution depends on (where the managers live).
_RELEVANT = tuple(sorted({m.variable for m in MANAGERS} | {_CARGO_BIN}))


def view(names: Iterable[str], path: str, *, read_paths: Iterable[str] = (), write_paths: Iterable[str] = (),
         read_opt: bool = True, hidden: Iterable[str] = (), environ: Mapping[str, str] | None = None,
         home: str | None = None) -> View:
    """What a command with the allowlist ``names`` and the PATH ``path`` may see (cached)."""
    source = os.environ if environ is None else environ
    home = home if home is not None else os.path.expanduser("~")
    relevant = tuple((k, source[k]) for k in _RELEVANT if source.get(k))
    return _cached(frozenset(names), path, relevant, home, tuple(hidden), tuple(read_paths), tuple(write_paths),
                   read_opt)


def summary(view: View, *, read_opt: bool = True) -> str:
    """``view`` in one line, for people: what a command reads besides its workspace."""
    parts = ["the workspace and a scratch HOME/TMPDIR (read-write)",
             "/usr, /bin, /sbin, /lib*" + (", /opt" if read_opt else " (not /opt)") + ", named files of /etc"]
    parts.append("toolchains " + (", ".join(view.toolchains) if view.toolchains else "(none outside /usr)"))
    extra = [p for p in view.read if p not in view.toolchains and not _system_path(p)]
    if extra:
        parts.append("read_paths " + ", ".join(extra))
    if view.write:
        parts.append("write_paths " + ", ".join(view.write) + " (read-write)")
    return "; ".join(parts) + "; nothing else"


def _system_path(path: str) -> bool:
    return any(inside(path, top) for top in (*SYSTEM, "/opt", "/etc", "/sys"))


def git_dirs(root: str, *, hidden: Iterable[str] = (), home: str | None = None) -> tuple[str, ...]:
    """The git directories a workspace that is a linked worktree or a submodule keeps
    outside itself (its ``.git`` is a file: ``gitdir: <dir>``, and that dir's ``commondir``),
    so ``git status`` and ``git commit`` work there as in any repository; each must be safe
    to bind (not the home directory or an ancestor, no credential store or acode's home)."""
    text = _small_file(os.path.join(root, ".git"))
    if text is None or not text.startswith("gitdir:"):
        return ()
    gitdir = os.path.normpath(os.path.join(root, text[len("gitdir:"):].strip()))
    found = [gitdir]
    common = _small_file(os.path.join(gitdir, "commondir"))
    if common is not None and common.strip():
        found.append(os.path.normpath(os.path.join(gitdir, common.strip())))
    guard = _Guard(home if home is not None else os.path.expanduser("~"), hidden)
    return tuple(d for d in dict.fromkeys(found)
                 if os.path.isdir(d) and not inside(_real(d), _real(root)) and guard.safe(d))


def _small_file(path: str) -> str | None:
    """A regular file's first 4 KB as text, never following a final symlink; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)


def bwrap_argv(bwrap: str, root: str, scratch: Path, view: View, *, network: bool, seal: tuple[str, ...] = (),
               hidden: Iterable[str] = (), root_writable: bool = True) -> list[str]:
    """bubblewrap's arguments: an empty root with only what ``view`` names bound into it
    (parents before children, so a read-write workspace beneath a read-only prefix
    stays writable), a fresh /tmp, /dev and /proc, then acode's own paths and the
    credential stores masked wherever a bound directory holds them. Run as root, the
    command gets no capability (bubblewrap would keep them all: with CAP_SYS_ADMIN a
    command can mount devtmpfs and read the disk beneath every bind). ``root_writable``
    false binds the workspace read-only (an MCP server not configured to write)."""
    argv = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:  # as root bwrap keeps every capability: CAP_SYS_ADMIN mounts devtmpfs, the disk
        argv += ["--cap-drop", "ALL"]
    if not network:
        argv.append("--unshare-net")
    if "/" in view.read:  # no read boundary (scripts/bench.py's comparison): the root first, the rest over it
        argv += ["--ro-bind", "/", "/"]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for link, target in view.links:
        argv += ["--symlink", target, link]
    mounts = [(path, "--ro-bind") for path in view.read if path != "/"]
    mounts += [(path, "--bind") for path in (*view.write, str(scratch))]
    mounts.append((root, "--bind" if root_writable else "--ro-bind"))
    for path, how in sorted(mounts, key=lambda mount: mount[0]):  # stable: read-write wins a tie
        argv += [how, path, path]
    argv += seal  # the protected paths, over the read-write binds (actors.sandbox.confinement.sealed)
    home = os.path.expanduser("~")
    bound = [path for path, _ in mounts]
    for masked in [*hidden, *(os.path.join(home, name) for name in CREDENTIALS)]:
        if not os.path.lexists(masked) or _holds(masked, root):
            continue  # the workspace itself stays visible
        if not any(inside(os.path.abspath(masked), path) for path in bound):
            continue  # not bound, so not there
        if os.path.isdir(masked):
            argv += ["--tmpfs", masked]
        else:
            argv += ["--ro-bind", "/dev/null", masked]
    return [*argv, "--chdir", root, "--"]


def _holds(path: str, root: str) -> bool:
    """Whether ``root`` is ``path`` or lies beneath it (``path`` made absolute)."""
    return os.path.commonpath([root, os.path.abspath(path)]) == os.path.abspath(path)
