"""run_terminal: one command, checked by the policy, confined, with a deadline and a capped output.

How a command runs:

- :func:`actors.sandbox.confinement.policy.check` parses it into argv (no shell ever sees it, unless
  the user opted in for that exact command) and refuses shell syntax, executables off the
  allowlist and the argument forms known to escape (ACODE-SBX-010/011/012). The session
  may require a minimum isolation level; below it nothing runs (ACODE-SBX-015).
- The executable is looked up on the command's PATH first: a missing one is ACODE-SBX-005.
  That PATH is the user's, with the workspace's own virtualenv first when it has one
  (:mod:`actors.sandbox.confinement.toolchain`), never acode's own installation.
- It starts through ``launcher.py`` (see there) in a new session and process group, stdin
  from /dev/null, cwd the workspace, an allowlisted environment with HOME and TMPDIR in a
  per-call scratch dir (removed afterwards), rlimits, a pids cgroup when there is one, and
  the isolation :mod:`actors.sandbox.confinement.isolation` found: bubblewrap, Landlock or process-level,
  with the process tree contained by a PID namespace or a subreaper.
- git's configuration and hooks, ``.agent/`` and acode's config are protected
  (:mod:`actors.sandbox.confinement.sealed`: read-only binds under bubblewrap, and ``.git`` read-only
  as a whole to programs other than git) and compared before and after the command at
  every level (:mod:`actors.sandbox.confinement.tripwire`): a change is restored and fails the call
  with ACODE-SBX-021, which pauses the session.
- stdout and stderr share one pipe, read without blocking as data comes. At most
  ``max_bytes`` are kept (head and tail halves); the middle is counted and marked. ANSI
  and OSC escapes and other control characters are stripped, invalid UTF-8 replaced.
- The launcher's exit is watched through a pidfd. At the deadline the tree is killed: the
  launcher's process group gets SIGKILL, which takes a PID namespace with it; in subreaper
  mode the launcher first gets SIGTERM so it can sweep re-parented orphans. Whatever is
  left in the pids cgroup is killed when it is released. The sandbox is a child subreaper
  too, so an orphan that escaped everything else comes back to it and is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import msgspec
import psutil

from actors.private import user_umask
from actors.sandbox.confinement import policy as command_policy
from actors.sandbox.confinement import sealed, toolchain, tripwire, visible
from actors.sandbox.confinement.confine import Workspace, quote
from actors.sandbox.confinement.isolation import (
    LAUNCHER,
    Isolation,
    PidsCgroup,
    command_env,
    detect,
    require,
)
from actors.sandbox.confinement.policy import command_policy_of
from actors.sandbox.confinement.visible import View, inside
from actors.sandbox.tools.output import Capture, Outcome
from protocol.calls.tools import RunTerminal
from protocol.errors import ConfigError, ErrorInfo, SandboxError
from protocol.policy.sandbox import SandboxPolicy

__all__ = ["SCRATCH_PREFIX", "Terminal", "command_policy_of", "sweep_scratch"]

SCRATCH_PREFIX = "acode-cmd-"  # a command's scratch directory: acode-cmd-<sandbox pid>-<random>
_SCRATCH = re.compile(re.escape(SCRATCH_PREFIX) + r"([0-9]+)-[^/]+")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def sweep_scratch(root: Path) -> int:
    """Remove the scratch directories of sandboxes that died without removing them (a kill
    -9 in the middle of a command): named ``acode-cmd-<pid>-…``, owned by this user, their
    pid not running. A pid reused since keeps its directory until a later sweep. Returns
    how many were removed."""
    removed = 0
    uid = os.getuid()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for entry in entries:
        found = _SCRATCH.fullmatch(entry.name)
        if found is None:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        if not _alive(int(found.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed

_CHUNK = 65536
_DRAIN_CHUNKS = 64  # per turn: an endless writer cannot keep us from checking the deadline
_SWEEP_GRACE_S = 2.0  # how long a subreaper launcher gets to sweep after SIGTERM
_PR_SET_CHILD_SUBREAPER = 36
# Beyond the view, Landlock lets a command read /proc (other processes' sensitive entries are
# ptrace-scoped away) and these devices; /dev/null and /dev/tty are writable (launcher.py).
_LANDLOCK_READ = ("/proc", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _drain(fd: int, capture: Capture) -> bool:
    """Read what the pipe holds now; False at end of file."""
    for _ in range(_DRAIN_CHUNKS):
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        capture.feed(chunk)
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _user_processes() -> int:
    uid = os.getuid()
    return sum(1 for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid)


class Terminal:
    """Runs commands and remembers the running ones, so :meth:`kill_all` can end them at stop.

    ``isolation`` is what :func:`~actors.sandbox.confinement.isolation.detect` found (detected on first
    use when not given); ``subreaper`` makes this process a child subreaper, which only the
    sandbox actor wants (orphans of every command come back to it: :meth:`sweep`).
    """

    def __init__(self, isolation: Isolation | None = None, *, subreaper: bool = False, read_boundary: bool = True,
                 protect: bool = True):
        self._read_boundary = read_boundary  # False: the whole root readable, for scripts/bench.py's comparison only
        self._protect = protect  # False: no protected paths (actors.sandbox.confinement.sealed): scripts/bench.py only
        self._lock = threading.Lock()
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        # per workspace root: commands in flight, and the mount points bubblewrap made for them
        # over missing protected directories; removed when the last of them ends (see _leave)
        self._in_flight: dict[str, int] = {}
        self._mount_points: dict[str, set[str]] = {}
        self._isolation = isolation
        self._cgroups: PidsCgroup | None = None
        self._scratch_root = Path(tempfile.gettempdir())
        self._hidden: list[str] = []
        if subreaper:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            # the sandbox actor: what a predecessor killed mid-command left behind goes now
            self.scratch_swept = sweep_scratch(self._scratch_root)

    @property
    def isolation(self) -> Isolation:
        with self._lock:
            if self._isolation is None:
                self._isolation = detect()
            if self._isolation.pids == "cgroup" and self._cgroups is None:
                self._cgroups = PidsCgroup.create()
            return self._isolation

    def hide(self, *paths: str) -> None:
        """Paths a bubblewrapped command must not see (acode's home, its sockets)."""
        self._hidden.extend(paths)

    def close(self) -> None:
        self.kill_all()
        if self._cgroups is not None:
            self._cgroups.close()

    def kill_all(self) -> int:
        """SIGKILL the process group of every running command; how many there were."""
        with self._lock:
            for pid in self._running:
                _signal_group(pid, signal.SIGKILL)
            return len(self._running)

    def sweep(self) -> int:
        """Kill and reap orphans re-parented to this (subreaper) process that are not one of
        our running launchers; how many there were."""
        swept = 0
        with self._lock:
            known = set(self._running)
            for orphan in psutil.Process().children():
                if orphan.pid in known:
                    continue
                with contextlib.suppress(psutil.NoSuchProcess):
                    orphan.kill()
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(orphan.pid, 0)
                swept += 1
        return swept

    def run(self, ws: Workspace, args: RunTerminal, *, timeout_s: float, max_bytes: int,
            policy: SandboxPolicy | None = None) -> Outcome:
        policy = policy or SandboxPolicy()
        allowed = command_policy_of(policy)
        command = command_policy.check(args.command, allowed)
        isolation = self.isolation
        require(isolation, policy.require_isolation)
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=self._scratch_root))
        group: Path | None = None
        try:
            (scratch / "home").mkdir()
            (scratch / "tmp").mkdir()
            env = command_env(scratch, extra=frozenset(policy.pass_env), path=policy.path)
            # what a command sees follows the user's PATH outside the workspace: its files are never followed
            view = self.view(policy, toolchain.outside(env["PATH"], ws.root), allowed.allow)
            for name, value in view.env.items():
                env.setdefault(name, value)  # PYENV_ROOT and the like: HOME is the scratch dir now
            tools = toolchain.command_path(ws.root, env["PATH"])
            if tools.venv is not None:  # the workspace's own virtualenv first, its base interpreter visible
                env.update(PATH=tools.path, **tools.env())
                base = visible.python_home(tools.venv, ws.root, home=os.path.expanduser("~"), hidden=self._hidden)
                view = View(read=(*view.read, *(p for p in base if not any(inside(p, r) for r in view.read))),
                            write=view.write, links=view.links, env=view.env, toolchains=view.toolchains)
            argv = command.argv
            executable = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env["PATH"])
            if executable is None:
                raise SandboxError(f"command {quote(argv[0])} was not found on PATH; install it or run a command "
                                   "that exists", code="ACODE-SBX-005")
            if self._cgroups is not None:
                group = self._cgroups.group(policy.max_processes)
            git = sealed.is_git(executable, ws.root)
            gits = visible.git_dirs(ws.root, hidden=self._hidden)
            if gits:  # a linked worktree or submodule: its git directories are the workspace's too (git's to write)
                view = View(read=(*view.read, *(() if git else gits)), write=(*view.write, *(gits if git else ())),
                            links=view.links, env=view.env, toolchains=view.toolchains)
            found = (sealed.find(ws.root, homes=self._hidden, hidden=self._hidden) if self._protect
                     else sealed.Sealed(root=ws.root))
            with self._lock:  # before the spec: no other command's end removes a mount point this one binds
                self._in_flight[ws.root] = self._in_flight.get(ws.root, 0) + 1
            try:
                spec, made = self._spec(ws, isolation, policy, scratch, executable, argv, env, timeout_s, group,
                                        view, found, git)
                with self._lock:
                    self._mount_points.setdefault(ws.root, set()).update(made)
                outcome = self._guarded(ws, spec, argv, env, timeout_s, max_bytes, isolation, args.command, found)
            finally:
                self._leave(ws.root)
        finally:
            if group is not None and self._cgroups is not None:
                self._cgroups.release(group)
            shutil.rmtree(scratch, ignore_errors=True)
        return msgspec.structs.replace(outcome, isolation=isolation.describe())

    def _guarded(self, ws: Workspace, spec: dict[str, object], argv: list[str], env: dict[str, str],
                 timeout_s: float, max_bytes: int, isolation: Isolation, command: str,
                 found: sealed.Sealed) -> Outcome:
        """:meth:`_launch` between a :class:`~actors.sandbox.confinement.tripwire.Tripwire` and its check:
        a command that changed a protected path fails with ACODE-SBX-021, the paths restored."""
        wire = tripwire.Tripwire(found)
        outcome: Outcome | None = None
        failure: SandboxError | None = None
        try:
            outcome = self._launch(ws, spec, argv, env, timeout_s, max_bytes, isolation)
        except SandboxError as exc:
            failure = exc
        finally:  # an empty mount point left for a command still running counts as missing here
            report = wire.check()
        if report:
            info = tripwire.error(command, report)
            if outcome is None:
                raise SandboxError(info.message, code=info.code) from failure
            return msgspec.structs.replace(outcome, error=info)
        if failure is not None:
            raise failure
        assert outcome is not None
        return outcome

    def _leave(self, root: str) -> None:
        """One command in ``root`` ended: when it was the last, remove the mount points
        bubblewrap made over missing protected directories (still empty: nothing could write
        them). Not sooner: a command running beside it may have bound them as they are, and
        removing one under its starting bubblewrap fails that command's mount."""
        with self._lock:
            self._in_flight[root] -= 1
            if self._in_flight[root]:
                return
            del self._in_flight[root]
            made = self._mount_points.pop(root, set())
            for path in sorted(made, reverse=True):  # children before their parents
                with contextlib.suppress(OSError):
                    os.rmdir(path)

    def view(self, policy: SandboxPolicy, path: str, allow: frozenset[str]) -> View:
        """What a command under ``policy`` may see (:mod:`actors.sandbox.confinement.visible`); the
        configured read and write paths are checked again here (ACODE-CFG-001)."""
        home = os.path.expanduser("~")
        try:
            read_paths = visible.check_paths("sandbox.read_paths", policy.read_paths, home=home, hidden=self._hidden)
            write_paths = visible.check_paths("sandbox.write_paths", policy.write_paths, home=home,
                                              hidden=self._hidden)
        except ConfigError as exc:
            raise SandboxError(exc.message, code=exc.code) from exc
        found = visible.view(allow, path, read_paths=read_paths, write_paths=write_paths, read_opt=policy.read_opt,
                             hidden=self._hidden)
        if not self._read_boundary:
            return View(read=("/",), write=found.write, env=found.env)
        return found

    def _spec(self, ws: Workspace, isolation: Isolation, policy: SandboxPolicy, scratch: Path, executable: str,
              argv: list[str], env: dict[str, str], timeout_s: float, group: Path | None,
              view: View, found: sealed.Sealed, git: bool) -> tuple[dict[str, object], list[str]]:
        """The launcher's spec, and the mount points bubblewrap will make (to remove after)."""
        rlimits: dict[str, int] = {"core": 0, "nofile": 4096,
                                   "cpu": math.ceil(timeout_s * (os.cpu_count() or 1)) + 10}
        if policy.memory_limit_mb:
            rlimits["as"] = policy.memory_limit_mb * 2**20
        if policy.file_size_limit_mb:
            rlimits["fsize"] = policy.file_size_limit_mb * 2**20
        if isolation.pids == "rlimit":
            rlimits["nproc"] = _user_processes() + policy.max_processes
        spec: dict[str, object] = {
            "sandbox_pid": os.getpid(), "mode": isolation.mode, "executable": executable,
            "argv": [executable, *argv[1:]] if isolation.mode == "bwrap" else argv, "env": env,
            "rlimits": rlimits, "cgroup": str(group) if group else None,
            "landlock_abi": isolation.landlock_abi if isolation.level == "landlock" else 0,
            "readable": [*view.read, *_LANDLOCK_READ],
            "writable": [ws.root, str(scratch), *view.write],
        }
        empty = scratch / "empty"  # bound read-only over a missing protected directory
        empty.mkdir(mode=0o555)
        made: list[str] = []
        if isolation.mode == "bwrap":
            assert isolation.bwrap is not None
            seal, made = sealed.bwrap_args(found, str(empty), git=git)
            spec["bwrap"] = visible.bwrap_argv(isolation.bwrap, ws.root, scratch, view, network=policy.network,
                                               seal=tuple(seal), hidden=self._hidden)
        elif isolation.mode == "pidns":  # the launcher binds them in the command's own mount namespace
            binds, made = sealed.binds(found, str(empty), git=git, masks=True)
            spec["seal"] = [list(bind) for bind in binds]
        return spec, made

    def _launch(self, ws: Workspace, spec: dict[str, object], argv: list[str], env: dict[str, str],
                timeout_s: float, max_bytes: int, isolation: Isolation) -> Outcome:
        status_r, status_w = os.pipe()
        spec["status_fd"] = status_w
        try:
            with self._lock:  # registered before a sweep can see it
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-B", LAUNCHER, json.dumps(spec)],
                    cwd=ws.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(status_w,), close_fds=True,
                    umask=user_umask())  # a command creates files as the user would (ours is 077)
                self._running[proc.pid] = proc
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        try:
            return self._watch(proc, status_r, argv, time.monotonic() + timeout_s, timeout_s, max_bytes,
                               isolation)
        finally:
            with self._lock:
                self._running.pop(proc.pid, None)
            _signal_group(proc.pid, signal.SIGKILL)  # leftovers of the group; the leader is not reaped yet
            if proc.stdout is not None:
                proc.stdout.close()
            proc.wait()

    def _watch(self, proc: subprocess.Popen[bytes], status_fd: int, argv: list[str], deadline: float,
               timeout_s: float, max_bytes: int, isolation: Isolation) -> Outcome:
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        os.set_blocking(out, False)
        os.set_blocking(status_fd, False)
        capture, status = Capture(max_bytes), bytearray()
        pidfd = os.pidfd_open(proc.pid)
        poller = select.poll()
        for fd in (out, pidfd, status_fd):
            poller.register(fd, select.POLLIN)
        exited = eof = False
        try:
            while not (exited and eof):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._kill_tree(proc, pidfd, isolation)
                    _drain(out, capture)
                    return Outcome(output=capture.text(), error=ErrorInfo(
                        code="ACODE-SBX-006",
                        message=f"command {quote(shlex.join(argv))} did not finish within {timeout_s:g}s and was "
                                "killed with every process it started; make it faster or give it a larger "
                                "timeout_s"))
                for fd, _ in poller.poll(math.ceil(remaining * 1000)):
                    if fd == out and not _drain(out, capture):
                        eof = True
                        poller.unregister(out)
                    elif fd == status_fd and not _read_status(status_fd, status):
                        poller.unregister(status_fd)
                    elif fd == pidfd:
                        exited = True
                        poller.unregister(pidfd)
                if exited and not eof:
                    _drain(out, capture)  # what the command wrote; background children hold the pipe
                    break
            _read_status(status_fd, status)
        finally:
            os.close(pidfd)
            os.close(status_fd)
        messages = [json.loads(line) for line in status.decode(errors="replace").splitlines() if line.strip()]
        for message in messages:
            if "error" in message:
                raise SandboxError(f"command {quote(argv[0])} could not start: {message.get('reason')} (errno "
                                   f"{message['error']}); check that it exists and is executable",
                                   code="ACODE-SBX-005")
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # peek: reaping comes after the killpg
        assert info is not None
        exit_code = _exit_code(info)
        for message in messages:
            if "exit" in message:
                exit_code = int(message["exit"])
            elif "signal" in message:
                exit_code = -int(message["signal"])
        return Outcome(output=capture.text(), exit_code=exit_code)

    @staticmethod
    def _kill_tree(proc: subprocess.Popen[bytes], pidfd: int, isolation: Isolation) -> None:
        if isolation.mode == "subreaper":  # let the launcher sweep its re-parented orphans first
            _signal_group(proc.pid, signal.SIGTERM)
            select.select([pidfd], [], [], _SWEEP_GRACE_S)
        _signal_group(proc.pid, signal.SIGKILL)


def _read_status(fd: int, into: bytearray) -> bool:
    """Read what the status pipe holds; False at end of file."""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        into += chunk


def _exit_code(info: os.waitid_result) -> int:
    """Popen's convention: the exit status, or minus the signal that killed the process."""
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status
