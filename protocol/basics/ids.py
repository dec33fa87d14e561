"""Time-ordered identifiers (UUIDv7, RFC 9562) for messages, sessions, events and plans.

Python 3.11 has no ``uuid.uuid7``; this is the RFC's method 1: a 48-bit Unix
millisecond timestamp, then a 12-bit counter that orders ids made within the same
millisecond by this process, then 62 random bits. Ids from one process sort in the
order they were made; ids from different processes sort by millisecond.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid

__all__ = ["new_id", "new_span_id", "new_trace_id", "stable_id"]

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_id() -> str:
    """Return a new UUIDv7 in canonical text form."""
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            # Same millisecond (or the clock stepped back): keep order by counting on
            # from the last id; borrow the next millisecond when the counter wraps.
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:
                ms += 1
                _counter = 0
        else:
            _counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
        _last_ms = ms
        counter = _counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand
    digits = f"{value:032x}"  # uuid.UUID(int=value)'s text, without building the object (4 -> 1 us)
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def new_trace_id() -> str:
    """A 128-bit trace id (W3C trace-context shape: 32 hex digits)."""
    return os.urandom(16).hex()


def new_span_id() -> str:
    """A 64-bit span id (16 hex digits)."""
    return os.urandom(8).hex()


def stable_id(*parts: object) -> str:
    """A UUID derived from ``parts`` (UUIDv5): the same logical event gets the same id.

    Used for events a retried attempt may emit again (a step that starts twice, a check
    that is reported twice), so persistence stores them once.
    """
    # str(uuid.uuid5(_NAMESPACE, name)), without the two uuid.UUID objects (4 -> 2 us; four
    # per executor step): SHA-1 of the namespace's bytes and the name, cut to 16 bytes, with
    # the version (5) and the RFC 4122 variant bits set as uuid.UUID(bytes=..., version=5) does.
    name = "\x1f".join(map(str, parts))
    value = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name.encode()).digest()[:16])
    value[6] = (value[6] & 0x0F) | 0x50
    value[8] = (value[8] & 0x3F) | 0x80
    digits = value.hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


_NAMESPACE = uuid.UUID("6b1c4c52-4a0e-4d4f-9a51-ac0de0000000")
_NAMESPACE_BYTES = _NAMESPACE.bytes
