"""System-test fixtures: a real ``acode`` (CLI processes, coordinator, actors) per home.

:class:`Acode` runs the CLI as a subprocess exactly as a user would, with a private home
and fast supervision settings. It records every actor pid it ever sees and, on close,
runs ``acode down`` and then checks that none of them is alive, killing (by pid) and
failing the test if one is: a test that leaves a process behind is a failing test.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest

from acode.connection import Connection
from protocol.errors import AcodeError
from protocol.messages import GetStatus
from tests.harness import wait_until

CLI = [sys.executable, "-m", "cli.app"]
REPO = Path(__file__).resolve().parents[2]
FAST = {
    "ACODE_SUPERVISION__HEARTBEAT_INTERVAL": "0.25",
    "ACODE_SUPERVISION__BACKOFF_INITIAL": "0.05",
    "ACODE_SUPERVISION__BACKOFF_MAX": "0.5",
}


class Acode:
    def __init__(self, home: Path, env: dict[str, str] | None = None, *, umask: int = -1):
        self.home = home
        self.umask = umask  # the user's umask for every CLI process (-1: the test process's own)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ACODE_")}
        self.env.update({"PYTHONPATH": str(REPO), **FAST, **(env or {})})
        self.pids: set[int] = set()
        self.running: list[subprocess.Popen[str]] = []

    def __call__(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, "--home", str(self.home), *args], env=self.env, cwd=REPO,
                              capture_output=True, text=True, timeout=timeout, umask=self.umask)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Run a CLI command in the background (e.g. ``run``), to act while it goes on."""
        proc = subprocess.Popen([*CLI, "--home", str(self.home), *args], env=self.env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, umask=self.umask)
        self.running.append(proc)
        return proc

    def up(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self("up", "--detach", *args)
        self.status_or_none()
        return result

    def status_or_none(self) -> dict[str, Any] | None:
        """The coordinator's status report (asked in-process: polling through the CLI is slow)."""
        try:
            with Connection(self.home) as connection:
                report = connection.coordinator(GetStatus(), timeout=5.0)
        except AcodeError:
            return None
        data: dict[str, Any] = msgspec.to_builtins(report)
        data["actors"] = [msgspec.structs.asdict(a) for a in report.actors]  # with defaults (busy=0, ...)
        data["degraded"] = report.degraded
        for actor in data["actors"]:
            if actor.get("pid"):
                self.pids.add(actor["pid"])
        return data

    def status(self) -> dict[str, Any]:
        report = self.status_or_none()
        assert report is not None, "acode status failed"
        return report

    def actor(self, instance: str) -> dict[str, Any]:
        return next(a for a in self.status()["actors"] if a["instance"] == instance)

    def wait_busy(self, instance: str, timeout: float = 30.0) -> dict[str, Any]:
        return wait_until(lambda: (lambda a: a if a["busy"] and a["state"] == "ready" else None)(
            self.actor(instance)), timeout, interval=0.02, what=f"{instance} busy")

    def wait_restarted(self, instance: str, epoch: int, timeout: float = 30.0) -> dict[str, Any]:
        return wait_until(lambda: (lambda a: a if a["state"] == "ready" and a["epoch"] > epoch else None)(
            self.actor(instance)), timeout, what=f"{instance} restarted")

    def kill(self, instance: str) -> dict[str, Any]:
        """``kill -9`` an actor by the pid acode status reports; returns its status before."""
        actor = self.actor(instance)
        os.kill(actor["pid"], signal.SIGKILL)
        return actor

    def close(self) -> None:
        for proc in self.running:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
        self.status_or_none()
        self("down", timeout=120)
        leftovers = []
        for pid in self.pids:
            try:
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE:
                    leftovers.append((pid, " ".join(process.cmdline())[:120]))
                    process.kill()
            except psutil.NoSuchProcess:
                continue
        assert not leftovers, f"processes left behind after acode down: {leftovers}"
        log = self.home / "run" / "logs" / "coordinator.log"
        escalated = [line[:300] for line in log.read_text().splitlines() if "actor_stop_escalated" in line] \
            if log.exists() else []
        assert not escalated, f"actors ignored the request to stop: {escalated}"


@pytest.fixture
def acode(home: Path) -> Iterator[Acode]:
    instance = Acode(home)
    try:
        yield instance
    finally:
        instance.close()


@contextlib.contextmanager
def running(prefix: str) -> Iterator[Acode]:
    """An acode up in a temporary home of its own, stopped and removed after: the shared
    actor set of a module's tests (``scope="module"`` fixtures)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as home:
        instance = Acode(Path(home))
        try:
            result = instance.up()
            assert result.returncode == 0, result.stdout + result.stderr
            yield instance
        finally:
            instance.close()


@pytest.fixture(scope="module")
def shared_set(request: pytest.FixtureRequest) -> Iterator[Acode]:
    """One acode for a module's tests that each run sessions of their own and read only
    what those did (use ``shared``): an ``up`` and a ``down`` per module, not per test."""
    with running(f"acode-{request.module.__name__.rsplit('.', 1)[-1]}-") as acode:
        yield acode


@pytest.fixture
def shared(shared_set: Acode) -> Iterator[Acode]:
    """The module's shared acode, with this test's settings: what the test adds to its
    environment (read by the CLI commands it runs, e.g. a session's model and approvals
    policy, which ``acode run`` sends with the session) is undone after it."""
    env = dict(shared_set.env)
    try:
        yield shared_set
    finally:
        shared_set.env = env


def wait_exit(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def read_until(fd: int, needle: str, timeout: float = 120.0) -> str:
    """What a pty showed until ``needle`` (the tests that answer a prompt on a terminal)."""
    out = b""
    deadline = time.monotonic() + timeout
    while needle.encode() not in out:
        left = deadline - time.monotonic()
        assert left > 0, f"no {needle!r} in: {out.decode(errors='replace')[-2000:]}"
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def json_lines(stdout: str) -> list[Any]:
    """A --json command's lines, each checked to carry ``schema_version`` first, which is then
    dropped (to compare an event line with the same event nested in ``acode show --json``)."""
    from protocol.schema import SCHEMA_VERSION

    lines = []
    for line in stdout.splitlines():
        data = json.loads(line)
        assert next(iter(data)) == "schema_version" and data.pop("schema_version") == SCHEMA_VERSION, line
        lines.append(data)
    return lines


def last_json(stdout: str) -> dict[str, Any]:
    """The last JSON line of a --json command (``acode run``'s: the session and its figures)."""
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])  # type: ignore[no-any-return]


def shown_json(acode: Acode, session: str) -> dict[str, Any]:
    """``acode show SESSION --json``, which must succeed."""
    shown = acode("show", session, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)  # type: ignore[no-any-return]
