"""A session's events grouped for ``acode show``: by stage visit (``--stage``), by cycle
(``--cycle``) and by executor step (the step timing of the default view).

Pure functions of the event log, so they work on any past session (crashed, resumed,
cancelled) and on one still running:

- a **stage visit** begins at the ``transitioned`` event that enters the stage and ends
  at the next one (or the session's end); everything in between is the visit's: its
  attempts (``stage_retried``, each ``stage_finished``), steps, checks, tool calls and
  pauses. A stage entered again afresh (a stage retry, a resume that revisits it) is a
  new visit; a resume that retries the attempt goes on with the same visit;
- a **cycle** begins at a ``transitioned`` event with a ``cycle_kind`` (``verifier ->
  executor``: a verify cycle, ``reviewer -> executor|planner``: a review cycle; its
  ``cycle``: the number of that kind) and runs until the next one; cycle 0 is the first
  pass, from the start to the first cycle. Verify and review cycles are counted apart, and
  a resume after a cycle limit starts a fresh round, so ``--cycle 1`` may name more than
  one stretch: each is shown, with its kind;
- a **step's** time runs from its ``step_started`` to its ``step_finished`` (both stamped
  by the executor as they happen); its turns, the tool calls its model made and their
  tokens are summed from its ``turn_answered`` events (``estimated``: acode's count, the
  server gave none). A step run again in a later visit is a row of that visit.

Rendering is :mod:`cli.viewtext`; ``--json`` prints these dataclasses as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import CliError
from protocol.plans.stages import STAGES, Stage
from protocol.sessions.events import (
    ApprovalDecided,
    CheckRan,
    Event,
    PlanRecorded,
    ReworkChosen,
    SessionFinished,
    SessionPaused,
    SessionResumed,
    StageFinished,
    StageRetried,
    StepFinished,
    StepRetried,
    StepStarted,
    ToolCalled,
    Transitioned,
    TurnAnswered,
)

__all__ = ["Attempt", "Check", "Cycle", "Pause", "StageVisit", "StepTiming", "ToolCall", "check_stage", "cycles",
           "cycles_numbered", "step_timings", "visits"]

VIEW_CODE = "ACODE-CLI-012"  # a stage name that is not one, a cycle the session never reached


@dataclass
class StepTiming:
    """One step of one executor visit: its time, tries, turns, the model's tool calls, tokens."""

    visit: int
    task: str
    step: str
    title: str = ""
    status: str = "running"  # completed, failed, blocked; running: not finished yet; interrupted: not finished
    # when the session paused, ended or left the visit (a retried attempt finishes it later)
    summary: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None  # finished_at - started_at (None: not started, or not finished)
    tries: int = 1
    turns: int = 0
    tool_calls: int = 0  # the calls the model made in its turns (refused ones too)
    tokens_in: int = 0
    tokens_out: int = 0
    estimated: bool = False  # some turn's tokens are acode's estimate, not the server's count

    @property
    def label(self) -> str:
        return f"{self.task}/{self.step}"


@dataclass
class ToolCall:
    at: float
    tool: str
    target: str
    ok: bool
    outcome: str
    risk: str
    duration_ms: float
    summary: str


@dataclass
class Check:
    at: float
    label: str
    command: str
    passed: bool
    exit_code: int | None
    evidence: str


@dataclass
class Attempt:
    """A ``stage_finished`` of the visit: one attempt's end."""

    at: float
    attempt: int
    ok: bool
    duration_s: float
    summary: str
    code: str = ""  # the error's, when it failed


@dataclass
class Pause:
    at: float
    kind: str
    code: str
    message: str
    resumed_at: float | None = None
    resumed: str = ""  # the resume's reason


@dataclass
class StageVisit:
    """One visit of a stage: how it was entered, what happened in it, where the session went."""

    stage: str
    visit: int
    entered_at: float
    source: str  # the stage it came from (``start`` for the first planner)
    reason: str
    cycle_kind: str | None = None  # the visit opens this cycle
    cycle: int = 0
    left_at: float | None = None  # the next transition or the session's end (None: still in it)
    next: str = ""  # where the session went: a stage, ``completed``, ``paused (kind)``, ``cancelled``...
    attempts: int = 1
    duration_s: float = 0.0  # the attempts' own time, summed (``stage_finished``)
    model_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    finished: list[Attempt] = field(default_factory=list)
    plan: str = ""  # the planner's: the plan version it recorded
    steps: list[StepTiming] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    rework: str = ""  # the verifier's: what it kept and runs again
    tool_calls: list[ToolCall] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float | None:
        return None if self.left_at is None else round(max(0.0, self.left_at - self.entered_at), 3)


@dataclass
class Cycle:
    """A stretch of the session between two cycle transitions (kind None: the first pass, cycle 0)."""

    cycle: int
    kind: str | None
    started_at: float
    ended_at: float | None = None
    transitions: list[Transitioned] = field(default_factory=list)
    visits: list[StageVisit] = field(default_factory=list)


def check_stage(stage: str) -> Stage:
    """``stage`` if it names a stage, else CliError (ACODE-CLI-012) listing the stages."""
    for known in STAGES:
        if stage == known:
            return known
    raise CliError(f"--stage {stage!r} is not a stage; give one of {', '.join(STAGES)}", code=VIEW_CODE)


def visits(events: Iterable[Event]) -> list[StageVisit]:
    """Every stage visit of the session, in the order they began."""
    found: list[StageVisit] = []
    current: StageVisit | None = None
    steps: dict[str, StepTiming] = {}  # the current executor visit's, by label
    for event in events:
        if isinstance(event, Transitioned | SessionPaused | SessionFinished):
            _interrupt(steps.values())
        if isinstance(event, Transitioned):
            if current is not None:
                current.left_at, current.next = event.at, event.target
                if event.cycle_kind:
                    current.next += f" ({event.cycle_kind} cycle {event.cycle})"
            current, steps = None, {}
            if event.target != "completed":
                current = StageVisit(stage=event.target, visit=event.visit, entered_at=event.at, source=event.source,
                                     reason=event.reason, cycle_kind=event.cycle_kind, cycle=event.cycle)
                found.append(current)
            continue
        if current is None:
            continue
        match event:
            case StageFinished():
                current.finished.append(Attempt(at=event.at, attempt=event.attempt, ok=event.ok,
                                                duration_s=round(event.duration_ms / 1000, 3), summary=event.summary,
                                                code=event.error.code if event.error else ""))
                current.attempts = max(current.attempts, event.attempt)
                current.duration_s = round(current.duration_s + event.duration_ms / 1000, 3)
                current.model_s = round(current.model_s + event.model_ms / 1000, 3)
                current.tokens_in += event.tokens_in
                current.tokens_out += event.tokens_out
                current.tokens_cached += event.tokens_cached
            case StageRetried():
                current.attempts = max(current.attempts, event.attempt)
            case PlanRecorded():
                current.plan = f"plan v{event.version}: {event.tasks} task(s), {event.steps} step(s) ({event.status})"
            case StepStarted():
                started = steps[f"{event.task}/{event.step}"] = StepTiming(
                    visit=event.visit, task=event.task, step=event.step, title=event.title, started_at=event.at)
                current.steps.append(started)
            case TurnAnswered():
                step = steps.get(f"{event.task}/{event.step}")
                if step is not None:
                    step.turns += 1
                    step.tool_calls += event.tool_calls
                    step.tokens_in += event.prompt_tokens
                    step.tokens_out += event.completion_tokens
                    step.estimated = step.estimated or event.estimated
            case StepRetried():
                step = steps.get(f"{event.task}/{event.step}")
                if step is not None:
                    step.tries = max(step.tries, event.attempt)
            case StepFinished():
                step = steps.get(f"{event.task}/{event.step}")
                if step is None:  # a blocked step never starts
                    step = steps[f"{event.task}/{event.step}"] = StepTiming(visit=event.visit, task=event.task,
                                                                           step=event.step)
                    current.steps.append(step)
                step.status, step.summary, step.finished_at = event.status, event.summary, event.at
                if step.started_at is not None:
                    step.duration_s = round(max(0.0, event.at - step.started_at), 3)
            case ToolCalled():
                current.tool_calls.append(ToolCall(at=event.at, tool=event.tool, target=event.target, ok=event.ok,
                                                   outcome=event.outcome, risk=event.risk,
                                                   duration_ms=event.duration_ms, summary=event.summary))
            case CheckRan():
                current.checks.append(Check(at=event.at, label=event.label, command=event.command,
                                            passed=event.passed, exit_code=event.exit_code, evidence=event.evidence))
            case ReworkChosen() if event.rule != "passed":
                current.rework = f"rework ({event.rule}): {event.reason}; kept {len(event.kept)} step(s)"
            case SessionPaused():
                current.pauses.append(Pause(at=event.at, kind=event.kind, code=event.code, message=event.message))
                current.left_at, current.next = event.at, f"paused ({event.kind})"
            case SessionResumed():
                if current.pauses and current.pauses[-1].resumed_at is None:
                    current.pauses[-1].resumed_at, current.pauses[-1].resumed = event.at, event.reason
                current.left_at, current.next = None, ""
                for step in steps.values():
                    step.status = "running" if step.status == "interrupted" else step.status
            case ApprovalDecided():
                verb = "approved" if event.decision == "approve" else "denied"
                current.approvals.append(f"{event.tool} {event.target} ({event.risk}) {verb} by {event.by}")
            case SessionFinished():
                current.left_at, current.next = event.at, event.status
    return found


def _interrupt(steps: Iterable[StepTiming]) -> None:
    for step in steps:
        step.status = "interrupted" if step.status == "running" else step.status


def step_timings(events: Iterable[Event]) -> list[StepTiming]:
    """Every executor step of the session, visit by visit, in the order they ran."""
    return [step for visit in visits(events) if visit.stage == "executor" for step in visit.steps]


def cycles(events: list[Event]) -> list[Cycle]:
    """The session cut at its cycle transitions: the first pass (cycle 0), then each cycle."""
    start = events[0].at if events else 0.0
    found = [Cycle(cycle=0, kind=None, started_at=start)]
    for event in events:
        if isinstance(event, Transitioned):
            if event.cycle_kind:
                found[-1].ended_at = event.at
                found.append(Cycle(cycle=event.cycle, kind=event.cycle_kind, started_at=event.at))
            found[-1].transitions.append(event)
    entered = iter(visits(events))  # a visit per transition into a stage, in order
    for part in found:
        for transition in part.transitions:
            if transition.target != "completed":
                part.visits.append(next(entered))
    return found


def cycles_numbered(events: list[Event], number: int, *, session_id: str) -> list[Cycle]:
    """The stretches of cycle ``number``; CliError (ACODE-CLI-012) if the session never reached it."""
    every = cycles(events)
    chosen = [part for part in every if part.cycle == number]
    if not chosen:
        reached = sorted({part.cycle for part in every})
        kinds = ", ".join(f"{part.kind} {part.cycle}" for part in every if part.kind) or "none"
        some = ", ".join(map(str, reached[:-1])) + " or " if len(reached) > 1 else ""
        raise CliError(f"session {session_id} never reached cycle {number}: its cycles are {kinds}; give --cycle "
                       f"{some}{reached[-1]} (0: the first pass)", code=VIEW_CODE)
    return chosen
