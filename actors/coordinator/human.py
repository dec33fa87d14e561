"""What a human does to a session: the state machine's inputs that come from a person.

Pure functions from (snapshot, command, now) to a :class:`~actors.coordinator.machine.Decision`,
built of the machine's transitions (:mod:`actors.coordinator.machine`, which decides what a
stage's result, a lost attempt, a timeout and a restart mean); the orchestrator persists a
decision before it acts on it, as for every input.

``acode resume`` (:func:`resume`): a paused or failed session gets a fresh round for what
stopped it, in the pause's resume mode; it applies the settings ``overrides`` it is given
(only a human raises a limit). ``acode cancel`` (:func:`cancel`) ends a session; only a
human does.

A human in the loop (issue 11). Plan review (``settings.plan_review``): a ready plan
pauses the session (``plan_review``) instead of entering the executor; :func:`approve_plan`
enters it, :func:`replan` sends the plan back to the planner with the user's feedback
(a :class:`Feedback` from ``user``), and the next version pauses again. A plain ``resume``
of a plan under review is refused (ACODE-CLI-008). ``acode pause`` (:func:`request_pause`)
records the request in the snapshot (``pause_requested_at``, event ``pause_requested``);
while it stands no stage is dispatched (the machine holds the next dispatch and pauses the
session ``user``). Resume mode ``retry``: the next attempt replays what was recorded. Seed
002 wants pause and resume at least 1 s apart (:data:`PAUSE_GAP_S`): a resume sooner is
refused (ACODE-CLI-007), and a repeated pause changes nothing; a resume while the pause is
still on its way withdraws it. ``acode steer`` (:func:`steer`) keeps the note in the
snapshot: every later dispatch carries it.

Approvals: an executor call that needs a human's decision pauses the session
``awaiting_approval``; :func:`decide_call` (``acode approve``/``acode deny``) records the
decision and retries the attempt in one commit. ``resume`` refuses such a pause: it needs a
decision.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from actors.coordinator import overrides as overrides_
from actors.coordinator.machine import (
    HISTORY_LIMIT,
    Decision,
    enter,
    execute_plan,
    finish,
    new_event,
    retry,
    revisit,
    updated,
)
from protocol.basics.ids import new_id
from protocol.calls.autonomy import ApprovalDecision
from protocol.errors import ErrorInfo, TransitionError
from protocol.plans.plan import TaskPlan
from protocol.plans.stages import CycleKind, ResumeMode, Stage
from protocol.sessions.events import ApprovalDecided, Event, PauseRequested, SessionResumed, SettingsChanged, Steered
from protocol.sessions.session import (
    MAX_STEERING_NOTES,
    Clarification,
    Feedback,
    SessionSnapshot,
    SettingsOverride,
    SteeringNote,
)

__all__ = [
    "PAUSE_GAP_S",
    "approve_plan",
    "cancel",
    "decide_call",
    "replan",
    "request_pause",
    "resume",
    "rewind",
    "steer",
]

PAUSE_GAP_S = 1.0  # seed 002: pause and resume at least this far apart (debounce)


def resume(snap: SessionSnapshot, now: float, answers: list[Clarification] | None = None,
           overrides: SettingsOverride | None = None) -> Decision:
    """A human resumes a paused or failed session: a fresh round for what stopped it.

    ``overrides`` (from ``acode resume --max-turns 20`` ...) are applied first and recorded
    as a ``settings_changed`` event. How it goes on is the pause's ``resume`` mode: retry
    the attempt (recorded work is replayed), revisit the stage afresh (finished steps
    stay finished, the failed step gets a fresh round of tries), make the cycle transition
    the pause stopped (a fresh round of cycles), or, for the planner's questions, plan
    again with ``answers`` (given by ``acode answer``, or the defaults when the wait ran out).
    """
    if snap.status == "running" and snap.pause_requested_at:
        return _withdraw_pause(snap, now)
    if snap.status not in ("paused", "failed"):
        raise TransitionError(f"session {snap.id} is {snap.status}; only paused or failed sessions resume",
                              code="ACODE-CLI-004")
    kind = snap.pause.kind if snap.pause else ("failed" if snap.status == "failed" else "escalation")
    mode: ResumeMode = snap.pause.resume if snap.pause else "revisit"
    if kind == "plan_review":
        short = snap.id[:8]
        raise TransitionError(f"session {snap.id} waits for the review of plan v{snap.plan_version}; `acode approve "
                              f"{short}` executes it, `acode replan {short} \"what to change\"` sends it back to "
                              "the planner", code="ACODE-CLI-008")
    if kind == "user":
        _check_gap(snap, now)
    if kind == "cycle_limit":
        mode = "cycle"  # also for pauses recorded before resume modes existed
    if kind == "needs_input":
        if not answers:
            raise TransitionError(f"session {snap.id} is waiting for answers to the planner's questions; "
                                  f"give them with `acode answer {snap.id[:8]}`", code="ACODE-CLI-004")
    elif answers:
        raise TransitionError(f"session {snap.id} is paused for {kind}, not for questions; resume it with "
                              "`acode resume`", code="ACODE-CLI-004")
    if kind == "awaiting_approval" and snap.approval is not None:
        raise TransitionError(f"session {snap.id} waits for a decision on {snap.approval.tool} "
                              f"{snap.approval.target!r}; give it with `acode approve {snap.id}` or `acode deny "
                              f"{snap.id}`", code="ACODE-CLI-004")
    events: list[Event] = []
    settings = snap.settings
    if overrides is not None and not overrides.is_empty():
        settings, changes = overrides_.apply(settings, overrides)
        if changes:
            events.append(new_event(SettingsChanged, snap, now, changes=changes))
    stage = snap.stage or ("executor" if snap.plan_version else "planner")  # a session failed before stages kept
    running = updated(snap, now, status="running", pause=None, exit_code=None, timeouts=0, error=None,
                      finished_at=None, settings=settings, stage=stage, retries=0, failure_print="",
                      attempt_floor=snap.attempt, pause_requested_at=0.0,  # a fresh round of attempts
                      verifications=[], verify_responses=[])  # and of the verify_repeat anomaly's ladder
    if kind == "needs_input":
        assert answers is not None
        events.append(new_event(SessionResumed, snap, now, reason=f"{len(answers)} answer(s) given", answers=answers))
        running = msgspec.structs.replace(running, clarifications=[*snap.clarifications, *answers])
        return enter(running, "planner", now, events=events, reason="the planner's questions were answered")
    events.append(new_event(SessionResumed, snap, now, reason=f"resumed after {kind}"))
    if mode == "cycle" and snap.feedback is not None:
        cycle_kind: CycleKind = "verify" if snap.feedback.source == "verifier" else "review"
        target: Stage = snap.feedback.target or ("executor" if cycle_kind == "verify" else "planner")
        running = msgspec.structs.replace(running, cycles={**snap.cycles, cycle_kind: 0})
        why = f"the {cycle_kind} cycle limit" if kind == "cycle_limit" else kind
        return enter(running, target, now, events=events, reason=f"resumed after {why}: {snap.feedback.summary}")
    if mode == "revisit":
        return revisit(running, now, events=events, reason=f"resumed after {kind}: a fresh round")
    return retry(running, now, f"resumed after {kind}", events)


def _check_gap(snap: SessionSnapshot, now: float) -> None:
    """Seed 002's debounce: a resume less than :data:`PAUSE_GAP_S` after the pause is refused."""
    since = now - snap.pause_requested_at
    if snap.pause_requested_at and since < PAUSE_GAP_S:
        raise TransitionError(f"session {snap.id} was paused {since:.2f}s ago; pause and resume must be at least "
                              f"{PAUSE_GAP_S:g}s apart (seed 002): resume again in {PAUSE_GAP_S - since:.2f}s",
                              code="ACODE-CLI-007")


def _withdraw_pause(snap: SessionSnapshot, now: float) -> Decision:
    """A resume while the pause is still on its way to a safe point withdraws it: the session
    goes on (a stage that stops all the same is retried, replaying what it recorded)."""
    _check_gap(snap, now)
    return Decision(updated(snap, now, pause_requested_at=0.0),
                    [new_event(SessionResumed, snap, now, reason="the pause was withdrawn before the session stopped")],
                    going_on=True)


def request_pause(snap: SessionSnapshot, now: float) -> Decision | None:
    """``acode pause``: record the request (the orchestrator then tells the stage at work).
    None when it changes nothing: the session is paused already, or a pause is on its way."""
    if snap.status in ("completed", "failed", "cancelled"):
        raise TransitionError(f"session {snap.id} is {snap.status}; only a running session pauses",
                              code="ACODE-CLI-004")
    if snap.status == "paused" or snap.pause_requested_at:
        return None
    return Decision(updated(snap, now, pause_requested_at=now),
                    [new_event(PauseRequested, snap, now, stage=snap.stage or "")], going_on=True)


def steer(snap: SessionSnapshot, text: str, now: float) -> Decision:
    """``acode steer``: keep the note (the orchestrator tells the stage at work; every later
    dispatch carries it). A running or paused session takes it."""
    if snap.status in ("completed", "failed", "cancelled"):
        raise TransitionError(f"session {snap.id} is {snap.status}; only a running or paused session can be steered",
                              code="ACODE-CLI-004")
    event = new_event(Steered, snap, now, text=text, stage=snap.stage or "")
    note = SteeringNote(id=event.id, text=text)
    return Decision(updated(snap, now, steering=[*snap.steering, note][-MAX_STEERING_NOTES:]), [event],
                    going_on=snap.status == "running")


def _reviewing(snap: SessionSnapshot, what: str) -> None:
    if snap.status != "paused" or snap.pause is None or snap.pause.kind != "plan_review":
        state = f"paused ({snap.pause.kind})" if snap.status == "paused" and snap.pause else snap.status
        raise TransitionError(f"session {snap.id} is {state}, not waiting for a plan review; {what} is for a "
                              "session paused plan_review (`acode run --approve-plan`)", code="ACODE-CLI-004")


def approve_plan(snap: SessionSnapshot, now: float) -> Decision:
    """The user approved the plan under review: planner -> executor. A pause the user asked
    for before the review is answered by it: approving (or re-planning) is the go-on."""
    _reviewing(snap, "approve")
    result = snap.last_result
    if result is None or result.plan is None:
        raise TransitionError(f"session {snap.id} has no plan to approve; `acode replan` it", code="ACODE-CLI-004")
    running = updated(snap, now, status="running", pause=None, exit_code=None, pause_requested_at=0.0)
    why = f"plan v{result.plan.version} approved by the user"
    events: list[Event] = [new_event(SessionResumed, snap, now, reason=why)]
    return execute_plan(running, result.plan, result, now, events=events, history=snap.history, reason=why)


def replan(snap: SessionSnapshot, text: str, now: float) -> Decision:
    """The user sent the plan under review back with feedback: the planner plans the next version."""
    _reviewing(snap, "replan")
    feedback = Feedback(source="user", summary=text, target="planner")
    running = updated(snap, now, status="running", pause=None, exit_code=None, pause_requested_at=0.0,
                      history=[*snap.history, feedback][-HISTORY_LIMIT:])
    events: list[Event] = [new_event(SessionResumed, snap, now, reason=f"the user asked for a re-plan: {text}")]
    return enter(running, "planner", now, events=events, feedback=feedback,
                 reason=f"plan v{snap.plan_version} sent back by the user")


def rewind(snap: SessionSnapshot, plan: TaskPlan | None, now: float, *, checkpoint: str, task: str = "",
           step: str = "", steering: str = "") -> Decision:
    """``acode rewind``: the sandbox put the workspace back at ``checkpoint``, taken before
    step ``task``/``step`` ran (the session's start when empty); the executor goes on from
    that step in a new visit (its model is asked again: a new visit's calls have new keys):
    the steps before it in the plan are kept, it and every later one run again. A paused,
    failed or completed session rewinds; a running one must be paused first."""
    if snap.status in ("running", "cancelled"):
        why = "pause it first (`acode pause`)" if snap.status == "running" else "a cancelled session stays ended"
        raise TransitionError(f"session {snap.id} is {snap.status}; {why}", code="ACODE-CLI-004")
    if plan is None or not snap.plan_version:
        raise TransitionError(f"session {snap.id} has no plan yet; `acode undo` puts its workspace back, "
                              "`acode resume` plans again", code="ACODE-CLI-004")
    order = [(t.label, s.label) for t in plan.tasks for s in t.steps]
    if task and (task, step) not in order:
        raise TransitionError(f"checkpoint {checkpoint[:12]} was taken in step {task}/{step}, which plan "
                              f"v{plan.version} does not have; rewind to a checkpoint of this plan "
                              f"(`acode checkpoints {snap.id[:8]}`)", code="ACODE-CLI-004")
    kept = [f"{t}/{s}" for t, s in order[:order.index((task, step))]] if task else []
    before = {t.label for t in plan.tasks if all(f"{t.label}/{s.label}" in kept for s in t.steps)}  # done whole
    where = f"step {task}/{step}" if task else "its first step"
    events: list[Event] = [new_event(SessionResumed, snap, now,
                                     reason=f"rewound to checkpoint {checkpoint[:12]}: from {where}")]
    notes = snap.steering
    if steering:
        event = new_event(Steered, snap, now, text=steering, stage="executor")
        events.append(event)
        notes = [*notes, SteeringNote(id=event.id, text=steering)][-MAX_STEERING_NOTES:]
    running = updated(snap, now, status="running", pause=None, exit_code=None, timeouts=0, error=None,
                      finished_at=None, retries=0, failure_print="", pause_requested_at=0.0, steering=notes,
                      cycles={}, feedback=None)
    return enter(running, "executor", now, events=events, reason=f"rewound to checkpoint {checkpoint[:12]}",
                 kept_steps=kept, completed_tasks=[t for t in snap.completed_tasks if t in before])


def decide_call(snap: SessionSnapshot, decision: str, now: float, *, always: bool = False, reason: str = "",
                by: str = "acode approve", key: str = "") -> Decision:
    """A human decides the call an ``awaiting_approval`` pause waits on: the decision is
    recorded (``approval_decided``, and in the snapshot, where the sandbox checks it) and the
    attempt is retried in the same commit."""
    ask = snap.approval
    if snap.status != "paused" or snap.pause is None or snap.pause.kind != "awaiting_approval" or ask is None:
        state = f"paused for {snap.pause.kind}" if snap.pause else snap.status
        raise TransitionError(f"session {snap.id} is {state}, not waiting for an approval; see `acode show "
                              f"{snap.id}`", code="ACODE-CLI-004")
    if key and key != ask.key:
        raise TransitionError(f"session {snap.id} now waits on another call ({ask.tool} {ask.target!r}); look at it "
                              f"with `acode show {snap.id}` and decide again", code="ACODE-CLI-004")
    if decision not in ("approve", "deny"):
        raise TransitionError(f"decision {decision!r} is neither approve nor deny", code="ACODE-CLI-003")
    verdict: Literal["approve", "deny"] = "approve" if decision == "approve" else "deny"
    record = ApprovalDecision(id=new_id(), key=ask.key, call_hash=ask.call_hash, tool=ask.tool, risk=ask.risk,
                              rule=ask.rule, decision=verdict, always=always and verdict == "approve",
                              reason=reason, by=by, at=now)
    event = new_event(ApprovalDecided, snap, now, key=ask.key, call_hash=ask.call_hash, tool=ask.tool,
                      target=ask.target, risk=ask.risk, rule=ask.rule, decision=verdict, always=record.always,
                      reason=reason, by=by)
    decided = updated(snap, now, approvals=[*snap.approvals, record], approval=None)
    resumed = resume(decided, now)
    return Decision(resumed.snapshot, [event, *resumed.events])


def cancel(snap: SessionSnapshot, reason: str, now: float) -> Decision:
    if snap.status in ("completed", "failed", "cancelled"):
        raise TransitionError(f"session {snap.id} is already {snap.status}", code="ACODE-CLI-004")
    return finish(snap, "cancelled", now, events=[], error=ErrorInfo(code="ACODE-ORCH-007", message=reason),
                  summary=reason)
