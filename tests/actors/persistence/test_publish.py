"""How persistence paces the event stream (``PersistenceActor._publish``): at most one
message every ``PUBLISH_EVERY_S``, a session's final event at once; real PUB/SUB sockets,
the actor's own loop on a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
import zmq

from actors.persistence import service
from actors.persistence.service import PersistenceActor
from protocol import codec
from protocol.basics.ids import new_id
from protocol.sessions.events import Event, SessionFinished
from tests.actors.persistence import records
from tests.harness import Harness, wait_until


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def wired(harness: Harness) -> Iterator[tuple[PersistenceActor, zmq.Socket[bytes], _Clock]]:
    clock = _Clock()
    actor = PersistenceActor(harness.spec("persistence"), clock=clock)
    actor.log = structlog.get_logger()
    pub, sub = harness.ctx.socket(zmq.PUB), harness.ctx.socket(zmq.SUB)
    endpoint = f"inproc://publish-{new_id()}"
    pub.bind(endpoint)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    actor._events = pub
    try:
        def joined() -> bool:  # a subscription takes effect on its own time
            pub.send_multipart([b"probe", b""])
            return bool(sub.poll(20))
        wait_until(joined, what="the subscription")
        while sub.poll(50):
            sub.recv_multipart()
        yield actor, sub, clock
    finally:
        actor.loop.close()
        pub.close(linger=0)
        sub.close(linger=0)


def _messages(sub: zmq.Socket[bytes]) -> list[list[str]]:
    """The messages waiting (up to a short wait for the first), each as its events' ids."""
    out: list[list[str]] = []
    while sub.poll(100 if not out else 20):
        topic, *bodies = sub.recv_multipart()
        out.append([topic.decode(), *(codec.EVENT.decode(body).id for body in bodies)])
    return out


def _finished(session_id: str) -> Event:
    return SessionFinished(id=new_id(), session_id=session_id, status="completed", exit_code=0)


def test_events_are_published_at_most_once_a_window_and_a_final_event_at_once(
        wired: tuple[PersistenceActor, zmq.Socket[bytes], _Clock]) -> None:
    actor, sub, clock = wired
    sid, other = new_id(), new_id()
    first, second, third = (records.transitioned(sid) for _ in range(3))
    actor._publish([first])  # nothing published lately: at once
    assert _messages(sub) == [[sid, first.id]]

    clock.now += service.PUBLISH_EVERY_S / 5
    actor._publish([second])
    clock.now += service.PUBLISH_EVERY_S / 5
    theirs = records.transitioned(other)
    actor._publish([third, theirs])
    assert _messages(sub) == []  # within the window: they wait

    clock.now += service.PUBLISH_EVERY_S  # the window has passed: the loop's timer sends them
    actor.loop.run_once()
    assert _messages(sub) == [[sid, second.id, third.id], [other, theirs.id]]  # one message a session, in order

    clock.now += service.PUBLISH_EVERY_S / 5
    fourth, final = records.transitioned(sid), _finished(sid)
    actor._publish([fourth])
    assert _messages(sub) == []
    actor._publish([final])  # `acode run` stops at it: it never waits for the window
    assert _messages(sub) == [[sid, fourth.id, final.id]]
    clock.now += service.PUBLISH_EVERY_S * 2
    actor.loop.run_once()
    assert _messages(sub) == []  # the timer it replaced sends nothing twice
