"""A human's hand on a session: ``acode pause`` stops it at its next safe point, ``steer``
guides it, ``approve``/``deny`` decide the call (or the plan) it waits for, ``replan`` sends a
plan under review back with feedback, ``answer`` answers the planner's questions, and
``plan show`` shows a plan version."""

import sys
import time
from typing import Annotated, Any, Literal

import typer

from cli import approvals, render
from cli.commands.home import Json, home
from cli.commands.sessions import follow_resumed, full_session_id, real_status
from cli.connection import Connection
from cli.follow import print_json
from cli.render import echo
from protocol.autonomy import ApprovalRequest
from protocol.errors import CliError
from protocol.messages import (
    DecideApproval,
    GetPlan,
    GetSession,
    PauseSession,
    ReplanSession,
    ResumeSession,
    SteerSession,
)
from protocol.plan import TaskPlan
from protocol.printable import printable
from protocol.session import MAX_STEERING_CHARS, Clarification, SessionSnapshot

__all__ = ["answer", "approve", "collect_answers", "deny", "pause", "plan_show", "replan", "steer"]


def _text_arg(text: str, what: str) -> str:
    """Steering or feedback text as given: not blank, at most MAX_STEERING_CHARS (ACODE-CLI-009)."""
    if not text.strip():
        raise CliError(f"the {what} is empty; say in a sentence what the session should do differently",
                       code="ACODE-CLI-009")
    if len(text) > MAX_STEERING_CHARS:
        raise CliError(f"the {what} is {len(text):,} characters; at most {MAX_STEERING_CHARS:,} are taken: say it "
                       "shorter", code="ACODE-CLI-009")
    return text


def pause(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="wait until the session has stopped")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for it to stop", min=0)] = 600.0,
) -> None:
    """Pause a running session at its next safe point: before its next tool call or model
    turn, or before the next stage (a model answer in flight is recorded first, so nothing
    is paid twice). `acode resume` continues it, at least 1 s later; a second pause changes nothing."""
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        before: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        snapshot: SessionSnapshot = connection.coordinator(PauseSession(session_id=session_id)).session
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
            snapshot = connection.persistence(GetSession(session_id=session_id)).session
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
    text = _text_arg(text, "steering text")
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        snapshot: SessionSnapshot = connection.coordinator(SteerSession(session_id=session_id, text=text)).session
    where = f"the {snapshot.stage} reads it at its next model turn" if snapshot.status == "running" and \
        snapshot.stage else "the next stage reads it"
    echo(f"steered session {session_id}: {where}, and every later stage too")


def _decide(session: str, decision: Literal["approve", "deny"], *, always: bool = False, reason: str = "",
            detach: bool, json_out: bool) -> None:
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        snapshot: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        body = approvals.decision_for(snapshot, decision, always=always, reason=reason, by=f"acode {decision}")
        if isinstance(body, DecideApproval) and snapshot.approval is not None:
            echo("\n".join(render.request_lines(snapshot.approval)))
            if always:
                _confirm_always(snapshot.approval)
        follow_resumed(connection, session_id, body, detach=detach, json_out=json_out,
                        done="approved" if decision == "approve" else "denied")


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
    json_out: Json = False,
) -> None:
    """Approve what a paused session waits for, and follow it on: the call it shows
    (``awaiting_approval``), or the plan under review (``plan_review``, `acode run --approve-plan`)."""
    _decide(session, "approve", always=always, detach=detach, json_out=json_out)


def deny(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    reason: Annotated[str, typer.Option("--reason", help="why; the model is told")] = "denied by the user",
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Deny the call a paused session waits for: the model is told "the user denied this: REASON"."""
    _decide(session, "deny", reason=reason, detach=detach, json_out=json_out)


def replan(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    feedback: Annotated[str, typer.Argument(help="what to change in the plan, in plain words")],
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Send a plan under review back to the planner with your feedback; the next version is shown again."""
    feedback = _text_arg(feedback, "feedback")
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        follow_resumed(connection, session_id, ReplanSession(session_id=session_id, feedback=feedback),
                        detach=detach, json_out=json_out)


def _chosen(question: Any, given: str) -> str:
    """An answer as typed: an option's number picks that option; other text is free text."""
    text = given.strip()
    if text.isdigit() and question.options:
        number = int(text)
        if not 1 <= number <= len(question.options):
            raise CliError(f"{question.label} has options 1 to {len(question.options)}, not {number}",
                           code="ACODE-CLI-005")
        return str(question.options[number - 1])
    if not text:
        raise CliError(f"the answer to {question.label} is empty; give an option number or some text",
                       code="ACODE-CLI-005")
    if question.options and not question.free_text and text not in question.options:
        numbered = "; ".join(f"{n}) {o}" for n, o in enumerate(question.options, 1))
        raise CliError(f"{question.label} takes one of its options ({numbered}), not {text!r}",
                       code="ACODE-CLI-005")
    return text


def collect_answers(plan: TaskPlan, given: list[str], *, defaults: bool, ask: Any = None) -> list[Clarification]:
    """Answers for every question of ``plan``: ``LABEL=answer`` pairs first, then each
    remaining one from ``ask(question)`` (a prompt) or, with ``defaults``, its default."""
    by_label = {q.label: q for q in plan.questions}
    answers: dict[str, Clarification] = {}
    for item in given:
        label, sep, text = item.partition("=")
        label = label.strip()
        if not sep:
            raise CliError(f"--answer {item!r} is not LABEL=ANSWER (e.g. Q1=2 or Q1='use pytest')",
                           code="ACODE-CLI-005")
        question = by_label.get(label)
        if question is None:
            raise CliError(f"the plan has no question {label!r}; its questions are {', '.join(by_label)}",
                           code="ACODE-CLI-005")
        answers[label] = Clarification(label=label, question=question.question, answer=_chosen(question, text))
    for question in plan.questions:
        if question.label in answers:
            continue
        if defaults:
            from actors.coordinator.orchestrator import default_answers

            answers[question.label] = next(a for a in default_answers(plan, timed_out=False)
                                           if a.label == question.label)
        elif ask is not None:
            answers[question.label] = Clarification(label=question.label, question=question.question,
                                                    answer=_chosen(question, ask(question)))
        else:
            raise CliError(f"no answer for {question.label} ({question.question}); pass --answer "
                           f"{question.label}=… or --defaults", code="ACODE-CLI-005")
    return [answers[q.label] for q in plan.questions]


def answer(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    answers: Annotated[list[str] | None, typer.Option("--answer", "-a", help="LABEL=ANSWER; an option's "
                                                      "number picks it (repeat for each question)")] = None,
    defaults: Annotated[bool, typer.Option("--defaults", help="use each unanswered question's default")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Answer the planner's questions of a paused session, and follow it on."""
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        snapshot: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        if snapshot.pause is None or snapshot.pause.kind != "needs_input":
            state = f"paused for {snapshot.pause.kind}" if snapshot.pause else snapshot.status
            raise CliError(f"session {session_id} is {state}, not waiting for answers; see `acode show "
                           f"{session_id[:8]}`", code="ACODE-CLI-004")
        plan: TaskPlan = connection.persistence(GetPlan(session_id=session_id, version=snapshot.plan_version)).plan
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
        follow_resumed(connection, session_id, ResumeSession(session_id=session_id, answers=chosen),
                        detach=detach, json_out=json_out)


def plan_show(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    version: Annotated[int, typer.Option("--version", "-v", help="plan version (default: the latest)", min=0)] = 0,
    json_out: Json = False,
) -> None:
    """Show a session's plan: tasks, steps, acceptance criteria, questions, changes."""
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        plan = connection.persistence(GetPlan(session_id=session_id, version=version)).plan
        plan = real_status(connection, connection.persistence(GetSession(session_id=session_id)).session, plan)
    if json_out:
        print_json(plan)
    else:
        echo(render.plan_detail(plan, session_id))
