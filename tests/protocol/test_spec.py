"""The spec a child gets on its command line: JSON that round-trips and refuses typos."""

from __future__ import annotations

import msgspec
import pytest

from protocol.transport.spec import ActorSpec, Endpoints

ENDPOINTS = Endpoints(broker="ipc:///h/broker.ipc", events_in="ipc:///h/in.ipc", events_out="ipc:///h/out.ipc",
                      supervisor="ipc:///h/sup.ipc")


def test_an_actor_spec_survives_a_json_round_trip() -> None:
    spec = ActorSpec(actor="executor", instance="executor-2", epoch=3, home="/h", endpoints=ENDPOINTS,
                     parent_pid=41, heartbeat_interval=0.5, options={"max_turns": 10})
    assert msgspec.json.decode(msgspec.json.encode(spec), type=ActorSpec) == spec


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("heartbeat_intervall", 1.0, "Object contains unknown field `heartbeat_intervall`"),
        ("epoch", -1, "Expected `int` >= 0 - at `$.epoch`"),
        ("heartbeat_interval", 0, "Expected `float` > 0.0 - at `$.heartbeat_interval`"),
        ("liveness", 0, "Expected `int` >= 1 - at `$.liveness`"),
    ],
)
def test_an_actor_spec_refuses_an_unknown_field_or_a_value_out_of_bounds(field: str, value: object,
                                                                          message: str) -> None:
    raw = msgspec.to_builtins(ActorSpec(actor="sandbox", instance="sandbox-1", epoch=1, home="/h",
                                        endpoints=ENDPOINTS))
    raw[field] = value
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(msgspec.json.encode(raw), type=ActorSpec)
    assert str(info.value) == message
