"""Drives every running session through its stages, write-ahead.

For each input (a stage's answer, a lost attempt, a timeout; a user's cancel or resume
arriving through :mod:`requests`) the :mod:`machine` decides (:mod:`human`, for a user's);
the decision's snapshot and events are committed through persistence, and only after the
acknowledgement does anything act on it: the next stage is dispatched, the client is
answered. A session has at most one thing in progress: a commit or a dispatch.

Fencing: each dispatch is a request with its own id, for ``(session, stage, visit,
attempt)``. An answer is accepted only for the dispatch the session waits on; anything
else (a late answer from an abandoned attempt) is logged and dropped.

Each dispatch sends the session's plan with every task's status as the session has it
(``completed_tasks``: a stored plan version keeps the status it was recorded with), the
executor the steps the last verification kept, the reviewer the cycle history.

Recovery: when persistence is ready after the coordinator starts, every session still
``running`` is loaded with its plan and dispatched again with ``attempt + 1``; sessions
paused because an actor failed resume by themselves.

A human's hand (issue 11): once a decision with a ``pause_requested`` or ``steered``
event is durable, the stage actor working on the session's dispatch is told
(``PauseWork``, ``SteerWork``, on the supervision channel ``CancelWork`` uses). The
message only makes it sooner: the snapshot holds the request, so no stage is dispatched
while a pause stands, and every dispatch carries the steering notes.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.coordinator import human, machine
from actors.coordinator.hooking import CoordinatorHooks
from actors.coordinator.machine import Decision
from broker.client import Client
from broker.worker import Request
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import (
    AcodeError,
    ErrorInfo,
    RequestTimeout,
    TransitionError,
)
from protocol.messages import (
    Commit,
    Committed,
    Error,
    GetPlan,
    ListSessions,
    Message,
    PauseWork,
    ReplayIndex,
    RunStage,
    SessionAccepted,
    SteerWork,
)
from protocol.plans.plan import TaskPlan, with_status
from protocol.plans.results import Requirement, StageResult
from protocol.plans.stages import TERMINAL
from protocol.sessions.events import PauseRequested, Steered
from protocol.sessions.session import Clarification, SessionSnapshot, SteeringNote

__all__ = ["Orchestrator", "Session", "default_answers"]

NO_ANSWER = ("no answer was given in time: choose the most reasonable option yourself and state it as an "
             "assumption in the plan")
LEFT_TO_YOU = ("the user left this to you: choose the most reasonable option yourself and state it as an "
               "assumption in the plan")


def default_answers(plan: TaskPlan, *, timed_out: bool = True) -> list[Clarification]:
    """Each question's default: the planner's, its first option, else an instruction to assume (FR-069).
    ``timed_out``: the wait ran out; else the user chose the defaults (``acode answer --defaults``)."""
    assume = NO_ANSWER if timed_out else LEFT_TO_YOU
    return [Clarification(label=q.label, question=q.question, defaulted=True, timed_out=timed_out,
                          answer=q.default or (q.options[0] if q.options else assume)) for q in plan.questions]

COMMIT_TIMEOUT = 30.0
REQUIRED_WAIT_S = 10.0  # how long a transition waits for the stage's last writes before the attempt counts as lost
RECENT_END_S = 3_600.0  # a session that ended this recently before a restart gets its missing session_end hooks
_NEEDS = {"planner": {"planner"}, "executor": {"executor", "sandbox"}, "verifier": {"verifier", "sandbox"},
          "reviewer": {"reviewer", "sandbox"}}


@dataclass
class _Dispatch:
    request_id: str
    stage: str
    visit: int
    attempt: int


@dataclass
class Session:
    snapshot: SessionSnapshot
    plan: TaskPlan | None = None
    dispatch: _Dispatch | None = None
    committing: bool = False
    decided_at: float = 0.0  # monotonic time the pending decision was made
    waiters: list[Request] = field(default_factory=list)
    queued: list[Callable[[], None]] = field(default_factory=list)
    replay: ReplayIndex | None = None  # the next dispatch's replay index, read with its transition's commit

    @property
    def id(self) -> str:
        return self.snapshot.id


class Orchestrator:
    def __init__(self, owner: Any, client: Client, *, is_failed: Callable[[str], bool]):
        self.owner = owner
        self.log = owner.log
        self.client = client
        self.is_failed = is_failed
        self.sessions: dict[str, Session] = {}
        self.recovered = False
        self.hooks = CoordinatorHooks(self)  # the user's hooks at the session's turning points

    @property
    def active(self) -> int:
        return sum(1 for s in self.sessions.values() if s.snapshot.status == "running")

    def reply(self, request: Request, body: Message) -> None:
        self.owner.worker.reply(request, body)

    # -- persistence -----------------------------------------------------------------------

    def persist(self, body: Message, on_reply: Callable[[Any, AcodeError | None], None], session_id: str) -> None:
        self.client.send("persistence", body, timeout=COMMIT_TIMEOUT, decoder=codec.PERSISTENCE_REPLY,
                         on_reply=on_reply, session_id=session_id)

    def apply(self, session: Session, decision: Decision, reply_to: Request | None = None,
              requires: Requirement | None = None) -> None:
        """Commit ``decision``; act on it (and answer ``reply_to``) only once it is durable.
        ``requires``: the stage's writes still on their way (``StageResult.requires``); the
        commit is refused until they are stored, and retried meanwhile (see
        :meth:`_send_commit`)."""
        session.committing = True
        session.decided_at = time.monotonic()
        # A transition that dispatches reads what the stage will replay in its own commit, so
        # the stage need not ask before its first model call or read (one round trip less).
        index_for = decision.snapshot.stage if decision.dispatch else None
        commit = Commit(session_id=session.id, events=decision.events, snapshot=decision.snapshot, plan=decision.plan,
                        index_for=index_for, requires=requires)
        self._send_commit(session, commit, decision, reply_to, delay=0.25)

    def _send_commit(self, session: Session, commit: Commit, decision: Decision, reply_to: Request | None,
                     delay: float, since: float | None = None) -> None:
        since = time.monotonic() if since is None else since

        def done(reply: Any, error: AcodeError | None) -> None:
            if error is not None and error.code == "ACODE-STORE-004":
                # The stage's last writes were not stored while persistence held the commit
                # for them (persistence.service.PARK_S): ask again, up to REQUIRED_WAIT_S
                # (a restarted persistence gets the stage's resend within a second or so).
                # If they never come (the stage actor died before they left), the attempt is
                # lost: dispatched again.
                waited = time.monotonic() - since
                if waited >= REQUIRED_WAIT_S:
                    self.log.warning("stage_writes_missing", session_id=session.id, waited_s=round(waited, 3),
                                     error=str(error))
                    session.committing = False
                    now = time.time()
                    self.decide(session, lambda snap: machine.on_lost(
                        snap, "the stage's last writes never became durable", now))
                    return
                self.owner.loop.call_later(0.01, lambda: self._send_commit(session, commit, decision, reply_to,
                                                                           delay, since))
                return
            if error is not None:
                # Same events, same ids: a retried commit never duplicates anything.
                self.log.warning("commit_retrying", session_id=session.id, error=str(error), retry_in_s=delay)
                self.owner.loop.call_later(delay, lambda: self._send_commit(session, commit, decision, reply_to,
                                                                            min(delay * 2, 5.0)))
                return
            session.replay = reply.index if isinstance(reply, Committed) else None
            self._committed(session, decision, reply_to)

        self.persist(commit, done, session.id)

    def _committed(self, session: Session, decision: Decision, reply_to: Request | None) -> None:
        session.committing = False
        session.snapshot = decision.snapshot
        if decision.plan is not None:
            session.plan = decision.plan
        if reply_to is not None:
            self.reply(reply_to, SessionAccepted(session=session.snapshot))
        for request in session.waiters:  # resends of the SubmitTask that created the session
            self.reply(request, SessionAccepted(session=session.snapshot))
        session.waiters.clear()
        self._tell_work(session, decision)
        snapshot = session.snapshot  # the hooks a transition triggers answer before the stage starts
        self.hooks.committed(snapshot, decision.events,
                             (lambda: self._dispatch_held(session, snapshot)) if decision.dispatch else None)
        if not decision.dispatch and session.snapshot.status != "running":
            pause = session.snapshot.pause
            self.log.info("session_settled", session_id=session.id, status=session.snapshot.status,
                          exit_code=session.snapshot.exit_code, pause_kind=pause.kind if pause else None,
                          code=pause.code if pause else None, step=f"{pause.task}/{pause.step}" if pause and pause.task
                          else None)
            self._schedule_defaults(session)
        while session.queued and not session.committing:  # inputs that arrived during the commit
            session.queued.pop(0)()
        if not session.committing and not session.queued and session.snapshot.status in TERMINAL:
            self.sessions.pop(session.id, None)

    def decide(self, session: Session, decide: Callable[[SessionSnapshot], Decision | None],
               reply_to: Request | None = None, requires: Requirement | None = None) -> None:
        """Decide from the session's snapshot *as it is then* and apply the decision.

        One thing at a time per session: while a commit is in flight the input waits. A
        transition the machine refuses is answered as an error when a user asked for it
        (``reply_to``); otherwise it is a bug, and the session fails rather than hangs.
        """
        if session.committing:
            session.queued.append(lambda: self.decide(session, decide, reply_to, requires))
            return
        try:
            decision = decide(session.snapshot)
        except TransitionError as exc:
            if reply_to is not None:
                self.reply(reply_to, Error(error=exc.info()))
                return
            self.log.error("transition_refused", session_id=session.id, error=str(exc))
            decision = machine.on_result(session.snapshot, self._failure(session.snapshot, exc.info()), time.time())
        if decision is not None:
            self.apply(session, decision, reply_to, requires)
        elif reply_to is not None:  # nothing to change (a repeated pause): the session as it is
            self.reply(reply_to, SessionAccepted(session=session.snapshot))

    def abandon(self, session: Session, reason: str = "abandoned by the coordinator") -> None:
        """Stop waiting for the current attempt (its answer, if any, will be dropped) and
        tell the stage actors to stop working on it."""
        if session.dispatch is not None:
            self.client.cancel(session.dispatch.request_id)
            self._cancel_work(session.dispatch, reason)
            session.dispatch = None

    def _cancel_work(self, dispatch: _Dispatch, reason: str) -> None:
        cancel_work = getattr(self.owner, "cancel_work", None)
        if cancel_work is not None:
            cancel_work(dispatch.stage, dispatch.request_id, reason)

    def _tell_work(self, session: Session, decision: Decision) -> None:
        """After a pause request or a steering note is durable, tell the stage at work."""
        dispatch = session.dispatch
        control = getattr(self.owner, "control_work", None)
        if dispatch is None or control is None:
            return
        for event in decision.events:
            if isinstance(event, PauseRequested):
                control(dispatch.stage, PauseWork(request_ids=[dispatch.request_id], reason="acode pause"))
            elif isinstance(event, Steered):
                control(dispatch.stage, SteerWork(request_ids=[dispatch.request_id],
                                                  note=SteeringNote(id=event.id, text=event.text)))

    @staticmethod
    def _failure(snap: SessionSnapshot, error: ErrorInfo) -> StageResult:
        assert snap.stage is not None
        return StageResult(session_id=snap.id, stage=snap.stage, visit=snap.visit, attempt=snap.attempt, ok=False,
                           summary=error.message, error=error)

    # -- clarifications --------------------------------------------------------------------

    def _schedule_defaults(self, session: Session) -> None:
        """A session waiting on the planner's questions goes on with their defaults once
        ``clarification_timeout_s`` has passed since it paused (0: it waits for ever)."""
        snap = session.snapshot
        timeout = snap.settings.clarification_timeout_s
        if snap.status != "paused" or snap.pause is None or snap.pause.kind != "needs_input" or timeout <= 0:
            return
        version = snap.plan_version
        delay = max(0.0, snap.updated_at + timeout - time.time())
        self.log.info("clarification_default_scheduled", session_id=session.id, in_s=round(delay, 1))
        self.owner.loop.call_later(delay, lambda: self._answer_with_defaults(session.id, version))

    def _answer_with_defaults(self, session_id: str, version: int) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.plan is None:
            return
        answers = default_answers(session.plan)

        def decide(snap: SessionSnapshot) -> Decision | None:
            if snap.status != "paused" or snap.pause is None or snap.pause.kind != "needs_input" \
                    or snap.plan_version != version:
                return None  # answered (or cancelled) in the meantime
            self.log.info("clarification_defaulted", session_id=snap.id, questions=len(answers))
            return human.resume(snap, time.time(), answers)

        self.decide(session, decide)

    # -- dispatch --------------------------------------------------------------------------

    def _dispatch_held(self, session: Session, snapshot: SessionSnapshot) -> None:
        """The dispatch a decision made, once its hooks answered: unless the session moved on
        meanwhile (a pause, a cancel, another dispatch)."""
        current = session.snapshot
        if session.dispatch is None and current.status == "running" \
                and (current.stage, current.attempt) == (snapshot.stage, snapshot.attempt):
            self._dispatch(session)

    def _dispatch(self, session: Session) -> None:
        snap = session.snapshot
        assert snap.stage is not None
        failed = sorted(a for a in _NEEDS[snap.stage] if self.is_failed(a))
        if failed:
            self._pause_for(session, failed[0], "it is failed")
            return
        if not os.path.isdir(snap.workspace):  # the one error no stage retry or pause can help
            gone = ErrorInfo(code="ACODE-ORCH-009", message=f"the workspace {snap.workspace} is gone; restore it "
                                                            f"and `acode resume {snap.id}`, or `acode cancel`")
            self.decide(session, lambda current: machine.on_result(current, self._failure(current, gone), time.time()))
            return
        request_id = new_id()
        plan = with_status(session.plan, snap.completed_tasks) if session.plan is not None else None
        body = RunStage(session_id=snap.id, stage=snap.stage, visit=snap.visit, attempt=snap.attempt, task=snap.task,
                        workspace=snap.workspace, settings=snap.settings, plan=plan, feedback=snap.feedback,
                        previous=snap.last_result, clarifications=snap.clarifications,
                        kept_steps=snap.kept_steps if snap.stage == "executor" else [],
                        history=snap.history if snap.stage == "reviewer" else [], steering=snap.steering,
                        approvals=snap.approvals if snap.stage in ("executor", "verifier") else [],
                        replay=session.replay, running_s=snap.running_s)
        session.replay = None  # read for this dispatch only
        session.dispatch = _Dispatch(request_id, snap.stage, snap.visit, snap.attempt)
        self.client.send(snap.stage, body, timeout=snap.settings.stage_timeouts.get(snap.stage, 300.0),
                         decoder=codec.STAGE_REPLY, request_id=request_id, session_id=snap.id,
                         attempt=snap.attempt, retry_on_lost=False,
                         on_reply=functools.partial(self._on_stage_reply, snap.id, request_id))
        # transition_ms: from the answer that led here, through the durable commit, to this dispatch
        self.log.info("stage_dispatched", session_id=snap.id, stage=snap.stage, visit=snap.visit,
                      attempt=snap.attempt, request_id=request_id,
                      transition_ms=round((time.monotonic() - session.decided_at) * 1000, 3))

    def _on_stage_reply(self, session_id: str, request_id: str, reply: Any, error: AcodeError | None) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.dispatch is None or session.dispatch.request_id != request_id:
            self.log.info("stale_answer_dropped", session_id=session_id, request_id=request_id)
            return
        dispatch, session.dispatch = session.dispatch, None
        now = time.time()
        if error is None:
            result: StageResult = reply.result
            fence = (result.session_id, result.stage, result.visit, result.attempt)
            if fence != (session.id, dispatch.stage, dispatch.visit, dispatch.attempt):
                self.log.warning("fenced_answer_dropped", session_id=session_id, got=list(fence))
                self.decide(session, lambda snap: machine.on_lost(snap, "answer for another attempt", now))
                return
            self.decide(session, lambda snap: machine.on_result(snap, result, now), requires=result.requires)
        elif isinstance(error, RequestTimeout):
            self._cancel_work(dispatch, "the stage timed out")
            self.decide(session, lambda snap: machine.on_timeout(snap, now))
        elif error.retryable:
            why = f"{dispatch.stage} attempt {dispatch.attempt} lost: {error.message}"
            self.decide(session, lambda snap: machine.on_lost(snap, why, now))
        else:
            info = error.info()
            self.decide(session, lambda snap: machine.on_result(snap, self._failure(snap, info), now))

    # -- supervision events ----------------------------------------------------------------

    def on_child_lost(self, actor: str, busy: list[str], reason: str) -> None:
        """A child exited: every attempt it was working on is dispatched again."""
        for session in list(self.sessions.values()):
            dispatch = session.dispatch
            if dispatch is not None and dispatch.request_id in busy:
                self.abandon(session)
                why = f"{reason} during {dispatch.stage} attempt {dispatch.attempt}"

                def lost(snap: SessionSnapshot, why: str = why) -> Decision | None:
                    return machine.on_lost(snap, why, time.time())

                self.decide(session, lost)

    def on_actor_failed(self, actor: str, reason: str) -> None:
        """An actor is past its restart intensity: pause the sessions that need it."""
        for session in list(self.sessions.values()):
            stage = session.snapshot.stage
            if stage is not None and (actor in _NEEDS[stage] or actor in ("broker", "persistence")):
                self._pause_for(session, actor, reason)

    def _pause_for(self, session: Session, actor: str, reason: str) -> None:
        message = (f"actor {actor} failed ({reason}); see `acode status` and its log, fix the cause, then "
                   f"`acode down` and `acode up` (the session resumes by itself)")

        def decide(snap: SessionSnapshot) -> Decision | None:
            if snap.status != "running":
                return None
            self.abandon(session)
            return machine.pause(snap, "actor_failed", "ACODE-SUP-001", message, time.time())

        self.decide(session, decide)

    # -- recovery --------------------------------------------------------------------------

    def recover(self) -> None:
        """Load unfinished sessions once persistence is up, and dispatch them again."""
        if self.recovered:
            return
        self.recovered = True

        def listed(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.log.error("recovery_failed", error=str(error))
                self.recovered = False
                self.owner.loop.call_later(1.0, self.recover)
                return
            for snap in reply.sessions:
                resumable = snap.status == "running" or (snap.pause is not None and snap.pause.kind == "actor_failed")
                waiting = (snap.pause is not None and snap.pause.kind == "needs_input"
                           and snap.settings.clarification_timeout_s > 0)
                if (resumable or waiting) and snap.id not in self.sessions:
                    self._recover_one(snap)
                self.hooks.recover(snap)

        self.client.send("persistence", ListSessions(statuses=["running", "paused"], limit=10_000), timeout=60,
                         decoder=codec.PERSISTENCE_REPLY, on_reply=listed)

        def ended(reply: Any, error: AcodeError | None) -> None:
            """Sessions that ended shortly before the restart: their session_end hooks may not have run."""
            if error is None:
                for snap in reply.sessions:
                    if snap.finished_at is not None and time.time() - snap.finished_at < RECENT_END_S:
                        self.hooks.recover(snap)

        self.client.send("persistence", ListSessions(statuses=["completed", "failed", "cancelled"], limit=50),
                         timeout=60, decoder=codec.PERSISTENCE_REPLY, on_reply=ended)

    def _recover_one(self, snap: SessionSnapshot) -> None:
        session = Session(snapshot=snap, committing=True)  # nothing else may act before the plan is loaded
        self.sessions[snap.id] = session

        def resume(plan: TaskPlan | None) -> None:
            session.plan = plan
            session.committing = False
            now = time.time()
            if snap.pause is not None and snap.pause.kind == "needs_input":
                self._schedule_defaults(session)
            elif snap.status == "paused":
                self.log.info("session_resumed_after_failure", session_id=snap.id)
                self.decide(session, lambda current: human.resume(current, now))
            else:
                self.log.info("session_recovered", session_id=snap.id, stage=snap.stage, attempt=snap.attempt)
                self.decide(session, lambda current: machine.recover(current, now))

        if not snap.plan_version:
            resume(None)
            return

        def loaded(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.log.error("plan_load_failed", session_id=snap.id, error=str(error))
                self.owner.loop.call_later(1.0, lambda: self.persist(
                    GetPlan(session_id=snap.id, version=snap.plan_version), loaded, snap.id))
                return
            resume(reply.plan)

        self.persist(GetPlan(session_id=snap.id, version=snap.plan_version), loaded, snap.id)
