"""The actor set's lifecycle: ``acode up`` starts it, ``acode down`` stops it, ``acode status``
shows every actor and where each running or paused session stands."""

from pathlib import Path
from typing import Annotated, Any

import typer

from acode.client import Client
from acode.config.loader import resolve
from acode.config.settings import up_options
from acode.connection import coordinator_pid
from acode.events import typed
from acode.stream import read_events
from cli import daemon, render
from cli.commands.home import Json, home, run_paths
from cli.follow import print_json
from cli.render import echo
from protocol.errors import CliError
from protocol.messages import GetPlan
from protocol.plans.plan import TaskPlan
from protocol.plans.stages import STAGES
from protocol.sessions.events import StepStarted
from protocol.sessions.health import session_health
from protocol.sessions.session import SessionSnapshot

__all__ = ["down", "status", "up"]


def up(
    detach: Annotated[bool, typer.Option("--detach", "-d", help="run in the background; return when ready")] = False,
    workers: Annotated[list[str] | None, typer.Option(
        "--workers", help="instances per stage, e.g. --workers executor=3 (repeatable)")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")] = "info",
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for readiness (--detach)")] = 60.0,
) -> None:
    """Start the coordinator, broker, persistence, sandbox and the four stage actors."""
    paths = run_paths()
    flags: dict[str, Any] = {}
    for item in workers or []:
        stage, sep, count = item.partition("=")
        if not sep or stage not in STAGES or not count.isdigit():
            raise CliError(f"--workers {item!r} is not STAGE=COUNT with STAGE one of {', '.join(STAGES)}")
        flags[f"workers.{stage}"] = int(count)
    for changed in paths.prepare():  # a home an older acode (or a hand) made looser: one line per path
        echo(f"acode up: made private: {changed}", err=True)
    config = resolve(home=paths.home, flags=flags)
    _collect(paths.checkpoints, config.checkpoints.keep_days or 7.0)
    options, interval, liveness = up_options(config)
    spec = daemon.coordinator_spec(paths, options, heartbeat_interval=interval, liveness=liveness,
                                   log_level=log_level)
    if not detach:
        pid = coordinator_pid(paths)
        if pid is not None:
            raise CliError(f"acode is already running for {paths.home} (coordinator pid {pid})",
                           code="ACODE-CLI-001")
        echo(f"acode up: home {paths.home}; Ctrl-C or `acode down` stops it", err=True)
        raise typer.Exit(daemon.run_foreground(spec))
    report, started = daemon.start_detached(spec, timeout=timeout)
    if report.degraded:
        echo(render.status_table(report))
        raise CliError(f"acode is running DEGRADED: {report.reason}; fix the cause, then `acode down` and "
                       "`acode up` (sessions that need the failed actor are paused)", code="ACODE-SUP-001")
    echo(("acode is up" if started else "acode was already running") +
         f": coordinator pid {report.pid}, {len(report.actors)} actors ready, home {paths.home}")


def down(timeout: Annotated[float, typer.Option("--timeout", help="seconds per escalation step")] = 30.0) -> None:
    """Stop every actor (ask, then SIGTERM, then SIGKILL); no process remains."""
    paths = run_paths()
    pid = daemon.stop(paths, timeout=timeout)
    echo(f"acode stopped (coordinator pid {pid})" if pid else f"acode was not running for {paths.home}")


def status(
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="whose sandbox paths to show")] = Path("."),
    json_out: Json = False,
) -> None:
    """Every actor (pid, state, epoch, restarts, uptime, last heartbeat), the sandbox's
    isolation, what commands read and the workspace's configured read and write paths,
    then the sessions running or paused, with their stage and step, budget use and health."""
    from cli.doctor import configured_paths

    with Client(home()) as client:
        report = client.status()
        active = client.sessions(["running", "paused"], limit=1_000)
        where = {s.id: _where(client, s) for s in active}
        spent = {s.id: client.spent(s.id) for s in active}
        health = {s.id: session_health(typed(read_events(client.connection, s.id)), s.settings.budget, spent[s.id])
                  for s in active}
    if json_out:  # the coordinator's report, then each session in progress as the text shows it
        print_json({"type": "status_report", **{f: getattr(report, f) for f in report.__struct_fields__},
                    "sessions": [{"session": s, "where": where[s.id],
                                  "budget": {"limits": s.settings.budget, "spent": spent[s.id]},
                                  "health": health[s.id]} for s in active]})
        return
    echo(render.status_table(report))
    echo(configured_paths(run_paths(), workspace.expanduser().resolve()))
    echo(_store_size(run_paths().checkpoints))
    if active:
        echo("")
        echo(render.active_sessions(active, where, spent, health))

def _collect(root: Path, keep_days: float) -> None:
    """``acode up`` drops checkpoints older than ``checkpoints.keep_days`` first (``acode gc``)."""
    if not root.is_dir():
        return
    from cli.commands.checkpoints import collect

    try:
        report = collect(root, keep_days)
    except OSError as exc:  # a damaged store must not keep acode from starting
        echo(f"acode up: checkpoints gc skipped: {exc}; run `acode gc` to see", err=True)
        return
    dropped = sum(row["dropped"] for row in report["stores"])
    if dropped:
        echo(f"acode up: dropped {dropped} checkpoint(s) older than {keep_days:g} days", err=True)


def _store_size(root: Path) -> str:
    """The checkpoint stores' size, read without the sandbox's code (a status loads none)."""
    from actors.paths import checkpoint_stores, tree_bytes

    found = checkpoint_stores(root)
    size = sum(tree_bytes(directory) for directory, _ in found)
    return f"checkpoints: {size / 1e6:.1f} MB in {len(found)} workspace store(s) ({root}; `acode gc` trims)"


def _where(client: Client, session: SessionSnapshot) -> str:
    """Where a session stands: ``executor T2/S3, step 5 of 9``, ``verifier (visit 2)``, ``paused (user)``."""
    if session.status == "paused":
        kind = session.pause.kind if session.pause else "?"
        return f"paused ({kind}) in {session.stage or '-'}"
    pausing = " (pausing: it stops at its next safe point)" if session.pause_requested_at else ""
    where = f"{session.stage}" + (f" (visit {session.visit})" if session.visit > 1 else "")
    if session.stage != "executor" or not session.plan_version:
        return where + pausing
    started = [e for e in read_events(client.connection, session.id) if isinstance(e, StepStarted)]
    if not started:
        return where + pausing
    last = started[-1]
    plan: TaskPlan = client.connection.persistence(GetPlan(session_id=session.id, version=session.plan_version)).plan
    order = [(task.label, step.label) for task in plan.tasks for step in task.steps]
    number = order.index((last.task, last.step)) + 1 if (last.task, last.step) in order else 0
    return f"executor {last.task}/{last.step}" + (f", step {number} of {len(order)}" if number else "") + pausing
