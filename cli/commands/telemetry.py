"""Telemetry: ``acode trace`` shows a session as a tree of spans, ``acode metrics`` counts
every session in the Prometheus text format (docs/commands.md "Traces and metrics").

Both read what ``acode show`` reads, through the running acode (persistence: the session
and its events; the coordinator: the actors' restarts), and build their output with the
pure functions of :mod:`acode.telemetry`, imported when a command runs (they cost the
other commands nothing at start-up).
"""

from typing import Annotated

import typer

from cli.commands.home import home
from cli.commands.sessions import full_session_id
from cli.connection import Connection
from cli.follow import print_json, read_events
from cli.render import echo
from protocol.messages import GetSession, GetStatus, ListSessions

__all__ = ["metrics", "trace"]


def trace(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    json_out: Annotated[bool, typer.Option("--json", help="OTLP-JSON (resourceSpans), one line")] = False,
) -> None:
    """A session as a tree of spans: stage visits, model calls, tool calls (any past session)."""
    from acode.telemetry import build_trace, otlp_json, render_tree

    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        snapshot = connection.persistence(GetSession(session_id=session_id)).session
        events = read_events(connection, session_id)
    built = build_trace(session_id, events, snapshot)
    if json_out:
        print_json(otlp_json(built))
    else:
        echo(render_tree(built))


def metrics() -> None:
    """Every session's figures in the Prometheus text format (counters, histograms)."""
    from acode.telemetry import Restarts, SessionRecord, exposition

    with Connection(home()) as connection:
        found = connection.persistence(ListSessions(limit=100_000)).sessions
        records = [SessionRecord(s, read_events(connection, s.id)) for s in found]
        report = connection.coordinator(GetStatus(), timeout=10.0)
    restarts = [Restarts(actor=a.actor, instance=a.instance, restarts=a.restarts) for a in report.actors]
    echo(exposition(records, restarts).rstrip("\n"))
