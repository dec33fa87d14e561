"""Telemetry: ``acode trace`` shows a session as a tree of spans, ``acode metrics`` counts
every session in the Prometheus text format, ``acode export`` sends each session's trace
to an OpenTelemetry collector as it ends (docs/commands.md "Traces and metrics").

Both read what ``acode show`` reads, through the running acode (persistence: the session
and its events; the coordinator: the actors' restarts), and build their output with the
pure functions of :mod:`acode.telemetry`, imported when a command runs (they cost the
other commands nothing at start-up). ``acode export`` is the one that sends anything, and
only when run: to the collector ``$ACODE_HOME/telemetry.yml`` names (the user's own file;
no workspace's config is read), by default the one on this machine.
"""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import msgspec.yaml
import typer

from acode.client import Client
from acode.events import typed
from acode.stream import read_events
from cli.commands.home import home, run_paths
from cli.follow import print_json
from cli.render import echo
from protocol.errors import CliError, ConfigError

if TYPE_CHECKING:
    from acode.telemetry.export import ExportSettings

__all__ = ["export", "export_settings", "metrics", "trace"]

SETTINGS_FILE = "telemetry.yml"


def trace(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    json_out: Annotated[bool, typer.Option("--json", help="OTLP-JSON (resourceSpans), one line")] = False,
) -> None:
    """A session as a tree of spans: stage visits, model calls, tool calls (any past session)."""
    from acode.telemetry import build_trace, otlp_json, render_tree

    with Client(home()) as client:
        session_id = client.session_id(session)
        snapshot = client.session(session_id)
        events = typed(read_events(client.connection, session_id))
    built = build_trace(session_id, events, snapshot)
    if json_out:
        print_json(otlp_json(built))
    else:
        echo(render_tree(built))


def metrics() -> None:
    """Every session's figures in the Prometheus text format (counters, histograms)."""
    from acode.telemetry import Restarts, SessionRecord, exposition

    with Client(home()) as client:
        found = client.sessions(limit=100_000)
        records = [SessionRecord(s, typed(read_events(client.connection, s.id))) for s in found]
        report = client.status()
    restarts = [Restarts(actor=a.actor, instance=a.instance, restarts=a.restarts) for a in report.actors]
    echo(exposition(records, restarts).rstrip("\n"))


def export_settings(path: Path) -> "ExportSettings":
    """``$ACODE_HOME/telemetry.yml`` (defaults when there is none, or it is empty)."""
    from acode.telemetry.export import ExportSettings

    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return ExportSettings()
    if not text.strip():
        return ExportSettings()
    try:
        return msgspec.yaml.decode(text, type=ExportSettings)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ConfigError(f"{path}: {exc}; valid keys: {', '.join(ExportSettings.__struct_fields__)} "
                          "(docs/commands.md 'Traces and metrics')", code="ACODE-CFG-001") from exc


def export(
    backfill: Annotated[bool, typer.Option("--all", help="also send the sessions that ended before")] = False,
    once: Annotated[bool, typer.Option("--once", help="one pass, then exit (fails if the collector does not "
                                       "take a trace)")] = False,
) -> None:
    """Send each session's trace to an OpenTelemetry collector when it ends (opt-in: OTLP/HTTP
    to the endpoint of $ACODE_HOME/telemetry.yml, by default 127.0.0.1:4318)."""
    from acode.telemetry import build_trace
    from acode.telemetry.export import Follower, exporter, readable_spans

    path = run_paths().home / SETTINGS_FILE
    settings = export_settings(path)
    sender = exporter(settings)
    follower = Follower()
    try:
        with Client(home()) as client:
            listed = client.sessions(limit=100_000)
            follower.start(listed, backfill=backfill)
            echo(f"exporting traces to {settings.endpoint}" + ("" if once else " (Ctrl-C stops)"))
            while True:
                for session in follower.due(listed):
                    built = build_trace(session.id, typed(read_events(client.connection, session.id)), session)
                    if sender.export(readable_spans(built)).name == "SUCCESS":
                        follower.done(session)
                        echo(f"session {session.id} {session.status}: {len(built.spans)} spans sent")
                        continue
                    problem = (f"the collector at {settings.endpoint} did not take the trace of session "
                               f"{session.id}; is it running? (the endpoint is in {path})")
                    if once:
                        raise CliError(problem, code="ACODE-CLI-013")
                    echo(f"acode: {problem}; trying again in {settings.interval_seconds:g}s (ACODE-CLI-013)", err=True)
                if once:
                    return
                time.sleep(settings.interval_seconds)
                listed = client.sessions(limit=100_000)
    except KeyboardInterrupt:
        return
    finally:
        sender.shutdown()
