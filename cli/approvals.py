"""Approvals in the CLI: what a waiting call looks like, the inline prompt, and what
``acode approve``/``acode deny`` send for a session's pause.

A foreground ``acode run`` whose stdin and stdout are terminals asks inline when the
session pauses ``awaiting_approval``::

    approve? [y]es [n]o [a]lways [d]iff [q]uit:

``y`` approves this call, ``a`` approves it and later calls of the same rule in this
session (the rule is shown in full and confirmed first: :func:`cli.render.always_lines`), ``n``
denies it (with an optional reason), ``d`` shows the diff of a write, ``q`` detaches and
leaves the session waiting, printing the commands that decide it.
The decision goes to the coordinator like ``acode approve``'s; the run then follows the
session on. Off a terminal the session's ``non_interactive_policy`` decides instead (it
was resolved when the session was submitted).
"""

from __future__ import annotations

import sys
from typing import Literal

from acode.client import Client
from acode.stream import read_events
from cli.follow import follow_and_print
from cli.modeltext import ModelText
from cli.render import always_lines, echo, request_lines
from protocol.calls.autonomy import ApprovalRequest
from protocol.sessions.events import HookRan
from protocol.sessions.session import SessionSnapshot

__all__ = ["PROMPT", "interactive", "prompt_loop"]

PROMPT = "approve? [y]es [n]o [a]lways [d]iff [q]uit: "


def interactive() -> bool:
    """Whether a human is at this terminal to answer a prompt."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _ask(request: ApprovalRequest) -> tuple[str, str]:
    """One decision from the terminal: ("approve"|"always"|"deny"|"quit", reason)."""
    while True:
        echo(PROMPT, nl=False)
        answer = sys.stdin.readline()
        if not answer:
            return "quit", ""
        match answer.strip().lower()[:1]:
            case "y":
                return "approve", ""
            case "a":
                echo("\n".join(always_lines(request)))
                echo("approve with this rule? [y/N]: ", nl=False)
                if sys.stdin.readline().strip().lower()[:1] == "y":
                    return "always", ""
            case "n":
                echo("reason (optional): ", nl=False)
                return "deny", sys.stdin.readline().strip()
            case "d":
                lines = request.diff.rstrip("\n").split("\n") if request.diff else ["(this call writes no file)"]
                echo("\n".join(lines))
            case "q":
                return "quit", ""
            case _:
                echo("answer y, n, a, d or q")


def prompt_loop(client: Client, session: SessionSnapshot, *, json_out: bool = False,
                model_text: ModelText | None = None) -> SessionSnapshot:
    """While the session waits for approval, or for the answer to a ``confirm`` hook, ask
    here, send the decision, follow it on (``model_text``: ``--verbose``'s, going on)."""
    session = _confirm(client, session, json_out, model_text)
    while session.status == "paused" and session.pause is not None and session.pause.kind == "awaiting_approval" \
            and session.approval is not None:
        request = session.approval
        echo(f"[APPROVAL] session {session.id}")
        echo("\n".join(request_lines(request)))
        choice, reason = _ask(request)
        if choice == "quit":
            echo(f"detached: session {session.id} waits for a decision; `acode approve {session.id}` runs the "
                 f"call, `acode deny {session.id} --reason TEXT` refuses it")
            return session
        verdict: Literal["approve", "deny"] = "deny" if choice == "deny" else "approve"
        events = read_events(client.connection, session.id)
        body = client.decision(session, verdict, always=choice == "always", reason=reason or
                               "denied at the prompt" if verdict == "deny" else "", by="the inline prompt")
        client.send(body)  # the follow below shows the approval_decided event
        session = follow_and_print(client, session.id, json_out=json_out, after_seq=events[-1].seq if events else 0,
                                   model_text=model_text)
        session = _confirm(client, session, json_out, model_text)
    return session


def _confirm(client: Client, session: SessionSnapshot, json_out: bool,
             model_text: ModelText | None = None) -> SessionSnapshot:
    """A session paused by a ``confirm`` hook (README "Hooks"): ask whether to go on; yes
    resumes it (as ``acode resume``) and follows it; anything else leaves it paused."""
    while session.status == "paused" and session.pause is not None and session.pause.kind == "hook":
        events = read_events(client.connection, session.id)
        asked = next((e for e in reversed(events) if isinstance(e, HookRan) and e.decision == "pause"), None)
        if asked is None or asked.action != "confirm":
            return session
        echo(f"[CONFIRM] {asked.reason}")
        echo("go on? [y/N]: ", nl=False)
        if sys.stdin.readline().strip().lower()[:1] != "y":
            echo(f"the session stays paused; `acode resume {session.id}` goes on")
            return session
        client.resume(session.id)
        session = follow_and_print(client, session.id, json_out=json_out, after_seq=events[-1].seq,
                                   model_text=model_text)
    return session

