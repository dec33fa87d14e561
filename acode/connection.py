"""The link to a running actor set: the broker's endpoint, a broker client, liveness checks.

ZeroMQ, the broker client and the codec are imported when a connection is made, not with
this module: ``acode --help`` and a command that fails its checks never pay for them
(start-up is part of every command's time; see README "Performance").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.paths import RunPaths
from protocol.errors import NotRunning
from protocol.messages import Message

if TYPE_CHECKING:
    import zmq

    from protocol.codec import TypedDecoder

__all__ = ["Connection", "coordinator_pid"]


def coordinator_pid(paths: RunPaths) -> int | None:
    """The running coordinator's pid, or None (a stale pid file is ignored)."""
    try:
        pid = int(paths.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie: from ``/proc`` where there is one (importing
    psutil costs every command some 10 ms of start-up), else through psutil."""
    if Path("/proc/self/stat").exists():
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            return False
        return stat.rsplit(b")", 1)[-1].split()[:1] != [b"Z"]  # the state follows the (command)
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


class Connection:
    """Talks to the coordinator, persistence and (for an undo) sandbox services of one acode home."""

    def __init__(self, home: Path | None = None):
        import zmq

        from broker.client import Client

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

    def call(self, service: str, body: Message, *, decoder: TypedDecoder[Any], timeout: float = 15.0) -> Any:
        """``body`` to ``service``, its reply decoded by ``decoder`` (an ``Error`` reply is raised)."""
        self.require_running()
        return self.client.call(service, body, timeout=timeout, decoder=decoder)

    def coordinator(self, body: Message, *, timeout: float = 15.0) -> Any:
        from protocol import codec

        self.require_running()
        return self.client.call("coordinator", body, timeout=timeout, decoder=codec.COORDINATOR_REPLY)

    def persistence(self, body: Message, *, timeout: float = 15.0) -> Any:
        from protocol import codec

        self.require_running()
        return self.client.call("persistence", body, timeout=timeout, decoder=codec.PERSISTENCE_REPLY)

    def sandbox(self, body: Message, *, timeout: float = 60.0) -> Any:
        from protocol import codec

        self.require_running()
        return self.client.call("sandbox", body, timeout=timeout, decoder=codec.SANDBOX_REPLY)

    def subscribe(self, topic: str) -> zmq.Socket[Any]:
        import zmq

        sub: zmq.Socket[Any] = self.ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        sub.connect(self.endpoints.events_out)
        return sub
