"""Trace and span ids derived from what they name, so every process agrees on them.

A session is one trace. Its id is a pure function of the session id (:func:`trace_id`):
the envelope of every request about the session (``Envelope.trace_id``), every log line
written while it is handled (``acode logs --session``) and the spans ``acode trace`` builds
from its event log after the fact carry the same 32 hex digits, with nothing stored and
nothing to hand from one process to the next, across crashes and resumes alike, and a
reader of the logs with acode down computes it too. A session id is a UUID (all of acode's
are: UUIDv7), and its trace id is that UUID's hex, the W3C trace-context shape
OpenTelemetry expects; any other id (a test's ``"s1"``) gives the first 32 hex digits of
its SHA-256.

Span ids (:func:`span_id`, 16 hex digits) are a hash of the span's parts (the session, a
stage visit, an event id...): building the trace twice gives the same ids.
"""

from __future__ import annotations

import functools
import hashlib
import uuid

__all__ = ["span_id", "trace_id"]


@functools.lru_cache(maxsize=1024)
def trace_id(session_id: str) -> str:
    """The session's trace id (32 lowercase hex digits, not all zero)."""
    try:
        digits = uuid.UUID(session_id).hex
    except ValueError:
        digits = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return digits if digits.strip("0") else "0" * 31 + "1"


def span_id(*parts: object) -> str:
    """A span id (16 lowercase hex digits, not all zero) derived from ``parts``."""
    digits = hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]
    return digits if digits.strip("0") else "0" * 15 + "1"
