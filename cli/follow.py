"""Following a session live on a terminal: the client's ordered stream
(:func:`acode.stream.follow`) rendered as progress lines or JSON lines, with the thinking
line (``cli.thinking``) while a model answers, and the summary at the end.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from acode.client import Client
from acode.events import AnyEvent, GenericEvent, typed
from acode.stream import final, follow, read_events
from cli import render
from cli.modeltext import ModelText
from cli.progress import Progress, files_changed, stage_table, stage_totals
from cli.render import echo
from cli.thinking import ThinkingLine
from protocol.basics.printable import json_printable
from protocol.errors import NotRunning
from protocol.sessions.events import Event
from protocol.sessions.session import SessionSnapshot

__all__ = ["attach_and_print", "follow_and_print", "plain", "print_json", "show_plan_review"]


def print_json(value: Any) -> None:
    """One JSON line, with ``schema_version`` first in each object (protocol.schema)."""
    import msgspec

    from protocol import codec
    from protocol.schema import versioned

    data = versioned(msgspec.json.decode(codec.to_json(plain(value))))
    sys.stdout.write(json_printable(msgspec.json.encode(data).decode()) + "\n")  # C1 and bidi escaped too
    sys.stdout.flush()


def plain(value: Any) -> Any:
    """``value`` with each :class:`~acode.events.GenericEvent` in it as it was sent (an
    event of a newer acode passes through a ``--json`` line unchanged)."""
    import msgspec

    if isinstance(value, GenericEvent):
        return value.data
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, msgspec.Struct) and any(isinstance(v, list) for v in msgspec.structs.astuple(value)):
        return msgspec.structs.replace(value, **{k: plain(v) for k, v in msgspec.structs.asdict(value).items()
                                                 if isinstance(v, list)})
    return value


def attach_and_print(client: Client, session_id: str, *, replay: int = 20,
                     json_out: bool = False, model_text: ModelText | None = None) -> SessionSnapshot:
    """``acode attach``: show a session's last ``replay`` progress lines (or events, as JSON),
    then follow it live as ``acode run`` does (``model_text``: ``--verbose``, the model's text
    from when it was made, :mod:`cli.modeltext`). Any number of terminals may attach at once:
    each has its own subscription. A session that is not running is shown and left.

    The session is read before its events, so it may have stopped in between: when the
    last event read is one a follower stops at, it is read again. Followed from after that
    event, it would wait for one that never comes (a session that paused just after
    ``acode approve --detach`` hung ``acode attach``)."""
    session = client.session(session_id)
    events = read_events(client.connection, session_id)
    if session.status == "running" and events and final(events[-1]):
        session = client.session(session_id)  # it stopped (or stopped and went on) since
    known = typed(events)
    progress = Progress()
    if json_out:
        for event in events[-replay:] if replay else []:
            print_json(event)
    else:
        lines = [line for line in map(progress.line, known) if line]
        shown = lines[-replay:] if replay else []
        if len(lines) > len(shown):
            echo(f"[… {len(lines) - len(shown)} earlier line(s); `acode show {session_id}` has them all]")
        for line in shown:
            echo(line)
    if session.status == "running":
        last = events[-1].seq if events else 0
        return follow_and_print(client, session_id, json_out=json_out, after_seq=last, progress=progress,
                                earlier=events, model_text=model_text)
    if json_out:
        print_json({"session": session, "stages": stage_totals(known)})
    elif session.pause is not None and session.pause.kind == "plan_review":
        show_plan_review(client, session)
    elif session.status == "paused":
        echo(f"session {session_id} is paused; `acode resume {session_id}` continues it, "
             f"`acode cancel {session_id}` ends it")
    else:
        echo(f"session {session_id} is {session.status}; files changed: {files_changed(known)}")
        print_stage_summary(known)
    return session


def follow_and_print(client: Client, session_id: str, *, json_out: bool = False,
                     after_seq: int = 0, progress: Progress | None = None,
                     earlier: list[AnyEvent] | None = None, model_text: ModelText | None = None) -> SessionSnapshot:
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
    events: list[AnyEvent] = list(earlier or [])
    progress = progress or Progress()
    thinking = None if json_out else ThinkingLine()

    def on_event(event: AnyEvent) -> None:
        events.append(event)
        if json_out:
            print_json(event)
            return
        line = None if isinstance(event, GenericEvent) else progress.line(event)
        if line:
            if thinking is not None:
                thinking.clear()
            echo(line)
        if model_text is not None and not isinstance(event, GenericEvent):
            model_text.after(event)

    try:
        try:
            session = follow(client.connection, session_id, on_event, after_seq=after_seq,
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
    known = typed(events)
    if json_out:
        print_json({"session": session, "stages": stage_totals(known)})
    elif session.pause is not None and session.pause.kind == "plan_review":
        show_plan_review(client, session)
    else:
        echo(f"files changed: {files_changed(known)}")
        print_stage_summary(known)
    return session


def print_stage_summary(events: list[Event]) -> None:
    """The per-stage table (runs, tokens in/out, model time, stage time) after a session's end."""
    summary = stage_table(events)
    if summary:
        echo(summary)


def show_plan_review(client: Client, session: SessionSnapshot) -> None:
    """The plan a session waits on (plan review), and the two commands that continue it."""
    plan = client.plan(session.id, session.plan_version)
    short = session.id[:8]
    echo("")
    echo(render.plan_detail(plan, session.id))
    echo("")
    echo(f"review it: `acode approve {short}` executes this plan; `acode replan {short} \"what to change\"` "
         "sends it back to the planner with your feedback")
