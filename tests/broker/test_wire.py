"""broker.wire: whole multipart messages in and out, "nothing waiting" and "would block" as values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from broker import wire


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[Any], zmq.Socket[Any]]]:
    ctx: zmq.Context[Any] = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        router.bind("inproc://wire")
        dealer.connect("inproc://wire")
        yield router, dealer
    finally:
        router.close(linger=0)
        dealer.close(linger=0)
        ctx.term()


def test_recv_answers_none_when_nothing_waits_and_each_message_whole(
        pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    router, dealer = pair
    assert wire.recv(router) is None
    assert wire.send(dealer, [b"a", b"", b"c" * 5000]) and wire.send(dealer, [b"one"])
    assert router.poll(1000)
    first, second = wire.recv(router), wire.recv(router)
    assert first is not None and second is not None
    route = first[0]
    assert first[1:] == [b"a", b"", b"c" * 5000] and second == [route, b"one"]
    assert wire.recv(router) is None
    assert wire.send(router, [route, b"back", b"again"])
    assert dealer.poll(1000) and wire.recv(dealer) == [b"back", b"again"]


def test_send_answers_false_when_it_would_block_and_router_errors_still_raise() -> None:
    ctx: zmq.Context[Any] = zmq.Context()
    lonely, router = ctx.socket(zmq.DEALER), ctx.socket(zmq.ROUTER)
    try:
        assert wire.send(lonely, [b"nobody", b"listens"]) is False  # no peer: EAGAIN, as a value
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.bind("inproc://mandatory")
        with pytest.raises(zmq.ZMQError) as raised:  # an unknown route is not "would block"
            wire.send(router, [b"no-such-peer", b"x"])
        assert raised.value.errno == zmq.EHOSTUNREACH
    finally:
        lonely.close(linger=0)
        router.close(linger=0)
        ctx.term()
