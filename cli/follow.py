"""Following a session live: the event stream for speed, the database for completeness.

The SUB socket delivers events as persistence commits them (one message per commit: the
session id as topic, then each event, or one model-progress message), but a subscriber can miss
some (it joined late, the broker restarted). Every event carries its session-local
sequence number, so a gap is filled from persistence (``GetEvents``), and a periodic
catch-up reads whatever the stream did not bring. Events are handed over exactly once,
in order.

The same stream carries the stage actors' ephemeral :class:`~protocol.progress.ModelProgress`
messages (a model at work); they are told apart by their tag when decoded, never enter the
ordering above, and go to ``on_progress`` (the thinking line, ``cli.thinking``) only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import typer

from cli import render
from cli.connection import Connection
from cli.modeltext import ModelText
from cli.progress import Progress, files_changed, stage_table, stage_totals
from cli.render import echo
from cli.thinking import ThinkingLine
from protocol.errors import AcodeError, NotRunning, ProtocolError
from protocol.events import Event, is_final
from protocol.messages import GetEvents, GetPlan, GetSession
from protocol.printable import json_printable
from protocol.progress import ModelProgress
from protocol.session import SessionSnapshot

__all__ = ["attach_and_print", "follow", "follow_and_print", "print_json", "read_events", "show_plan_review"]

CATCH_UP_EVERY = 1.0
_PAGE = 10_000  # events per GetEvents read


def follow(connection: Connection, session_id: str, on_event: Callable[[Event], None], *,
           after_seq: int = 0, on_silence: Callable[[], None] | None = None,
           on_progress: Callable[[ModelProgress], None] | None = None) -> SessionSnapshot:
    """Hand every event of the session to ``on_event`` until it finishes or pauses, and
    each progress message the stream brings meanwhile to ``on_progress``."""
    import zmq

    from broker import wire
    from protocol import codec

    sub = connection.subscribe(session_id)
    poller = zmq.Poller()  # one for the whole follow (Socket.poll makes one a call)
    poller.register(sub, zmq.POLLIN)
    next_seq = after_seq + 1
    final = False

    def deliver(events: list[Event]) -> None:
        nonlocal next_seq, final
        for event in sorted(events, key=lambda e: e.seq):
            if event.seq == next_seq:
                on_event(event)
                next_seq += 1
                final = final or is_final(event)

    def catch_up() -> None:
        reply = connection.persistence(GetEvents(session_id=session_id, after_seq=next_seq - 1), timeout=30.0)
        deliver(reply.events)

    try:
        catch_up()
        last_catch_up = time.monotonic()
        while not final:
            if poller.poll(200):
                streamed: list[Event] = []
                while (parts := wire.recv(sub)) is not None:  # a topic, then one or more bodies
                    for body in parts[1:]:
                        try:
                            message = codec.STREAM.decode(body)
                        except ProtocolError:
                            continue
                        if isinstance(message, ModelProgress):
                            if on_progress is not None:
                                on_progress(message)
                        else:
                            streamed.append(message)
                if streamed and min(e.seq for e in streamed) > next_seq:
                    catch_up()  # a gap: read the missing events first
                deliver(streamed)
            if not final and time.monotonic() - last_catch_up >= CATCH_UP_EVERY:
                try:
                    catch_up()
                except AcodeError:
                    if on_silence is not None:
                        on_silence()
                    raise
                last_catch_up = time.monotonic()
        reply: Any = connection.persistence(GetSession(session_id=session_id))
        return reply.session  # type: ignore[no-any-return]  # Client.call gives its decoder's union as Any
    finally:
        sub.close(linger=0)


def print_json(value: Any) -> None:
    """One JSON line, with ``schema_version`` first in each object (protocol.schema)."""
    import msgspec

    from protocol import codec
    from protocol.schema import versioned

    data = versioned(msgspec.json.decode(codec.to_json(value)))
    sys.stdout.write(json_printable(msgspec.json.encode(data).decode()) + "\n")  # C1 and bidi escaped too
    sys.stdout.flush()


def read_events(connection: Connection, session_id: str, after_seq: int = 0) -> list[Event]:
    """Every event of a session after ``after_seq``, read from persistence page by page."""
    events: list[Event] = []
    while True:
        page = connection.persistence(GetEvents(session_id=session_id, after_seq=after_seq, limit=_PAGE),
                                      timeout=30.0).events
        events += page
        if len(page) < _PAGE:
            return events
        after_seq = page[-1].seq


def attach_and_print(connection: Connection, session_id: str, *, replay: int = 20,
                     json_out: bool = False, model_text: ModelText | None = None) -> SessionSnapshot:
    """``acode attach``: show a session's last ``replay`` progress lines (or events, as JSON),
    then follow it live as ``acode run`` does (``model_text``: ``--verbose``, the model's text
    from when it was made, :mod:`cli.modeltext`). Any number of terminals may attach at once:
    each has its own subscription. A session that is not running is shown and left."""
    session: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
    events = read_events(connection, session_id)
    progress = Progress()
    if json_out:
        for event in events[-replay:] if replay else []:
            print_json(event)
    else:
        lines = [line for line in map(progress.line, events) if line]
        shown = lines[-replay:] if replay else []
        if len(lines) > len(shown):
            echo(f"[… {len(lines) - len(shown)} earlier line(s); `acode show {session_id}` has them all]")
        for line in shown:
            echo(line)
    if session.status == "running":
        last = events[-1].seq if events else 0
        return follow_and_print(connection, session_id, json_out=json_out, after_seq=last, progress=progress,
                                earlier=events, model_text=model_text)
    if json_out:
        print_json({"session": session, "stages": stage_totals(events)})
    elif session.pause is not None and session.pause.kind == "plan_review":
        show_plan_review(connection, session)
    elif session.status == "paused":
        echo(f"session {session_id} is paused; `acode resume {session_id}` continues it, "
             f"`acode cancel {session_id}` ends it")
    else:
        echo(f"session {session_id} is {session.status}; files changed: {files_changed(events)}")
        print_stage_summary(events)
    return session


def follow_and_print(connection: Connection, session_id: str, *, json_out: bool = False,
                     after_seq: int = 0, progress: Progress | None = None,
                     earlier: list[Event] | None = None, model_text: ModelText | None = None) -> SessionSnapshot:
    """Follow a session printing one line per event (or JSON lines), then the files changed
    (``earlier``: events already shown, counted in the files changed; ``progress``: the
    renderer that showed them; ``model_text``: ``--verbose``, the model's text under its
    turns and stages, :mod:`cli.modeltext`).

    While a model answers, a thinking line shows it is alive (``cli.thinking``; not with
    ``--json``, whose output is the committed events only). The end adds the per-stage
    figures (:func:`print_stage_summary`).

    Ctrl-C detaches: the session goes on inside the actors (exit 130), and ``acode attach``
    follows it again.
    """
    events: list[Event] = list(earlier or [])
    progress = progress or Progress()
    thinking = None if json_out else ThinkingLine()

    def on_event(event: Event) -> None:
        events.append(event)
        if json_out:
            print_json(event)
            return
        line = progress.line(event)
        if line:
            if thinking is not None:
                thinking.clear()
            echo(line)
        if model_text is not None:
            model_text.after(event)

    try:
        try:
            session = follow(connection, session_id, on_event, after_seq=after_seq,
                             on_progress=None if thinking is None else thinking.show)
        finally:
            if thinking is not None:
                thinking.clear()
    except NotRunning:
        raise NotRunning(f"acode stopped while session {session_id} was running; the session goes on after "
                         f"`acode up --detach` (follow it with `acode attach {session_id}`)") from None
    except KeyboardInterrupt:
        echo(f"\ndetached: session {session_id} goes on; `acode attach {session_id}` follows it again, "
             f"`acode cancel {session_id}` stops it", err=True)
        raise typer.Exit(130) from None
    if json_out:
        print_json({"session": session, "stages": stage_totals(events)})
    elif session.pause is not None and session.pause.kind == "plan_review":
        show_plan_review(connection, session)
    else:
        echo(f"files changed: {files_changed(events)}")
        print_stage_summary(events)
    return session


def print_stage_summary(events: list[Event]) -> None:
    """The per-stage table (runs, tokens in/out, model time, stage time) after a session's end."""
    summary = stage_table(events)
    if summary:
        echo(summary)


def show_plan_review(connection: Connection, session: SessionSnapshot) -> None:
    """The plan a session waits on (plan review), and the two commands that continue it."""
    plan = connection.persistence(GetPlan(session_id=session.id, version=session.plan_version)).plan
    short = session.id[:8]
    echo("")
    echo(render.plan_detail(plan, session.id))
    echo("")
    echo(f"review it: `acode approve {short}` executes this plan; `acode replan {short} \"what to change\"` "
         "sends it back to the planner with your feedback")
