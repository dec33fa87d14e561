"""Multipart frame layout between clients, the broker and workers (Majordomo-style).

After the ROUTER's routing-id frame, every message starts with ``MAGIC`` and a one-byte
command::

    client -> broker   [MAGIC, REQUEST, service, header, body]
    broker -> worker   [MAGIC, REQUEST, client_route, header, body]
    worker -> broker   [MAGIC, REPLY, client_route, header, body]
    broker -> client   [MAGIC, REPLY, service, header, body]
    worker -> broker   [MAGIC, READY, service, worker_info]
    either way         [MAGIC, HEARTBEAT]
    either way         [MAGIC, DISCONNECT]

``header`` is an msgpack :class:`~protocol.messages.Envelope`; ``body`` is an msgpack
tagged message the broker never decodes. Parsing only checks the frame shape.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol.errors import ProtocolError

__all__ = ["DISCONNECT", "HEARTBEAT", "MAGIC", "READY", "REPLY", "REQUEST", "Frames", "parse"]

MAGIC = b"ACODE1"
REQUEST = b"\x01"
REPLY = b"\x02"
READY = b"\x03"
HEARTBEAT = b"\x04"
DISCONNECT = b"\x05"

_SIZES = {REQUEST: 5, REPLY: 5, READY: 4, HEARTBEAT: 2, DISCONNECT: 2}
_NAMES = {REQUEST: "REQUEST", REPLY: "REPLY", READY: "READY", HEARTBEAT: "HEARTBEAT",
          DISCONNECT: "DISCONNECT"}


class Frames(NamedTuple):
    command: bytes
    address: bytes = b""  # service name or client route, by direction
    header: bytes = b""
    body: bytes = b""


def parse(frames: list[bytes]) -> Frames:
    """Check a message's shape (magic, command, frame count) and split it."""
    if not frames or frames[0] != MAGIC:
        head = frames[0][:16] if frames else b""
        raise ProtocolError(f"frame does not start with {MAGIC!r} (got {head!r}, {len(frames)} frames); "
                            "is the peer an acode process of the same version?",
                            code="ACODE-PROTO-001")
    if len(frames) < 2:
        raise ProtocolError(f"message has only the {MAGIC!r} frame; a command frame must follow it",
                            code="ACODE-PROTO-001")
    command = frames[1]
    size = _SIZES.get(command)
    if size is None:
        raise ProtocolError(f"unknown command byte {command[:4]!r}", code="ACODE-PROTO-001")
    if len(frames) != size:
        raise ProtocolError(f"{_NAMES[command]} needs {size} frames, got {len(frames)}",
                            code="ACODE-PROTO-001")
    if size == 2:
        return Frames(command)
    if size == 4:
        return Frames(command, frames[2], frames[3])
    return Frames(command, frames[2], frames[3], frames[4])
