"""Drives every running session through its stages, write-ahead.

For each input (a stage's answer, a lost attempt, a timeout, a user's cancel or resume)
the :mod:`machine` decides; the decision's snapshot and events are committed through
persistence, and only after the acknowledgement does anything act on it: the next stage
is dispatched, the client is answered. A session has at most one thing in progress: a
commit or a dispatch.

Fencing: each dispatch is a request with its own id, for ``(session, stage, visit,
attempt)``. An answer is accepted only for the dispatch the session waits on; anything
else (a late answer from an abandoned attempt) is logged and dropped.

Recovery: when persistence is ready after the coordinator starts, every session still
``running`` is loaded with its plan and dispatched again with ``attempt + 1``; sessions
paused because an actor failed resume by themselves.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.coordinator import machine
from actors.coordinator.machine import Decision
from broker.client import Client
from broker.worker import Request
from protocol import codec
from protocol.errors import (
    AcodeError,
    CliError,
    ErrorInfo,
    ModelError,
    NotFoundError,
    RequestTimeout,
    TransitionError,
)
from protocol.ids import new_id
from protocol.messages import (
    CancelSession,
    Commit,
    Error,
    GetPlan,
    GetSession,
    ListSessions,
    Message,
    ResumeSession,
    RunStage,
    SessionAccepted,
    SubmitTask,
)
from protocol.plan import TaskPlan
from protocol.results import StageResult
from protocol.script import load_script
from protocol.session import ScriptedProvider, SessionSnapshot
from protocol.stages import STAGES, TERMINAL

__all__ = ["Orchestrator"]

COMMIT_TIMEOUT = 30.0
MAX_TASK_CHARS = 10_000
_NEEDS = {"planner": {"planner"}, "executor": {"executor", "sandbox"}, "verifier": {"verifier", "sandbox"},
          "reviewer": {"reviewer", "sandbox"}}


@dataclass
class _Dispatch:
    request_id: str
    stage: str
    visit: int
    attempt: int


@dataclass
class _Session:
    snapshot: SessionSnapshot
    plan: TaskPlan | None = None
    dispatch: _Dispatch | None = None
    committing: bool = False
    decided_at: float = 0.0  # monotonic time the pending decision was made
    waiters: list[Request] = field(default_factory=list)
    queued: list[Callable[[], None]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.snapshot.id


class Orchestrator:
    def __init__(self, owner: Any, client: Client, *, is_failed: Callable[[str], bool]):
        self.owner = owner
        self.log = owner.log
        self.client = client
        self.is_failed = is_failed
        self.sessions: dict[str, _Session] = {}
        self.recovered = False

    @property
    def active(self) -> int:
        return sum(1 for s in self.sessions.values() if s.snapshot.status == "running")

    def _reply(self, request: Request, body: Message) -> None:
        self.owner.worker.reply(request, body)

    # -- persistence -----------------------------------------------------------------------

    def _persist(self, body: Message, on_reply: Callable[[Any, AcodeError | None], None], session_id: str) -> None:
        self.client.send("persistence", body, timeout=COMMIT_TIMEOUT, decoder=codec.PERSISTENCE_REPLY,
                         on_reply=on_reply, session_id=session_id)

    def _apply(self, session: _Session, decision: Decision, reply_to: Request | None = None) -> None:
        """Commit ``decision``; act on it (and answer ``reply_to``) only once it is durable."""
        session.committing = True
        session.decided_at = time.monotonic()
        commit = Commit(session_id=session.id, events=decision.events, snapshot=decision.snapshot, plan=decision.plan)
        self._send_commit(session, commit, decision, reply_to, delay=0.25)

    def _send_commit(self, session: _Session, commit: Commit, decision: Decision, reply_to: Request | None,
                     delay: float) -> None:
        def done(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                # Same events, same ids: a retried commit never duplicates anything.
                self.log.warning("commit_retrying", session_id=session.id, error=str(error), retry_in_s=delay)
                self.owner.loop.call_later(delay, lambda: self._send_commit(session, commit, decision, reply_to,
                                                                            min(delay * 2, 5.0)))
                return
            self._committed(session, decision, reply_to)

        self._persist(commit, done, session.id)

    def _committed(self, session: _Session, decision: Decision, reply_to: Request | None) -> None:
        session.committing = False
        session.snapshot = decision.snapshot
        if decision.plan is not None:
            session.plan = decision.plan
        if reply_to is not None:
            self._reply(reply_to, SessionAccepted(session=session.snapshot))
        for request in session.waiters:  # resends of the SubmitTask that created the session
            self._reply(request, SessionAccepted(session=session.snapshot))
        session.waiters.clear()
        if decision.dispatch:
            self._dispatch(session)
        elif session.snapshot.status != "running":
            self.log.info("session_settled", session_id=session.id, status=session.snapshot.status,
                          exit_code=session.snapshot.exit_code)
        while session.queued and not session.committing:  # inputs that arrived during the commit
            session.queued.pop(0)()
        if not session.committing and not session.queued and session.snapshot.status in TERMINAL:
            self.sessions.pop(session.id, None)

    def _decide(self, session: _Session, decide: Callable[[SessionSnapshot], Decision | None],
                reply_to: Request | None = None) -> None:
        """Decide from the session's snapshot *as it is then* and apply the decision.

        One thing at a time per session: while a commit is in flight the input waits. A
        transition the machine refuses is answered as an error when a user asked for it
        (``reply_to``); otherwise it is a bug, and the session fails rather than hangs.
        """
        if session.committing:
            session.queued.append(lambda: self._decide(session, decide, reply_to))
            return
        try:
            decision = decide(session.snapshot)
        except TransitionError as exc:
            if reply_to is not None:
                self._reply(reply_to, Error(error=exc.info()))
                return
            self.log.error("transition_refused", session_id=session.id, error=str(exc))
            decision = machine.on_result(session.snapshot, self._failure(session.snapshot, exc.info()), time.time())
        if decision is not None:
            self._apply(session, decision, reply_to)

    def _abandon(self, session: _Session) -> None:
        """Stop waiting for the current attempt (its answer, if any, will be dropped)."""
        if session.dispatch is not None:
            self.client.cancel(session.dispatch.request_id)
            session.dispatch = None

    @staticmethod
    def _failure(snap: SessionSnapshot, error: ErrorInfo) -> StageResult:
        assert snap.stage is not None
        return StageResult(session_id=snap.id, stage=snap.stage, visit=snap.visit, attempt=snap.attempt, ok=False,
                           summary=error.message, error=error)

    # -- dispatch --------------------------------------------------------------------------

    def _dispatch(self, session: _Session) -> None:
        snap = session.snapshot
        assert snap.stage is not None
        failed = sorted(a for a in _NEEDS[snap.stage] if self.is_failed(a))
        if failed:
            self._pause_for(session, failed[0], "it is failed")
            return
        request_id = new_id()
        body = RunStage(session_id=snap.id, stage=snap.stage, visit=snap.visit, attempt=snap.attempt, task=snap.task,
                        workspace=snap.workspace, settings=snap.settings, plan=session.plan, feedback=snap.feedback,
                        previous=snap.last_result)
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
                self._decide(session, lambda snap: machine.on_lost(snap, "answer for another attempt", now))
                return
            self._decide(session, lambda snap: machine.on_result(snap, result, now))
        elif isinstance(error, RequestTimeout):
            self._decide(session, lambda snap: machine.on_timeout(snap, now))
        elif error.retryable:
            why = f"{dispatch.stage} attempt {dispatch.attempt} lost: {error.message}"
            self._decide(session, lambda snap: machine.on_lost(snap, why, now))
        else:
            info = error.info()
            self._decide(session, lambda snap: machine.on_result(snap, self._failure(snap, info), now))

    # -- supervision events ----------------------------------------------------------------

    def on_child_lost(self, actor: str, busy: list[str], reason: str) -> None:
        """A child exited: every attempt it was working on is dispatched again."""
        for session in list(self.sessions.values()):
            dispatch = session.dispatch
            if dispatch is not None and dispatch.request_id in busy:
                self._abandon(session)
                why = f"{reason} during {dispatch.stage} attempt {dispatch.attempt}"
                self._decide(session, lambda snap, why=why: machine.on_lost(snap, why, time.time()))

    def on_actor_failed(self, actor: str, reason: str) -> None:
        """An actor is past its restart intensity: pause the sessions that need it."""
        for session in list(self.sessions.values()):
            stage = session.snapshot.stage
            if stage is not None and (actor in _NEEDS[stage] or actor in ("broker", "persistence")):
                self._pause_for(session, actor, reason)

    def _pause_for(self, session: _Session, actor: str, reason: str) -> None:
        message = (f"actor {actor} failed ({reason}); see `acode status` and its log, fix the cause, then "
                   f"`acode down` and `acode up` (the session resumes by itself)")

        def decide(snap: SessionSnapshot) -> Decision | None:
            if snap.status != "running":
                return None
            self._abandon(session)
            return machine.pause(snap, "actor_failed", "ACODE-SUP-001", message, time.time())

        self._decide(session, decide)

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
                if resumable and snap.id not in self.sessions:
                    self._recover_one(snap)

        self.client.send("persistence", ListSessions(statuses=["running", "paused"], limit=10_000), timeout=60,
                         decoder=codec.PERSISTENCE_REPLY, on_reply=listed)

    def _recover_one(self, snap: SessionSnapshot) -> None:
        session = _Session(snapshot=snap, committing=True)  # nothing else may act before the plan is loaded
        self.sessions[snap.id] = session

        def resume(plan: TaskPlan | None) -> None:
            session.plan = plan
            session.committing = False
            now = time.time()
            if snap.status == "paused":
                self.log.info("session_resumed_after_failure", session_id=snap.id)
                self._decide(session, lambda current: machine.resume(current, now))
            else:
                self.log.info("session_recovered", session_id=snap.id, stage=snap.stage, attempt=snap.attempt)
                self._decide(session, lambda current: machine.recover(current, now))

        if not snap.plan_version:
            resume(None)
            return

        def loaded(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.log.error("plan_load_failed", session_id=snap.id, error=str(error))
                self.owner.loop.call_later(1.0, lambda: self._persist(
                    GetPlan(session_id=snap.id, version=snap.plan_version), loaded, snap.id))
                return
            resume(reply.plan)

        self._persist(GetPlan(session_id=snap.id, version=snap.plan_version), loaded, snap.id)

    # -- client requests -------------------------------------------------------------------

    def submit(self, request: Request, body: SubmitTask) -> Message | None:
        """Start a session (idempotent by the client's session id); reply once durable."""
        existing = self.sessions.get(body.session_id)
        if existing is not None:
            if existing.committing:
                existing.waiters.append(request)
                return None
            return SessionAccepted(session=existing.snapshot)
        self._validate(body)

        def looked_up(reply: Any, error: AcodeError | None) -> None:
            if error is None:
                self._reply(request, SessionAccepted(session=reply.session))  # a resend after we restarted
            elif isinstance(error, NotFoundError):
                self._create(request, body)
            else:
                self._reply(request, Error(error=error.info()))

        self._persist(GetSession(session_id=body.session_id), looked_up, body.session_id)
        return None

    @staticmethod
    def _validate(body: SubmitTask) -> None:
        if len(body.task) > MAX_TASK_CHARS:
            raise CliError(f"the task is {len(body.task)} characters; at most {MAX_TASK_CHARS} are accepted, "
                           "put details in a file of the workspace and refer to it", code="ACODE-PLAN-001")
        if not os.path.isabs(body.workspace) or not os.path.isdir(body.workspace):
            raise CliError(f"workspace {body.workspace!r} is not an existing directory (absolute path); "
                           "create it or pass --workspace DIR", code="ACODE-CLI-003")
        provider = body.settings.provider
        if provider is None:
            raise ModelError("no model configured; pass --provider scripted --script FILE", code="ACODE-LLM-001")
        if isinstance(provider, ScriptedProvider):
            load_script(provider.script_yaml, name=provider.script_name or "<script>")
        missing = [s for s in STAGES if s not in body.settings.stage_timeouts]
        if missing:
            raise CliError(f"settings lack a timeout for {', '.join(missing)}", code="ACODE-CFG-001")

    def _create(self, request: Request, body: SubmitTask) -> None:
        if body.session_id in self.sessions:  # two resends raced through the lookup
            self.sessions[body.session_id].waiters.append(request)
            return
        decision = machine.create(body.session_id, body.task, body.workspace, body.settings, time.time())
        session = _Session(snapshot=decision.snapshot)
        self.sessions[session.id] = session
        self.log.info("session_submitted", session_id=session.id, workspace=body.workspace)
        self._apply(session, decision, request)

    def _load(self, request: Request, session_id: str, then: Callable[[_Session], None]) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            then(session)
            return

        def found(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self._reply(request, Error(error=error.info() if not isinstance(error, NotFoundError) else ErrorInfo(
                    code="ACODE-CLI-002", message=f"session {session_id} not found; list them with `acode sessions`")))
                return
            loaded = _Session(snapshot=reply.session)
            if loaded.snapshot.status in ("running", "paused") and loaded.snapshot.id not in self.sessions:
                self.sessions[loaded.id] = loaded
            then(self.sessions.get(loaded.id, loaded))

        self._persist(GetSession(session_id=session_id), found, session_id)

    def cancel(self, request: Request, body: CancelSession) -> None:
        def decide(snap: SessionSnapshot, session: _Session) -> Decision:
            decision = machine.cancel(snap, body.reason, time.time())  # refused when already finished
            self._abandon(session)
            return decision

        self._load(request, body.session_id,
                    lambda session: self._decide(session, lambda snap: decide(snap, session), reply_to=request))

    def resume(self, request: Request, body: ResumeSession) -> None:
        def act(session: _Session) -> None:
            def go(plan: TaskPlan | None) -> None:
                session.plan = plan
                self._decide(session, lambda snap: machine.resume(snap, time.time()), reply_to=request)

            if session.plan is None and session.snapshot.plan_version:
                self._persist(GetPlan(session_id=session.id, version=session.snapshot.plan_version),
                              lambda reply, error: go(reply.plan if error is None else None), session.id)
            else:
                go(session.plan)

        self._load(request, body.session_id, act)
