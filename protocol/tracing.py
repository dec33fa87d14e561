"""Trace and span ids derived from what they name, so every process agrees on them.

A session is one trace. Its id is a pure function of the session id (:func:`trace_id`):
the envelope of every message about the session, every log line about it and the spans
``acode trace`` builds from its event log after the fact carry the same 32 hex digits,
with nothing stored and nothing to hand from one process to the next, across crashes and
resumes alike. A session id is a UUID (``protocol.ids.new_id``), and its trace id is that
UUID's hex: a reader can tell the two apart but map either to the other by eye. Anything
else (a test's ``"s1"``) is hashed.

Span ids (:func:`span_id`, 16 hex digits) are a hash of the span's parts (the session, a
stage visit, an event id...): building the trace twice gives the same ids.
"""

from __future__ import annotations

import hashlib
import uuid

__all__ = ["span_id", "trace_id"]


def trace_id(session_id: str) -> str:
    """The session's trace id (W3C trace-context shape: 32 lowercase hex digits, not all zero)."""
    try:
        digits = uuid.UUID(session_id).hex
    except ValueError:
        digits = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return digits if digits.strip("0") else "0" * 31 + "1"


def span_id(*parts: object) -> str:
    """A span id (16 lowercase hex digits, not all zero) derived from ``parts``."""
    digits = hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]
    return digits if digits.strip("0") else "0" * 15 + "1"
