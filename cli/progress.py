"""A session's events in words, for humans: :class:`Progress` turns each event into the
line ``acode run`` and ``acode attach`` print as it comes; :func:`files_changed` and the
per-stage figures (:func:`stage_totals`, :func:`stage_table`) sum a session up at its end;
:func:`session_detail` is ``acode show`` (its step timing from :mod:`cli.views`). The text
goes out through :func:`cli.render.echo`, which escapes what a model or a command put in it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from cli.render import budget_line, one_line, request_lines, table
from cli.views import step_timings
from cli.viewtext import step_table
from protocol.calls.tools import INTERNAL_TOOLS
from protocol.errors import with_code
from protocol.plans.results import WorkspaceChanges
from protocol.policy.budget import FLAGS, Spent
from protocol.sessions.events import (
    AnomalyDetected,
    ApprovalDecided,
    BudgetWarning,
    CheckpointTaken,
    CheckRan,
    Event,
    HookRan,
    PauseRequested,
    PlanRecorded,
    ReworkChosen,
    SessionCreated,
    SessionFinished,
    SessionPaused,
    SessionResumed,
    SettingsChanged,
    StageFinished,
    StageRetried,
    Steered,
    StepFinished,
    StepRetried,
    StepStarted,
    ToolCalled,
    Transitioned,
    TurnAnswered,
    WorkspaceRestored,
)
from protocol.sessions.health import session_health
from protocol.sessions.session import SessionSnapshot

__all__ = ["Progress", "StageTotal", "files_changed", "health_line", "session_detail", "stage_figures", "stage_table",
           "stage_totals"]

_FILE_WRITES = frozenset({"write_file", "modify_file"})  # create_directory makes no file
_RESPONSES = {"note": "a note goes to the model with its next turn",
              "fresh_window": "the step's try ends; the next starts from a fresh window",
              "pause": "the session pauses"}


def _tag(stage: str) -> str:
    return f"[{stage.upper()}]".ljust(11)


class Progress:
    """Turns a session's events into progress lines; remembers the stage a tool call belongs to."""

    def __init__(self) -> None:
        self.stage = "planner"

    def line(self, event: Event) -> str | None:
        """One line for ``acode run``; None for events not worth a line."""
        match event:
            case SessionCreated(task=task, workspace=workspace, overrode_hold=holder):
                forced = f" (--force: session {holder} still holds it)" if holder else ""
                return f"session {event.session_id}: {one_line(task, 80)!r} in {workspace}{forced}"
            case Transitioned(target="completed"):
                return None
            case Transitioned(source=source, target=target, visit=visit, cycle_kind=kind, cycle=cycle, reason=reason):
                self.stage = target
                if kind:
                    return f"{_tag(source)} -> {target} ({kind} cycle {cycle}): {one_line(reason)}"
                if source != "start" and "resumed" in reason:
                    return f"{_tag(target)} {one_line(reason)}"
                if source == target:  # a stage retried afresh
                    return f"{_tag(target)} {one_line(reason)} (visit {visit})"
                return f"{_tag(target)} started" + (f" (visit {visit})" if visit > 1 else "")
            case StageRetried(stage=stage, attempt=attempt, reason=reason):
                return f"{_tag(stage)} retrying, attempt {attempt}: {one_line(reason)}"
            case StageFinished(stage=stage, ok=ok, summary=summary, duration_ms=ms, error=error):
                text = summary if ok else f"FAILED: {error.message if error else summary}"
                if error is not None and error.code == "ACODE-ORCH-010":
                    text = f"stopped at a safe point: {error.message}"
                elif error is not None and error.code == "ACODE-EXEC-009":  # a call waits for the user's decision
                    text = f"waiting for approval: {error.message}"
                return f"{_tag(stage)} {one_line(text)} ({ms / 1000:.2f}s{stage_figures(event)})"
            case PlanRecorded():
                return None  # the planner's stage_finished line says it
            case StepStarted(task=task, step=step, title=title):
                return f"{_tag('executor')} {task}/{step} {one_line(title, 100)}"
            case ToolCalled(tool=tool, target=target, ok=ok, summary=summary, outcome=outcome):
                if self.stage in ("planner", "verifier") or tool in INTERNAL_TOOLS or ":ctx" in event.key \
                        or event.key.endswith(":preview"):
                    return None  # context and diff-preview reads are many; check_ran says the verifier's
                mark = "ok" if ok else ("UNKNOWN" if outcome == "unknown" else "error")
                return f"{_tag(self.stage)}   {tool} {one_line(target, 60)} -> {mark}: {one_line(summary, 100)}"
            case TurnAnswered(task=task, step=step, turn=turn, tool_calls=calls, correction=correction):
                tokens = "" if event.estimated or not event.prompt_tokens else \
                    f" ({event.prompt_tokens}+{event.completion_tokens} tokens)"
                if correction:
                    return f"{_tag('executor')} {task}/{step} turn {turn}: no tool call ran{tokens}; sent: " \
                           f"{one_line(correction, 100)}"
                return f"{_tag('executor')} {task}/{step} turn {turn}: {calls} tool call{'s' * (calls != 1)}{tokens}"
            case StepFinished(task=task, step=step, status=status, summary=summary):
                return f"{_tag('executor')} {task}/{step} {status}: {one_line(summary)}"
            case StepRetried(task=task, step=step, attempt=attempt, of=of, reason=reason):
                return (f"{_tag('executor')} {task}/{step} try {attempt - 1} of {of} failed: {one_line(reason, 200)}; "
                        f"try {attempt} starts from a fresh window")
            case BudgetWarning(kind=kind, used=used, limit=limit):
                return (f"budget warning: the session has used {used / limit:.0%} of its {kind} budget ({used:,.10g} "
                        f"of {limit:,.10g}); a call that would cross it pauses the session until `acode resume "
                        f"{event.session_id} {FLAGS.get(kind, '--budget-' + kind)} +50%`")
            case HookRan(point=point, hook=hook, decision=decision, reason=reason, failed=broke):
                if decision in ("continue", "allow") and not broke:
                    return None  # a hook that decided nothing says nothing
                why = f": {one_line(reason, 200)}" if reason else ""
                return f"hook {hook} ({point}): {decision}{why}"
            case AnomalyDetected(kind=kind, evidence=evidence, score=score, response=response, stage=stage,
                                 task=task, step=step, health=health):
                where = f" in {task}/{step}" if task else ""
                return (f"{_tag(stage)} anomaly {kind}{where} (score {score}, session health {health}): "
                        f"{one_line(evidence, 300)}; {_RESPONSES[response]}")
            case SettingsChanged(changes=changes, by=by):
                return f"settings changed by {by}: {'; '.join(changes)}"
            case ReworkChosen(rule=rule, reason=reason, kept=kept):
                if rule == "passed":
                    return None
                return f"{_tag('verifier')} rework ({rule}): {one_line(reason, 300)}; kept {len(kept)} step(s)"
            case CheckRan(label=label, command=command, passed=passed):
                return f"{_tag('verifier')} {label} `{one_line(command, 80)}`: {'passed' if passed else 'FAILED'}"
            case SessionPaused(kind=kind, code=code, message=message, exit_code=exit_code, fix=fix, command=command):
                lines = [f"paused ({kind}): {with_code(one_line(message, 400), code)}; exit {exit_code}"]
                if fix:
                    lines.append(f"  fix: {one_line(fix, 300)}")
                if command:
                    lines.append(f"  continue with: {command}")
                return "\n".join(lines)
            case SessionResumed(reason=reason):
                return f"resumed: {reason}"
            case PauseRequested(stage=stage):
                return f"pause requested: the {stage or 'session'} stops at its next safe point"
            case Steered(text=text):
                return f"steered by the user: {one_line(text, 300)}"
            case ApprovalDecided(tool=tool, target=target, risk=risk, decision=decision, always=always, reason=reason,
                                 by=by):
                verb = "approved" + (" (always, this rule)" if always else "") if decision == "approve" else "denied"
                why = f": {one_line(reason, 200)}" if reason else ""
                return f"{_tag('executor')}   {tool} {one_line(target, 60)} ({risk}) {verb} by {by}{why}"
            case SessionFinished(status=status, exit_code=exit_code, error=error):
                failed = error is not None and status != "completed"
                detail = f": {with_code(one_line(error.message, 400), error.code)}" if failed and error else ""
                after = f"\n  continue with: acode resume {event.session_id}" if status == "failed" else ""
                return f"{status}{detail} (exit {exit_code}){after}"
        return None


# Directories tools fill with caches of their own (each marks itself ignored): their files are
# counted in one entry, not listed (a hand run's `files changed:` led with five .pytest_cache files)
CACHE_DIRS = frozenset({".pytest_cache", "__pycache__", ".mypy_cache", ".ruff_cache", ".hypothesis"})


def _cache_dir(path: str) -> str | None:
    """The cache directory ``path`` lies in (``a/__pycache__/``), or None."""
    parts = path.split("/")
    found = next((i for i, part in enumerate(parts[:-1]) if part in CACHE_DIRS), None)
    return "/".join(parts[:found + 1]) + "/" if found is not None else None


def _listed(changes: WorkspaceChanges) -> str:
    if not changes.files:
        return "none"
    entries: dict[str, str] = {}  # a file's entry, or a cache directory's (its files' statuses counted)
    caches: dict[str, Counter[str]] = {}
    for c in changes.files:
        cache = _cache_dir(c.path)
        if cache is None:
            entries[c.path] = f"{c.old} -> {c.path} ({c.status})" if c.old else f"{c.path} ({c.status})"
        else:
            entries.setdefault(cache, "")
            caches.setdefault(cache, Counter())[c.status] += 1
    for cache, statuses in caches.items():
        count = sum(statuses.values())
        said = (": " + ", ".join(f"{n} {status}" for status, n in statuses.items()) if len(statuses) > 1
                else f" {next(iter(statuses))}")
        entries[cache] = f"{cache} ({count} cache file{'s' if count != 1 else ''}{said})"
    shown = ", ".join(entries.values())
    more = changes.total - len(changes.files)
    return shown + (f", and {more} more (`acode show --json` has the first {len(changes.files)})" if more > 0 else "")


def files_changed(events: Iterable[Event]) -> str:
    """What ``files changed:`` says: the last comparison of the workspace with the session's
    baseline (the verifier's or the reviewer's diff, so what commands did is in it), each
    file with what happened to it. Calls that can change files made after that comparison
    (or before any) are named too, said to be not compared yet: the file tools' writes by
    path (directories never), commands by count. (``session_finished`` carries the last
    comparison again, not a new one: a session cancelled after more calls says so.)"""
    last: WorkspaceChanges | None = None
    written: list[str] = []
    commands = 0
    for event in events:
        if isinstance(event, StageFinished) and event.changes is not None:  # session_finished repeats the last
            last, written, commands = event.changes, [], 0
        elif isinstance(event, ToolCalled) and event.tool == "run_terminal":  # the verifier's checks too
            commands += 1
        elif isinstance(event, ToolCalled) and event.ok and event.tool in _FILE_WRITES and event.target:
            written.append(event.target)
    if not written and not commands:
        return _listed(last) if last is not None else "none"
    since = []
    if written:
        since.append(f"written by the file tools: {', '.join(dict.fromkeys(written))}")
    if commands:
        since.append(f"{commands} command{'s' if commands != 1 else ''} ran, whose effects are not listed")
    if last is None:
        return f"not compared with the baseline; {'; '.join(since)}"
    return f"{_listed(last)} at the last comparison with the baseline; since then, not compared: {'; '.join(since)}"


def stage_figures(event: StageFinished) -> str:
    """A stage end line's model figures: ``; tokens 1,234 in / 56 out, model 12.3 s`` (``in
    (1,000 from the server's cache)`` where it says so), or nothing when the stage did not
    ask a model (a replayed answer counts 0 s)."""
    if not (event.tokens_in or event.tokens_out or event.model_ms):
        return ""
    cached = f" ({event.tokens_cached:,} from the server's cache)" if event.tokens_cached else ""
    return f"; tokens {event.tokens_in:,} in{cached} / {event.tokens_out:,} out, model {event.model_ms / 1000:.1f} s"


@dataclass
class StageTotal:
    """One stage's figures over a session (``--json``: the final summary's ``stages``)."""

    stage: str
    runs: int = 0  # StageFinished events: visits and retried attempts
    tokens_in: int = 0  # as the server counted them (the scripted model: acode's estimate)
    tokens_out: int = 0
    tokens_cached: int = 0  # of tokens_in, served from the server's prompt cache (where it says so)
    model_s: float = 0.0  # waiting for the model's answers (a replayed answer counts 0)
    duration_s: float = 0.0  # the stage's whole time, tools and checks included
    state: str = "finished"  # "cancelled": the stage that was running when the session was cancelled

    def add(self, event: StageFinished) -> None:
        self.runs += 1
        self.tokens_in += event.tokens_in
        self.tokens_out += event.tokens_out
        self.tokens_cached += event.tokens_cached
        self.model_s = round(self.model_s + event.model_ms / 1000, 3)
        self.duration_s = round(self.duration_s + event.duration_ms / 1000, 3)


def stage_totals(events: Iterable[Event]) -> list[StageTotal]:
    """Per stage, in the order stages first finished, its StageFinished figures summed; then,
    for a cancelled session, the stage that was running (``state`` cancelled: its time until
    the cancel; its figures were never reported)."""
    totals: dict[str, StageTotal] = {}
    running: tuple[str, float] | None = None  # the stage dispatched and not finished, since when
    current = ""  # the stage the session is at
    cancelled: StageTotal | None = None
    for event in events:
        if isinstance(event, StageFinished):
            totals.setdefault(event.stage, StageTotal(stage=event.stage)).add(event)
            running, current = None, event.stage
        elif isinstance(event, Transitioned) and event.target != "completed":
            running, current = (event.target, event.at), event.target
        elif isinstance(event, StageRetried | SessionResumed) and current:
            running = (current, event.at)
        elif isinstance(event, SessionPaused):
            running = None
        elif isinstance(event, SessionFinished) and event.status == "cancelled" and running is not None:
            cancelled = StageTotal(stage=running[0], runs=1, duration_s=round(max(0.0, event.at - running[1]), 3),
                                   state="cancelled")
    return [*totals.values(), *([cancelled] if cancelled is not None else [])]


def stage_table(events: Iterable[Event]) -> str:
    """The session's final summary per stage: runs, tokens in/out, model time, stage time;
    empty when no stage finished or was cancelled. A cancelled stage's figures show as
    ``-`` (never reported) and its time so far as ``N s, cancelled``."""
    rows = stage_totals(events)
    if not rows:
        return ""
    total = StageTotal(stage="total", runs=sum(r.runs for r in rows), tokens_in=sum(r.tokens_in for r in rows),
                       tokens_out=sum(r.tokens_out for r in rows), model_s=sum(r.model_s for r in rows),
                       duration_s=sum(r.duration_s for r in rows))
    lines = [["STAGE", "RUNS", "TOKENS IN", "TOKENS OUT", "MODEL", "STAGE TIME"]]
    for r in [*rows, total]:
        if r.state == "cancelled":
            lines.append([r.stage, str(r.runs), "-", "-", "-", f"{r.duration_s:.1f} s, cancelled"])
        else:
            lines.append([r.stage, str(r.runs), f"{r.tokens_in:,}", f"{r.tokens_out:,}", f"{r.model_s:.1f} s",
                          f"{r.duration_s:.1f} s"])
    return table(lines)


def _tokens(event: StageFinished) -> str:
    """A stage's token figures: its largest prompt (acode's estimate) against its budget,
    and what the server counted, when it said."""
    if not event.tokens_est and not event.tokens_in:
        return ""  # the model was not asked
    parts = []
    if event.budget_tokens:
        parts.append(f"largest prompt ~{event.largest_prompt_est:,} of {event.budget_tokens:,} tokens budgeted, "
                     f"~{event.tokens_est:,} in all")
    if event.tokens_in or event.tokens_out:
        parts.append(f"server: {event.tokens_in:,} in, {event.tokens_out:,} out")
    if event.model_ms:
        parts.append(f"model {event.model_ms / 1000:.1f} s")
    return f" [{'; '.join(parts)}]"


def health_line(session: SessionSnapshot, events: list[Event], spent: Spent) -> str:
    """``acode show``'s health: ``100 of 100`` or ``72 of 100 (2 anomalies: repeated_error, no_progress)``."""
    figure = session_health(events, session.settings.budget, spent)
    kinds = [e.kind for e in events if isinstance(e, AnomalyDetected)]
    said = f" ({len(kinds)} anomal{'y' if len(kinds) == 1 else 'ies'}: {', '.join(dict.fromkeys(kinds))})" \
        if kinds else ""
    return f"{figure} of 100{said}"


def session_detail(session: SessionSnapshot, events: list[Event], spent: Spent | None = None) -> str:
    lines = [
        f"session   {session.id}",
        f"task      {session.task}",
        f"workspace {session.workspace}",
        f"status    {session.status}" + (f" (exit {session.exit_code})" if session.exit_code is not None else ""),
    ]
    if spent is not None:
        lines.append(f"budget    {budget_line(session.settings.budget, spent)}")
        lines.append(f"health    {health_line(session, events, spent)}")
    if session.pause:
        pause = session.pause
        lines.append(f"paused    {pause.kind}: {with_code(pause.message, pause.code)}")
        if pause.task:
            lines.append(f"step      {pause.task}/{pause.step}")
        if pause.fix:
            lines.append(f"fix       {pause.fix}")
        if pause.command:
            lines.append(f"continue  {pause.command} (or `acode cancel {session.id}` ends the session)")
        if session.approval is not None:
            lines += [f"          {line}" for line in request_lines(session.approval, diff=True)]
    if session.error:
        lines.append(f"error     {with_code(session.error.message, session.error.code)}")
    if session.status == "failed":
        lines.append(f"continue  acode resume {session.id}")
    cycles = ", ".join(f"{k} {v}" for k, v in session.cycles.items()) or "none"
    lines.append(f"plan      v{session.plan_version}; cycles: {cycles}")
    lines.append("")
    lines.append("transitions:")
    start = events[0].at if events else session.created_at
    entered: dict[str, float] = {}
    for event in events:
        if isinstance(event, Transitioned):
            note = f" ({event.cycle_kind} cycle {event.cycle})" if event.cycle_kind else ""
            lines.append(f"  +{event.at - start:8.3f}s  {event.source:>8} -> {event.target:<9} "
                         f"{one_line(event.reason, 100)}{note}")
            entered[event.target] = event.at
        elif isinstance(event, StageFinished):
            took = f"{event.duration_ms / 1000:.3f}s"
            lines.append(f"  +{event.at - start:8.3f}s  {event.stage:>8} finished in {took}: "
                         f"{one_line(event.summary, 100)}{_tokens(event)}")
        elif isinstance(event, ReworkChosen) and event.rule != "passed":
            lines.append(f"  +{event.at - start:8.3f}s  {'verifier':>8} rework ({event.rule}): "
                         f"{one_line(event.reason, 200)}")
        elif isinstance(event, StageRetried):
            lines.append(f"  +{event.at - start:8.3f}s  {event.stage:>8} attempt {event.attempt}: "
                         f"{one_line(event.reason, 100)}")
        elif isinstance(event, WorkspaceRestored):
            left = f"; left alone: {', '.join(event.left[:5])}" if event.left else ""
            lines.append(f"  +{event.at - start:8.3f}s  {event.by} to checkpoint {event.to[:12]}: {event.written} "
                         f"written, {event.deleted} deleted{left}")
        elif isinstance(event, (SessionPaused, SessionResumed, SessionFinished, SettingsChanged, StepRetried,
                                ApprovalDecided, AnomalyDetected)):
            text = Progress().line(event) or ""
            lines.append(f"  +{event.at - start:8.3f}s  {text.splitlines()[0] if text else type(event).__name__}")
    steps = step_table(step_timings(events))
    if steps:  # the executor's steps, visit by visit: `--stage executor` has each visit's detail
        lines += ["", "steps (time from start to finish, turns, the model's tool calls, tokens in+out; ~ estimated):",
                  *steps]
    lines.append("")
    lines.append(f"files changed: {files_changed(events)}")
    taken = [e for e in events if isinstance(e, CheckpointTaken) and e.key]  # the start checkpoint has no call
    if taken:
        lines.append(f"checkpoints: {len(taken)} before calls, {sum(e.took_ms for e in taken):.0f} ms in all "
                     f"(`acode checkpoints {session.id[:8]}`; `acode undo {session.id[:8]}` takes the session back)")
    lines.append(f"events: {len(events)} (see --json for all; --stage STAGE and --cycle N for a stage's visits "
                 "and a cycle, --answers for the model's text)")
    return "\n".join(lines)
