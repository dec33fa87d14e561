"""OTP-style supervision of the actor processes, driven by the coordinator's loop.

- Spawn: each child is ``python -m <module> --spec <json>`` in its own process group, with
  a new epoch (recorded in ``run/epoch`` with fsync before the child starts).
- Exits are seen at once: a pidfd per child is a reader of the loop (no polling, no
  SIGCHLD handler). The child is reaped there.
- Hangs are seen by heartbeat: a ready child silent for ``liveness`` intervals, or a child
  not ready within ``ready_timeout``, is SIGKILLed (its group), which makes it an exit.
- Restarts use jittered exponential backoff (``backoff_initial`` doubling to
  ``backoff_max``). More than ``restart_intensity`` exits within ``restart_period``
  seconds and the child is left failed, with the reason shown in ``acode status``.
- Stop, in reverse start order: ask (Stop on the supervision socket), wait, SIGTERM,
  wait, SIGKILL the process group, reap. Escalations are logged as warnings.
- Logs stay bounded (:mod:`actors.logrotate`): a child's log past the limit is rotated
  before the child is spawned, and every ``ROTATE_EVERY_S`` the logs its children (and the
  coordinator itself, and the MCP servers) are writing are rotated in place.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import zmq

from actors.logrotate import ROTATE_EVERY_S, LogLimits, rotate, rotate_all
from actors.paths import RunPaths
from actors.spawn import MODULES, spawn
from protocol import codec
from protocol.messages import ActorState, ActorStatus, CancelWork, Heartbeat, Stop, SupervisorDown
from protocol.transport.spec import ActorSpec

__all__ = ["Child", "SupervisionOptions", "Supervisor", "next_epoch"]


class SupervisionOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    restart_intensity: int = 5
    restart_period: float = 30.0
    backoff_initial: float = 0.25
    backoff_max: float = 8.0
    stable_after: float = 10.0  # a child up this long has its backoff reset
    ready_timeout: float = 30.0
    stop_timeout: float = 5.0


def next_epoch(path: Path) -> int:
    """Issue the next epoch number, durably (write, fsync, rename, fsync the directory)."""
    try:
        current = int(path.read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        current = 0
    epoch = current + 1
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as handle:
        handle.write(f"{epoch}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return epoch


@dataclass
class Child:
    instance: str
    actor: str
    options: dict[str, Any] = field(default_factory=dict)
    state: ActorState = "stopped"
    proc: subprocess.Popen[bytes] | None = None
    pidfd: int | None = None
    epoch: int = 0
    restarts: int = 0
    exits: deque[float] = field(default_factory=deque)
    consecutive: int = 0
    started_mono: float = 0.0
    started_wall: float | None = None
    last_beat: float | None = None
    busy: list[str] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    timer: Any = None

    def status(self, now: float) -> ActorStatus:
        alive = self.proc is not None and self.state in ("starting", "ready")
        return ActorStatus(
            instance=self.instance, actor=self.actor, state=self.state,
            pid=self.proc.pid if alive and self.proc else None, epoch=self.epoch, restarts=self.restarts,
            started_at=self.started_wall if alive else None,
            uptime_s=round(now - self.started_mono, 3) if alive else 0.0,
            heartbeat_age_s=round(now - self.last_beat, 3) if alive and self.last_beat is not None else None,
            busy=len(self.busy), reason=self.reason, info=self.info if alive else {})


class Supervisor:
    """The children of one coordinator. Callbacks tell the orchestrator what happened."""

    def __init__(self, owner: Any, paths: RunPaths, options: SupervisionOptions, *,
                 on_ready: Callable[[Child], None], on_lost: Callable[[Child, list[str], str], None],
                 on_failed: Callable[[Child], None], logs: LogLimits = LogLimits()):
        self.owner = owner
        self.loop = owner.loop
        self.log = owner.log
        self.paths = paths
        self.options = options
        self.logs = logs
        self.on_ready = on_ready
        self.on_lost = on_lost
        self.on_failed = on_failed
        self.children: dict[str, Child] = {}
        self.stopping = False
        spec = owner.spec
        self.interval = spec.heartbeat_interval
        self.liveness = spec.liveness
        self.socket = owner.socket(zmq.ROUTER)
        self.socket.bind(spec.endpoints.supervisor)
        self.loop.add_reader(self.socket, self._on_heartbeats)
        self._liveness_timer = self.loop.every(self.interval / 2, self._check_liveness)
        self._rotation_timer = self.loop.every(ROTATE_EVERY_S, self.rotate_logs)

    # -- children ----------------------------------------------------------------------------

    def add(self, instance: str, actor: str, **options: Any) -> Child:
        child = Child(instance=instance, actor=actor, options=options)
        self.children[instance] = child
        return child

    def start_all(self) -> None:
        for child in self.children.values():
            self._spawn(child)

    def failed(self) -> list[Child]:
        return [c for c in self.children.values() if c.state == "failed"]

    def is_failed(self, actor: str) -> bool:
        group = [c for c in self.children.values() if c.actor == actor]
        return bool(group) and all(c.state == "failed" for c in group)

    def statuses(self) -> list[ActorStatus]:
        now = self.loop.clock()
        return [c.status(now) for c in self.children.values()]

    def _spawn(self, child: Child) -> None:
        spec = self.owner.spec
        child.epoch = next_epoch(self.paths.epoch_file)
        child_spec = ActorSpec(
            actor=child.actor, instance=child.instance, epoch=child.epoch, home=spec.home,
            endpoints=spec.endpoints, parent_pid=os.getpid(), heartbeat_interval=self.interval,
            liveness=self.liveness, log_level=spec.log_level, options=child.options)
        log_path = self.paths.log_file(child.instance)
        self._rotate_before_spawn(log_path)
        child.proc = spawn(child_spec, log_path=log_path, module=MODULES[child.actor])
        child.pidfd = os.pidfd_open(child.proc.pid)
        self.loop.add_reader(child.pidfd, lambda: self._on_exit(child))
        child.state = "starting"
        child.started_mono = self.loop.clock()
        child.started_wall = time.time()
        child.last_beat = None
        child.busy = []
        self.log.info("actor_spawned", child=child.instance, child_pid=child.proc.pid, epoch=child.epoch)

    def _on_heartbeats(self) -> None:
        while True:
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                beat = codec.SUPERVISOR_UP.decode(frames[-1])
            except Exception as exc:  # noqa: BLE001 - one bad frame must not stop supervision
                self.log.warning("heartbeat_rejected", error=str(exc))
                continue
            self._on_beat(beat)

    def _on_beat(self, beat: Heartbeat) -> None:
        child = self.children.get(beat.instance)
        if child is None or beat.epoch != child.epoch:
            return  # a stale epoch (a process on its way out) or a stranger
        child.last_beat = self.loop.clock()
        child.busy = beat.busy
        child.info = beat.info
        if beat.state == "ready" and child.state == "starting":
            child.state = "ready"
            child.reason = ""
            self.log.info("actor_ready", child=child.instance, epoch=child.epoch,
                          startup_ms=round((child.last_beat - child.started_mono) * 1000, 1))
            self.on_ready(child)

    def _on_exit(self, child: Child) -> None:
        assert child.proc is not None and child.pidfd is not None
        self.loop.remove_reader(child.pidfd)
        os.close(child.pidfd)
        child.pidfd = None
        code = child.proc.wait()
        busy, child.busy = child.busy, []
        if self.stopping or child.state == "stopping":
            child.state = "stopped"
            return
        now = self.loop.clock()
        lived = now - child.started_mono
        child.consecutive = 1 if lived >= self.options.stable_after else child.consecutive + 1
        child.exits.append(now)
        while child.exits and child.exits[0] < now - self.options.restart_period:
            child.exits.popleft()
        description = f"exit code {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"
        self.log.warning("actor_exited", child=child.instance, epoch=child.epoch, how=description,
                         lived_s=round(lived, 3), busy=len(busy))
        self.on_lost(child, busy, f"{child.instance} exited ({description})")
        if len(child.exits) > self.options.restart_intensity:
            child.state = "failed"
            child.reason = (f"{description} {len(child.exits)} times in {self.options.restart_period:g}s, "
                            f"past the restart intensity of {self.options.restart_intensity}; "
                            f"last log line: {self._last_log_line(child)}")
            self.log.error("actor_failed", child=child.instance, reason=child.reason)
            self.on_failed(child)
            return
        delay = min(self.options.backoff_max, self.options.backoff_initial * 2 ** (child.consecutive - 1))
        delay *= random.uniform(0.75, 1.25)
        child.state = "backoff"
        child.reason = f"restarting in {delay:.2f}s after {description}"
        child.timer = self.loop.call_later(delay, lambda: self._restart(child))

    def _restart(self, child: Child) -> None:
        if self.stopping:
            return
        child.restarts += 1
        self._spawn(child)
        self.log.warning("actor_restarted", child=child.instance, epoch=child.epoch, restarts=child.restarts)

    def _last_log_line(self, child: Child) -> str:
        try:
            with open(self.paths.log_file(child.instance), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 4096))
                lines = [line for line in handle.read().decode(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "(no log)"
        return lines[-1][-600:] if lines else "(empty log)"  # room for a whole error message

    def _rotate_before_spawn(self, path: Path) -> None:
        """The child's log past the limit is renamed away: its last writer has exited (one
        that somehow still holds it writes on into the renamed file, losing nothing)."""
        try:
            if rotate(path, self.logs, live=False):
                self.log.info("log_rotated", log=path.name, max_mb=self.logs.max_mb, keep=self.logs.keep)
        except OSError as exc:
            self.log.warning("log_not_rotated", log=path.name, error=str(exc))

    def rotate_logs(self) -> None:
        """The periodic pass: rotate in place every log past the limit (its writer runs on).
        A failure is logged and tried again next pass: logs must never stop supervision."""
        for path, error in rotate_all(self.paths.logs, self.logs):
            if error is None:
                self.log.info("log_rotated", log=path.name, max_mb=self.logs.max_mb, keep=self.logs.keep)
            else:
                self.log.warning("log_not_rotated", log=path.name, error=str(error))

    def _check_liveness(self) -> None:
        now = self.loop.clock()
        for child in self.children.values():
            if child.proc is None or child.proc.returncode is not None:
                continue
            if child.state == "ready" and child.last_beat is not None and \
                    now - child.last_beat > self.interval * self.liveness:
                self.log.warning("actor_hung", child=child.instance, silent_s=round(now - child.last_beat, 2))
                self._kill_group(child)
            elif child.state == "starting" and now - child.started_mono > self.options.ready_timeout:
                self.log.warning("actor_not_ready", child=child.instance, waited_s=self.options.ready_timeout)
                self._kill_group(child)

    def _kill_group(self, child: Child) -> None:
        assert child.proc is not None
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    # -- stop --------------------------------------------------------------------------------

    def stop_all(self, groups: list[list[str]]) -> None:
        """Stop children group by group (each a list of actor names), in the order given."""
        self.stopping = True
        self._liveness_timer.cancel()
        self._rotation_timer.cancel()
        for child in self.children.values():
            if child.timer is not None:
                child.timer.cancel()
        for actors in groups:
            members = [c for c in self.children.values() if c.actor in actors]
            self._stop_group(members)

    def cancel_work(self, actor: str, request_id: str, reason: str) -> None:
        """Tell every live instance of ``actor`` that ``request_id`` is abandoned (the
        instance working on it may not have reported it busy yet, so all are told)."""
        self.control(actor, CancelWork(request_ids=[request_id], reason=reason))

    def control(self, actor: str, message: SupervisorDown) -> None:
        """Send a control message (``CancelWork``, ``PauseWork``, ``SteerWork``) to every live
        instance of ``actor``: a doorbell only, what it asks for is durable elsewhere."""
        encoded = codec.encode(message)
        for child in self.children.values():
            if child.actor == actor and child.proc is not None and child.proc.poll() is None:
                try:
                    self.socket.send_multipart([child.instance.encode(), encoded], zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass  # it is gone or not reading; fencing drops its answer anyway

    def _stop_group(self, members: list[Child]) -> None:
        live = [c for c in members if c.proc is not None and c.proc.poll() is None]
        for child in live:
            child.state = "stopping"
            try:
                self.socket.send_multipart([child.instance.encode(), codec.encode(Stop(reason="acode down"))],
                                           zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
        live = self._wait(live, self.options.stop_timeout)
        for child in live:
            self.log.warning("actor_stop_escalated", child=child.instance, step="SIGTERM",
                             waited_s=self.options.stop_timeout)
            self._signal(child, signal.SIGTERM)
        live = self._wait(live, self.options.stop_timeout)
        for child in live:
            self.log.warning("actor_stop_escalated", child=child.instance, step="SIGKILL",
                             waited_s=self.options.stop_timeout)
            self._kill_group(child)
        self._wait(live, self.options.stop_timeout)
        for child in members:
            if child.pidfd is not None:
                self.loop.remove_reader(child.pidfd)
                os.close(child.pidfd)
                child.pidfd = None
            if child.proc is not None and child.proc.poll() is None:
                self._kill_group(child)
                child.proc.wait()
            child.state = "stopped"

    def _signal(self, child: Child, signum: int) -> None:
        assert child.proc is not None
        try:
            os.kill(child.proc.pid, signum)
        except ProcessLookupError:
            pass

    def _wait(self, children: list[Child], timeout: float) -> list[Child]:
        """Wait until the children exit or ``timeout`` passes; reap them; return the living."""
        deadline = time.monotonic() + timeout
        live = [c for c in children if c.proc is not None and c.proc.poll() is None]
        while live:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            fds = [c.pidfd for c in live if c.pidfd is not None]
            if fds:
                select.select(fds, [], [], min(remaining, 0.5))
            else:
                time.sleep(min(remaining, 0.05))
            live = [c for c in live if c.proc is not None and c.proc.poll() is None]
        return live
