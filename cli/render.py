"""Text rendering of statuses, sessions, plans and the calls waiting for approval, for humans
(``--json`` skips all this); a session's events in words are :mod:`cli.progress`.

Everything the CLI prints goes through :func:`echo` (text) or ``cli.follow.print_json``
(``--json``): a model's or a command's words reach the terminal with their control
characters escaped (:mod:`protocol.basics.printable`), never obeyed.
"""

from __future__ import annotations

import datetime as dt
import json

import typer

from protocol.basics.printable import printable
from protocol.calls.autonomy import ApprovalRequest
from protocol.calls.mcp import parse_tool_name
from protocol.messages import StatusReport
from protocol.plans.plan import TaskPlan
from protocol.policy import budget as budgets
from protocol.policy.budget import Budget, BudgetKind, Spent
from protocol.sessions.session import SessionSnapshot

__all__ = ["active_sessions", "always_lines", "echo", "one_line", "plan_detail", "question_lines", "request_lines",
           "sessions_table", "status_table", "table"]


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` (to stderr with ``err``) with its control and bidi characters escaped:
    the one way the CLI writes text, any part of which a model or a command may have made."""
    typer.echo(printable(text), err=err, nl=nl)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def status_table(report: StatusReport) -> str:
    rows = [["ACTOR", "PID", "STATE", "EPOCH", "RESTARTS", "UPTIME", "HEARTBEAT", "BUSY"]]
    for a in report.actors:
        rows.append([a.instance, str(a.pid or "-"), a.state, str(a.epoch), str(a.restarts), _age(a.uptime_s or None),
                     _age(a.heartbeat_age_s) + (" ago" if a.heartbeat_age_s is not None else ""), str(a.busy)])
    head = f"acode {'DEGRADED' if report.degraded else 'up'}: home {report.home}, coordinator pid {report.pid}, " \
           f"{report.sessions_active} active session(s)"
    lines = [head, table(rows)]
    for a in report.actors:
        if a.state == "failed":
            lines.append(f"{a.instance} failed: {a.reason}")
        for key, value in sorted(a.info.items()):
            lines.append(f"{a.instance} {key}: {value}")
    return "\n".join(lines)


def sessions_table(sessions: list[SessionSnapshot]) -> str:
    if not sessions:
        return "no sessions yet; start one with `acode run \"<task>\" --workspace DIR ...`"
    rows = [["SESSION", "STATUS", "STAGE", "EXIT", "CREATED", "TASK"]]
    for s in sessions:
        task = s.task if len(s.task) <= 50 else s.task[:47] + "..."
        rows.append([s.id, s.status, s.stage or "-", "-" if s.exit_code is None else str(s.exit_code),
                     dt.datetime.fromtimestamp(s.created_at).strftime("%Y-%m-%d %H:%M:%S"), task])
    return table(rows)


def budget_line(budget: Budget, spent: Spent) -> str:
    """What a session spent against each limit: ``tokens 12,000 of 2,000,000 (1%) · tool calls 3 of 500 ...``."""
    parts = []
    names: dict[BudgetKind, str] = {"tokens": "tokens", "tool_calls": "tool calls", "wall_minutes": "running min",
                                    "model_minutes": "model min"}
    for kind, name in names.items():
        used, limit = budgets.spent_on(spent, kind), budgets.limit_of(budget, kind)
        figure = budgets.figure(kind, used)
        parts.append(f"{name} {figure} of {budgets.figure(kind, limit)} ({used / limit:.0%})" if limit
                     else f"{name} {figure} (no limit)")
    return " · ".join(parts)


def active_sessions(sessions: list[SessionSnapshot], where: dict[str, str],
                    spent: dict[str, Spent] | None = None, health: dict[str, int] | None = None) -> str:
    """`acode status`: the sessions running or paused, with where each stands, what each
    spent and its health (protocol.sessions.health)."""
    rows = [["SESSION", "STATUS", "WHERE", "TASK"]]
    for s in sessions:
        task = s.task if len(s.task) <= 50 else s.task[:47] + "..."
        rows.append([s.id, s.status, where.get(s.id, s.stage or "-"), task])
    lines = [table(rows)]
    for s in sessions:  # why each paused one waits, and the way on
        if s.status == "paused" and s.pause is not None:
            pause = s.pause
            code = f", {pause.code}" if pause.code else ""
            lines.append(f"{s.id[:8]} paused ({pause.kind}{code}): {one_line(pause.message, 300)}")
            if pause.fix:
                lines.append(f"         fix: {one_line(pause.fix, 300)}")
            lines.append(f"         continue: {pause.command or f'acode resume {s.id}'}, or `acode cancel {s.id}`")
    for s in sessions:
        if spent is not None and s.id in spent:
            lines.append(f"{s.id[:8]} budget: {budget_line(s.settings.budget, spent[s.id])}")
        if health is not None and s.id in health:
            lines.append(f"{s.id[:8]} health: {health[s.id]} of 100")
    return "\n".join(lines)


def one_line(text: str, width: int = 160) -> str:
    """Progress lines stay on one line; the full text is in `acode show --json`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def plan_detail(plan: TaskPlan, session_id: str = "") -> str:
    """A plan version for `acode plan show`: tasks, steps, criteria with their checks, questions."""
    head = f"plan v{plan.version}" + (f" of session {session_id}" if session_id else "") + f" ({plan.status})"
    lines = [head, f"goal: {plan.goal}"]
    if plan.change_summary:
        lines.append(f"changes from v{plan.version - 1}: {plan.change_summary}")
    for task in plan.tasks:
        deps = f" after {', '.join(task.depends_on)}" if task.depends_on else ""
        lines.append("")
        lines.append(f"{task.label} [{task.status}] {task.title} (complexity {task.complexity}){deps}")
        if task.description:
            lines.append(f"   {one_line(task.description, 300)}")
        resources = task.resources
        for name, values in (("reads", resources.read), ("writes", resources.write),
                             ("directories", resources.directories), ("commands", resources.commands)):
            if values:
                lines.append(f"   {name}: {', '.join(values)}")
        for step in task.steps:
            after = f" after {', '.join(step.depends_on)}" if step.depends_on else ""
            lines.append(f"   {step.label} {step.action:<16} {one_line(step.title, 100)}{after}")
        for criterion in task.acceptance:
            check = f"  [check: `{criterion.check.command}` exits {criterion.check.expect_exit}]" \
                if criterion.check else "  [judged by the verifier's model]"
            lines.append(f"   {criterion.label} {one_line(criterion.description, 120)}{check}")
    if plan.questions:
        lines.append("")
        lines.append("questions:")
        lines += question_lines(plan)
    return "\n".join(lines)


def question_lines(plan: TaskPlan) -> list[str]:
    """The planner's questions, numbered options, and each question's default."""
    lines = []
    for question in plan.questions:
        lines.append(f"{question.label}. {question.question}")
        for number, option in enumerate(question.options, 1):
            lines.append(f"    {number}) {option}")
        if question.options and question.free_text:
            lines.append("    (or write your own answer)")
        if question.default:
            lines.append(f"    default: {question.default}")
    return lines


def request_lines(request: ApprovalRequest, *, diff: bool = False) -> list[str]:
    """The exact call a session waits on: tool, risk, why; a command's argv and cwd; a write's diff.
    Each value stays on its line (a newline in a path or command shows as ``\\n``); :func:`echo`
    escapes what else a model may have put in them."""
    where = f"{request.task}/{request.step} " if request.task else ""
    lines = [f"{where}wants to run {request.tool} ({request.risk}): {printable(request.target, lines=False)}",
             f"  why: {printable(request.why, lines=False)}"]
    mcp = parse_tool_name(request.tool)
    if mcp is not None:  # an MCP tool: its server, its own name, every argument (the target is cut)
        lines.append(f"  MCP server: {mcp[0]}  tool: {mcp[1]}")
        shown = json.dumps(request.arguments, indent=2, sort_keys=True, ensure_ascii=False, default=str)
        lines += ["  arguments:", *[f"    {printable(line, lines=False)}" for line in shown.splitlines()[:200]]]
    if request.argv:
        lines.append(f"  argv: {request.argv}")  # a list's repr: each word quoted, its controls escaped
    if request.cwd:
        lines.append(f"  cwd: {printable(request.cwd, lines=False)}")
    if request.diff:
        if diff:
            lines += ["  diff:", *[f"    {line}" for line in request.diff.rstrip("\n").split("\n")]]
        else:
            changed = sum(1 for line in request.diff.splitlines()
                          if line[:1] in "+-" and not line.startswith(("+++", "---")))
            lines.append(f"  diff: {changed} line(s) changed ([d] shows it)")
    lines.append(f"  rule for --always: {printable(request.rule, lines=False)}")
    return lines


def always_lines(request: ApprovalRequest) -> list[str]:
    """What ``--always`` grants, in full: the rule, and that nothing wider is covered."""
    return ["--always approves this call and, for the rest of the session, every later call with exactly this rule:",
            f"  {request.rule}",
            "  (the same tool and, for a command, the same program, subcommand and option names, and the same risk "
            "class; its arguments may differ; anything else still asks)"]
