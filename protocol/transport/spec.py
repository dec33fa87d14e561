"""The spec a supervised child receives on its command line (``--spec <json>``).

Children get endpoints and settings, never sockets: each process makes its own ZeroMQ
context after it starts. ``options`` holds the actor's own settings; each actor converts
it into its own typed Struct.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

__all__ = ["ActorSpec", "Endpoints"]


class Endpoints(msgspec.Struct, frozen=True, kw_only=True):
    broker: str  # ROUTER: requests and replies
    events_in: str  # XSUB: publishers connect here
    events_out: str  # XPUB: subscribers connect here
    supervisor: str  # coordinator's ROUTER: heartbeats up, Stop down


class ActorSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    actor: str  # broker, persistence, sandbox, planner, executor, verifier, reviewer
    instance: str  # unique name of this process, e.g. "executor-2"
    epoch: Annotated[int, msgspec.Meta(ge=0)]
    home: str
    endpoints: Endpoints
    parent_pid: Annotated[int, msgspec.Meta(ge=0)] = 0
    heartbeat_interval: Annotated[float, msgspec.Meta(gt=0, le=60)] = 1.0
    liveness: Annotated[int, msgspec.Meta(ge=1, le=100)] = 3
    log_level: str = "info"
    options: dict[str, Any] = {}
