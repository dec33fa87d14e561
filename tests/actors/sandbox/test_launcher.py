"""The launcher in subreaper mode, driven directly: repeated SIGTERMs never cut its sweep short.

When the multi-threaded sandbox is killed, the launcher's PDEATHSIG (SIGTERM in subreaper
mode) comes once per exiting thread it is handed to, and once more when init takes it:
several SIGTERMs, the later ones after the command is gone. A burst of SIGTERMs sent here
plays that out; the launcher must still kill the command, sweep the double-forked
``setsid`` grandchild and report how the command ended (not a launcher error).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from actors.sandbox.confinement.isolation import LAUNCHER, command_env
from tests.harness import wait_until

ROUNDS = 10  # each round is a fresh chance at the window after the reap; before the fix the first one failed


def _daemon_argv(marker: str) -> list[str]:
    """Python whose child ``setsid``s and forks ``sleep <marker>`` (writing its pid to
    ``grandchild.pid``), then exits; the command itself sleeps on."""
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        open('grandchild.tmp', 'w').write(str(os.getpid()))\n"
            "        os.replace('grandchild.tmp', 'grandchild.pid')\n"
            f"        os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\ntime.sleep(600)")
    return [sys.executable, "-c", code]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _one_round(workspace: Path) -> tuple[list[dict[str, object]], int, bool]:
    """Start a command under the launcher, SIGTERM the launcher over and over until it
    exits; its status messages, its exit code, and whether the grandchild outlived it."""
    marker = f"{9_000_000 + secrets.randbelow(10**6)}.5"
    scratch = workspace / "scratch"
    scratch.mkdir()
    env = command_env(scratch)
    status_r, status_w = os.pipe()
    spec = {"sandbox_pid": os.getpid(), "mode": "subreaper", "executable": sys.executable,
            "argv": _daemon_argv(marker), "env": env, "rlimits": {}, "cgroup": None, "landlock_abi": 0,
            "writable": [str(workspace)], "status_fd": status_w}
    grandchild: psutil.Process | None = None
    try:
        launcher = subprocess.Popen([sys.executable, "-I", "-S", "-B", LAUNCHER, json.dumps(spec)],
                                    cwd=workspace, env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                                    pass_fds=(status_w,))
    finally:
        os.close(status_w)
    try:
        pid_file = workspace / "grandchild.pid"
        wait_until(lambda: pid_file.exists(), what="the double-forked grandchild")
        grandchild = psutil.Process(int(pid_file.read_text()))
        wait_until(lambda: grandchild.cmdline() == ["sleep", marker], what="the grandchild's exec")
        while launcher.poll() is None:  # each thread of a dying sandbox sends one
            os.kill(launcher.pid, signal.SIGTERM)
            time.sleep(0.0002)
        with os.fdopen(status_r, "rb") as pipe:
            status_r = -1
            messages = [json.loads(line) for line in pipe.read().splitlines()]
        return messages, launcher.returncode, _alive(grandchild)
    finally:
        if status_r != -1:
            os.close(status_r)
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        if grandchild is not None and _alive(grandchild):
            grandchild.kill()


def test_repeated_sigterms_never_stop_the_sweep_or_leave_the_daemon_alive(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        workspace = tmp_path / str(n)
        workspace.mkdir()
        messages, returncode, survived = _one_round(workspace)
        assert not survived, f"round {n}: the setsid grandchild outlived the launcher; status: {messages}"
        assert (messages, returncode) == ([{"started": True}, {"signal": signal.SIGKILL}], 0), f"round {n}"
