"""Real processes for tests: a private acode home, a supervision socket, spawned actors.

A :class:`Harness` plays the coordinator's supervision role just enough for actors to run
without a coordinator: it binds the supervisor endpoint (children send heartbeats there)
and starts children with :func:`actors.spawn.spawn`. It owns every process, socket and
directory it creates and removes them in :meth:`close`, even after a failing test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import zmq

from actors.paths import RunPaths
from actors.spawn import spawn
from broker.client import Client
from protocol import codec
from protocol.messages import Heartbeat
from protocol.transport.spec import ActorSpec

__all__ = ["Harness", "free_port", "listening", "wait_until"]

REPO = Path(__file__).resolve().parent.parent


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Harness:
    def __init__(self, home: Path, *, heartbeat_interval: float = 0.5):
        self.paths = RunPaths(home)
        self.paths.prepare()
        self.endpoints = self.paths.endpoints()
        self.heartbeat_interval = heartbeat_interval
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.supervisor = self.ctx.socket(zmq.ROUTER)
        self.supervisor.setsockopt(zmq.LINGER, 0)
        self.supervisor.bind(self.endpoints.supervisor)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.beats: dict[str, Heartbeat] = {}
        self.clients: list[Client] = []
        self._epoch = 0

    def spec(self, actor: str, instance: str | None = None, **options: Any) -> ActorSpec:
        self._epoch += 1
        return ActorSpec(actor=actor, instance=instance or actor, epoch=self._epoch,
                         home=str(self.paths.home), endpoints=self.endpoints, parent_pid=os.getpid(),
                         heartbeat_interval=self.heartbeat_interval, liveness=3, log_level="debug",
                         options=options)

    def start(self, actor: str, instance: str | None = None, *, module: str | None = None,
              env: dict[str, str] | None = None, wait: bool = True, ready_timeout: float = 15.0,
              **options: Any) -> subprocess.Popen[bytes]:
        spec = self.spec(actor, instance, **options)
        env = {"PYTHONPATH": str(REPO), **(env or {})}  # test-only actors live under tests/
        proc = spawn(spec, log_path=self.paths.log_file(spec.instance), module=module, env=env)
        self.procs[spec.instance] = proc
        self.beats.pop(spec.instance, None)
        if wait:
            self.wait_ready(spec.instance, epoch=spec.epoch, timeout=ready_timeout)
        return proc

    def drain_heartbeats(self) -> None:
        while True:
            try:
                _, body = self.supervisor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            beat = codec.SUPERVISOR_UP.decode(body)
            self.beats[beat.instance] = beat

    def wait_ready(self, instance: str, *, epoch: int | None = None, timeout: float = 15.0) -> Heartbeat:
        def ready() -> Heartbeat | None:
            proc = self.procs[instance]
            if proc.poll() is not None:
                raise AssertionError(f"{instance} exited with {proc.returncode} before it was ready; "
                                     f"log:\n{self.log(instance)}")
            self.supervisor.poll(20)
            self.drain_heartbeats()
            beat = self.beats.get(instance)
            if beat and beat.state == "ready" and (epoch is None or beat.epoch == epoch):
                return beat
            return None
        return wait_until(ready, timeout, interval=0, what=f"{instance} ready")

    def log(self, instance: str) -> str:
        path = self.paths.log_file(instance)
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self, sender: str = "test", **options: Any) -> Client:
        client = Client(self.ctx, self.endpoints.broker, sender=sender, **options)
        self.clients.append(client)
        return client

    def kill(self, instance: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[instance]
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        proc.wait(10)

    def stop(self, instance: str) -> int:
        proc = self.procs.pop(instance)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        return proc.returncode

    def close(self) -> None:
        for instance in list(self.procs):
            try:
                self.stop(instance)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        for client in self.clients:
            client.close()
        self.supervisor.close(linger=0)
        self.ctx.term()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def decode_json(data: bytes, type_: Any) -> Any:
    return msgspec.json.decode(data, type=type_)
