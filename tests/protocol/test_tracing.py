"""Trace and span ids are pure functions of what they name, in the W3C trace-context shape."""

from __future__ import annotations

import re
import uuid

from protocol.basics.ids import new_id
from protocol.basics.tracing import span_id, trace_id


def test_a_uuid_session_id_traces_as_its_own_hex() -> None:
    session = new_id()
    assert trace_id(session) == uuid.UUID(session).hex
    assert trace_id(session) == trace_id(session.upper())


def test_any_other_session_id_is_hashed_to_32_hex_digits() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", trace_id("s1"))
    assert trace_id("s1") == trace_id("s1") != trace_id("s2")


def test_an_all_zero_id_is_never_made() -> None:
    assert trace_id(str(uuid.UUID(int=0))) != "0" * 32


def test_span_ids_are_16_hex_digits_and_depend_on_every_part() -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", span_id("s", "executor", 1))
    assert span_id("s", "executor", 1) == span_id("s", "executor", 1)
    assert span_id("s", "executor", 1) != span_id("s", "executor", 2) != span_id("s", "executor1")
