"""Multipart send and receive for the hot path, without pyzmq's per-frame Python overhead.

pyzmq's ``send_multipart``/``recv_multipart`` combine flags as ``IntFlag`` enums and look
socket options up as enums on every frame (microseconds each), and a non-blocking receive
with nothing waiting raises ``zmq.Again``, an exception built every time. The broker
forwards about 250 messages per W1 session, and every hop crosses two of these calls, so
the broker, its workers and its clients use these two functions instead: plain ints,
the backend's methods called directly, each part's "more" flag read from its frame, and
"nothing waiting" answered by ``ZMQ_EVENTS`` rather than by an exception. The semantics
are pyzmq's: all frames of a message or none (ZeroMQ checks the high-water mark on the
first frame only), and a ``ZMQError`` other than EAGAIN (e.g. EHOSTUNREACH from a ROUTER
with ``ROUTER_MANDATORY``) still raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import zmq
from zmq.backend import Socket as _Backend

__all__ = ["recv", "send"]

_send = _Backend.send
_recv = _Backend.recv
_get = _Backend.get
_SNDMORE = int(zmq.SNDMORE)
_NOBLOCK = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


def recv(socket: zmq.Socket[Any]) -> list[bytes] | None:
    """The next whole message waiting on ``socket``, or None if none is (never blocks).

    Each part is received as a ``zmq.Frame`` and copied out: the frame carries its
    "more" flag (read in C), where asking ``RCVMORE`` per part costs an enum lookup each."""
    if not cast(int, _get(socket, _EVENTS)) & _POLLIN:
        return None
    frame = _recv(socket, _NOBLOCK, False)
    parts: list[bytes] = [frame.bytes]
    while frame.more:
        frame = _recv(socket, _NOBLOCK, False)
        parts.append(frame.bytes)
    return parts


def send(socket: zmq.Socket[Any], parts: Sequence[bytes]) -> bool:
    """Queue ``parts`` as one message without blocking; False if the socket would block
    (its peer's queue is full, or there is no peer yet)."""
    last = len(parts) - 1
    try:
        for i, part in enumerate(parts):
            _send(socket, part, _NOBLOCK | _SNDMORE if i < last else _NOBLOCK)
    except zmq.Again:
        return False
    return True
