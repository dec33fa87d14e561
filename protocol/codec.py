"""Encoders and decoders, built once per process (msgpack on the wire, JSON for humans).

Decoding validates: a malformed or unexpected body raises :class:`ProtocolError` with a
stable code, never a bare msgspec error, so a receiver can answer with an ``Error``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from protocol.errors import ProtocolError
from protocol.messages import (
    PROTOCOL_VERSION,
    CoordinatorReply,
    CoordinatorRequest,
    Envelope,
    McpReply,
    McpRequest,
    PersistenceReply,
    PersistenceRequest,
    RunStage,
    SandboxReply,
    SandboxRequest,
    StageReply,
    SupervisorDown,
    SupervisorUp,
    WorkerInfo,
)
from protocol.sessions.events import Event
from protocol.sessions.progress import ModelProgress

__all__ = [
    "COORDINATOR_REPLY",
    "COORDINATOR_REQUEST",
    "ENVELOPE",
    "EVENT",
    "MCP_REPLY",
    "MCP_REQUEST",
    "PERSISTENCE_REPLY",
    "PERSISTENCE_REQUEST",
    "SANDBOX_REPLY",
    "SANDBOX_REQUEST",
    "STREAM",
    "STAGE_REPLY",
    "STAGE_REQUEST",
    "SUPERVISOR_DOWN",
    "SUPERVISOR_UP",
    "WORKER_INFO",
    "TypedDecoder",
    "check_version",
    "decode_envelope",
    "encode",
    "to_json",
]

T = TypeVar("T")

_encoder = msgspec.msgpack.Encoder()
_json_encoder = msgspec.json.Encoder()


def encode(obj: Any) -> bytes:
    return _encoder.encode(obj)


def to_json(obj: Any) -> bytes:
    """JSON for humans and scripts: every field, defaults included (the wire omits them)."""
    return _json_encoder.encode(_complete(obj))


def _complete(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        config = obj.__struct_config__
        out: dict[str, Any] = {config.tag_field: config.tag} if config.tag_field else {}
        for name in obj.__struct_fields__:
            out[name] = _complete(getattr(obj, name))
        return out
    if isinstance(obj, (list, tuple)):
        return [_complete(item) for item in obj]
    if isinstance(obj, dict):
        return {key: _complete(value) for key, value in obj.items()}
    return obj


class TypedDecoder(Generic[T]):
    """An msgpack decoder for one union that raises ProtocolError (ACODE-PROTO-002).

    msgspec's decoder is built at the first ``decode``, not at import: building all of the
    module's decoders costs some 8 ms, and a process uses a few of them (a CLI command
    three: start-up is part of every command's time, README "Performance")."""

    __slots__ = ("_decoder", "_type", "name")

    def __init__(self, type_: Any, name: str):
        self._type = type_
        self._decoder: msgspec.msgpack.Decoder[T] | None = None
        self.name = name

    def decode(self, data: bytes) -> T:
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = msgspec.msgpack.Decoder(self._type)
        try:
            return decoder.decode(data)
        # msgspec raises RecursionError for data nested past its depth limit; an untyped
        # field (tool arguments) lets a peer send that, so it is a rejected body too.
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            raise ProtocolError(f"{self.name} body rejected: {exc} ({len(data)} bytes)",
                                code="ACODE-PROTO-002") from exc


ENVELOPE: TypedDecoder[Envelope] = TypedDecoder(Envelope, "envelope")
WORKER_INFO: TypedDecoder[WorkerInfo] = TypedDecoder(WorkerInfo, "worker info")
EVENT: TypedDecoder[Event] = TypedDecoder(Event, "event")
# What a follower reads off the event stream: committed events and ephemeral model progress
STREAM: TypedDecoder[Event | ModelProgress] = TypedDecoder(Event | ModelProgress, "event stream message")
COORDINATOR_REQUEST: TypedDecoder[CoordinatorRequest] = TypedDecoder(CoordinatorRequest, "coordinator request")
COORDINATOR_REPLY: TypedDecoder[CoordinatorReply] = TypedDecoder(CoordinatorReply, "coordinator reply")
PERSISTENCE_REQUEST: TypedDecoder[PersistenceRequest] = TypedDecoder(PersistenceRequest, "persistence request")
PERSISTENCE_REPLY: TypedDecoder[PersistenceReply] = TypedDecoder(PersistenceReply, "persistence reply")
STAGE_REQUEST: TypedDecoder[RunStage] = TypedDecoder(RunStage, "stage request")
STAGE_REPLY: TypedDecoder[StageReply] = TypedDecoder(StageReply, "stage reply")
SANDBOX_REQUEST: TypedDecoder[SandboxRequest] = TypedDecoder(SandboxRequest, "sandbox request")
SANDBOX_REPLY: TypedDecoder[SandboxReply] = TypedDecoder(SandboxReply, "sandbox reply")
MCP_REQUEST: TypedDecoder[McpRequest] = TypedDecoder(McpRequest, "mcp request")
MCP_REPLY: TypedDecoder[McpReply] = TypedDecoder(McpReply, "mcp reply")
SUPERVISOR_UP: TypedDecoder[SupervisorUp] = TypedDecoder(SupervisorUp, "heartbeat")
SUPERVISOR_DOWN: TypedDecoder[SupervisorDown] = TypedDecoder(SupervisorDown, "supervisor command")


def decode_envelope(data: bytes) -> Envelope:
    """Decode a header and refuse a protocol version this process does not speak."""
    env = ENVELOPE.decode(data)
    check_version(env)
    return env


def check_version(env: Envelope) -> None:
    """Raise ProtocolError (ACODE-PROTO-003) for a version this process does not speak."""
    if env.v != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {env.v} is not supported (this acode speaks "
                            f"{PROTOCOL_VERSION}); run the same acode version everywhere",
                            code="ACODE-PROTO-003")
