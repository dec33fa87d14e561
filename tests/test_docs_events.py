"""docs/events.md describes every event type a session's log can hold, and no other."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from protocol.events import Event

EVENTS_DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"


def test_the_events_doc_has_a_row_for_every_event_type_and_no_other() -> None:
    tags = {member.__struct_config__.tag for member in typing.get_args(Event)}
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", EVENTS_DOC.read_text(encoding="utf-8"), flags=re.M))
    rows -= {"type", "id", "session_id", "seq", "at"}  # the fields every event has
    assert sorted(rows) == sorted(tags)
