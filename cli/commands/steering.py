"""A human's hand on a session: ``acode pause`` stops it at its next safe point, ``steer``
guides it, ``approve``/``deny`` decide the call (or the plan) it waits for, ``replan`` sends a
plan under review back with feedback, ``answer`` answers the planner's questions, and
``plan show`` shows a plan version."""

import sys
import time
from typing import Annotated, Any, Literal

import typer

from acode.client import Client
from acode.inputs import collect_answers, steering_text
from cli import approvals, render
from cli.commands.home import Json, Verbose, home
from cli.commands.sessions import check_verbose, follow_resumed
from cli.follow import print_json
from cli.render import echo
from protocol.basics.printable import printable
from protocol.calls.autonomy import ApprovalRequest
from protocol.errors import CliError
from protocol.messages import DecideApproval, ReplanSession, ResumeSession

__all__ = ["answer", "approve", "deny", "pause", "plan_show", "replan", "steer"]


def pause(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="wait until the session has stopped")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for it to stop", min=0)] = 600.0,
) -> None:
    """Pause a running session at its next safe point: before its next tool call or model
    turn, or before the next stage (a model answer in flight is recorded first, so nothing
    is paid twice). `acode resume` continues it, at least 1 s later; a second pause changes nothing."""
    with Client(home()) as client:
        session_id = client.session_id(session)
        before = client.session(session_id)
        snapshot = client.pause(session_id)
        if before.status == "paused":
            kind = before.pause.kind if before.pause else "?"
            echo(f"session {session_id} is paused already ({kind}); `acode resume {session_id}` continues it")
            return
        if before.pause_requested_at:
            echo(f"session {session_id} is pausing already: it stops at its next safe point")
        else:
            echo(f"pausing session {session_id}: it stops at its next safe point")
        deadline = time.monotonic() + timeout
        while wait and snapshot.status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            snapshot = client.session(session_id)
    if snapshot.status == "paused":
        kind = snapshot.pause.kind if snapshot.pause else "?"
        echo(f"session {session_id} paused ({kind}) in {snapshot.stage or '-'}; `acode resume {session_id}` "
             "continues it")
    elif snapshot.status != "running":
        echo(f"session {session_id} is {snapshot.status}")
    elif wait:
        echo(f"session {session_id} has not reached a safe point in {timeout:g}s (a model answer may still be "
             "coming); it stops there: `acode status` shows it")


def steer(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    text: Annotated[str, typer.Argument(help="guidance, e.g. \"keep the public API unchanged\"")],
) -> None:
    """Guide a running (or paused) session: the stage at work reads the text from its next
    model turn on, and so does every later stage; the model sees it fenced as untrusted text."""
    text = steering_text(text, "steering text")
    with Client(home()) as client:
        session_id = client.session_id(session)
        snapshot = client.steer(session_id, text)
    where = f"the {snapshot.stage} reads it at its next model turn" if snapshot.status == "running" and \
        snapshot.stage else "the next stage reads it"
    echo(f"steered session {session_id}: {where}, and every later stage too")


def _decide(session: str, decision: Literal["approve", "deny"], *, always: bool = False, reason: str = "",
            detach: bool, json_out: bool, verbose: bool) -> None:
    check_verbose(verbose, json_out)
    with Client(home()) as client:
        session_id = client.session_id(session)
        snapshot = client.session(session_id)
        body = client.decision(snapshot, decision, always=always, reason=reason, by=f"acode {decision}")
        if isinstance(body, DecideApproval) and snapshot.approval is not None:
            echo("\n".join(render.request_lines(snapshot.approval)))
            if always:
                _confirm_always(snapshot.approval)
        follow_resumed(client, session_id, body, detach=detach, json_out=json_out,
                       done="approved" if decision == "approve" else "denied", verbose=verbose)


def _confirm_always(request: ApprovalRequest) -> None:
    """Show what ``--always`` grants in full; on a terminal, ask before granting it."""
    echo("\n".join(render.always_lines(request)))
    if not approvals.interactive():
        echo("not a terminal: approving with this rule as --always asked")
        return
    echo("approve with this rule? [y/N]: ", nl=False)
    if sys.stdin.readline().strip().lower()[:1] != "y":
        raise CliError("nothing approved: the --always rule was not confirmed; `acode approve SESSION` approves "
                       "this call alone", code="ACODE-CLI-004")


def approve(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    always: Annotated[bool, typer.Option(
        "--always", help="also approve later calls with the same rule in this session: the same program, "
        "subcommand, option names and risk class (shown in full, confirmed on a terminal)")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    verbose: Verbose = False,
    json_out: Json = False,
) -> None:
    """Approve what a paused session waits for, and follow it on: the call it shows
    (``awaiting_approval``), or the plan under review (``plan_review``, `acode run --approve-plan`)."""
    _decide(session, "approve", always=always, detach=detach, json_out=json_out, verbose=verbose)


def deny(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    reason: Annotated[str, typer.Option("--reason", help="why; the model is told")] = "denied by the user",
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    verbose: Verbose = False,
    json_out: Json = False,
) -> None:
    """Deny the call a paused session waits for: the model is told "the user denied this: REASON"."""
    _decide(session, "deny", reason=reason, detach=detach, json_out=json_out, verbose=verbose)


def replan(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    feedback: Annotated[str, typer.Argument(help="what to change in the plan, in plain words")],
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    verbose: Verbose = False,
    json_out: Json = False,
) -> None:
    """Send a plan under review back to the planner with your feedback; the next version is shown again."""
    check_verbose(verbose, json_out)
    feedback = steering_text(feedback, "feedback")
    with Client(home()) as client:
        session_id = client.session_id(session)
        follow_resumed(client, session_id, ReplanSession(session_id=session_id, feedback=feedback),
                       detach=detach, json_out=json_out, verbose=verbose)


def answer(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    answers: Annotated[list[str] | None, typer.Option("--answer", "-a", help="LABEL=ANSWER; an option's "
                                                      "number picks it (repeat for each question)")] = None,
    defaults: Annotated[bool, typer.Option("--defaults", help="use each unanswered question's default")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    verbose: Verbose = False,
    json_out: Json = False,
) -> None:
    """Answer the planner's questions of a paused session, and follow it on."""
    check_verbose(verbose, json_out)
    with Client(home()) as client:
        session_id = client.session_id(session)
        plan = client.waiting_questions(session_id)
        interactive = not answers and not defaults
        if interactive:
            echo("\n".join(render.question_lines(plan)))

        def ask(question: Any) -> str:
            default = question.default or (question.options[0] if question.options else None)
            shown = f" [{printable(default, lines=False)}]" if default else ""  # the model's words, escaped
            try:
                return str(typer.prompt(f"{printable(question.label, lines=False)}{shown}", default=default,
                                        show_default=False))
            except typer.Abort:
                raise CliError(f"no answer for {question.label}; pass --answer {question.label}=… or --defaults",
                               code="ACODE-CLI-005") from None

        chosen = collect_answers(plan, answers or [], defaults=defaults, ask=ask if interactive else None)
        follow_resumed(client, session_id, ResumeSession(session_id=session_id, answers=chosen),
                       detach=detach, json_out=json_out, verbose=verbose)


def plan_show(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    version: Annotated[int, typer.Option("--version", "-v", help="plan version (default: the latest)", min=0)] = 0,
    json_out: Json = False,
) -> None:
    """Show a session's plan: tasks, steps, acceptance criteria, questions, changes."""
    with Client(home()) as client:
        session_id = client.session_id(session)
        plan = client.plan(session_id, version)
    if json_out:
        print_json(plan)
    else:
        echo(render.plan_detail(plan, session_id))
