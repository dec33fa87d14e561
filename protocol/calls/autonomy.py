"""Autonomy levels and approvals: what a tool call needs before it runs (pure, no I/O).

A session's autonomy level (0-3) and its ``approvals`` refinement are read once, when the
session is created, and stored in its settings (seed 002 S9: nothing changes them later,
``acode resume`` included). The executor's autonomy step and the sandbox's gate both call
:func:`gate` with those stored values and the call's risk class (:func:`risk_of_call`), so
the two agree by construction.

The table, risk class x level (``auto``: runs; ``prompt``: waits for a human's decision)::

    class        examples                             0       1       2       3
    read         read_file, list_directory, search    auto    auto    auto    auto
    write        write_file, modify_file, mkdir       prompt  auto    auto    auto
    execute      pytest, python x.py, git status      prompt  prompt  auto    auto
    network      pip install, git fetch, npx          prompt  prompt  auto    auto
    destructive  rm, mv, git reset, git stash, ...    prompt  prompt  prompt  auto

``approvals:`` (seed 004) overrides a level per class with ``auto``, ``prompt`` or ``deny``
(``deny``: refused without asking): ``file_write`` the write class, ``file_delete`` the
destructive class (what deletes or discards files), ``terminal_commands`` the execute and
network classes. Reads are never gated. ``non_interactive_policy`` decides a prompt when no
human is there to answer (see :data:`ApprovalMode`).

An approval is bound to the exact call: its :func:`call_hash` (tool and canonical
arguments) and its idempotency key; ``--always`` records a *rule* (:func:`rule_of`: the
tool, for commands the program, subcommand and option names, and the risk class) that
approves later calls of the same session with the same rule, and nothing else.

A command's class comes from :mod:`protocol.calls.commands`: destructive unless its program,
subcommand and options are known to read or only add (see there). An MCP tool's
(``mcp__SERVER__TOOL``) comes from :func:`protocol.calls.mcp.risk_of_tool`, which the caller
computes from the tool's definition as the ``mcp`` actor lists it and the server's
configuration stored with the session, and passes to :func:`risk_of_call`; its ``--always``
rule is the tool's full name and class, ``mcp__github__create_issue (destructive)``.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from protocol.calls.commands import REDIRECT, classify, shape
from protocol.calls.mcp import PREFIX as MCP_PREFIX
from protocol.calls.tools import Risk, risk_of

__all__ = [
    "LEVELS",
    "TABLE",
    "ApprovalDecision",
    "ApprovalMode",
    "ApprovalRequest",
    "Approvals",
    "ClassPolicy",
    "Gate",
    "Level",
    "call_hash",
    "classify",
    "command_argv",
    "command_risk",
    "decision_of",
    "gate",
    "matches",
    "risk_of_call",
    "rule_of",
    "target_of",
]

Level = Annotated[int, msgspec.Meta(ge=0, le=3)]
LEVELS = (0, 1, 2, 3)
Gate = Literal["auto", "prompt", "deny"]
ClassPolicy = Literal["auto", "prompt", "deny"]
# How a prompt is decided: "wait" for a human (`acode approve` / `acode deny`, or the inline
# prompt of a foreground `acode run` on a terminal); otherwise the session was submitted with
# no human to answer and its non_interactive_policy decides: "auto" approves, "skip" denies
# ("skipped: non-interactive"), "fail" pauses the session with ACODE-EXEC-005 (exit 33).
ApprovalMode = Literal["wait", "auto", "skip", "fail"]

TABLE: dict[Risk, tuple[Gate, Gate, Gate, Gate]] = {
    "read": ("auto", "auto", "auto", "auto"),
    "write": ("prompt", "auto", "auto", "auto"),
    "execute": ("prompt", "prompt", "auto", "auto"),
    "network": ("prompt", "prompt", "auto", "auto"),
    "destructive": ("prompt", "prompt", "prompt", "auto"),
}
_CLASS_KEY: dict[Risk, str | None] = {"read": None, "write": "file_write", "execute": "terminal_commands",
                                      "network": "terminal_commands", "destructive": "file_delete"}


class _Wire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class Approvals(_Wire, frozen=True, kw_only=True):
    """Seed 004's ``approvals:`` block, as stored with a session (None: the level decides)."""

    file_write: ClassPolicy | None = None
    file_delete: ClassPolicy | None = None
    terminal_commands: ClassPolicy | None = None
    non_interactive_policy: Literal["auto", "skip", "fail"] = "fail"


class ApprovalRequest(_Wire, frozen=True, kw_only=True):
    """A call the executor may not run without a human's decision: what the pause shows.

    ``why`` says which rule asks; ``diff`` is the unified diff a write would make (against
    the file as the sandbox read it); ``argv`` and ``cwd`` are a command's."""

    key: str
    call_hash: str
    tool: str
    arguments: dict[str, Any] = {}
    risk: Risk
    rule: str
    why: str
    task: str = ""
    step: str = ""
    target: str = ""
    diff: str = ""
    argv: list[str] = []
    cwd: str = ""


class ApprovalDecision(_Wire, frozen=True, kw_only=True):
    """A human's (or the non-interactive policy's) decision on one call, durable with the
    session; ``id`` is the token a RunTool carries to the sandbox. ``always``: the decision
    also approves later calls of the same ``rule`` in this session."""

    id: str
    key: str
    call_hash: str
    tool: str
    risk: Risk
    rule: str
    decision: Literal["approve", "deny"]
    always: bool = False
    reason: str = ""
    by: str = ""
    at: float = 0.0


def command_argv(command: str) -> list[str]:
    """A command's words as the sandbox splits them (a POSIX shell's quoting, no expansion);
    [] when it does not parse (the sandbox refuses it anyway)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return []


def command_risk(command: str) -> Risk:
    """The risk class of a command line (:func:`protocol.calls.commands.classify`); one with an
    unquoted output redirection (``echo x > f``, as a configured ``shell_commands`` entry
    may have) is destructive: it truncates the file. A quoted ``">"`` is an argument."""
    raw = shlex.shlex(command, posix=False, punctuation_chars=";&|<>()")
    raw.whitespace_split = True
    raw.commenters = ""
    try:
        if any(REDIRECT.fullmatch(token) for token in raw):
            return "destructive"
    except ValueError:
        pass  # unbalanced quotes: command_argv gives [] and the sandbox refuses it
    return classify(command_argv(command))


def risk_of_call(tool: str, arguments: dict[str, Any], mcp: Mapping[str, Risk] | None = None) -> Risk:
    """A call's risk class: a command's from what it runs, an MCP tool's (``mcp__S__T``) from
    ``mcp``, the classes :func:`protocol.calls.mcp.risk_of_tool` gave the tools as the ``mcp``
    actor lists them under the session's stored server configuration (never anything the
    model says; a tool not in it is destructive), any other tool's from its kind."""
    if tool == "run_terminal":
        command = arguments.get("command")
        return command_risk(command) if isinstance(command, str) else "execute"
    if tool.startswith(MCP_PREFIX):
        return (mcp or {}).get(tool, "destructive")
    return risk_of(tool)


def gate(level: int, approvals: Approvals, risk: Risk, mode: ApprovalMode = "wait") -> tuple[Gate, str]:
    """What a call of ``risk`` needs, and the rule that says so (for the prompt's "why").
    ``mode`` auto or skip decides a prompt at once (approve, deny)."""
    key = _CLASS_KEY[risk]
    refined: ClassPolicy | None = getattr(approvals, key) if key else None
    if refined is not None:
        verdict: Gate = refined
        rule = f"approvals.{key}: {refined}"
    else:
        verdict = TABLE[risk][level]
        rule = f"{risk} calls {'ask' if verdict == 'prompt' else 'run'} at autonomy {level}"
    if verdict == "prompt" and mode == "auto":
        return "auto", f"{rule}; non_interactive_policy: auto approved it"
    if verdict == "prompt" and mode == "skip":
        return "deny", f"{rule}; skipped: non-interactive"
    return verdict, rule


def call_hash(tool: str, arguments: dict[str, Any], definition: str = "") -> str:
    """The exact call: its tool and its arguments in canonical JSON; an MCP tool's also the
    hash of the definition it was offered with (``definition``), so an approval given for
    one definition does not approve the call against another."""
    call: list[Any] = [tool, arguments, definition] if definition else [tool, arguments]
    text = json.dumps(call, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def rule_of(tool: str, arguments: dict[str, Any], risk: Risk) -> str:
    """What ``--always`` approves: for a command, its shape (:func:`protocol.calls.commands.shape`:
    program, subcommand, the names of its options) and its risk class, ``run_terminal: git
    clean --dry-run (execute)``; for another tool, the tool and class, ``write_file (write)``
    (an MCP tool: ``mcp__github__create_issue (destructive)``).
    A rule covers a later call only when the two strings are equal, so a destructive call is
    never covered by a rule made from a non-destructive one, and a rule stored in the old
    form (``run_terminal git (execute)``: no colon) covers no command any more."""
    if tool == "run_terminal":
        return f"run_terminal: {shape(command_argv(str(arguments.get('command', ''))))} ({risk})"
    return f"{tool} ({risk})"


def _same_call(decision: ApprovalDecision, key: str, digest: str) -> bool:
    same_key = key == decision.key or key.startswith(decision.key + ":retry")
    return same_key and decision.call_hash == digest


def matches(decision: ApprovalDecision, key: str, digest: str, rule: str) -> bool:
    """Whether ``decision`` decides the call with ``key`` (a transient failure's retries,
    ``<key>:retry<n>``, included), hash ``digest`` and ``rule``: the same call, or an
    ``--always`` approval of its rule."""
    if decision.always and decision.decision == "approve" and decision.rule == rule:
        return True
    return _same_call(decision, key, digest)


def decision_of(decisions: list[ApprovalDecision], key: str, digest: str, rule: str) -> ApprovalDecision | None:
    """The decision on this call: one made on the call itself comes first (so a replayed
    stage meets the same decisions in the same order: a call denied before an ``--always``
    rule was made stays denied), else an ``--always`` approval of its rule."""
    exact = [d for d in decisions if _same_call(d, key, digest)]
    if exact:
        return exact[-1]
    return next((d for d in decisions if d.always and d.decision == "approve" and d.rule == rule), None)


def target_of(tool: str, arguments: dict[str, Any]) -> str:
    if tool.startswith(MCP_PREFIX):  # an MCP tool's arguments are its own: all of them, as JSON
        value: Any = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str) if arguments else ""
    else:
        value = arguments.get("path") or arguments.get("command") or ""
    text = str(value)
    return text if len(text) <= 200 else text[:200] + "…"

