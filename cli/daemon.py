"""Starting and stopping the actor set: ``acode up`` (foreground or detached) and ``acode down``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import msgspec

from acode.connection import Connection, coordinator_pid
from actors.logrotate import LogLimits, rotate
from actors.paths import RunPaths
from protocol.errors import AcodeError, SupervisionError
from protocol.messages import GetStatus, Shutdown, StatusReport
from protocol.transport.spec import ActorSpec

if TYPE_CHECKING:  # the coordinator is imported only by the command that runs it in this process
    from actors.coordinator.actor import CoordinatorOptions

__all__ = ["coordinator_spec", "run_foreground", "start_detached", "stop", "wait_ready"]


def coordinator_spec(paths: RunPaths, options: CoordinatorOptions, *, heartbeat_interval: float, liveness: int,
                     log_level: str = "info") -> ActorSpec:
    return ActorSpec(actor="coordinator", instance="coordinator", epoch=0, home=str(paths.home),
                     endpoints=paths.endpoints(), heartbeat_interval=heartbeat_interval, liveness=liveness,
                     log_level=log_level, options=msgspec.to_builtins(options))


def run_foreground(spec: ActorSpec) -> int:
    """``acode up``: the coordinator runs in this process until Ctrl-C or ``acode down``."""
    from actors.coordinator.actor import run_coordinator

    return run_coordinator(spec)


def wait_ready(connection: Connection, *, timeout: float, pid: int | None = None) -> StatusReport:
    """Poll the coordinator until every actor is ready or one has failed past its restart
    intensity (the report then says ``degraded``); raise if the coordinator dies or the
    time runs out."""
    import psutil

    from protocol import codec

    deadline = time.monotonic() + timeout
    last: StatusReport | None = None
    while time.monotonic() < deadline:
        if pid is not None and not psutil.pid_exists(pid):
            log = connection.paths.log_file("coordinator")
            raise SupervisionError(f"the coordinator exited during start-up; see {log}", code="ACODE-SUP-002")
        try:
            last = connection.client.call("coordinator", GetStatus(), timeout=1.0, decoder=codec.COORDINATOR_REPLY)
        except AcodeError:
            continue
        if last.degraded or all(a.state == "ready" for a in last.actors):
            return last
        time.sleep(0.05)
    waiting = [a.instance for a in last.actors if a.state != "ready"] if last else ["coordinator"]
    raise SupervisionError(f"acode did not become ready within {timeout:g}s (waiting for {', '.join(waiting)}); "
                           f"see the logs in {connection.paths.logs}", code="ACODE-SUP-002")


def start_detached(spec: ActorSpec, *, timeout: float = 60.0) -> tuple[StatusReport, bool]:
    """Start the coordinator in the background; returns (status, whether we started it)."""
    paths = RunPaths.for_home(spec.home)
    paths.prepare()
    with Connection(paths.home) as connection:
        if coordinator_pid(paths) is not None:
            return wait_ready(connection, timeout=timeout), False
        # no coordinator runs, so nothing writes its log: renamed if past the limit (actors/logrotate.py)
        rotate(paths.log_file("coordinator"), msgspec.convert(spec.options.get("logs", {}), LogLimits), live=False)
        with open(paths.log_file("coordinator"), "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "actors.coordinator", "--spec", msgspec.json.encode(spec).decode()],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True)
        try:
            return wait_ready(connection, timeout=timeout, pid=process.pid), True
        except AcodeError:
            stop(paths, timeout=10.0)
            raise


def stop(paths: RunPaths, *, timeout: float = 30.0) -> int | None:
    """Ask the coordinator to stop; escalate to SIGTERM then SIGKILL. Returns the pid stopped, or None."""
    pid = coordinator_pid(paths)
    if pid is None:
        return None
    with Connection(paths.home) as connection:
        try:
            connection.coordinator(Shutdown(reason="acode down"), timeout=5.0)
        except AcodeError:
            pass  # it may be too broken to answer: the signals below still stop it
    for signum in (None, signal.SIGTERM, signal.SIGKILL):
        if signum is not None:
            log = paths.log_file("coordinator")
            print(f"acode: the coordinator (pid {pid}) is still running after {timeout:g}s; sending "
                  f"{signal.Signals(signum).name} (see {log})", file=sys.stderr)
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                break
        if _wait_gone(pid, timeout):
            break
    return pid


def _wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has exited. A zombie counts as gone: a detached coordinator is
    reaped by init, which may take its time, but it no longer runs anything."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False
