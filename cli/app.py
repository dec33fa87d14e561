"""The ``acode`` command: thin typer commands over the actors' protocol.

Commands parse arguments, send one message (or follow a session), and render the answer;
nothing here holds state the actors need. Errors print one line with their code, never a
traceback. Exit codes of ``run``/``resume`` follow seed 000: 0 done, 1 failed, 20 stage
timeout, 21 cycle limit, 22 human required, 23 cancelled.
"""

import os
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from actors.paths import RunPaths
from cli import daemon, render
from cli.config import resolve, session_settings, up_options
from cli.connection import Connection, coordinator_pid
from cli.follow import follow_and_print, print_json
from protocol.errors import AcodeError, CliError, ModelError
from protocol.ids import new_id
from protocol.messages import (
    CancelSession,
    GetEvents,
    GetPlan,
    GetSession,
    GetStatus,
    ListSessions,
    ResumeSession,
    SubmitTask,
)
from protocol.stages import STAGES

__all__ = ["app", "main"]

app = typer.Typer(name="acode", help="Local-first agentic coding: plan, execute, verify, review.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
_state: dict[str, Any] = {"home": None}

Home = Annotated[Path | None, typer.Option("--home", help="acode home (default $ACODE_HOME or ~/.acode)",
                                              show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="machine-readable JSON output")]


@app.callback()
def _root(home: Home = None) -> None:
    _state["home"] = home


def _paths() -> RunPaths:
    return RunPaths.for_home(_state["home"])


# -- lifecycle --------------------------------------------------------------------------------


@app.command()
def up(
    detach: Annotated[bool, typer.Option("--detach", "-d", help="run in the background; return when ready")] = False,
    workers: Annotated[list[str] | None, typer.Option(
        "--workers", help="instances per stage, e.g. --workers executor=3 (repeatable)")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")] = "info",
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for readiness (--detach)")] = 60.0,
) -> None:
    """Start the coordinator, broker, persistence, sandbox and the four stage actors."""
    paths = _paths()
    flags: dict[str, Any] = {}
    for item in workers or []:
        stage, sep, count = item.partition("=")
        if not sep or stage not in STAGES or not count.isdigit():
            raise CliError(f"--workers {item!r} is not STAGE=COUNT with STAGE one of {', '.join(STAGES)}")
        flags[f"workers.{stage}"] = int(count)
    config = resolve(home=paths.home, flags=flags)
    options, interval, liveness = up_options(config)
    spec = daemon.coordinator_spec(paths, options, heartbeat_interval=interval, liveness=liveness,
                                   log_level=log_level)
    if not detach:
        pid = coordinator_pid(paths)
        if pid is not None:
            raise CliError(f"acode is already running for {paths.home} (coordinator pid {pid})",
                           code="ACODE-CLI-001")
        typer.echo(f"acode up: home {paths.home}; Ctrl-C or `acode down` stops it", err=True)
        raise typer.Exit(daemon.run_foreground(spec))
    report, started = daemon.start_detached(spec, timeout=timeout)
    if report.degraded:
        typer.echo(render.status_table(report))
        raise CliError(f"acode is running DEGRADED: {report.reason}; fix the cause, then `acode down` and "
                       "`acode up` (sessions that need the failed actor are paused)", code="ACODE-SUP-001")
    typer.echo(("acode is up" if started else "acode was already running") +
               f": coordinator pid {report.pid}, {len(report.actors)} actors ready, home {paths.home}")


@app.command()
def down(timeout: Annotated[float, typer.Option("--timeout", help="seconds per escalation step")] = 30.0) -> None:
    """Stop every actor (ask, then SIGTERM, then SIGKILL); no process remains."""
    paths = _paths()
    pid = daemon.stop(paths, timeout=timeout)
    typer.echo(f"acode stopped (coordinator pid {pid})" if pid else f"acode was not running for {paths.home}")


@app.command()
def status(json_out: Json = False) -> None:
    """Every actor: pid, state, epoch, restarts, uptime, last heartbeat."""
    with Connection(_state["home"]) as connection:
        report = connection.coordinator(GetStatus())
    if json_out:
        print_json(report)
    else:
        typer.echo(render.status_table(report))


# -- sessions ---------------------------------------------------------------------------------


def _session_id(connection: Connection, given: str) -> str:
    """Accept a full session id or a unique prefix of one."""
    if len(given) >= 36:
        return given
    reply = connection.persistence(ListSessions(limit=100_000))
    matches = [s.id for s in reply.sessions if s.id.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CliError(f"no session starts with {given!r}; list them with `acode sessions`", code="ACODE-CLI-002")
    raise CliError(f"{len(matches)} sessions start with {given!r}; give more characters", code="ACODE-CLI-002")


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="what to change, in plain words")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="the project directory")] = Path("."),
    provider: Annotated[str | None, typer.Option("--provider", help="model provider: scripted")] = None,
    script: Annotated[Path | None, typer.Option("--script", help="scripted model file (YAML)")] = None,
    stage_timeout: Annotated[float | None, typer.Option("--stage-timeout", help="seconds, every stage")] = None,
    cycle_limit: Annotated[int | None, typer.Option("--cycle-limit", help="cycles per kind (0-10)")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="executor turns per step")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="submit and return the session id")] = False,
    json_out: Json = False,
) -> None:
    """Submit a task and follow it through every stage to a final state."""
    root = workspace.expanduser().resolve()
    if not root.is_dir():
        raise CliError(f"workspace {str(workspace)!r} is not a directory; create it or pass --workspace DIR")
    if provider is not None and provider != "scripted":
        raise ModelError(f"provider {provider!r} is not available in this version; available: scripted",
                         code="ACODE-LLM-001")
    flags: dict[str, Any] = {"model.provider": provider, "model.script": str(script.resolve()) if script else None,
                             "orchestration.cycle_limit": cycle_limit, "executor.max_turns_per_step": max_turns}
    for stage in STAGES:
        flags[f"orchestration.{stage}_timeout"] = stage_timeout
    paths = _paths()
    settings = session_settings(resolve(home=paths.home, workspace=root, flags=flags))
    if settings.provider is None:
        raise ModelError("no model configured; pass --provider scripted --script FILE, or set model: in "
                         ".agent/config.yml", code="ACODE-LLM-001")
    with Connection(paths.home) as connection:
        connection.require_running()
        session_id = new_id()
        connection.coordinator(SubmitTask(session_id=session_id, task=task, workspace=str(root),
                                          settings=settings), timeout=30.0)
        if detach:
            typer.echo(session_id)
            return
        session = follow_and_print(connection, session_id, json_out=json_out)
    raise typer.Exit(session.exit_code or 0)


@app.command()
def sessions(
    json_out: Json = False,
    status_filter: Annotated[list[str] | None, typer.Option("--status", help="only these statuses")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
) -> None:
    """List sessions, newest first."""
    with Connection(_state["home"]) as connection:
        reply = connection.persistence(ListSessions(statuses=status_filter or [], limit=limit))
    if json_out:
        print_json(reply.sessions)
    else:
        typer.echo(render.sessions_table(reply.sessions))


@app.command()
def show(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    json_out: Json = False,
) -> None:
    """One session: state, every transition with timing, files changed."""
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        snapshot = connection.persistence(GetSession(session_id=session_id)).session
        events = connection.persistence(GetEvents(session_id=session_id)).events
        plan = None
        if snapshot.plan_version:
            plan = connection.persistence(GetPlan(session_id=session_id)).plan
    if json_out:
        print_json({"session": snapshot, "plan": plan, "events": events})
    else:
        typer.echo(render.session_detail(snapshot, events))


@app.command()
def cancel(session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")]) -> None:
    """Cancel a running or paused session (exit code 23 for its `acode run`)."""
    with Connection(_state["home"]) as connection:
        reply = connection.coordinator(CancelSession(session_id=_session_id(connection, session)))
    typer.echo(f"session {reply.session.id} {reply.session.status}")


@app.command()
def resume(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Resume a paused session and follow it."""
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        before = connection.persistence(GetEvents(session_id=session_id)).events
        connection.coordinator(ResumeSession(session_id=session_id))
        if detach:
            typer.echo(f"session {session_id} resumed")
            return
        snapshot = follow_and_print(connection, session_id, json_out=json_out,
                                    after_seq=before[-1].seq if before else 0)
    raise typer.Exit(snapshot.exit_code or 0)


@app.command()
def logs(
    instance: Annotated[str | None, typer.Argument(help="actor instance, e.g. executor")] = None,
    lines: Annotated[int, typer.Option("--lines", "-n")] = 40,
) -> None:
    """Show an actor's log tail (or list the log files)."""
    paths = _paths()
    if instance is None:
        names = sorted(p.stem for p in paths.logs.glob("*.log")) if paths.logs.exists() else []
        typer.echo(f"logs in {paths.logs}: {', '.join(names) if names else 'none yet'}")
        return
    path = paths.log_file(instance)
    if not path.exists():
        raise CliError(f"no log for {instance!r} in {paths.logs}; `acode logs` lists them")
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 256 * lines))
        text = handle.read().decode(errors="replace").splitlines()[-lines:]
    typer.echo("\n".join(text))


@app.command()
def demo(
    keep_running: Annotated[bool, typer.Option("--keep-running", help="leave the actors up afterwards")] = False,
) -> None:
    """Run the shipped example end to end (starts and stops acode if it was not running)."""
    from cli.demo import run_demo

    raise typer.Exit(run_demo(_paths(), keep_running=keep_running))


def main() -> None:
    try:
        app(prog_name="acode")
    except AcodeError as exc:
        typer.echo(f"acode: {exc}", err=True)
        raise SystemExit(1) from None
    except msgspec.ValidationError as exc:  # pragma: no cover - every input is validated above
        typer.echo(f"acode: invalid input: {exc} (ACODE-CLI-003)", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
