"""The broker with real processes and sockets: routing, balancing, dedup, restarts, bad frames."""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.client import Client
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError, RequestTimeout, TransportError
from protocol.messages import Ack, Envelope, GetStatus, Message
from protocol.transport import frames
from tests.harness import Harness, wait_until

ECHO = "tests.broker.echo_actor"
REPLY = codec.COORDINATOR_REPLY


@pytest.fixture
def broker(harness: Harness) -> Harness:
    harness.start("broker")
    return harness


def _pump(client: Client, box: list[Any], count: int, *, what: str, timeout: float = 10.0) -> None:
    """Drive a client's replies and resends until ``box`` holds ``count`` answers."""

    def answered() -> bool:
        client.socket.poll(50)
        client.on_readable()
        client.tick()
        return len(box) >= count

    wait_until(answered, timeout, what=what)


def _call(client: Client, service: str = "echo", body: Message | None = None, timeout: float = 10.0) -> Ack:
    return client.call(service, body or GetStatus(), timeout=timeout, decoder=REPLY)


def test_request_reaches_a_worker_and_the_reply_comes_back(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO)
    reply = _call(broker.client())
    assert reply == Ack(detail="echo-1 1")


def test_requests_are_balanced_across_workers_of_one_service(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO, delay=0.2)
    broker.start("echo", "echo-2", module=ECHO, delay=0.2)
    client = broker.client()
    replies: list[Ack] = []
    for _ in range(4):
        client.send("echo", GetStatus(), timeout=10, decoder=REPLY,
                    on_reply=lambda reply, error: replies.append(reply))

    _pump(client, replies, 4, what="4 replies")
    assert {r.detail.split()[0] for r in replies} == {"echo-1", "echo-2"}


def test_call_all_sends_every_request_before_waiting_for_any_reply(broker: Harness) -> None:
    # Each handler waits until all three are in hand: sent one after another, they would
    # fail at the barrier instead.
    broker.start("echo", "echo-1", module=ECHO, capacity=3, threads=3, barrier=3)
    replies = broker.client().call_all("echo", [GetStatus()] * 3, timeout=10, decoder=REPLY)
    assert sorted(reply.detail for reply in replies) == ["echo-1 1", "echo-1 2", "echo-1 3"]


def test_call_all_gives_each_request_its_own_outcome(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO)
    bad = Ack(detail="not a coordinator request")  # the actor answers this one with an Error
    outcomes = broker.client().call_all("echo", [GetStatus(), bad, GetStatus()], timeout=10, decoder=REPLY)
    assert isinstance(outcomes[0], Ack) and isinstance(outcomes[2], Ack)
    assert isinstance(outcomes[1], AcodeError) and outcomes[1].code == "ACODE-PROTO-002"


def test_a_resent_request_runs_the_handler_once(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO, delay=0.3)
    client = broker.client(resend_interval=0.05)  # many resends while the handler sleeps
    assert _call(client) == Ack(detail="echo-1 1")
    assert _call(client) == Ack(detail="echo-1 2")  # the next request is the handler's 2nd run, not 20th


def test_a_request_waits_in_the_queue_until_a_worker_registers(broker: Harness) -> None:
    client = broker.client()
    replies: list[object] = []
    client.send("echo", GetStatus(), timeout=15, decoder=REPLY,
                on_reply=lambda reply, error: replies.append(reply or error))
    broker.start("echo", "echo-1", module=ECHO)

    _pump(client, replies, 1, what="queued request answered")
    assert replies == [Ack(detail="echo-1 1")]


def test_no_worker_before_the_deadline_is_a_request_timeout(broker: Harness) -> None:
    with pytest.raises(RequestTimeout) as info:
        _call(broker.client(), service="nobody", timeout=0.5)
    assert info.value.code == "ACODE-NET-001"
    assert "nobody" in str(info.value)


def test_broker_restart_strands_nobody(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO)
    client = broker.client()
    assert _call(client) == Ack(detail="echo-1 1")
    broker.kill("broker")
    broker.start("broker")  # same endpoints; the worker re-registers, the client resends
    assert _call(client, timeout=15) == Ack(detail="echo-1 2")


def test_a_worker_killed_mid_request_is_reported_lost_and_the_request_moves_on(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO, delay=30)
    client = broker.client()
    outcome: list[object] = []
    client.send("echo", GetStatus(), timeout=20, decoder=REPLY, retry_on_lost=False,
                on_reply=lambda reply, error: outcome.append(reply or error))
    wait_until(lambda: (broker.drain_heartbeats() or True) and broker.beats["echo-1"].busy,
               what="echo-1 busy")
    broker.kill("echo-1")

    _pump(client, outcome, 1, what="worker-lost answer", timeout=10)
    assert isinstance(outcome[0], TransportError)
    assert outcome[0].code == "ACODE-NET-002"


def test_a_restarted_instance_replaces_its_old_registration_at_once(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO, delay=30)
    client = broker.client()
    outcome: list[object] = []
    client.send("echo", GetStatus(), timeout=30, decoder=REPLY,
                on_reply=lambda reply, error: outcome.append(reply or error))
    wait_until(lambda: (broker.drain_heartbeats() or True) and broker.beats["echo-1"].busy,
               what="echo-1 busy")
    broker.kill("echo-1")
    broker.start("echo", "echo-1", module=ECHO)  # newer epoch, same instance: old one dropped

    _pump(client, outcome, 1, what="request re-routed to the new epoch", timeout=10)
    assert outcome == [Ack(detail="echo-1 1")]


def test_events_are_forwarded_to_subscribers_of_their_topic(broker: Harness) -> None:
    pub = broker.ctx.socket(zmq.PUB)
    sub = broker.ctx.socket(zmq.SUB)
    try:
        pub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.LINGER, 0)
        pub.connect(broker.endpoints.events_in)
        sub.connect(broker.endpoints.events_out)
        sub.setsockopt(zmq.SUBSCRIBE, b"session-a")

        def received() -> list[bytes] | None:
            pub.send_multipart([b"session-b", b"not for us"])
            pub.send_multipart([b"session-a", b"hello"])
            if sub.poll(50):
                return sub.recv_multipart()
            return None

        assert wait_until(received, what="event forwarded") == [b"session-a", b"hello"]
    finally:
        pub.close()
        sub.close()


# -- malformed input ----------------------------------------------------------------------


def _raw_dealer(h: Harness) -> zmq.Socket:  # type: ignore[type-arg]
    sock = h.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)  # what we send must reach the broker before close() returns
    sock.connect(h.endpoints.broker)
    return sock


def _request(body: bytes, *, header: bytes | None = None, service: bytes = b"echo") -> tuple[str, list[bytes]]:
    request_id = new_id()
    wall_ms = int.from_bytes(os.urandom(0) or b"\0", "big")  # no deadline
    env = header if header is not None else codec.encode(Envelope(id=request_id, deadline_ms=wall_ms))
    return request_id, [frames.MAGIC, frames.REQUEST, service, env, body]


def test_a_body_of_the_wrong_shape_gets_an_error_reply_from_the_actor(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO)
    sock = _raw_dealer(broker)
    try:
        request_id, message = _request(msgspec.msgpack.encode({"type": "submit_task", "task": 7}))
        sock.send_multipart(message)
        assert sock.poll(10_000)
        split = frames.parse(sock.recv_multipart())
        header = codec.decode_envelope(split.header)
        reply = REPLY.decode(split.body)
        assert header.correlation_id == request_id
        assert reply.error.code == "ACODE-PROTO-002"
        assert "coordinator request body rejected" in reply.error.message
    finally:
        sock.close()
    assert _call(broker.client()) == Ack(detail="echo-1 1")  # the actor is still serving


def test_an_unsupported_protocol_version_is_refused_with_its_code(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO)
    sock = _raw_dealer(broker)
    try:
        request_id = new_id()
        header = msgspec.msgpack.encode({"v": 99, "id": request_id})
        sock.send_multipart([frames.MAGIC, frames.REQUEST, b"echo", header, codec.encode(GetStatus())])
        assert sock.poll(10_000)
        reply = REPLY.decode(frames.parse(sock.recv_multipart()).body)
        assert reply.error.code == "ACODE-PROTO-003"
    finally:
        sock.close()


msgpack_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
frame_lists = st.lists(st.binary(max_size=64), min_size=0, max_size=7)
wrong_shapes = st.one_of(
    msgpack_ints, st.text(max_size=20), st.lists(msgpack_ints, max_size=5),
    st.dictionaries(st.text(max_size=8), msgpack_ints | st.text(max_size=8), max_size=5),
).map(msgspec.msgpack.encode)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.one_of(
    frame_lists,
    frame_lists.map(lambda parts: [frames.MAGIC, *parts]),
    st.tuples(wrong_shapes, wrong_shapes).map(lambda hb: [frames.MAGIC, frames.REQUEST, b"echo", *hb]),
    st.tuples(wrong_shapes).map(lambda h: [frames.MAGIC, frames.READY, b"echo", h[0]]),
    st.tuples(wrong_shapes, wrong_shapes).map(lambda hb: [frames.MAGIC, frames.REPLY, b"x", *hb]),
))
def test_random_frames_never_crash_the_broker(broker: Harness, junk: list[bytes]) -> None:
    if not junk:
        junk = [b""]
    sock = _raw_dealer(broker)
    try:
        sock.send_multipart(junk)
    finally:
        sock.close()
    assert broker.procs["broker"].poll() is None


def test_the_broker_still_routes_after_a_burst_of_garbage(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO)
    sock = _raw_dealer(broker)
    try:
        for i in range(200):
            sock.send_multipart([os.urandom(i % 17) for _ in range(i % 6 + 1)])
        sock.send_multipart([frames.MAGIC, frames.REQUEST, b"echo", b"\xc1", b"\xc1"])
    finally:
        sock.close()
    assert _call(broker.client()) == Ack(detail="echo-1 1")
    assert broker.procs["broker"].poll() is None
    assert "frame_rejected" in broker.log("broker")


def test_a_worker_busy_across_a_broker_restart_is_given_its_capacity_back_when_it_answers(broker: Harness) -> None:
    broker.start("echo", "echo-1", module=ECHO, delay=1.0)
    client = broker.client()
    outcome: list[object] = []
    client.send("echo", GetStatus(), timeout=20, decoder=REPLY,
                on_reply=lambda reply, error: outcome.append(reply or error))
    wait_until(lambda: (broker.drain_heartbeats() or True) and broker.beats["echo-1"].busy, what="echo-1 busy")
    broker.kill("broker")
    broker.start("broker")  # the worker registers again while still busy: no capacity left

    _pump(client, outcome, 1, what="the interrupted request answered", timeout=15)
    assert outcome == [Ack(detail="echo-1 1")]
    assert _call(client, timeout=10) == Ack(detail="echo-1 2")  # capacity came back with the answer
