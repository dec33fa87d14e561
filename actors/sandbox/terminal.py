"""run_terminal: one command, no shell, in its own session, with a deadline and a capped output.

How a command runs:

- ``shlex.split`` parses it into argv (no shell ever sees it); the executable is looked
  up on the command's PATH first, so a missing one is ACODE-SBX-005 naming it.
- It starts through ``launcher.py`` (see there) in a new session and process group,
  stdin from /dev/null, cwd the workspace, and dies with the sandbox (PR_SET_PDEATHSIG).
- Environment: the sandbox's, minus every name containing KEY, TOKEN, SECRET or PASSWORD,
  with the directory of ``sys.executable`` first on PATH (``python`` is acode's).
- stdout and stderr share one pipe, read without blocking as data comes. At most
  ``max_bytes`` are kept (head and tail halves); the middle is counted and marked.
- The process exit is watched through a pidfd. When the command exits, or the deadline
  passes, the whole process group is SIGKILLed (leftover background children included)
  before the leader is reaped, so its pid, the group id, cannot be reused under us.
"""

from __future__ import annotations

import math
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from actors.sandbox.confine import Workspace, quote
from actors.sandbox.output import Outcome, utf8_start, utf8_stop
from protocol.errors import ErrorInfo, SandboxError
from protocol.tools import RunTerminal

__all__ = ["Terminal", "command_env"]

_LAUNCHER = str(Path(__file__).with_name("launcher.py"))
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_CHUNK = 65536
_DRAIN_CHUNKS = 64  # per turn: an endless writer cannot keep us from checking the deadline


def command_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command gets: no secrets by name, acode's interpreter first on PATH."""
    source = dict(os.environ if base is None else base)
    env = {k: v for k, v in source.items() if not any(word in k.upper() for word in _SECRET_WORDS)}
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    return env


class _Capture:
    """Keeps the first and last ``limit / 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[:-self.tail_cap]

    def text(self) -> str:
        head, tail = self.head, self.tail[-self.tail_cap:]
        if self.total == len(head) + len(tail):
            return (head + tail).decode("utf-8", "replace")
        stop, start = utf8_stop(head, len(head)), utf8_start(tail, 0)
        cut = self.total - stop - (len(tail) - start)
        return (head[:stop].decode("utf-8", "replace") + f"\n[… truncated: {cut} bytes cut from the middle …]\n"
                + tail[start:].decode("utf-8", "replace"))


def _drain(fd: int, capture: _Capture) -> bool:
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


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


class Terminal:
    """Runs commands and remembers the running ones, so :meth:`kill_all` can end them at stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, subprocess.Popen[bytes]] = {}

    def kill_all(self) -> int:
        """SIGKILL the process group of every running command; how many there were."""
        with self._lock:
            for pid in self._running:
                _killpg(pid)
            return len(self._running)

    def run(self, ws: Workspace, args: RunTerminal, *, timeout_s: float, max_bytes: int) -> Outcome:
        try:
            argv = shlex.split(args.command)
        except ValueError as exc:
            raise SandboxError(f"command {quote(args.command)} could not be parsed: {exc}; quote it as a "
                               "POSIX shell would (no shell runs it)", code="ACODE-SBX-007") from exc
        if not argv:
            raise SandboxError("command is empty; name a program to run", code="ACODE-SBX-007")
        env = command_env()
        executable = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env["PATH"])
        if executable is None:
            raise SandboxError(f"command {quote(argv[0])} was not found on PATH; install it or run a command "
                               "that exists", code="ACODE-SBX-005")
        status_r, status_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", _LAUNCHER, str(status_w), str(os.getpid()), executable,
                 *argv],
                cwd=ws.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(status_w,), close_fds=True)
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        with self._lock:
            self._running[proc.pid] = proc
        try:
            with open(status_r, "rb") as status:
                failure = status.read()  # EOF at exec: empty when the command started
            if failure:
                err, _, reason = failure.decode(errors="replace").partition(":")
                raise SandboxError(f"command {quote(argv[0])} could not start: {reason} (errno {err}); check "
                                   "that it exists and is executable", code="ACODE-SBX-005")
            return self._watch(proc, argv, time.monotonic() + timeout_s, timeout_s, max_bytes)
        finally:
            with self._lock:
                self._running.pop(proc.pid, None)
            _killpg(proc.pid)  # leftovers of the group; the leader is not reaped yet
            if proc.stdout is not None:
                proc.stdout.close()
            proc.wait()

    def _watch(self, proc: subprocess.Popen[bytes], argv: list[str], deadline: float, timeout_s: float,
               max_bytes: int) -> Outcome:
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        os.set_blocking(out, False)
        capture = _Capture(max_bytes)
        pidfd = os.pidfd_open(proc.pid)
        poller = select.poll()
        poller.register(out, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        exited = eof = False
        try:
            while not (exited and eof):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _killpg(proc.pid)
                    _drain(out, capture)
                    return Outcome(output=capture.text(), error=ErrorInfo(
                        code="ACODE-SBX-006",
                        message=f"command {quote(shlex.join(argv))} did not finish within {timeout_s:g}s and was "
                                "killed with its process group; make it faster or give it a larger timeout_s"))
                for fd, _ in poller.poll(math.ceil(remaining * 1000)):
                    if fd == out and not _drain(out, capture):
                        eof = True
                        poller.unregister(out)
                    elif fd == pidfd:
                        exited = True
                        poller.unregister(pidfd)
                if exited and not eof:
                    _drain(out, capture)  # what the command wrote; background children hold the pipe
                    break
        finally:
            os.close(pidfd)
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # peek: reaping comes after the killpg
        assert info is not None
        return Outcome(output=capture.text(), exit_code=_exit_code(info))


def _exit_code(info: os.waitid_result) -> int:
    """Popen's convention: the exit status, or minus the signal that killed the process."""
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status
