"""The session state machine: pure functions from (snapshot, input, now) to a Decision.

No I/O here. The orchestrator persists a decision's snapshot and events, waits for the
acknowledgement, and only then acts on it (dispatches the next stage). Inputs are a
stage's result, a lost attempt (its actor died or the broker lost it), a timeout, and a
user's cancel or resume.

Stage transitions are a whitelist::

    start -> planner -> executor -> verifier -> reviewer -> completed
                ^          ^  ^        |           |  |
                |          |  +-verify-+           |  |   (cycle kinds; each limited,
                |          +------ review ---------+  |    default 3 per kind)
                +------------------ review -----------+

The reviewer's three decisions: ``approve`` completes the session, ``request_changes``
sends its issues to the executor, ``replan`` sends them to the planner; both count as a
review cycle. Finished work is kept: a verification's :class:`Rework` (which steps are
kept, which tasks completed, by which rule) is recorded (``rework_chosen``) and goes with
the session until the next plan version. Every cycle's feedback and every re-plan's change
summary are appended to the session's ``history``, which the reviewer sees.

A session completes only after every stage has been visited. The 4th cycle of one kind
pauses the session (ACODE-ORCH-003, exit 21); a stage that times out more than
``stage_retry_limit`` times (or its own ``stage_retry_limits`` entry) pauses it
(ACODE-ORCH-002, exit 20).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from protocol.errors import ErrorInfo, TransitionError
from protocol.events import (
    Event,
    PlanRecorded,
    ReworkChosen,
    SessionCreated,
    SessionFinished,
    SessionPaused,
    SessionResumed,
    StageFinished,
    StageRetried,
    Transitioned,
)
from protocol.ids import new_id
from protocol.plan import TaskPlan
from protocol.results import StageResult
from protocol.session import Clarification, Feedback, FeedbackItem, PauseInfo, SessionSettings, SessionSnapshot
from protocol.stages import STAGES, CycleKind, PauseKind, Stage

__all__ = [
    "ALLOWED",
    "EXIT_CODES",
    "MAX_ATTEMPTS",
    "Decision",
    "cancel",
    "create",
    "on_lost",
    "on_result",
    "on_timeout",
    "pause",
    "recover",
    "resume",
]

ALLOWED: frozenset[tuple[str, str]] = frozenset({
    ("start", "planner"),
    ("planner", "planner"),  # the user answered the planner's questions: plan again with them
    ("planner", "executor"),
    ("executor", "verifier"),
    ("verifier", "executor"),
    ("verifier", "reviewer"),
    ("reviewer", "planner"),
    ("reviewer", "executor"),  # request_changes: the approach is right, the executor applies the issues
    ("reviewer", "completed"),
})
PAUSE_EXIT: dict[PauseKind, int] = {
    "stage_timeout": 20,
    "cycle_limit": 21,
    "needs_input": 22,
    "actor_failed": 22,
    "escalation": 22,
}
EXIT_CODES = {"completed": 0, "failed": 1, "cancelled": 23}
MAX_ATTEMPTS = 10  # per visit, whatever the reason: past it a human must look
HISTORY_LIMIT = 20  # entries of a session's cycle history kept for the reviewer


@dataclass(frozen=True)
class Decision:
    """What to persist (snapshot and events, plus a plan version) and whether to dispatch."""

    snapshot: SessionSnapshot
    events: list[Event] = field(default_factory=list)
    plan: TaskPlan | None = None

    @property
    def dispatch(self) -> bool:
        return self.snapshot.status == "running" and self.snapshot.stage is not None


def _event(cls: Callable[..., Event], snap: SessionSnapshot, now: float, **fields: object) -> Event:
    return cls(id=new_id(), session_id=snap.id, at=now, **fields)


def _with(snap: SessionSnapshot, now: float, **changes: object) -> SessionSnapshot:
    return msgspec.structs.replace(snap, updated_at=now, **changes)


def create(session_id: str, task: str, workspace: str, settings: SessionSettings, now: float, *,
           overrode_hold: str = "") -> Decision:
    """A new session, entering the planner (``overrode_hold``: the session whose hold on the
    workspace ``--force`` overrode)."""
    snap = SessionSnapshot(id=session_id, task=task, workspace=workspace, status="running",
                           stage="planner", visits={"planner": 1}, attempt=1, created_at=now,
                           updated_at=now, settings=settings)
    return Decision(snap, [
        _event(SessionCreated, snap, now, task=task, workspace=workspace, overrode_hold=overrode_hold),
        _event(Transitioned, snap, now, source="start", target="planner", visit=1, reason="session started"),
    ])


def _enter(snap: SessionSnapshot, target: Stage, now: float, *, reason: str,
           cycle_kind: CycleKind | None = None, events: list[Event], **changes: object) -> Decision:
    source = snap.stage or "start"
    if (source, target) not in ALLOWED:
        raise TransitionError(f"transition {source} -> {target} is not allowed; allowed from "
                              f"{source}: {sorted(t for s, t in ALLOWED if s == source)}")
    visits = {**snap.visits, target: snap.visits.get(target, 0) + 1}
    cycles = dict(snap.cycles)
    if cycle_kind is not None:
        cycles[cycle_kind] = cycles.get(cycle_kind, 0) + 1
    new = _with(snap, now, stage=target, visits=visits, attempt=1, timeouts=0, cycles=cycles, **changes)
    events.append(_event(Transitioned, snap, now, source=source, target=target, visit=visits[target],
                         reason=reason, cycle_kind=cycle_kind, cycle=cycles.get(cycle_kind, 0) if cycle_kind else 0))
    return Decision(new, events)


def _finish(snap: SessionSnapshot, status: str, now: float, *, events: list[Event],
            error: ErrorInfo | None = None, summary: str = "") -> Decision:
    exit_code = EXIT_CODES[status]
    if status == "completed":
        missing = [s for s in STAGES if not snap.visits.get(s)]
        if missing:
            raise TransitionError(f"cannot complete: stages never visited: {', '.join(missing)}")
        events.append(_event(Transitioned, snap, now, source=snap.stage or "start", target="completed",
                             visit=1, reason=summary or "approved"))
    new = _with(snap, now, status=status, stage=None, exit_code=exit_code, finished_at=now, error=error,
                pause=None)
    events.append(_event(SessionFinished, snap, now, status=status, exit_code=exit_code, error=error,
                         summary=summary))
    return Decision(new, events)


def pause(snap: SessionSnapshot, kind: PauseKind, code: str, message: str, now: float,
          events: list[Event] | None = None, **changes: object) -> Decision:
    """Stop dispatching until a human resumes; the stage to resume is kept."""
    events = events if events is not None else []
    exit_code = PAUSE_EXIT[kind]
    new = _with(snap, now, status="paused", pause=PauseInfo(kind=kind, code=code, message=message),
                exit_code=exit_code, **changes)
    events.append(_event(SessionPaused, snap, now, kind=kind, code=code, message=message, exit_code=exit_code))
    return Decision(new, events)


def _cycle(snap: SessionSnapshot, kind: CycleKind, target: Stage, now: float, *, feedback: Feedback,
           events: list[Event], last_result: StageResult) -> Decision:
    limit = snap.settings.cycle_limits.get(kind, 3)
    done = snap.cycles.get(kind, 0)
    feedback = msgspec.structs.replace(feedback, target=target, cycle=done + 1)
    snap = _with(snap, now, history=[*snap.history, feedback][-HISTORY_LIMIT:])
    if done + 1 > limit:
        # Stay at the stage that asked for the cycle, keeping what the next stage needs;
        # `acode resume` makes the transition with a fresh round of cycles.
        message = (f"{kind} cycle limit reached ({done} of {limit}); last feedback: {feedback.summary}; "
                   "raise orchestration.cycle_limit or `acode resume` the session for another round")
        return pause(snap, "cycle_limit", "ACODE-ORCH-003", message, now, events, feedback=feedback,
                     last_result=last_result)
    return _enter(snap, target, now, reason=feedback.summary, cycle_kind=kind,
                  events=events, feedback=feedback, last_result=last_result)


def on_result(snap: SessionSnapshot, result: StageResult, now: float) -> Decision:
    """Decide what a stage's (already fenced) result means for the session."""
    stage = snap.stage
    assert stage is not None and result.stage == stage
    events: list[Event] = [_event(
        StageFinished, snap, now, stage=stage, visit=result.visit, attempt=result.attempt, ok=result.ok,
        duration_ms=result.metrics.duration_ms, summary=result.summary, error=result.error,
        tokens_est=result.metrics.prompt_tokens_est, largest_prompt_est=result.metrics.largest_prompt_est,
        budget_tokens=result.metrics.budget_tokens, tokens_in=result.metrics.tokens_in,
        tokens_out=result.metrics.tokens_out)]
    if not result.ok:
        error = result.error or ErrorInfo(code="ACODE-ORCH-001", message=f"{stage} failed")
        if error.retryable and snap.attempt <= _retry_limit(snap):
            return _retry(snap, now, f"{stage} reported a transient error: {error.message}", events)
        return _finish(snap, "failed", now, events=events, error=error,
                       summary=f"{stage} failed: {error.message}")
    match stage:
        case "planner":
            plan = result.plan
            if plan is None:
                return _finish(snap, "failed", now, events=events, error=ErrorInfo(
                    code="ACODE-PLAN-003", message="the planner answered without a plan"))
            events.append(_event(PlanRecorded, snap, now, version=plan.version, goal=plan.goal,
                                 tasks=len(plan.tasks), steps=plan.step_count(), status=plan.status))
            if plan.status == "needs_clarification":
                questions = "; ".join(q.question for q in plan.questions)
                decision = pause(snap, "needs_input", "ACODE-ORCH-004",
                                 f"the planner needs answers before it can plan: {questions}; answer with "
                                 f"`acode answer {snap.id[:8]}`", now, events,
                                 plan_version=plan.version, last_result=result)
                return Decision(decision.snapshot, decision.events, plan)
            history = snap.history
            if plan.change_summary:
                history = [*history, Feedback(source="planner", summary=f"plan v{plan.version}: "
                                                                         f"{plan.change_summary}")][-HISTORY_LIMIT:]
            decision = _enter(snap, "executor", now, reason=result.summary or "plan ready", events=events,
                              plan_version=plan.version, feedback=None, last_result=result, history=history,
                              kept_steps=[], completed_tasks=[t.label for t in plan.tasks if t.status == "completed"])
            return Decision(decision.snapshot, decision.events, plan)
        case "executor":
            return _enter(snap, "verifier", now, reason=result.summary or "steps done", events=events,
                          feedback=None, last_result=result)
        case "verifier":
            verdict = result.verification
            rework = result.rework
            if rework is not None:
                events.append(_event(ReworkChosen, snap, now, visit=result.visit, rule=rework.rule,
                                     reason=rework.reason, rerun=rework.rerun, kept=rework.kept,
                                     completed_tasks=rework.completed_tasks))
                snap = _with(snap, now, kept_steps=rework.kept, completed_tasks=rework.completed_tasks)
            if verdict is not None and verdict.passed:
                return _enter(snap, "reviewer", now, reason=verdict.summary or "verified", events=events,
                              feedback=None, last_result=result)
            failed = [c for c in (verdict.criteria if verdict else []) if not c.passed]
            feedback = Feedback(
                source="verifier", summary=(verdict.summary if verdict else "") or
                f"{len(failed)} criteria failed: {', '.join(c.label for c in failed)}",
                items=[FeedbackItem(label=c.label, problem="criterion not met", detail=c.evidence) for c in failed])
            return _cycle(snap, "verify", "executor", now, feedback=feedback, events=events, last_result=result)
        case "reviewer":
            review = result.review
            if review is not None and review.decision == "approve":
                return _finish(snap, "completed", now, events=events, summary=review.summary or "approved")
            issues = review.issues if review else []
            changes = review is not None and review.decision == "request_changes"
            feedback = Feedback(
                source="reviewer", summary=(review.summary if review else "") or
                ("the reviewer asked for changes" if changes else "the reviewer asked for a re-plan"),
                items=[FeedbackItem(label=i.criterion or f"issue {n}", problem=i.problem, detail=i.suggestion)
                       for n, i in enumerate(issues, start=1)])
            return _cycle(snap, "review", "executor" if changes else "planner", now, feedback=feedback,
                          events=events, last_result=result)
    raise TransitionError(f"unknown stage {stage!r}")  # pragma: no cover - Stage is a closed Literal


def _retry_limit(snap: SessionSnapshot) -> int:
    """Retries of the current stage: its own limit if it has one, else ``stage_retry_limit``."""
    settings = snap.settings
    return settings.stage_retry_limits.get(snap.stage, settings.stage_retry_limit) if snap.stage \
        else settings.stage_retry_limit


def _retry(snap: SessionSnapshot, now: float, reason: str, events: list[Event] | None = None,
           **changes: object) -> Decision:
    events = events if events is not None else []
    assert snap.stage is not None
    attempt = snap.attempt + 1
    if attempt > MAX_ATTEMPTS:
        return pause(snap, "escalation", "ACODE-ORCH-004",
                     f"{snap.stage} was attempted {snap.attempt} times without an answer; last: {reason}; "
                     "check `acode status` and the actor logs, then `acode resume`", now, events)
    new = _with(snap, now, attempt=attempt, **changes)
    events.append(_event(StageRetried, snap, now, stage=snap.stage, visit=snap.visit, attempt=attempt,
                         reason=reason))
    return Decision(new, events)


def on_lost(snap: SessionSnapshot, reason: str, now: float) -> Decision:
    """The attempt's actor died or was lost: dispatch again with attempt + 1."""
    return _retry(snap, now, reason)


def on_timeout(snap: SessionSnapshot, now: float) -> Decision:
    """The attempt ran past the stage timeout: abandon it; retry or pause (exit 20)."""
    assert snap.stage is not None
    limit = snap.settings.stage_timeouts.get(snap.stage, 300.0)
    timeouts = snap.timeouts + 1
    if timeouts > _retry_limit(snap):
        return pause(snap, "stage_timeout", "ACODE-ORCH-002",
                     f"{snap.stage} timed out {timeouts} times ({limit:g}s each); raise "
                     f"orchestration.{snap.stage}_timeout or check the model, then `acode resume`", now,
                     timeouts=timeouts)
    return _retry(snap, now, f"{snap.stage} timed out after {limit:g}s", timeouts=timeouts)


def recover(snap: SessionSnapshot, now: float) -> Decision:
    """After a coordinator restart: dispatch the current stage again with attempt + 1."""
    return _retry(snap, now, "recovered after a coordinator restart")


def resume(snap: SessionSnapshot, now: float, answers: list[Clarification] | None = None) -> Decision:
    """A human resumes a paused session: a fresh round for what paused it.

    A session paused for the planner's questions resumes only with ``answers`` (given by
    ``acode answer``, or each question's default when the wait ran out); the planner is
    entered again with every answer so far.
    """
    if snap.status != "paused":
        raise TransitionError(f"session {snap.id} is {snap.status}, not paused; only paused sessions "
                              "resume", code="ACODE-CLI-004")
    kind = snap.pause.kind if snap.pause else "escalation"
    if kind == "needs_input":
        if not answers:
            raise TransitionError(f"session {snap.id} is waiting for answers to the planner's questions; "
                                  f"give them with `acode answer {snap.id[:8]}`", code="ACODE-CLI-004")
        events = [_event(SessionResumed, snap, now, reason=f"{len(answers)} answer(s) given", answers=answers)]
        running = _with(snap, now, status="running", pause=None, exit_code=None, timeouts=0,
                        clarifications=[*snap.clarifications, *answers])
        return _enter(running, "planner", now, events=events, reason="the planner's questions were answered")
    if answers:
        raise TransitionError(f"session {snap.id} is paused for {kind}, not for questions; resume it with "
                              "`acode resume`", code="ACODE-CLI-004")
    events = [_event(SessionResumed, snap, now, reason=f"resumed after {kind}")]
    running = _with(snap, now, status="running", pause=None, exit_code=None, timeouts=0)
    if kind == "cycle_limit" and snap.feedback is not None:
        cycle_kind: CycleKind = "verify" if snap.feedback.source == "verifier" else "review"
        target: Stage = snap.feedback.target or ("executor" if cycle_kind == "verify" else "planner")
        running = msgspec.structs.replace(running, cycles={**snap.cycles, cycle_kind: 0})
        return _enter(running, target, now, events=events,
                      reason=f"resumed after the {cycle_kind} cycle limit: {snap.feedback.summary}")
    return _retry(running, now, f"resumed after {kind}", events)


def cancel(snap: SessionSnapshot, reason: str, now: float) -> Decision:
    if snap.status in ("completed", "failed", "cancelled"):
        raise TransitionError(f"session {snap.id} is already {snap.status}", code="ACODE-CLI-004")
    return _finish(snap, "cancelled", now, events=[], error=ErrorInfo(code="ACODE-ORCH-007", message=reason),
                   summary=reason)
