"""The persistence actor as a real process behind a real broker: requests, the event stream,
bad bodies, and ``kill -9`` in the middle of a stream of commits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import zmq

from broker.client import Client
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError, NotFoundError
from protocol.messages import Commit, Committed, Envelope, EventList, GetEvents, GetSession, SessionFound
from protocol.policy.budget import Spent
from protocol.sessions.events import Event
from protocol.transport import frames
from tests.actors.persistence import records
from tests.harness import Harness, wait_until

REPLY = codec.PERSISTENCE_REPLY


@pytest.fixture
def persistence(harness: Harness) -> Harness:
    harness.start("broker")
    harness.start("persistence")
    return harness


def _call(client: Client, body: Any, timeout: float = 10.0) -> Any:
    return client.call("persistence", body, timeout=timeout, decoder=REPLY)


def _new_session(client: Client) -> str:
    session_id = new_id()
    _call(client, Commit(session_id=session_id, snapshot=records.snapshot(session_id)))
    return session_id


class _Stream:
    """A subscriber to one session's events that has seen the subscription take effect."""

    def __init__(self, h: Harness, client: Client, session_id: str):
        self.sock = h.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(h.endpoints.events_out)
        self.sock.setsockopt(zmq.SUBSCRIBE, session_id.encode())
        self.client = client
        self.session_id = session_id
        self._bodies: list[bytes] = []  # the rest of the last message (one per commit)

    def warm_up(self) -> None:
        """Commit probe events until one arrives (the subscription travels up through the
        broker on its own time), then read up to the last probe: the stream is then clean."""
        probes: list[str] = []

        def probe_arrived() -> bool:
            probes.append(new_id())
            _call(self.client, Commit(session_id=self.session_id,
                                      events=[records.transitioned(self.session_id, probes[-1])]))
            return bool(self.sock.poll(50))

        wait_until(probe_arrived, what="the subscription to reach persistence's publisher")
        while self.next().id != probes[-1]:
            pass

    def next(self, timeout_ms: int = 5_000) -> Event:
        if not self._bodies:
            assert self.sock.poll(timeout_ms), "no event published in time"
            topic, *self._bodies = self.sock.recv_multipart()
            assert topic == self.session_id.encode() and self._bodies
        return codec.EVENT.decode(self._bodies.pop(0))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def stream(persistence: Harness) -> Iterator[_Stream]:
    client = persistence.client()
    stream = _Stream(persistence, client, _new_session(client))
    try:
        stream.warm_up()
        yield stream
    finally:
        stream.close()


def test_a_commit_through_the_broker_is_stored_and_read_back(persistence: Harness) -> None:
    client = persistence.client()
    session_id = new_id()
    events: list[Event] = [records.created(session_id), records.transitioned(session_id)]
    reply = _call(client, Commit(session_id=session_id, events=events, snapshot=records.snapshot(session_id)))
    assert reply == Committed(seqs=[1, 2])
    assert _call(client, GetSession(session_id=session_id)) == SessionFound(session=records.snapshot(session_id),
                                                                        spent=Spent())
    stored = _call(client, GetEvents(session_id=session_id))
    assert isinstance(stored, EventList)
    assert [(e.id, e.seq) for e in stored.events] == [(events[0].id, 1), (events[1].id, 2)]
    assert (persistence.paths.home / "acode.db").exists()


def test_a_missing_session_comes_back_as_not_found_with_its_code_and_message(persistence: Harness) -> None:
    with pytest.raises(NotFoundError) as info:
        _call(persistence.client(), GetSession(session_id="0193-missing"))
    assert info.value.code == "ACODE-STORE-002"
    assert info.value.message == "session 0193-missing not found; list sessions with `acode sessions`"


def test_committed_events_are_published_on_their_session_topic_in_seq_order(stream: _Stream) -> None:
    sid = stream.session_id
    first, second = records.created(sid), records.transitioned(sid)
    seqs = _call(stream.client, Commit(session_id=sid, events=[first, second])).seqs
    assert [(e.id, e.seq) for e in (stream.next(), stream.next())] == list(zip([first.id, second.id], seqs,
                                                                                strict=True))


def test_a_commit_is_published_as_one_message_of_its_events(stream: _Stream) -> None:
    sid = stream.session_id
    created, moved, again = records.created(sid), records.transitioned(sid), records.transitioned(sid)
    events = [created, moved, again]
    _call(stream.client, Commit(session_id=sid, events=[created, moved, again]))
    assert stream.sock.poll(5_000)
    topic, *bodies = stream.sock.recv_multipart()
    assert topic == sid.encode() and [codec.EVENT.decode(b).id for b in bodies] == [e.id for e in events]


def test_a_duplicate_commit_publishes_nothing_new(stream: _Stream) -> None:
    sid = stream.session_id
    event = records.created(sid)
    _call(stream.client, Commit(session_id=sid, events=[event]))
    assert stream.next().id == event.id
    _call(stream.client, Commit(session_id=sid, events=[event]))  # a retry: stored already
    marker = records.transitioned(sid)
    _call(stream.client, Commit(session_id=sid, events=[marker]))
    assert stream.next().id == marker.id  # one publisher keeps order: no copy of event came first


def test_a_body_of_the_wrong_shape_gets_proto_002_and_the_actor_keeps_serving(persistence: Harness) -> None:
    sock = persistence.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(persistence.endpoints.broker)
        request_id = new_id()
        body = msgspec.msgpack.encode({"type": "commit", "session_id": 7})
        sock.send_multipart([frames.MAGIC, frames.REQUEST, b"persistence",
                             codec.encode(Envelope(id=request_id)), body])
        assert sock.poll(10_000)
        split = frames.parse(sock.recv_multipart())
        assert codec.decode_envelope(split.header).correlation_id == request_id
        reply = REPLY.decode(split.body)
        assert reply.error.code == "ACODE-PROTO-002"
        assert reply.error.message.startswith("persistence request body rejected: Expected `str`, got `int`")
    finally:
        sock.close()
    client = persistence.client()
    assert isinstance(_call(client, GetSession(session_id=_new_session(client))), SessionFound)


def test_a_request_resent_to_a_restarted_persistence_gets_its_seqs_from_the_database(
        persistence: Harness) -> None:
    client = persistence.client()
    sid = _new_session(client)
    request_id = new_id()
    commit = Commit(session_id=sid, events=[records.created(sid), records.transitioned(sid)])
    first = client.call("persistence", commit, timeout=10, decoder=REPLY, request_id=request_id)
    persistence.kill("persistence")  # the worker's reply cache dies with it
    persistence.start("persistence")
    again = client.call("persistence", commit, timeout=10, decoder=REPLY, request_id=request_id)
    assert again == first == Committed(seqs=[1, 2])
    assert len(_call(client, GetEvents(session_id=sid)).events) == 2


def test_killing_persistence_mid_stream_loses_no_commit_and_duplicates_none(persistence: Harness) -> None:
    total, window, kill_after = 200, 8, 80
    client = persistence.client(resend_interval=0.2)
    sid = _new_session(client)
    commits = records.CommitPump(client, sid, total=total, window=window, timeout=30, poll_ms=50)
    pump, ids, answers = commits.pump, commits.ids, commits.answers

    wait_until(lambda: pump() >= kill_after, what=f"{kill_after} commits acknowledged")
    commits.fill()  # a pump may have read every reply: the window is full again when persistence dies
    in_flight = commits.sent - len(answers)
    persistence.kill("persistence")  # SIGKILL, with commits in flight
    persistence.start("persistence")
    wait_until(lambda: pump() == total, timeout=30, what="every commit acknowledged")

    assert in_flight > 0
    assert not [a for a in answers.values() if isinstance(a, AcodeError)]
    stored = _call(client, GetEvents(session_id=sid)).events
    assert [e.seq for e in stored] == list(range(1, total + 1))
    assert sorted(e.id for e in stored) == sorted(ids)
    assert {answers[n].seqs[0] for n in range(total)} == set(range(1, total + 1))
