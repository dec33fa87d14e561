"""The ``acode`` command: thin typer commands over the actors' protocol.

Commands parse arguments, send one message (or follow a session), and render the answer;
nothing here holds state the actors need. Errors print one line with their code, never a
traceback. Exit codes of ``run``/``resume``/``answer`` follow seed 000: 0 done, 1 failed,
20 stage timeout, 21 cycle limit, 22 human required (escalation, model unavailable,
invalid plan, questions, plan review, paused by the user), 23 cancelled; and seed
004's where a step's outcome paused the session: 30 step failed, 31 turn limit, 32 sandbox violation, 34 step timeout.

The commands live in :mod:`cli.commands`, one module per kind of work; this module is the
entry point (``acode = cli.app:main``) and the table of contents: it registers each command
on the one typer app, in the order ``acode --help`` lists them.
"""

import msgspec
import typer

from actors import private
from cli.commands import checkpoints, lifecycle, maintenance, sessions, steering, telemetry
from cli.commands.home import set_home
from cli.commands.mcp import mcp_app
from cli.render import echo
from protocol.errors import AcodeError

__all__ = ["app", "main"]

app = typer.Typer(name="acode", help="Local-first agentic coding: plan, execute, verify, review.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  rich_markup_mode=None)  # plain help: rich costs ~90 ms of start-up per command
app.callback()(set_home)

for command in (
    lifecycle.up, lifecycle.down, lifecycle.status,
    sessions.run, sessions.attach, sessions.sessions, sessions.show, sessions.cancel, sessions.resume,
    steering.pause, steering.steer, steering.approve, steering.deny, steering.replan, steering.answer,
    checkpoints.checkpoints, checkpoints.undo, checkpoints.rewind, checkpoints.gc,
    telemetry.trace, telemetry.metrics, telemetry.export,
    maintenance.doctor, maintenance.trust, maintenance.logs, maintenance.demo,
):
    app.command()(command)

plan_app = typer.Typer(help="The plans of a session (every version is kept).", no_args_is_help=True,
                       rich_markup_mode=None)
plan_app.command("show")(steering.plan_show)
app.add_typer(plan_app, name="plan")
app.add_typer(mcp_app, name="mcp")


def main() -> None:
    private.enter()  # acode's own files are private to the user (actors.private)
    try:
        app(prog_name="acode")
    except AcodeError as exc:
        echo(f"acode: {exc}", err=True)
        raise SystemExit(1) from None
    except msgspec.ValidationError as exc:  # pragma: no cover - every input is validated above
        echo(f"acode: invalid input: {exc} (ACODE-CLI-003)", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
