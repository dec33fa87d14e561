"""Looking after the setup: ``acode doctor`` checks the model server, the model, the sandbox
and the actors; ``trust`` lets a workspace's config loosen yours; ``logs`` shows an actor's
log, or one session's lines from every actor's log; ``demo`` runs the shipped example end to end."""

import os
from pathlib import Path
from typing import Annotated

import typer

from acode.config.loader import resolve
from cli.commands.home import Json, run_paths
from cli.follow import print_json
from cli.render import echo
from protocol.errors import CliError

__all__ = ["demo", "doctor", "logs", "trust"]


def doctor(
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="the project directory")] = Path("."),
    json_out: Json = False,
) -> None:
    """Check the model server, the model, the sandbox and the actors; one line each."""
    from cli.doctor import diagnose, render_checks

    checks = diagnose(run_paths(), workspace.expanduser().resolve())
    if json_out:
        print_json(checks)
    else:
        echo(render_checks(checks))
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)


def trust(
    directory: Annotated[Path, typer.Argument(help="the workspace whose .agent/config.yml you trust")] = Path("."),
    list_: Annotated[bool, typer.Option("--list", help="list the trusted files and whether each is unchanged")]
    = False,
    revoke: Annotated[bool, typer.Option("--revoke", help="stop trusting DIR's file")] = False,
) -> None:
    """Trust DIR/.agent/config.yml as it is now: its settings may then loosen yours (README 'Configuration')."""
    from acode.config import trust as trusting
    from acode.config.loader import decode_file

    home = run_paths().home
    store = trusting.load_store(home)
    if list_:
        for name, sha in sorted(store.files.items()):
            try:
                state = "trusted" if trusting.digest(Path(name).read_bytes()) == sha else "changed: untrusted"
            except OSError:
                state = "missing"
            echo(f"{name}  {state}")
        if not store.files:
            echo(f"no workspace config is trusted (store {home / trusting.STORE_NAME})")
        return
    root = directory.expanduser()
    if not root.is_dir():
        raise CliError(f"{str(directory)!r} is not a directory; pass the workspace directory", code="ACODE-CLI-003")
    path = trusting.config_file(root)
    if revoke:
        if str(path) not in store.files:
            raise CliError(f"{path} is not trusted; `acode trust --list` shows what is", code="ACODE-CLI-003")
        trusting.save_store(home, trusting.TrustStore(files={k: v for k, v in store.files.items() if k != str(path)}))
        echo(f"no longer trusted: {path}; its loosening settings are ignored again")
        return
    user = resolve(home=home, notices=[])  # the user's own layers: file, environment
    try:
        text = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise CliError(f"{path} does not exist; there is nothing to trust in {root.resolve()}",
                       code="ACODE-CLI-003") from None
    granted = trusting.grants(user, decode_file(path, text, []))  # an invalid file is refused, not trusted
    trusting.save_store(home, trusting.TrustStore(files={**store.files, str(path): trusting.digest(text)}))
    echo(f"trusted: {path} (sha256 {trusting.digest(text)[:16]}…); a change to the file untrusts it")
    for key, value, base in granted:
        echo(f"  grants {key}: {value} (yours: {base})")
    if not granted:
        echo("  it grants nothing beyond your own settings")


def logs(
    instance: Annotated[str | None, typer.Argument(help="actor instance, e.g. executor")] = None,
    lines: Annotated[int | None, typer.Option("--lines", "-n", help="the last N lines (default 40; "
                                                                     "with --session: all)")] = None,
    session: Annotated[str | None, typer.Option(
        "--session", help="one session's lines from every actor's log, in time order (id or unique prefix)")] = None,
    json_out: Json = False,
) -> None:
    """Show an actor's log tail (or list the log files), or one session's lines from every log."""
    paths = run_paths()
    if session is not None:
        _session_logs(paths.logs, session, instance, lines, json_out)
        return
    from actors.logrotate import logs_by_instance

    found = logs_by_instance(paths.logs)  # an instance's rotated files (x.log.1 ...) are its own, not another's
    if instance is None:
        echo(f"logs in {paths.logs}: {', '.join(found) if found else 'none yet'}")
        return
    if instance not in found:
        raise CliError(f"no log for {instance!r} in {paths.logs}; `acode logs` lists them")
    echo("\n".join(_tail(found[instance], 40 if lines is None else lines)))


def _tail(files: list[Path], count: int) -> list[str]:
    """The last ``count`` lines of a log's files (oldest first): from the live file, and
    from the newest rotated ones when it holds fewer (it was just rotated)."""
    text: list[str] = []
    for path in reversed(files):
        if len(text) >= count:
            break
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 256 * (count - len(text))))
                text = handle.read().decode(errors="replace").splitlines()[-(count - len(text)):] + text
        except FileNotFoundError:
            continue  # rotated away since the listing
    return text[-count:] if count > 0 else []


def _session_logs(logs: Path, given: str, instance: str | None, last: int | None, json_out: bool) -> None:
    """``acode logs --session``: reads the log files only, so it works with acode down."""
    from cli.sessionlogs import render, session_lines

    log = session_lines(logs, given, instance)
    found = log.lines
    if last is not None:
        found = found[-last:] if last > 0 else []
    if json_out:
        for line in found:
            print_json(line.fields)
        return
    actors = sorted({line.instance for line in found})
    echo(f"session {log.session_id or '?'} (trace {log.trace_id}): {len(found)} lines from {', '.join(actors)}")
    width = max((len(line.instance) for line in found), default=0)
    echo("\n".join(render(line, width) for line in found))


def demo(
    keep_running: Annotated[bool, typer.Option("--keep-running", help="leave the actors up afterwards")] = False,
) -> None:
    """Run the shipped example end to end (starts and stops acode if it was not running)."""
    from cli.demo import run_demo

    raise typer.Exit(run_demo(run_paths(), keep_running=keep_running))
