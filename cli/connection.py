"""A CLI's link to a running actor set: the broker's endpoint, a client, liveness checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import zmq

from actors.paths import RunPaths
from broker.client import Client
from protocol import codec
from protocol.errors import NotRunning
from protocol.messages import Message

__all__ = ["Connection", "coordinator_pid"]


def coordinator_pid(paths: RunPaths) -> int | None:
    """The running coordinator's pid, or None (a stale pid file is ignored)."""
    try:
        pid = int(paths.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    return pid


class Connection:
    """Talks to the coordinator and persistence services of one acode home."""

    def __init__(self, home: Path | None = None):
        self.paths = RunPaths.for_home(home)
        self.endpoints = self.paths.endpoints()
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.client = Client(self.ctx, self.endpoints.broker, sender="cli")

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()
        self.ctx.term()

    def require_running(self) -> int:
        pid = coordinator_pid(self.paths)
        if pid is None:
            raise NotRunning(f"acode is not running for {self.paths.home}; start it with `acode up --detach`")
        return pid

    def coordinator(self, body: Message, *, timeout: float = 15.0) -> Any:
        self.require_running()
        return self.client.call("coordinator", body, timeout=timeout, decoder=codec.COORDINATOR_REPLY)

    def persistence(self, body: Message, *, timeout: float = 15.0) -> Any:
        self.require_running()
        return self.client.call("persistence", body, timeout=timeout, decoder=codec.PERSISTENCE_REPLY)

    def subscribe(self, topic: str) -> zmq.Socket[Any]:
        sub: zmq.Socket[Any] = self.ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        sub.connect(self.endpoints.events_out)
        return sub
