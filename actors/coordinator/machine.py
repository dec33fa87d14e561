"""The session state machine: pure functions from (snapshot, input, now) to a Decision.

No I/O here. The orchestrator persists a decision's snapshot and events, waits for the
acknowledgement, and only then acts on it (dispatches the next stage). The inputs here are
a new session, a stage's result, a lost attempt (its actor died or the broker lost it), a
timeout and a coordinator's restart; a human's (resume, pause, steer, a plan's review, a
call's approval, cancel) are in :mod:`actors.coordinator.human`, built of the transitions
here (:func:`enter`, :func:`revisit`, :func:`retry`, :func:`pause`, :func:`finish`).

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

Failure is a pause, not an end (seed 000 "Error Escalation"). A stage that fails has
already climbed the lower rungs (a step's tries, the planner's corrections, the
provider's retries); :mod:`escalation` maps its error code to what happens next: a stage
retry where one can help (the stage entered again afresh, a *revisit*: ``executor ->
executor`` keeps the steps a failed visit completed), else a pause with a kind, the
step concerned, the fix and the exact command that continues. Only a human ends a
session (``cancel``); only an unrecoverable workspace error fails one, and a human may
resume a failed session too. Only a human raises a limit: ``resume`` applies the
overrides it is given, and nothing else here changes a setting.

A human in the loop (issue 11; the commands are in :mod:`actors.coordinator.human`) shows
here too: while a pause the user requested stands (``pause_requested_at``) no stage is
dispatched (:func:`_held`: after a result, a lost attempt, a timeout or a coordinator
restart the session pauses ``user`` instead), and a stage that stopped at a safe point
(ACODE-ORCH-010) pauses it too. A ready plan under ``settings.plan_review`` pauses the
session (``plan_review``) instead of entering the executor. An executor call that needs a
human's decision ends the attempt with the call (:class:`~protocol.calls.autonomy.ApprovalRequest`);
the session pauses ``awaiting_approval``.

What changed: the verifier's and the reviewer's results carry the workspace's changes
against the session's baseline; each is kept in the snapshot (``changes``) and its
``stage_finished`` event, and the last one goes with ``session_finished``. A verifier or
reviewer that cannot compute them fails with ACODE-ORCH-012, which pauses the session
(escalation, exit 22; a resume revisits the stage, so the diff is taken afresh): a
session completes only after a reviewer approved a change it saw whole.

Loop detection: a verify failure whose fingerprint (failing criteria and normalised
evidence) equals the previous one's pauses the session (ACODE-ORCH-008) instead of
spending the remaining cycles on it; the same criteria failing after changes is the
``verify_repeat`` anomaly (:func:`_verify_repeat`: a note, then a pause ``anomaly``, exit 25).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from actors.coordinator import escalation
from protocol.basics.ids import new_id
from protocol.errors import ErrorInfo, TransitionError
from protocol.plans.plan import TaskPlan
from protocol.plans.results import StageResult
from protocol.plans.stages import STAGES, CycleKind, PauseKind, ResumeMode, Stage
from protocol.sessions.events import (
    AnomalyDetected,
    Event,
    PlanRecorded,
    ReworkChosen,
    SessionCreated,
    SessionFinished,
    SessionPaused,
    StageFinished,
    StageRetried,
    Transitioned,
)
from protocol.sessions.session import (
    Feedback,
    FeedbackItem,
    PauseInfo,
    SessionSettings,
    SessionSnapshot,
    model_of,
)

__all__ = ["ALLOWED", "EXIT_CODES", "HISTORY_LIMIT", "MAX_ATTEMPTS", "Decision", "create", "enter", "execute_plan",
           "finish", "new_event", "on_lost", "on_result", "on_timeout", "pause", "recover", "retry", "revisit",
           "updated"]

ALLOWED: frozenset[tuple[str, str]] = frozenset({
    ("start", "planner"),
    ("start", "executor"),  # `acode rewind` of a completed session (which has no stage): its plan is kept
    ("planner", "planner"),  # the user answered the planner's questions: plan again with them
    ("planner", "executor"),
    ("executor", "verifier"),
    ("verifier", "executor"),
    ("verifier", "reviewer"),
    ("reviewer", "planner"),
    ("reviewer", "executor"),  # request_changes: the approach is right, the executor applies the issues
    ("reviewer", "completed"),
    # revisits: a stage retried afresh, or resumed by a human after it failed
    ("executor", "executor"),
    ("verifier", "verifier"),
    ("reviewer", "reviewer"),
})
PAUSE_EXIT: dict[PauseKind, int] = {  # a step's outcome may say more: 30, 31, 32, 34 (escalation.RULES)
    "stage_timeout": 20,
    "cycle_limit": 21,
    "needs_input": 22,
    "actor_failed": 22,
    "escalation": 22,
    "model_unavailable": 22,
    "invalid_plan": 22,
    "plan_review": 22,
    "user": 22,
    "awaiting_approval": 22,  # 33 when no human can answer (non_interactive_policy: fail, ACODE-EXEC-005)
    "budget_exhausted": 24,
    "hook": 22,
    "anomaly": 25,
}
EXIT_CODES = {"completed": 0, "failed": 1, "cancelled": 23}
MAX_ATTEMPTS = 10  # per visit (or since a human resumed it), whatever the reason: past it a human must look
HISTORY_LIMIT = 20  # entries of a session's cycle history kept for the reviewer


@dataclass(frozen=True)
class Decision:
    """What to persist (snapshot and events, plus a plan version) and whether to dispatch."""

    snapshot: SessionSnapshot
    events: list[Event] = field(default_factory=list)
    plan: TaskPlan | None = None
    going_on: bool = False  # the attempt in flight goes on (a pause request, a steering note): no dispatch

    @property
    def dispatch(self) -> bool:
        return not self.going_on and self.snapshot.status == "running" and self.snapshot.stage is not None


def new_event(cls: Callable[..., Event], snap: SessionSnapshot, now: float, **fields: object) -> Event:
    """An event of ``snap``'s session, with a new id, at ``now``."""
    return cls(id=new_id(), session_id=snap.id, at=now, **fields)


def updated(snap: SessionSnapshot, now: float, **changes: object) -> SessionSnapshot:
    """``snap`` with ``changes``, updated at ``now``; a running session's ``running_s`` (its
    wall_minutes budget, protocol.policy.budget) grows by the time since its last update."""
    if snap.status == "running" and now > snap.updated_at and "running_s" not in changes:
        changes["running_s"] = snap.running_s + (now - snap.updated_at)
    return msgspec.structs.replace(snap, updated_at=now, **changes)


def create(session_id: str, task: str, workspace: str, settings: SessionSettings, now: float, *,
           overrode_hold: str = "") -> Decision:
    """A new session, entering the planner (``overrode_hold``: the session whose hold on the
    workspace ``--force`` overrode)."""
    snap = SessionSnapshot(id=session_id, task=task, workspace=workspace, status="running",
                           stage="planner", visits={"planner": 1}, attempt=1, created_at=now,
                           updated_at=now, settings=settings)
    return Decision(snap, [
        new_event(SessionCreated, snap, now, task=task, workspace=workspace, overrode_hold=overrode_hold),
        new_event(Transitioned, snap, now, source="start", target="planner", visit=1, reason="session started"),
    ])


def enter(snap: SessionSnapshot, target: Stage, now: float, *, reason: str,
          cycle_kind: CycleKind | None = None, events: list[Event], **changes: object) -> Decision:
    """Enter ``target`` (a new visit, attempt 1) if :data:`ALLOWED`, else TransitionError."""
    source = snap.stage or "start"
    if (source, target) not in ALLOWED:
        raise TransitionError(f"transition {source} -> {target} is not allowed; allowed from "
                              f"{source}: {sorted(t for s, t in ALLOWED if s == source)}")
    visits = {**snap.visits, target: snap.visits.get(target, 0) + 1}
    cycles = dict(snap.cycles)
    if cycle_kind is not None:
        cycles[cycle_kind] = cycles.get(cycle_kind, 0) + 1
    fields: dict[str, object] = {"stage": target, "visits": visits, "attempt": 1, "timeouts": 0, "cycles": cycles,
                                 "retries": 0, "attempt_floor": 0}
    new = updated(snap, now, **{**fields, **changes})
    events.append(new_event(Transitioned, snap, now, source=source, target=target, visit=visits[target],
                            reason=reason, cycle_kind=cycle_kind, cycle=cycles.get(cycle_kind, 0) if cycle_kind else 0))
    return Decision(new, events)


def finish(snap: SessionSnapshot, status: str, now: float, *, events: list[Event],
           error: ErrorInfo | None = None, summary: str = "") -> Decision:
    """End the session ``completed`` (every stage visited), ``failed`` or ``cancelled``."""
    exit_code = EXIT_CODES[status]
    if status == "completed":
        missing = [s for s in STAGES if not snap.visits.get(s)]
        if missing:
            raise TransitionError(f"cannot complete: stages never visited: {', '.join(missing)}")
        events.append(new_event(Transitioned, snap, now, source=snap.stage or "start", target="completed",
                                visit=1, reason=summary or "approved"))
    stage = snap.stage if status == "failed" else None  # a failed session resumes where it stopped
    new = updated(snap, now, status=status, stage=stage, exit_code=exit_code, finished_at=now, error=error,
                  pause=None)
    events.append(new_event(SessionFinished, snap, now, status=status, exit_code=exit_code, error=error,
                            summary=summary, changes=snap.changes))
    return Decision(new, events)


def pause(snap: SessionSnapshot, kind: PauseKind, code: str, message: str, now: float,
          events: list[Event] | None = None, *, exit_code: int | None = None, resume: ResumeMode = "retry",
          task: str = "", step: str = "", fix: str = "", **changes: object) -> Decision:
    """Stop dispatching until a human resumes; the stage to resume is kept, and the pause
    says how it goes on (``resume``) and the exact command that does it."""
    events = events if events is not None else []
    exit_code = exit_code if exit_code is not None else PAUSE_EXIT[kind]
    settings = snap.settings
    stage = snap.stage
    command = escalation.command(snap.id, kind, stage=stage, code=code,
                                 timeout_s=settings.stage_timeouts.get(stage, 300.0) if stage else 0.0,
                                 max_turns=settings.max_turns_per_step, step_timeout_s=settings.step_timeout_s,
                                 message=message)
    info = PauseInfo(kind=kind, code=code, message=message, stage=stage, task=task, step=step, fix=fix,
                     command=command, resume=resume)
    new = updated(snap, now, status="paused", pause=info, exit_code=exit_code, **changes)
    events.append(new_event(SessionPaused, snap, now, kind=kind, code=code, message=message, exit_code=exit_code,
                            task=task, step=step, fix=fix, command=command))
    return Decision(new, events)


def _escalate(snap: SessionSnapshot, result: StageResult, error: ErrorInfo, now: float,
              events: list[Event]) -> Decision:
    """A stage failed past the rungs below: retry it afresh where that can help, else pause.
    The steps a failed executor completed are kept (``kept_steps``): neither a stage retry
    nor a human's resume runs them again."""
    stage = snap.stage
    assert stage is not None
    if error.code in escalation.UNRECOVERABLE:
        return finish(snap, "failed", now, events=events, error=error, summary=f"{stage} failed: {error.message}")
    if error.code == "ACODE-ORCH-015":  # a hook aborted the session: as `acode cancel` would
        return finish(snap, "cancelled", now, events=events, error=error, summary=error.message)
    steps = result.execution.steps if result.execution else []
    done = [f"{r.task}/{r.step}" for r in steps if r.status == "completed"]
    if done:
        snap = updated(snap, now, kept_steps=list(dict.fromkeys([*snap.kept_steps, *done])))
    rule = escalation.rule_for(error.code)
    limit = _retry_limit(snap)
    if rule.stage_retry and snap.retries < limit:
        return revisit(snap, now, events=events, retries=snap.retries + 1,
                       reason=f"stage retry {snap.retries + 1} of {limit}, afresh: {error.message}")
    failed = [r for r in steps if r.status == "failed"]
    task, step = (failed[0].task, failed[0].step) if failed else ("", "")
    fix = escalation.fix_of(error.message) if error.code.startswith(escalation.FIX_LINES) else ""
    return pause(snap, rule.kind, error.code, f"{stage} failed: {error.message}", now, events,
                 exit_code=rule.exit_code, resume=rule.resume, task=task, step=step, fix=fix)


def revisit(snap: SessionSnapshot, now: float, *, events: list[Event], reason: str, retries: int = 0) -> Decision:
    """Enter the current stage again, afresh (a new visit: its model calls are not replayed;
    the planner plans again with the feedback and plan it had; the executor skips the
    ``kept_steps``)."""
    stage = snap.stage
    assert stage is not None
    return enter(snap, stage, now, reason=reason, events=events, retries=retries)


def _cycle(snap: SessionSnapshot, kind: CycleKind, target: Stage, now: float, *, feedback: Feedback,
           events: list[Event], last_result: StageResult) -> Decision:
    limit = snap.settings.cycle_limits.get(kind, 3)
    done = snap.cycles.get(kind, 0)
    feedback = msgspec.structs.replace(feedback, target=target, cycle=done + 1)
    snap = updated(snap, now, history=[*snap.history, feedback][-HISTORY_LIMIT:])
    if done + 1 > limit:
        # Stay at the stage that asked for the cycle, keeping what the next stage needs;
        # `acode resume` makes the transition with a fresh round of cycles.
        message = (f"{kind} cycle limit reached ({done} of {limit}); last feedback: {feedback.summary}; "
                   "raise orchestration.cycle_limit or `acode resume` the session for another round")
        return pause(snap, "cycle_limit", "ACODE-ORCH-003", message, now, events, resume="cycle",
                     feedback=feedback, last_result=last_result)
    return enter(snap, target, now, reason=feedback.summary, cycle_kind=kind,
                 events=events, feedback=feedback, last_result=last_result)


def on_result(snap: SessionSnapshot, result: StageResult, now: float) -> Decision:
    """Decide what a stage's (already fenced) result means for the session; a session the
    user asked to pause stops before the next dispatch."""
    return _held(_on_result(snap, result, now))


def _on_result(snap: SessionSnapshot, result: StageResult, now: float) -> Decision:
    stage = snap.stage
    assert stage is not None and result.stage == stage
    provider, model = model_of(snap.settings.provider, stage)  # the settings the attempt was dispatched with
    events: list[Event] = [new_event(
        StageFinished, snap, now, stage=stage, visit=result.visit, attempt=result.attempt, ok=result.ok,
        duration_ms=result.metrics.duration_ms, summary=result.summary, error=result.error,
        tokens_est=result.metrics.prompt_tokens_est, largest_prompt_est=result.metrics.largest_prompt_est,
        budget_tokens=result.metrics.budget_tokens, tokens_in=result.metrics.tokens_in,
        tokens_out=result.metrics.tokens_out, tokens_cached=result.metrics.tokens_cached,
        model_ms=result.metrics.model_ms, changes=result.changes, provider=provider, model=model,
        model_calls=result.metrics.model_calls, replayed_model_calls=result.metrics.replayed_model_calls)]
    if result.changes is not None:  # the workspace against its baseline, as the verifier or reviewer saw it
        snap = updated(snap, now, changes=result.changes)
    if not result.ok and result.error is not None and result.error.code == "ACODE-ORCH-010":
        if snap.pause_requested_at:  # the stage stopped at a safe point: the next attempt replays its work
            why = _paused_message(snap, f"{result.error.message} in the {stage}")
            return pause(snap, "user", "ACODE-ORCH-010", why, now, events)
        return retry(snap, now, "the stage stopped for a pause that was withdrawn", events)
    if not result.ok:
        error = result.error or ErrorInfo(code="ACODE-ORCH-001", message=f"{stage} failed")
        if result.approval is not None:
            return _await_approval(snap, result, error, now, events)
        if error.retryable and snap.attempt <= _retry_limit(snap):
            return retry(snap, now, f"{stage} reported a transient error: {error.message}", events)
        return _escalate(snap, result, error, now, events)
    match stage:
        case "planner":
            plan = result.plan
            if plan is None:
                return _escalate(snap, result, ErrorInfo(code="ACODE-PLAN-003",
                                                         message="the planner answered without a plan"), now, events)
            events.append(new_event(PlanRecorded, snap, now, version=plan.version, goal=plan.goal,
                                    tasks=len(plan.tasks), steps=plan.step_count(), status=plan.status))
            if plan.status == "needs_clarification":
                questions = "; ".join(q.question for q in plan.questions)
                decision = pause(snap, "needs_input", "ACODE-ORCH-004",
                                 f"the planner needs answers before it can plan: {questions}; answer with "
                                 f"`acode answer {snap.id[:8]}`", now, events, resume="answers",
                                 plan_version=plan.version, last_result=result)
                return Decision(decision.snapshot, decision.events, plan)
            history = snap.history
            if plan.change_summary:
                history = [*history, Feedback(source="planner", summary=f"plan v{plan.version}: "
                                                                         f"{plan.change_summary}")][-HISTORY_LIMIT:]
            if snap.settings.plan_review:
                short = snap.id[:8]
                decision = pause(snap, "plan_review", "ACODE-ORCH-011",
                                 f"plan v{plan.version} waits for your review: `acode approve {short}` executes it, "
                                 f"`acode replan {short} \"what to change\"` sends it back to the planner", now,
                                 events, plan_version=plan.version, last_result=result, history=history, feedback=None)
                return Decision(decision.snapshot, decision.events, plan)
            decision = execute_plan(snap, plan, result, now, events=events, reason=result.summary or "plan ready",
                                    history=history)
            return Decision(decision.snapshot, decision.events, plan)
        case "executor":
            return enter(snap, "verifier", now, reason=result.summary or "steps done", events=events,
                         feedback=None, last_result=result)
        case "verifier":
            verdict = result.verification
            rework = result.rework
            if rework is not None:
                events.append(new_event(ReworkChosen, snap, now, visit=result.visit, rule=rework.rule,
                                        reason=rework.reason, rerun=rework.rerun, kept=rework.kept,
                                        completed_tasks=rework.completed_tasks))
                snap = updated(snap, now, kept_steps=rework.kept, completed_tasks=rework.completed_tasks)
            if verdict is not None and verdict.passed:
                return enter(snap, "reviewer", now, reason=verdict.summary or "verified", events=events,
                             feedback=None, last_result=result, failure_print="", verifications=[])
            failed = [c for c in (verdict.criteria if verdict else []) if not c.passed]
            feedback = Feedback(
                source="verifier", summary=(verdict.summary if verdict else "") or
                f"{len(failed)} criteria failed: {', '.join(c.label for c in failed)}",
                items=[FeedbackItem(label=c.label, problem="criterion not met", detail=c.evidence) for c in failed])
            printed = escalation.fingerprint([(c.label, c.evidence) for c in failed])
            if printed == snap.failure_print:
                return pause(snap, "escalation", "ACODE-ORCH-008",
                             f"the same failure twice: {feedback.summary}; the executor's last round changed "
                             "nothing the checks see. Look at the evidence (`acode show`), then resume for "
                             "another round, perhaps with another model (--model)", now, events, resume="cycle",
                             feedback=feedback, last_result=result)
            snap, feedback, stop = _verify_repeat(snap, result, feedback, now, events)
            if stop is not None:
                return stop
            decision = _cycle(snap, "verify", "executor", now, feedback=feedback, events=events, last_result=result)
            return Decision(msgspec.structs.replace(decision.snapshot, failure_print=printed), decision.events)
        case "reviewer":
            review = result.review
            if review is not None and review.decision == "approve":
                return finish(snap, "completed", now, events=events, summary=review.summary or "approved")
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


def _verify_repeat(snap: SessionSnapshot, result: StageResult, feedback: Feedback, now: float,
                   events: list[Event]) -> tuple[SessionSnapshot, Feedback, Decision | None]:
    """The failed verification ``result`` among the last ones (:func:`escalation.repeated`):
    the first ``verify_repeat`` is an event and a note in the executor's ``feedback``, the
    next the pause ``anomaly`` (the cycle goes on when a human resumes)."""
    kept = escalation.verifications(snap, result.visit, [item.label for item in feedback.items])
    snap = updated(snap, now, verifications=kept)
    anomaly = escalation.repeated(kept, result.visit, snap.settings.anomalies)
    if anomaly is None:
        return snap, feedback, None
    response = "pause" if snap.verify_responses else "note"
    events.append(new_event(AnomalyDetected, snap, now, kind=anomaly.kind, evidence=anomaly.evidence,
                            score=anomaly.score, response=response, stage="verifier", visit=result.visit,
                            turns=list(anomaly.turns)))
    snap = updated(snap, now, verify_responses=[*snap.verify_responses, response])
    if response == "note":
        return snap, escalation.noted(feedback, anomaly), None
    message = (f"the model went off the rails (anomaly verify_repeat): {anomaly.evidence}; the executor's changes "
               "do not touch what fails. Look at the evidence (`acode show`), then resume for another round")
    return snap, feedback, pause(snap, "anomaly", "ACODE-ORCH-017", message, now, events, resume="cycle",
                                 feedback=feedback, last_result=result)


def execute_plan(snap: SessionSnapshot, plan: TaskPlan, result: StageResult, now: float, *,
                 events: list[Event], reason: str, history: list[Feedback]) -> Decision:
    """planner -> executor with a ready plan (at once, or once the user approved it)."""
    return enter(snap, "executor", now, reason=reason, events=events, plan_version=plan.version, feedback=None,
                 last_result=result, history=history, kept_steps=[],
                 completed_tasks=[t.label for t in plan.tasks if t.status == "completed"])


def _paused_message(snap: SessionSnapshot, why: str) -> str:
    return f"{why}; `acode resume {snap.id[:8]}` continues (what was recorded is replayed, nothing is asked twice)"


def _held(decision: Decision) -> Decision:
    """``decision``, unless it dispatches a session the user asked to pause: then the
    session pauses (``user``) at the stage it would have dispatched."""
    snap = decision.snapshot
    if not decision.dispatch or not snap.pause_requested_at:
        return decision
    held = pause(snap, "user", "ACODE-ORCH-010",
                 _paused_message(snap, f"paused by the user before the {snap.stage} (attempt {snap.attempt})"),
                 snap.updated_at, list(decision.events))
    return Decision(held.snapshot, held.events, decision.plan)


def _await_approval(snap: SessionSnapshot, result: StageResult, error: ErrorInfo, now: float,
                    events: list[Event]) -> Decision:
    """A call of the executor waits for a human's decision: pause ``awaiting_approval``; the
    decision (:func:`~actors.coordinator.human.decide_call`) retries the attempt, which replays up to that call."""
    ask = result.approval
    assert ask is not None
    failing = error.code == "ACODE-EXEC-005"  # non_interactive_policy: fail
    return pause(snap, "awaiting_approval", error.code, error.message, now, events, exit_code=33 if failing else 22,
                 resume="retry", task=ask.task, step=ask.step, approval=ask)


def _retry_limit(snap: SessionSnapshot) -> int:
    """Retries of the current stage: its own limit if it has one, else ``stage_retry_limit``."""
    settings = snap.settings
    return settings.stage_retry_limits.get(snap.stage, settings.stage_retry_limit) if snap.stage \
        else settings.stage_retry_limit


def retry(snap: SessionSnapshot, now: float, reason: str, events: list[Event] | None = None,
          **changes: object) -> Decision:
    """Dispatch the current stage again with attempt + 1, or pause past :data:`MAX_ATTEMPTS`."""
    events = events if events is not None else []
    assert snap.stage is not None
    attempt = snap.attempt + 1
    if attempt - snap.attempt_floor > MAX_ATTEMPTS:
        return pause(snap, "escalation", "ACODE-ORCH-004",
                     f"{snap.stage} was attempted {attempt - 1 - snap.attempt_floor} times without an answer; last: "
                     f"{reason}; check `acode status` and the actor logs, then `acode resume`", now, events)
    new = updated(snap, now, attempt=attempt, **changes)
    events.append(new_event(StageRetried, snap, now, stage=snap.stage, visit=snap.visit, attempt=attempt,
                            reason=reason))
    return Decision(new, events)


def on_lost(snap: SessionSnapshot, reason: str, now: float) -> Decision:
    """The attempt's actor died or was lost: dispatch again with attempt + 1 (or pause, if
    the user asked)."""
    return _held(retry(snap, now, reason))


def on_timeout(snap: SessionSnapshot, now: float) -> Decision:
    """The attempt ran past the stage timeout: abandon it; retry or pause (exit 20)."""
    assert snap.stage is not None
    limit = snap.settings.stage_timeouts.get(snap.stage, 300.0)
    timeouts = snap.timeouts + 1
    if timeouts > _retry_limit(snap):
        return pause(snap, "stage_timeout", "ACODE-ORCH-002",
                     f"{snap.stage} timed out {timeouts} times ({limit:g}s each); resume with a longer "
                     f"--{snap.stage}-timeout, or check the model", now, timeouts=timeouts)
    return _held(retry(snap, now, f"{snap.stage} timed out after {limit:g}s", timeouts=timeouts))


def recover(snap: SessionSnapshot, now: float) -> Decision:
    """After a coordinator restart: dispatch the current stage again with attempt + 1 (or
    pause, if the user asked before the restart). The time acode was down is not time the
    session ran (its wall_minutes budget): the clock starts again now."""
    snap = msgspec.structs.replace(snap, updated_at=max(snap.updated_at, now))
    return _held(retry(snap, now, "recovered after a coordinator restart"))
