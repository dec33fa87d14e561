"""Events a newer acode sends (issue 29): a client passes what it does not know through."""

from __future__ import annotations

import json

import msgspec
import pytest

from acode.events import EVENT_LIST, GenericEvent, RawEventList, decode_event, decode_stream, kind, typed
from cli.follow import print_json
from protocol import codec
from protocol.errors import ProtocolError
from protocol.messages import EventList
from protocol.sessions.events import StepStarted
from protocol.sessions.progress import ModelProgress

KNOWN = StepStarted(id="e2", session_id="s1", seq=2, visit=1, task="T1", step="S1", title="write it")
NEWER = {"type": "plan_simulated", "id": "e3", "session_id": "s1", "seq": 3, "at": 1.5, "paths": ["a.py"]}
# a known type with a value this version does not allow (a new literal), and a field it does not have
WIDER = {"type": "session_finished", "id": "e4", "session_id": "s1", "seq": 4, "status": "abandoned",
         "exit_code": 0}


def test_a_known_event_is_typed_and_an_unknown_one_is_generic_with_everything_it_carried() -> None:
    assert decode_event(codec.encode(KNOWN)) == KNOWN
    newer = decode_event(msgspec.msgpack.encode(NEWER))
    assert isinstance(newer, GenericEvent)
    assert (newer.type, newer.seq, newer.id, newer.at, newer.data) == ("plan_simulated", 3, "e3", 1.5, NEWER)
    wider = decode_event(msgspec.msgpack.encode(WIDER))
    assert isinstance(wider, GenericEvent) and wider.type == "session_finished" and wider.seq == 4
    extra = decode_event(msgspec.msgpack.encode({**msgspec.to_builtins(KNOWN), "new_field": 1}))
    assert extra == KNOWN, "a field this version does not know is ignored, the event stays typed"
    assert [kind(e) for e in (KNOWN, newer)] == ["step_started", "plan_simulated"]
    assert typed([KNOWN, newer]) == [KNOWN]
    assert KNOWN.schema_version == newer.schema_version == 1, "every event a client gets says its schema version"
    assert "schema_version" not in msgspec.to_builtins(KNOWN), "a class attribute, not a field on the wire"


def test_a_whole_event_list_with_an_unknown_event_decodes_without_a_gap() -> None:
    body = msgspec.msgpack.encode({"type": "event_list", "events": [msgspec.to_builtins(KNOWN), NEWER]})
    listed = EVENT_LIST.decode(body)
    assert isinstance(listed, RawEventList)
    assert [e.seq for e in map(decode_event, listed.events)] == [2, 3]
    with pytest.raises(ProtocolError):  # what the strict decoder did before: the whole reply failed
        codec.PERSISTENCE_REPLY.decode(body)
    assert [decode_event(e) for e in EVENT_LIST.decode(codec.encode(EventList(events=[KNOWN]))).events] == [KNOWN]


def test_the_stream_tells_progress_events_and_unknown_events_apart() -> None:
    progress = ModelProgress(session_id="s1", stage="planner", tokens=3, elapsed_s=0.5)
    assert decode_stream(codec.encode(progress)) == progress
    assert isinstance(decode_stream(msgspec.msgpack.encode(NEWER)), GenericEvent)
    with pytest.raises(ProtocolError, match="ACODE-PROTO-002"):
        decode_stream(msgspec.msgpack.encode({"no": "type"}))


def test_json_output_passes_an_unknown_event_through_as_sent(capsys: pytest.CaptureFixture[str]) -> None:
    print_json(decode_event(msgspec.msgpack.encode(NEWER)))
    print_json([KNOWN, decode_event(msgspec.msgpack.encode(NEWER))])
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first == {"schema_version": 1, **NEWER}
    assert second[1] == {"schema_version": 1, **NEWER} and second[0]["type"] == "step_started"
