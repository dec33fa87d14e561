"""The coordinator process: supervisor of every actor, orchestrator of every session, and
the ``coordinator`` service the CLI talks to.

Start order: broker, persistence, sandbox, mcp (when the MCP SDK is installed), then the
stage actors (all spawned at once; ZeroMQ connections wait for their peers). When
persistence first reports ready, the orchestrator recovers unfinished sessions. Stop order
is the reverse: stage actors, sandbox, mcp, persistence, broker. Only one coordinator may
run per acode home: it holds an exclusive lock on ``run/coordinator.lock`` for its whole
life.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal, assert_never

import msgspec

from actors import private
from actors._base import Actor
from actors.coordinator.orchestrator import Orchestrator
from actors.coordinator.requests import SessionRequests
from actors.coordinator.supervisor import Child, SupervisionOptions, Supervisor, next_epoch
from actors.logrotate import LogLimits
from actors.paths import RunPaths
from broker.client import Client
from broker.worker import DEFERRED, Request, Worker
from protocol import codec
from protocol.errors import CliError
from protocol.messages import (
    Ack,
    ActorStatus,
    ApprovePlan,
    CancelSession,
    DecideApproval,
    GetStatus,
    Message,
    PauseSession,
    ReplanSession,
    ResumeSession,
    RewindSession,
    Shutdown,
    StatusReport,
    SteerSession,
    SubmitTask,
    SupervisorDown,
)
from protocol.plans.stages import STAGES
from protocol.transport.spec import ActorSpec

__all__ = ["Coordinator", "CoordinatorOptions", "mcp_installed", "run_coordinator"]

STOP_ORDER: list[list[str]] = [list(STAGES), ["sandbox"], ["mcp"], ["persistence"], ["broker"]]


class CoordinatorOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    workers: dict[str, int] = {}
    supervision: SupervisionOptions = SupervisionOptions()
    synchronous: Literal["full", "normal"] = "full"
    logs: LogLimits = LogLimits()


class Coordinator(Actor):
    actor = "coordinator"
    supervised = False

    def on_start(self) -> None:
        self.options = msgspec.convert(self.spec.options, CoordinatorOptions)
        self.paths = RunPaths(Path(self.spec.home))
        self.started_at = time.time()
        self.started_mono = self.loop.clock()
        self.supervisor = Supervisor(self, self.paths, self.options.supervision, on_ready=self._on_ready,
                                     on_lost=self._on_lost, on_failed=self._on_failed, logs=self.options.logs)
        self.supervisor.add("broker", "broker")
        self.supervisor.add("persistence", "persistence", database=str(self.paths.database),
                            synchronous=self.options.synchronous)
        self.supervisor.add("sandbox", "sandbox")
        if mcp_installed():
            self.supervisor.add("mcp", "mcp")
        for stage in STAGES:
            count = self.options.workers.get(stage, 1)
            for index in range(1, count + 1):
                self.supervisor.add(stage if count == 1 else f"{stage}-{index}", stage)
        assert self.ctx is not None
        self.client = Client(self.ctx, self.spec.endpoints.broker, sender="coordinator", epoch=self.spec.epoch,
                             log=self.log)
        self.loop.add_reader(self.client.socket, self.client.on_readable)
        self.loop.every(0.1, self.client.tick)
        self.worker = Worker(self, "coordinator", self.handle, capacity=1000)
        self.worker.start()
        self.orchestrator = Orchestrator(self, self.client, is_failed=self.supervisor.is_failed)
        self.requests = SessionRequests(self.orchestrator)
        self.supervisor.start_all()

    def on_stop(self) -> None:
        orchestrator = getattr(self, "orchestrator", None)  # None when stopped before it started
        if orchestrator is not None:
            orchestrator.hooks.close()
        self.worker.close()
        self.supervisor.stop_all(STOP_ORDER)
        self.client.close()

    def busy(self) -> list[str]:
        return self.worker.busy()

    # -- supervision callbacks -------------------------------------------------------------

    def cancel_work(self, actor: str, request_id: str, reason: str) -> None:
        self.supervisor.cancel_work(actor, request_id, reason)

    def control_work(self, actor: str, message: SupervisorDown) -> None:
        self.supervisor.control(actor, message)

    def _on_ready(self, child: Child) -> None:
        if child.actor == "persistence":
            self.orchestrator.recover()

    def _on_lost(self, child: Child, busy: list[str], reason: str) -> None:
        self.orchestrator.on_child_lost(child.actor, busy, reason)

    def _on_failed(self, child: Child) -> None:
        if self.supervisor.is_failed(child.actor):
            self.orchestrator.on_actor_failed(child.actor, child.reason)

    # -- the coordinator service -----------------------------------------------------------

    def handle(self, request: Request) -> Message:
        body = codec.COORDINATOR_REQUEST.decode(request.body)
        match body:
            case SubmitTask():
                reply = self.requests.submit(request, body)
                return reply if reply is not None else DEFERRED
            case GetStatus():
                return self.status()
            case CancelSession():
                self.requests.cancel(request, body)
                return DEFERRED
            case ResumeSession():
                self.requests.resume(request, body)
                return DEFERRED
            case PauseSession():
                self.requests.pause(request, body)
                return DEFERRED
            case SteerSession():
                self.requests.steer(request, body)
                return DEFERRED
            case ApprovePlan():
                self.requests.approve_plan(request, body)
                return DEFERRED
            case ReplanSession():
                self.requests.replan(request, body)
                return DEFERRED
            case DecideApproval():
                self.requests.decide_approval(request, body)
                return DEFERRED
            case RewindSession():
                self.requests.rewind(request, body)
                return DEFERRED
            case Shutdown(reason=reason):
                self.loop.call_later(0.05, lambda: self.request_stop(reason))
                return Ack(detail="stopping")
            case _:
                assert_never(body)

    def status(self) -> StatusReport:
        now = self.loop.clock()
        me = ActorStatus(instance="coordinator", actor="coordinator", state="ready", pid=os.getpid(),
                         epoch=self.spec.epoch, started_at=self.started_at,
                         uptime_s=round(now - self.started_mono, 3), heartbeat_age_s=0.0,
                         busy=self.orchestrator.active)
        failed = self.supervisor.failed()
        return StatusReport(pid=os.getpid(), home=self.spec.home, started_at=self.started_at,
                            degraded=bool(failed), reason="; ".join(f"{c.instance}: {c.reason}" for c in failed),
                            actors=[me, *self.supervisor.statuses()], sessions_active=self.orchestrator.active)


def mcp_installed() -> bool:
    """Whether the MCP SDK (``acode[mcp]``) is installed: only then is the ``mcp`` actor
    started (found without importing it: no process but that actor imports the SDK)."""
    return importlib.util.find_spec("mcp") is not None


def _lock(paths: RunPaths) -> Any:
    for changed in paths.prepare():  # a home an older acode (or a hand) made looser
        print(f"acode: made private: {changed}", file=sys.stderr)
    handle = open(paths.lock_file, "a+")  # noqa: SIM115 - held open for the coordinator's whole life
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        pid = paths.pid_file.read_text().strip() if paths.pid_file.exists() else "?"
        raise CliError(f"acode is already running for {paths.home} (coordinator pid {pid}); use it, or stop it "
                       "with `acode down`", code="ACODE-CLI-001") from None
    return handle


def run_coordinator(spec: ActorSpec) -> int:
    """Take the home's lock, issue the coordinator's epoch, write the pid file, run."""
    private.enter()  # foreground `acode up` has done so already; `python -m actors.coordinator` has not
    paths = RunPaths(Path(spec.home))
    lock = _lock(paths)
    try:
        spec = msgspec.structs.replace(spec, epoch=next_epoch(paths.epoch_file), parent_pid=0)
        paths.pid_file.write_text(f"{os.getpid()}\n")
        return Coordinator(spec).run()
    finally:
        try:
            if paths.pid_file.read_text().strip() == str(os.getpid()):
                paths.pid_file.unlink()
        except FileNotFoundError:
            pass
        lock.close()
