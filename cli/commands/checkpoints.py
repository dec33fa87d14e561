"""Checkpoints and undo: ``acode checkpoints`` lists a session's, ``undo`` puts the workspace
back, ``rewind`` puts it back and continues the session from that step, ``gc`` drops old
ones (README "Checkpoints and undo").

The store of each workspace is in acode's home (``actors/sandbox/checkpointing.py``).
Listing and gc read and write the store directly (they never touch a workspace), so they
work without ``acode up``; the undo is the sandbox's work (the only process that touches
a workspace), so it needs acode running: the CLI asks for the plan first, shows it, asks
on a terminal (``--yes`` off one), then asks the sandbox to apply it. A kill of the CLI
meanwhile changes nothing: the sandbox completes what it started.
"""

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from acode.checkpoints import checkpoint_store, listed
from acode.client import Client
from acode.config.loader import resolve
from cli.commands.home import Json, Verbose, home, run_paths
from cli.follow import print_json
from cli.render import echo
from protocol.errors import CliError

__all__ = ["checkpoints", "gc", "rewind", "undo"]

_SHOWN = 20  # paths listed per kind before "… and N more"
Yes = Annotated[bool, typer.Option("--yes", help="do not ask (needed off a terminal)")]
Force = Annotated[bool, typer.Option(
    "--force", help="also put back what someone else changed since (your own edits included)")]


def checkpoints(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    json_out: Json = False,
) -> None:
    """List a session's checkpoints: one before each call that could change the workspace."""
    full, workspace, _, records = checkpoint_store(run_paths().home, session)
    rows = listed(full, records)
    if json_out:
        for row in rows:
            print_json(row)
        return
    echo(f"session {full}  workspace {workspace}")
    for row in rows:
        where = "/".join(part for part in (row["task"], row["step"]) if part)
        when = time.strftime("%H:%M:%S", time.localtime(row["at"]))
        echo(f"{row['id'][:12]}  {when}  {row['stage'] or row['kind']:<9} {where or '-':<8} "
             f"{row['took_ms']:>6.1f} ms  {row['files']:>4} file(s)  {row['call']}")


def undo(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    to: Annotated[str | None, typer.Option("--to", help="checkpoint id (or prefix): back to just before that call")]
    = None,
    last: Annotated[bool, typer.Option("--last", help="back one call")] = False,
    yes: Yes = False,
    force: Force = False,
    json_out: Json = False,
) -> None:
    """Put the workspace back as it was before the session began (or --to / --last)."""
    from protocol.messages import RestoreWorkspace

    if to and last:
        raise CliError("give --to CHECKPOINT or --last, not both", code="ACODE-CLI-003")
    with Client(home()) as client:
        snapshot = client.paused(session, "undo")
        body = RestoreWorkspace(session_id=snapshot.id, workspace=snapshot.workspace, to=to or "", last=last,
                                force=force, policy=snapshot.settings.sandbox)  # what its checkpoints covered
        done = _restore(client, body, yes=yes, question="Restore?")
    _report(done, json_out, nothing=not done.applied)


def rewind(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    to: Annotated[str, typer.Option("--to", help="checkpoint id (or prefix) taken before an executor's step")],
    steer: Annotated[str | None, typer.Option("--steer", help="guidance for the work redone from there")] = None,
    yes: Yes = False,
    force: Force = False,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    verbose: Verbose = False,
    json_out: Json = False,
) -> None:
    """Put the workspace back at a checkpoint and continue the session from that step."""
    from cli.commands.sessions import check_verbose, follow_resumed
    from protocol.messages import RestoreWorkspace

    check_verbose(verbose, json_out)
    with Client(home()) as client:
        snapshot = client.paused(session, "rewind")
        record = client.rewind_target(snapshot, to)
        meta = record.meta
        body = RestoreWorkspace(session_id=snapshot.id, workspace=snapshot.workspace, to=record.id, force=force,
                                by="rewind", policy=snapshot.settings.sandbox)
        done = _restore(client, body, yes=yes, question="Restore and continue from there?")
        if not json_out:
            _report(done, json_out, nothing=not done.applied)
        where = f"{meta.task}/{meta.step}" if meta.task else "the first step"
        follow_resumed(client, snapshot.id, client.rewind_body(snapshot.id, record, steer),
                       detach=detach, json_out=json_out, done=f"rewound: the executor goes on from {where}",
                       verbose=verbose)


def _restore(client: Client, body: Any, *, yes: bool, question: str) -> Any:
    """Ask the sandbox for ``body``'s plan, show it and ask ``question`` on a terminal
    (``yes``: do not ask; off a terminal it must be given), then have it applied; the
    plan itself (not applied) when there is nothing to change."""
    import msgspec

    plan = client.restore(body)
    if not (plan.write or plan.delete):
        return plan
    if not yes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise CliError(f"{body.by} would change {len(plan.write) + len(plan.delete)} path(s) in "
                           f"{body.workspace}; run it on a terminal to confirm, or pass --yes", code="ACODE-CLI-011")
        echo(_changes(plan, body.workspace))
        if not typer.confirm(question, default=False):
            raise typer.Exit(1)
    return client.restore(msgspec.structs.replace(body, apply=True))


def _changes(plan: Any, workspace: str) -> str:
    lines = [f"back to checkpoint {plan.target[:12]} in {workspace}:"]
    for label, paths in (("write", plan.write), ("delete", plan.delete), ("leave (changed by someone else; --force "
                                                                           "puts them back too)", plan.left)):
        for path in paths[:_SHOWN]:
            lines.append(f"  {label.split()[0]:<6} {path}")
        if len(paths) > _SHOWN:
            lines.append(f"  … and {len(paths) - _SHOWN} more to {label}")
    return "\n".join(lines)


def _report(restored: Any, json_out: bool, *, nothing: bool = False) -> None:
    if json_out:
        print_json(restored)
        return
    if nothing:
        echo(f"nothing to restore: the workspace is as checkpoint {restored.target[:12]} has it"
             + (f" (left alone: {', '.join(restored.left[:_SHOWN])})" if restored.left else ""))
        return
    echo(f"restored to {restored.target[:12]}: {len(restored.write)} written, {len(restored.delete)} deleted"
         + (f", {len(restored.left)} left alone: {', '.join(restored.left[:_SHOWN])}" if restored.left else "")
         + f"; undo this with --to {restored.checkpoint[:12]}")


def gc(
    keep_days: Annotated[float | None, typer.Option(
        "--keep-days", help="keep checkpoints this many days (default: checkpoints.keep_days, 7)")] = None,
    json_out: Json = False,
) -> None:
    """Drop checkpoints older than checkpoints.keep_days from every workspace's store."""
    days = keep_days if keep_days is not None else resolve(home=run_paths().home, notices=[]).checkpoints.keep_days
    report = collect(run_paths().checkpoints, 7.0 if days is None else days)
    if json_out:
        print_json(report)
        return
    for row in report["stores"]:
        echo(f"{row['workspace']}: dropped {row['dropped']}, kept {row['kept']}, {row['bytes'] / 1e6:.1f} MB")
    echo(f"checkpoints: {report['bytes'] / 1e6:.1f} MB in {len(report['stores'])} store(s)")


def collect(root: Path, keep_days: float) -> dict[str, Any]:
    """gc every store under ``root`` (``acode gc``, and ``acode up`` before it starts the actors)."""
    from actors.paths import checkpoint_stores
    from actors.sandbox.workspace.checkpoints import Checkpoints

    rows = []
    for directory, workspace in checkpoint_stores(root):
        store = Checkpoints(directory, workspace)
        collected = store.gc(keep_days)
        rows.append({"workspace": workspace, "dropped": collected.dropped, "kept": collected.kept,
                     "objects_deleted": collected.deleted, "bytes": store.size_bytes()})
    return {"keep_days": keep_days, "stores": rows, "bytes": sum(row["bytes"] for row in rows)}
