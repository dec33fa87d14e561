"""Following a session: the event stream for speed, the database for completeness.

The SUB socket delivers events as persistence commits them (one message per commit: the
session id as topic, then each event, or one model-progress message), but a subscriber can
miss some (it joined late, the broker restarted). Every event carries its session-local
sequence number, so a gap is filled from persistence (``GetEvents``), and a periodic
catch-up reads whatever the stream did not bring. Events are handed over exactly once, in
order: the sequence numbers decide, never the order of arrival.

An actor killed meanwhile changes nothing for a follower: persistence restarted by the
coordinator answers the next catch-up (a request is resent until its deadline). A killed
coordinator takes every actor with it; a follower given ``reconnect_s`` keeps asking until
``acode up`` has brought them back, and goes on from the last number it handed over.

The same stream carries the stage actors' ephemeral :class:`~protocol.sessions.progress.ModelProgress`
messages (a model at work); they never enter the ordering above and go to ``on_progress``
only. Events this client does not know arrive as :class:`acode.events.GenericEvent`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from acode.connection import Connection
from acode.events import EVENT_LIST, AnyEvent, GenericEvent, RawEventList, decode_event, decode_stream
from protocol.errors import AcodeError, NotRunning, RequestTimeout, from_info
from protocol.messages import Error, GetEvents, GetSession
from protocol.sessions.events import is_final
from protocol.sessions.progress import ModelProgress
from protocol.sessions.session import SessionSnapshot

__all__ = ["CATCH_UP_EVERY", "events_after", "final", "follow", "iter_events", "read_events", "snapshot"]

CATCH_UP_EVERY = 1.0
_PAGE = 10_000  # events per GetEvents read


def final(event: AnyEvent) -> bool:
    """Whether a follower stops after ``event``: the session finished or paused."""
    return not isinstance(event, GenericEvent) and is_final(event)


def events_after(connection: Connection, session_id: str, after_seq: int, *, limit: int = 0,
                 timeout: float = 30.0) -> list[AnyEvent]:
    """One ``GetEvents`` read, each event decoded on its own (:func:`acode.events.decode_event`)."""
    reply = connection.call("persistence", GetEvents(session_id=session_id, after_seq=after_seq, limit=limit),
                            decoder=EVENT_LIST, timeout=timeout)
    if isinstance(reply, Error):  # pragma: no cover - Client.call raises an Error reply itself
        raise from_info(reply.error)
    assert isinstance(reply, RawEventList)
    return [decode_event(raw) for raw in reply.events]


def read_events(connection: Connection, session_id: str, after_seq: int = 0) -> list[AnyEvent]:
    """Every event of a session after ``after_seq``, read from persistence page by page."""
    events: list[AnyEvent] = []
    while True:
        page = events_after(connection, session_id, after_seq, limit=_PAGE)
        events += page
        if len(page) < _PAGE:
            return events
        after_seq = page[-1].seq


def _patiently(call: Callable[[], Any], reconnect_s: float) -> Any:
    """``call()``, tried again while acode is down or not answering, for up to ``reconnect_s``
    seconds (0: once)."""
    deadline = time.monotonic() + reconnect_s
    while True:
        try:
            return call()
        except (NotRunning, RequestTimeout):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def iter_events(connection: Connection, session_id: str, *, after_seq: int = 0,
                on_progress: Callable[[ModelProgress], None] | None = None,
                reconnect_s: float = 0.0) -> Iterator[AnyEvent]:
    """Every event of the session after ``after_seq``, in order, until it finishes or pauses
    (the event that says so is the last); each progress message the stream brings meanwhile
    goes to ``on_progress``.

    ``reconnect_s``: how long to keep trying while acode is not running or not answering
    (0: raise at once, :class:`~protocol.errors.NotRunning` or ``RequestTimeout``)."""
    import zmq

    from broker import wire

    sub = connection.subscribe(session_id)
    poller = zmq.Poller()  # one for the whole follow (Socket.poll makes one a call)
    poller.register(sub, zmq.POLLIN)
    next_seq = after_seq + 1
    pending: list[AnyEvent] = []

    def take(events: list[AnyEvent]) -> None:
        nonlocal next_seq
        for event in sorted(events, key=lambda e: e.seq):
            if event.seq == next_seq:
                pending.append(event)
                next_seq += 1

    def catch_up() -> None:
        take(_patiently(lambda: read_events(connection, session_id, next_seq - 1), reconnect_s))

    try:
        catch_up()
        last_catch_up = time.monotonic()
        while True:
            for event in pending:
                yield event
                if final(event):
                    return
            pending.clear()
            if poller.poll(200):
                streamed: list[AnyEvent] = []
                while (parts := wire.recv(sub)) is not None:  # a topic, then one or more bodies
                    for body in parts[1:]:
                        try:
                            message = decode_stream(body)
                        except AcodeError:
                            continue  # not an event at all: the catch-up reads what was committed
                        if isinstance(message, ModelProgress):
                            if on_progress is not None:
                                on_progress(message)
                        else:
                            streamed.append(message)
                if streamed and min(e.seq for e in streamed) > next_seq:
                    catch_up()  # a gap: read the missing events first
                take(streamed)
            if not pending and time.monotonic() - last_catch_up >= CATCH_UP_EVERY:
                catch_up()
                last_catch_up = time.monotonic()
    finally:
        sub.close(linger=0)


def follow(connection: Connection, session_id: str, on_event: Callable[[AnyEvent], None], *,
           after_seq: int = 0, on_progress: Callable[[ModelProgress], None] | None = None,
           reconnect_s: float = 0.0) -> SessionSnapshot:
    """:func:`iter_events` handed to ``on_event`` one by one; the session as it stands after."""
    for event in iter_events(connection, session_id, after_seq=after_seq, on_progress=on_progress,
                             reconnect_s=reconnect_s):
        on_event(event)
    return snapshot(connection, session_id, reconnect_s=reconnect_s)


def snapshot(connection: Connection, session_id: str, *, reconnect_s: float = 0.0) -> SessionSnapshot:
    """The session as persistence has it now."""
    found: Any = _patiently(lambda: connection.persistence(GetSession(session_id=session_id)), reconnect_s)
    return found.session  # type: ignore[no-any-return]  # Client.call gives its decoder's union as Any
