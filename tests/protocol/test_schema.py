"""The committed event schema agrees with the event types; every JSON line carries its version."""

from __future__ import annotations

import json
import typing

import msgspec
import pytest

from protocol import schema
from protocol.sessions.events import Event, SessionCreated


def test_the_committed_schema_is_what_the_event_types_make() -> None:
    committed = schema.path().read_text(encoding="utf-8")
    assert committed == schema.generate(), (
        f"the event types and {schema.path().name} disagree: an additive change (a new event, a new field with a "
        "default) is regenerated with `python -m protocol.schema`; anything else is a new schema version")


def test_a_deliberate_mismatch_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: an event type with one more field makes another schema."""

    class SessionCreatedPlus(SessionCreated, frozen=True, tag="session_created", kw_only=True):
        extra: int = 0

    members = tuple(SessionCreatedPlus if m is SessionCreated else m for m in typing.get_args(Event))
    monkeypatch.setattr("protocol.sessions.events.Event", typing.Union[members])  # noqa: UP007 - built at run time
    assert schema.generate() != schema.path().read_text(encoding="utf-8")


def test_every_event_type_is_in_the_schema_with_its_tag() -> None:
    data = json.loads(schema.path().read_text(encoding="utf-8"))
    tags = {member.__struct_config__.tag for member in typing.get_args(Event)}
    assert set(data["discriminator"]["mapping"]) == tags


def test_versioned_puts_the_version_first_in_each_object() -> None:
    assert list(schema.versioned({"session": 1, "schema_version": 0})) == ["schema_version", "session"]
    assert schema.versioned([{"a": 1}, 2]) == [{"schema_version": schema.SCHEMA_VERSION, "a": 1}, 2]
    assert schema.versioned("text") == "text"
    assert msgspec.json.decode(msgspec.json.encode(schema.versioned({"x": 1})))["schema_version"] == 1


def test_the_docs_show_one_valid_line_of_every_event_type() -> None:
    """docs/events.md "One line of each type": one JSON line per event type, at the current
    schema version, decoding strictly to its type, and exactly what acode prints for it."""
    from pathlib import Path

    from protocol import codec

    text = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text()
    block = text.split("## One line of each type", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    shown: list[str] = []
    for line in block.splitlines():
        data = json.loads(line)
        assert data.pop("schema_version") == schema.SCHEMA_VERSION, line[:80]
        event = msgspec.convert(data, Event, strict=True)
        assert json.loads(codec.to_json(event)) == data, line[:80]
        shown.append(data["type"])
    assert shown == [t.__struct_config__.tag for t in typing.get_args(Event)], "each type once, in the table's order"
