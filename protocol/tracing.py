"""A session's trace id: one for the whole session, the same in every process.

Every request that concerns a session carries the session's trace id in its envelope
(``Envelope.trace_id``), and every log line written while it is handled carries it too, so
the work of one session can be followed across the eight processes (``acode logs
--session``, ``acode trace``). It is derived from the session id rather than chosen and
passed around, so any process (or a reader of the logs after the fact, with acode down)
computes the same one: a session id that is a UUID (all of acode's are: UUIDv7) gives its
32 hex digits, which is also the W3C trace-context shape OpenTelemetry expects; any other
id gives the first 32 hex digits of its SHA-256.
"""

from __future__ import annotations

import functools
import hashlib
import uuid

__all__ = ["trace_id"]


@functools.lru_cache(maxsize=1024)
def trace_id(session_id: str) -> str:
    """The trace id of the session ``session_id`` (32 lowercase hex digits)."""
    try:
        return uuid.UUID(session_id).hex
    except ValueError:
        return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
