"""Isolation for run_terminal: which layer this machine offers, and what a command runs with.

Levels, weakest first (``LEVELS``):

``process``     every command, whatever else is present (reads and writes are *not*
                confined: a command reads what the user can): its own session and process
                group, stdin from /dev/null, an environment built from an allowlist with
                HOME and TMPDIR in a scratch dir, rlimits, a pids cgroup when the sandbox
                can make one, a wall-clock deadline, and a contained process tree (a PID
                namespace where the kernel allows one, else a child subreaper and sweep;
                see ``launcher.py``).
``landlock``    plus Landlock (kernel 5.13+), applied by the launcher to itself before the
                exec: reads only beneath what :mod:`actors.sandbox.confinement.visible` names (and
                /proc), writes only beneath the workspace and the scratch dir; from ABI 4 no
                TCP bind or connect; from ABI 6 no signals to and no abstract sockets of
                processes outside the command's own tree.
``bubblewrap``  plus bubblewrap (``bwrap`` on the PATH): an empty root into which only
                what a command may see is bound (:mod:`actors.sandbox.confinement.visible`: the
                workspace and scratch dir read-write, system dirs, toolchains and the
                configured paths read-only), a fresh /tmp, /dev and /proc, no network (a
                new network namespace with only loopback), new PID, IPC and UTS
                namespaces, ``--die-with-parent``, ``--new-session``; acode's own home and
                sockets, and well-known credential stores (~/.ssh, ~/.aws, ...) masked
                should a bound directory hold them.

:func:`detect` finds the strongest level once, at sandbox start, by probing rather than
guessing (``bwrap`` present but refused by the kernel is not bubblewrap).
:func:`choose` is what the sandbox calls: the strongest level, or exactly the level and
process-tree containment an operator or a test forced (the sandbox's ``isolation`` and
``tree`` options, or ``ACODE_SANDBOX_ISOLATION`` and ``ACODE_SANDBOX_TREE``); what the
machine cannot give fails the start (ACODE-SBX-015) instead of silently running weaker.
:func:`require` fails closed when a session asks for more than the machine has.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import msgspec

from protocol.errors import ConfigError, SandboxError

__all__ = ["CREDENTIALS", "ENV_ALLOW", "FORCE_ENV", "LAUNCHER", "LEVELS", "READS_NOT_CONFINED", "Isolation", "Level",
           "PidsCgroup", "Tree", "choose", "command_env", "detect", "is_secret_name", "require"]

Level = Literal["process", "landlock", "bubblewrap"]
LEVELS: tuple[Level, ...] = ("process", "landlock", "bubblewrap")
Tree = Literal["pidns", "subreaper"]  # how the launcher contains a command's tree below bubblewrap
# The environment variables that force the sandbox's isolation (test and operator hook).
FORCE_ENV = {"isolation": "ACODE_SANDBOX_ISOLATION", "tree": "ACODE_SANDBOX_TREE"}
LAUNCHER = str(Path(__file__).with_name("launcher.py"))

_HOW_TO = {
    "bubblewrap": "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap) "
                  "and allow unprivileged user namespaces",
    "landlock": "run on Linux 5.13 or newer with Landlock enabled (lsm=...,landlock on the kernel command line)",
    "process": "nothing",
}
# Names a command may inherit from the sandbox's environment (plus LC_*). Everything else,
# secrets above all, stays out; HOME and TMPDIR are replaced by the scratch dir. VIRTUAL_ENV
# is set for a workspace's own virtualenv only (actors/sandbox/confinement/toolchain.py).
ENV_ALLOW = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "PYTHONPATH",
                       "GOPATH", "GOROOT", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME", "NVM_DIR"})
READS_NOT_CONFINED = ("reads and writes NOT confined: a command can read every file this user can (~/.ssh "
                      "included); install bubblewrap or use Linux 5.13+ with Landlock to confine them")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# Hidden from a command under bubblewrap: credential stores of common tools, beneath HOME.
CREDENTIALS = (".ssh", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".config/gcloud", ".config/gh",
                ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".cargo/credentials",
                ".cargo/credentials.toml", ".config/hub", ".password-store", ".acode")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def command_env(scratch: Path, *, base: dict[str, str] | None = None,
                extra: frozenset[str] = frozenset(), path: str | None = None) -> dict[str, str]:
    """The environment a command gets: allowlisted names only, never a secret-looking one,
    HOME and TMPDIR in ``scratch``, git configured not to read the user's config or prompt,
    and the user's PATH: ``path`` (the client's) or ``base``'s, absolute entries only, never
    acode's own installation put first (:mod:`actors.sandbox.confinement.toolchain`; a workspace's
    virtualenv goes before it there)."""
    # imported here: the client imports this module for LEVELS and is_secret_name alone
    from actors.sandbox.confinement.toolchain import user_path

    source = os.environ if base is None else base
    allowed = ENV_ALLOW | extra
    env = {k: v for k, v in source.items()
           if (k in allowed or k.startswith("LC_")) and not is_secret_name(k)}
    env["PATH"] = user_path(path, source)
    env.update(HOME=str(scratch / "home"), TMPDIR=str(scratch / "tmp"), TERM="dumb", NO_COLOR="1",
               GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
               GIT_PAGER="cat", PAGER="cat", PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    return env


class Isolation(msgspec.Struct, frozen=True, kw_only=True):
    """What this machine offers, found once by :func:`detect`."""

    level: Level
    bwrap: str | None = None
    landlock_abi: int = 0
    pidns: bool = False  # the launcher can make a PID namespace (else: subreaper and sweep)
    pids: Literal["cgroup", "rlimit", "none"] = "none"

    def describe(self) -> str:
        """One line for ``acode status``, ``acode doctor`` and every run_terminal result and
        ``tool_called`` event: the level first, then plainly what it does for reads."""
        parts: list[str] = [self.level]
        if self.level == "bubblewrap":
            parts.append("only the workspace, system and toolchain dirs exist for a command (reads confined), "
                         "writes to workspace only, no network, pid namespace")
        elif self.level == "landlock":
            parts.append(f"Landlock ABI {self.landlock_abi}, reads confined to workspace, system and toolchain "
                         "dirs, writes to workspace only" + (", no TCP" if self.landlock_abi >= 4 else ""))
            parts.append("pid namespace" if self.pidns else "subreaper")
        else:
            parts.append(READS_NOT_CONFINED)
            parts.append("pid namespace" if self.pidns else "subreaper")
        parts.append(f"process limit by {self.pids}")
        return "; ".join(parts)

    @property
    def mode(self) -> Literal["bwrap", "pidns", "subreaper"]:
        if self.level == "bubblewrap":
            return "bwrap"
        return "pidns" if self.pidns else "subreaper"


def _bwrap_works(bwrap: str) -> bool:
    try:
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                               "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session", "true"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _probe() -> dict[str, object]:
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-B", LAUNCHER, "--probe"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=20, check=True)
        return dict(json.loads(done.stdout))
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


def detect(*, bubblewrap: bool = True, landlock: bool = True, cgroup: bool = True, pidns: bool = True) -> Isolation:
    """The strongest isolation this machine offers (the flags turn layers off: ``pidns=False``
    leaves the subreaper to contain a command's tree)."""
    probe = _probe()
    found = probe.get("landlock_abi", 0)  # the launcher's JSON: an int, unless something is badly wrong
    abi = found if landlock and isinstance(found, int) else 0
    pidns = pidns and bool(probe.get("pidns", False))
    pids: Literal["cgroup", "rlimit", "none"] = "none"
    if cgroup and PidsCgroup.base() is not None:
        pids = "cgroup"
    elif os.geteuid() != 0:
        pids = "rlimit"  # RLIMIT_NPROC does not bind root
    bwrap = shutil.which("bwrap") if bubblewrap else None
    if bwrap is not None and _bwrap_works(bwrap):
        return Isolation(level="bubblewrap", bwrap=bwrap, landlock_abi=abi, pidns=pidns, pids=pids)
    return Isolation(level="landlock" if abi > 0 else "process", landlock_abi=abi, pidns=pidns, pids=pids)


def choose(level: Level | Literal["auto"] = "auto", tree: Tree | Literal["auto"] = "auto", *,
           origin: str = "by the sandbox options") -> Isolation:
    """The isolation the sandbox runs with: the strongest this machine offers (``auto``), or
    exactly ``level`` and ``tree``. A forced level or tree the machine cannot give raises
    ACODE-SBX-015 (never a silent fallback); ``origin`` says who forced it, for the message."""
    if level == "bubblewrap" and tree == "subreaper":
        raise ConfigError(f"isolation 'bubblewrap' always contains a command's processes in its own PID namespace, "
                          f"so tree 'subreaper' cannot go with it (forced {origin}); use tree auto or pidns with "
                          "bubblewrap, or isolation landlock or process with the subreaper", code="ACODE-CFG-001")
    found = detect(bubblewrap=level in ("auto", "bubblewrap") and tree != "subreaper",
                   landlock=level != "process", pidns=tree != "subreaper")
    if level != "auto" and found.level != level:
        raise SandboxError(
            f"isolation {level!r} is forced ({origin}) but this machine cannot provide it: {_missing(level)}; "
            f"to get it, {_HOW_TO[level]}; or lower or unset the forced isolation", code="ACODE-SBX-015")
    if tree == "pidns" and found.level != "bubblewrap" and not found.pidns:
        raise SandboxError(
            f"tree 'pidns' is forced ({origin}) but this machine refuses a PID namespace (not root, and "
            "unprivileged user namespaces are off); to get it, run acode as root or allow unprivileged user "
            "namespaces (sysctl user.max_user_namespaces and, on Debian/Ubuntu, "
            "kernel.unprivileged_userns_clone=1); or use tree subreaper or auto", code="ACODE-SBX-015")
    return found


def _missing(level: Level) -> str:
    """Why ``level`` is not available here, in the words an operator can act on."""
    if level == "bubblewrap":
        bwrap = shutil.which("bwrap")
        return ("no bwrap on the PATH" if bwrap is None
                else f"{bwrap} cannot create its namespaces (user namespaces refused?)")
    return "the kernel reports no Landlock (ABI 0)"


def require(isolation: Isolation, minimum: Level) -> None:
    """Fail closed: refuse to run a command when ``minimum`` is stronger than what we have."""
    if LEVELS.index(isolation.level) < LEVELS.index(minimum):
        raise SandboxError(
            f"isolation {minimum!r} is required (sandbox.require_isolation) but this machine offers "
            f"{isolation.level!r}; to get it, {_HOW_TO[minimum]}, then restart acode (acode down; acode up); "
            "or lower sandbox.require_isolation", code="ACODE-SBX-015")


class PidsCgroup:
    """A pids cgroup per command, beneath ``acode-sandbox-<pid>-<random>`` in our own pids cgroup.

    ``pids.max`` caps the processes of one command tree, so a fork bomb stops at the
    limit instead of exhausting the machine's pid space. Only the cgroup v1 pids hierarchy
    and a cgroup v2 group that already delegates ``pids`` are used; nothing is enabled.
    """

    def __init__(self, root: Path):
        self.root = root
        self._numbers = itertools.count(1)  # next() is atomic: calls run on several threads

    @staticmethod
    def base() -> Path | None:
        """Our own pids cgroup directory, when we may make groups beneath it."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                base = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
                if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
                    return base
        return None

    @classmethod
    def create(cls) -> PidsCgroup | None:
        base = cls.base()
        if base is None:
            return None
        for stale in base.glob("acode-sandbox-*"):  # left by a sandbox that was killed
            with contextlib.suppress(ValueError, OSError):
                if not Path(f"/proc/{int(stale.name.split('-')[2])}").exists():
                    _remove_tree(stale)
        root = base / f"acode-sandbox-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            root.mkdir(exist_ok=True)
        except OSError:
            return None
        return cls(root)

    def group(self, limit: int) -> Path:
        group = self.root / str(next(self._numbers))
        group.mkdir()
        (group / "pids.max").write_text(str(limit))
        return group

    def release(self, group: Path) -> None:
        _remove_tree(group)

    def close(self) -> None:
        _remove_tree(self.root)


def _remove_tree(group: Path) -> None:
    """Kill what is left in a cgroup and its children, then remove them."""
    for child in sorted((p for p in group.iterdir() if p.is_dir()), reverse=True) if group.exists() else ():
        _remove_tree(child)
    for _ in range(100):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        os.sched_yield()
