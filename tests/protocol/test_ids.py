"""UUIDv7 ids: valid, unique and ordered as they were made, also across threads; UUIDv5
stable ids: the same text uuid.uuid5 gives (they are stored: their values must not change)."""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.basics import ids
from protocol.basics.ids import new_id, new_span_id, new_trace_id, stable_id

CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_new_id_is_a_canonical_uuid_version_7_with_the_rfc_4122_variant() -> None:
    value = new_id()
    parsed = uuid.UUID(value)
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert str(parsed) == value
    assert CANONICAL.fullmatch(value)


def test_ids_made_in_a_row_are_unique_and_sort_in_creation_order() -> None:
    made = [new_id() for _ in range(10_000)]
    assert len(set(made)) == len(made)
    assert sorted(made) == made
    assert all(uuid.UUID(v).version == 7 for v in made)


class _FrozenClock:
    """Stands in for the ``time`` module in protocol.basics.ids: the wall clock only moves when told."""

    def __init__(self) -> None:
        self.ns = time.time_ns()

    def time_ns(self) -> int:
        return self.ns


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _FrozenClock:
    fake = _FrozenClock()
    monkeypatch.setattr(ids, "time", fake)
    return fake


def test_ids_within_one_millisecond_keep_their_order_when_the_counter_wraps(clock: _FrozenClock) -> None:
    made = [new_id() for _ in range(10_000)]  # > 4,096: the 12-bit counter must wrap
    millis = {uuid.UUID(v).int >> 80 for v in made}
    assert len(millis) > 1  # the counter borrowed the next millisecond rather than repeat
    assert len(set(made)) == len(made)
    assert sorted(made) == made


def test_ids_keep_their_order_when_the_wall_clock_steps_back(clock: _FrozenClock) -> None:
    first = new_id()
    clock.ns -= 5 * 1_000_000_000
    second = new_id()
    assert second > first
    assert uuid.UUID(second).int >> 80 == uuid.UUID(first).int >> 80


def test_ids_from_two_threads_are_unique_and_each_thread_sees_them_in_order() -> None:
    results: list[list[str]] = [[], []]
    start = threading.Barrier(2)

    def make(out: list[str]) -> None:
        start.wait()
        out.extend(new_id() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results[0]) | set(results[1])) == 10_000
    assert all(sorted(out) == out for out in results)


def test_the_id_timestamp_is_the_current_unix_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    value = new_id()
    after = time.time_ns() // 1_000_000
    # The generator may borrow a few milliseconds ahead when its counter wraps.
    assert before <= uuid.UUID(value).int >> 80 <= after + 16


def test_trace_and_span_ids_have_the_w3c_shape() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", new_trace_id())
    assert re.fullmatch(r"[0-9a-f]{16}", new_span_id())


def test_a_stable_id_is_the_one_stored_events_carry() -> None:
    assert stable_id("0190a3b4-1234-7abc-8def-0123456789ab", "executor", 1, "T1", "S3", "turn1") \
        == "23ee94d8-424e-5502-88dd-aea584ad05d1"


@settings(max_examples=500)
@given(st.lists(st.one_of(st.text(), st.integers(), st.booleans(), st.none()), max_size=8))
def test_a_stable_id_is_uuid5_of_its_parts_joined_by_unit_separators(parts: list[object]) -> None:
    expected = uuid.uuid5(ids._NAMESPACE, "\x1f".join(str(p) for p in parts))
    value = stable_id(*parts)
    assert value == str(expected)
    assert uuid.UUID(value).version == 5
    assert uuid.UUID(value).variant == uuid.RFC_4122
