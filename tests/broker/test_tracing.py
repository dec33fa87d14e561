"""A session's trace id in the envelope: the round trip on the wire, what a new request
carries (broker.tracing.stamp), and the trace crossing two hops and every log line of
their handling, with a real broker and two real actors."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import zmq

from broker import tracing
from protocol import codec
from protocol.basics.ids import new_id
from protocol.basics.tracing import trace_id
from protocol.messages import Ack, CancelSession, Envelope, GetStatus
from protocol.transport import frames
from tests.harness import Harness, wait_until

ECHO = "tests.broker.echo_actor"
HEX32 = re.compile(r"[0-9a-f]{32}")


def test_a_session_id_gives_the_same_trace_id_everywhere() -> None:
    session = "0196f3a2-7c1e-7d4b-8a5f-3e2b1c0d9e8f"
    assert trace_id(session) == "0196f3a27c1e7d4b8a5f3e2b1c0d9e8f"
    assert HEX32.fullmatch(trace_id("not-a-uuid")) and trace_id("not-a-uuid") == trace_id("not-a-uuid")
    assert trace_id("not-a-uuid") != trace_id("not-a-uuie")


def test_an_envelope_round_trips_with_and_without_a_trace_id() -> None:
    session = new_id()
    traced = Envelope(id=new_id(), session_id=session, trace_id=trace_id(session), span_id="ab" * 8)
    assert codec.decode_envelope(codec.encode(traced)) == traced
    plain = Envelope(id=new_id())
    encoded = codec.encode(plain)
    assert b"trace_id" not in encoded and b"session_id" not in encoded  # an untraced header costs nothing
    decoded = codec.decode_envelope(encoded)
    assert decoded == plain and decoded.trace_id == "" and decoded.session_id is None
    # a header from a sender that knows more fields than this one still decodes
    newer = msgspec.msgpack.encode({**msgspec.to_builtins(traced), "baggage": "x"})
    assert codec.decode_envelope(newer) == traced


def test_a_request_carries_its_sessions_trace_or_the_one_being_served() -> None:
    session, other = new_id(), new_id()
    assert tracing.stamp(CancelSession(session_id=session)) == (session, trace_id(session))
    assert tracing.stamp(GetStatus(), session_id=other) == (other, trace_id(other))
    assert tracing.stamp(CancelSession(session_id=session), trace_id="f" * 32) == (session, "f" * 32)
    first, second = tracing.stamp(GetStatus()), tracing.stamp(GetStatus())
    assert first.session_id is None and HEX32.fullmatch(first.trace_id) and first.trace_id != second.trace_id
    served, token = tracing.serving(Envelope(id=new_id(), session_id=session))
    try:
        assert served == (session, trace_id(session))  # a header without a trace id: the session's
        assert tracing.stamp(GetStatus()) == served  # a call about no session inherits the request's
        assert tracing.stamp(CancelSession(session_id=other)) == (other, trace_id(other))  # its own wins
    finally:
        tracing.done(token)
    assert tracing.current() is None


def _handled(h: Harness, instance: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in h.log(instance).splitlines()
            if line.startswith("{") and '"echo_handled"' in line]


def test_a_sessions_trace_crosses_every_hop_and_is_on_every_line_of_its_handling(harness: Harness) -> None:
    harness.start("broker")
    harness.start("echo", "front", module=ECHO, relay="back")
    harness.start("echo", "back", module=ECHO, service="back")
    session = new_id()
    client = harness.client()
    reply = client.call("echo", CancelSession(session_id=session), timeout=10, decoder=codec.COORDINATOR_REPLY)
    assert reply == Ack(detail="front 1 <- back 1")
    untraced = client.call("echo", GetStatus(), timeout=10, decoder=codec.COORDINATOR_REPLY)
    assert untraced == Ack(detail="front 2 <- back 2")

    def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        front, back = _handled(harness, "front"), _handled(harness, "back")
        return (front, back) if len(front) == len(back) == 2 else None

    for first, second in wait_until(both, what="both actors' lines"):  # front's lines, then back's
        # the session's request: its trace on both hops, though the relayed body names no session
        assert (first["session_id"], first["trace_id"]) == (session, trace_id(session)), first
        # the request about no session: a new trace
        assert "session_id" not in second and HEX32.fullmatch(second["trace_id"]), second
    front, back = both() or ([], [])
    assert front[1]["trace_id"] == back[1]["trace_id"] != trace_id(session)  # the same on both hops


def test_the_reply_envelope_keeps_the_requests_session_and_trace(harness: Harness) -> None:
    harness.start("broker")
    harness.start("echo", "echo-1", module=ECHO)
    sock = harness.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(harness.endpoints.broker)
    try:
        session = new_id()
        for sent in (Envelope(id=new_id(), session_id=session, trace_id=trace_id(session)), Envelope(id=new_id())):
            sock.send_multipart([frames.MAGIC, frames.REQUEST, b"echo", codec.encode(sent), codec.encode(GetStatus())])
            assert sock.poll(10_000)
            header = codec.decode_envelope(frames.parse(sock.recv_multipart()).header)
            assert (header.correlation_id, header.session_id, header.trace_id) == (
                sent.id, sent.session_id, sent.trace_id)
    finally:
        sock.close()
