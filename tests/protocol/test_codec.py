"""The codec: every wire type survives a round trip, and anything else is a ProtocolError."""

from __future__ import annotations

from typing import Any, get_args

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import codec
from protocol.errors import ProtocolError
from protocol.messages import (
    CoordinatorReply,
    CoordinatorRequest,
    Envelope,
    GetSteps,
    Heartbeat,
    ListSessions,
    McpReply,
    McpRequest,
    PersistenceReply,
    PersistenceRequest,
    RunStage,
    RunTool,
    SandboxReply,
    SandboxRequest,
    StageReply,
    Stop,
    SubmitTask,
    WorkerInfo,
)
from protocol.plans.plan import TaskPlan
from protocol.sessions.events import Event, SessionCreated
from protocol.sessions.progress import ModelProgress
from protocol.sessions.session import SessionSettings, SessionSnapshot
from tests.protocol import strategies as s

#: Each decoder and the types it accepts.
DECODERS: dict[str, tuple[codec.TypedDecoder[Any], tuple[type[msgspec.Struct], ...]]] = {
    "envelope": (codec.ENVELOPE, (Envelope,)),
    "worker_info": (codec.WORKER_INFO, (WorkerInfo,)),
    "event": (codec.EVENT, get_args(Event)),
    "stream": (codec.STREAM, (*get_args(Event), ModelProgress)),
    "coordinator_request": (codec.COORDINATOR_REQUEST, get_args(CoordinatorRequest)),
    "coordinator_reply": (codec.COORDINATOR_REPLY, get_args(CoordinatorReply)),
    "persistence_request": (codec.PERSISTENCE_REQUEST, get_args(PersistenceRequest)),
    "persistence_reply": (codec.PERSISTENCE_REPLY, get_args(PersistenceReply)),
    "stage_request": (codec.STAGE_REQUEST, (RunStage,)),
    "stage_reply": (codec.STAGE_REPLY, get_args(StageReply)),
    "sandbox_request": (codec.SANDBOX_REQUEST, get_args(SandboxRequest)),
    "sandbox_reply": (codec.SANDBOX_REPLY, get_args(SandboxReply)),
    "mcp_request": (codec.MCP_REQUEST, get_args(McpRequest)),
    "mcp_reply": (codec.MCP_REPLY, get_args(McpReply)),
    "supervisor_up": (codec.SUPERVISOR_UP, (Heartbeat,)),
    "supervisor_down": (codec.SUPERVISOR_DOWN, (Stop,)),
}
#: Decoders of tagged bodies (the envelope and worker info are untagged headers).
TAGGED = [name for name in DECODERS if name not in ("envelope", "worker_info")]
MEMBERS = [(name, cls) for name, (_, types) in DECODERS.items() for cls in types]
ALL_BODY_TYPES = sorted({cls for name, cls in MEMBERS if name in TAGGED}, key=lambda c: c.__name__)


def _reject(decoder: codec.TypedDecoder[Any], data: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decoder.decode(data)
    return info.value


def _decodes_or_is_rejected(name: str, data: bytes) -> None:
    """The decoding contract: an accepted type, or ProtocolError ACODE-PROTO-002 — nothing else."""
    decoder, types = DECODERS[name]
    try:
        value = decoder.decode(data)
    except ProtocolError as exc:
        assert exc.code == "ACODE-PROTO-002"
        assert exc.message == f"{decoder.name} body rejected: {exc.__cause__} ({len(data)} bytes)"
    else:
        assert isinstance(value, types)


# --- strategies cover the protocol -------------------------------------------------------


def test_every_member_of_every_union_has_a_strategy() -> None:
    missing = sorted({cls.__name__ for _, cls in MEMBERS} - {cls.__name__ for cls in s.STRATEGIES})
    assert missing == []


@pytest.mark.parametrize("cls", s.struct_types(), ids=lambda cls: cls.__name__)
def test_strategy_sets_every_field_of_its_struct(cls: type[msgspec.Struct]) -> None:
    assert s.FIELDS[cls] == frozenset(cls.__struct_fields__)


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "cls"), MEMBERS, ids=[f"{n}-{c.__name__}" for n, c in MEMBERS])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_message_survives_an_msgpack_round_trip(name: str, cls: type, data: st.DataObject) -> None:
    decoder, _ = DECODERS[name]
    message = data.draw(s.strategy_for(cls))
    decoded = decoder.decode(codec.encode(message))
    assert decoded == message
    assert type(decoded) is cls


@pytest.mark.parametrize("cls", [*get_args(Event), SessionSnapshot, TaskPlan], ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_stored_records_survive_a_json_round_trip(cls: type, data: st.DataObject) -> None:
    value = data.draw(s.strategy_for(cls))
    target = Event if cls in get_args(Event) else cls
    assert msgspec.json.decode(codec.to_json(value), type=target) == value


# --- anything else is a ProtocolError ----------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    for name in DECODERS:
        _decodes_or_is_rejected(name, data)


_tags = st.sampled_from([cls.__struct_config__.tag for cls in ALL_BODY_TYPES])
_shapes = s.json_values | st.dictionaries(st.sampled_from(["type", "id", "session_id", "instance", "v"]),
                                          s.json_values | _tags, max_size=4)


@settings(max_examples=300, deadline=None)
@given(value=_shapes)
def test_valid_msgpack_of_any_shape_decodes_or_raises_protocol_error(value: Any) -> None:
    data = msgspec.msgpack.encode(value)
    for name in DECODERS:
        _decodes_or_is_rejected(name, data)


@pytest.mark.parametrize("name", TAGGED)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_message_of_another_union_is_rejected(name: str, data: st.DataObject) -> None:
    decoder, types = DECODERS[name]
    foreign = data.draw(st.sampled_from([cls for cls in ALL_BODY_TYPES if cls not in types]))
    body = codec.encode(data.draw(s.strategy_for(foreign)))
    err = _reject(decoder, body)
    assert err.code == "ACODE-PROTO-002"
    assert f"Invalid value '{foreign.__struct_config__.tag}' - at `$.type`" in err.message


def test_a_body_nested_past_the_depth_limit_is_a_protocol_error() -> None:
    shallow = msgspec.msgpack.encode({"type": "run_tool", "key": "k", "session_id": "s", "workspace": "/w",
                                      "tool": "read_file", "arguments": {"a": None}})
    assert shallow.endswith(b"\xc0")
    body = shallow[:-1] + b"\x91" * 5_000 + b"\xc0"  # arguments = {"a": [[[...[None]...]]]}
    err = _reject(codec.SANDBOX_REQUEST, body)
    assert err.code == "ACODE-PROTO-002"
    assert isinstance(err.__cause__, RecursionError)
    assert err.message == f"sandbox request body rejected: {err.__cause__} ({len(body)} bytes)"


def test_an_empty_body_is_rejected_with_the_decoder_name_and_size() -> None:
    err = _reject(codec.COORDINATOR_REQUEST, b"")
    assert str(err) == f"coordinator request body rejected: {err.__cause__} (0 bytes) (ACODE-PROTO-002)"
    assert isinstance(err.__cause__, msgspec.DecodeError)


# --- envelope versions -------------------------------------------------------------------


def test_decode_envelope_accepts_the_current_version() -> None:
    env = Envelope(id="r1", session_id="s1", attempt=3)
    assert codec.decode_envelope(codec.encode(env)) == env


@pytest.mark.parametrize("version", [0, 2, 255])
def test_decode_envelope_refuses_another_version(version: int) -> None:
    with pytest.raises(ProtocolError) as info:
        codec.decode_envelope(codec.encode(Envelope(id="r1", v=version)))
    assert info.value.code == "ACODE-PROTO-003"
    assert info.value.message == (f"protocol version {version} is not supported (this acode speaks 1); "
                                  "run the same acode version everywhere")


def test_decode_envelope_rejects_a_version_past_one_byte_as_malformed() -> None:
    with pytest.raises(ProtocolError) as info:
        codec.decode_envelope(codec.encode(Envelope(id="r1", v=256)))
    assert info.value.code == "ACODE-PROTO-002"
    assert "at `$.v`" in info.value.message


# --- forward compatibility and bounds ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("envelope", {"v": 1, "id": "r1", "priority": 9}, Envelope(id="r1")),
        ("event",
         {"type": "session_created", "id": "e1", "session_id": "s1", "task": "t", "workspace": "/w",
          "origin": {"host": "h"}},
         SessionCreated(id="e1", session_id="s1", task="t", workspace="/w")),
        ("coordinator_request",
         {"type": "submit_task", "session_id": "s1", "task": "t", "workspace": "/w",
          "settings": {"max_turns_per_step": 4, "sandbox_profile": "strict"}, "client": "cli/2"},
         SubmitTask(session_id="s1", task="t", workspace="/w", settings=SessionSettings(max_turns_per_step=4))),
        ("supervisor_up",
         {"type": "heartbeat", "instance": "executor-1", "actor": "executor", "pid": 7, "epoch": 2,
          "state": "ready", "load": 0.5},
         Heartbeat(instance="executor-1", actor="executor", pid=7, epoch=2, state="ready")),
    ],
    ids=["envelope", "event", "nested-settings", "heartbeat"],
)
def test_a_message_with_an_unknown_field_still_decodes(name: str, raw: dict[str, Any], expected: Any) -> None:
    decoder, _ = DECODERS[name]
    assert decoder.decode(msgspec.msgpack.encode(raw)) == expected


@pytest.mark.parametrize(
    ("name", "message", "path"),
    [
        ("envelope", Envelope(id="r1", attempt=0), "$.attempt"),
        ("envelope", Envelope(id="r1", attempt=10**7), "$.attempt"),
        ("envelope", Envelope(id="r1", epoch=-1), "$.epoch"),
        ("envelope", Envelope(id=""), "$.id"),
        ("stage_request",
         RunStage(session_id="s", stage="executor", visit=1, attempt=0, task="t", workspace="/w",
                  settings=SessionSettings()), "$.attempt"),
        ("stage_request",
         RunStage(session_id="s", stage="executor", visit=1_001, attempt=1, task="t", workspace="/w",
                  settings=SessionSettings()), "$.visit"),
        ("sandbox_request",
         RunTool(key="k", session_id="s", workspace="/w", tool="read_file", output_limit_bytes=1_023),
         "$.output_limit_bytes"),
        ("persistence_request", ListSessions(limit=0), "$.limit"),
        ("persistence_request", GetSteps(session_id="s", visit=0), "$.visit"),
        ("coordinator_request",
         SubmitTask(session_id="s", task="t", workspace="/w", settings=SessionSettings(max_turns_per_step=101)),
         "$.settings.max_turns_per_step"),
        ("worker_info", WorkerInfo(instance="w", capacity=0), "$.capacity"),
    ],
    ids=["attempt-0", "attempt-1e7", "epoch-neg", "empty-id", "stage-attempt-0", "visit-1001",
         "output-limit", "limit-0", "steps-visit-0", "max-turns", "capacity-0"],
)
def test_an_out_of_bound_value_is_rejected_on_decode(name: str, message: Any, path: str) -> None:
    decoder, _ = DECODERS[name]
    err = _reject(decoder, codec.encode(message))  # Structs do not validate on construction
    assert err.code == "ACODE-PROTO-002"
    assert str(err.__cause__).endswith(f"- at `{path}`")
