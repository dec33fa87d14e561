"""The coordinator service's session requests: submit, cancel, resume, and a human's
hand on a session: pause, steer, approve (a plan under review), replan, decide an approval.

Each is answered once the decision it caused is durable (the orchestrator commits, then
replies). A submit is idempotent by the client's session id, also across a coordinator
restart (the session is looked up in persistence first). Cancel and resume load a
session that is not in memory; a state that does not allow the request (cancelling a
finished session, resuming a running one) is answered with ACODE-CLI-004. A resume may
carry setting overrides (``acode resume --max-turns 20``): :mod:`human` applies them and
records them as an event in the same commit as the resume.

One session per workspace (seed 001 §2.3): an unfinished session (running or paused)
holds its workspace, and a submit for the same directory is refused with the holder's id
and what to do (ACODE-CLI-006), unless it says ``force``; the new session's
``session_created`` event then names the holder it overrode. The hold is nothing but
the holder's status, read from persistence (and from memory, for a submit racing another),
so it ends with the session and a stale one cannot exist.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from actors.coordinator import human, machine
from actors.coordinator.machine import Decision
from actors.coordinator.orchestrator import Orchestrator, Session
from broker.worker import Request
from protocol.errors import AcodeError, CliError, ModelError, NotFoundError
from protocol.messages import (
    ApprovePlan,
    CancelSession,
    DecideApproval,
    Error,
    GetPlan,
    GetSession,
    ListSessions,
    Message,
    PauseSession,
    ReplanSession,
    ResumeSession,
    RewindSession,
    SessionAccepted,
    SteerSession,
    SubmitTask,
)
from protocol.plans.script import load_script
from protocol.plans.stages import STAGES
from protocol.plans.task import check_task
from protocol.sessions.session import ScriptedProvider, SessionSnapshot

__all__ = ["SessionRequests"]

_HOLDING = ("running", "paused")  # the statuses of a session that holds its workspace


def _same_dir(a: str, b: str) -> bool:
    """Whether two workspace paths name one directory (a symlinked path included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


_CHECKED_SCRIPTS: OrderedDict[bytes, None] = OrderedDict()  # sha256 of script texts that load
_CHECKED_LIMIT = 64


def _check_script(provider: ScriptedProvider) -> None:
    """Refuse a scripted model file that does not load (ACODE-LLM-004). A text that loaded
    before is not parsed again: a script of a few hundred responses takes milliseconds to
    parse, on the coordinator's loop, for every submit that reuses it."""
    digest = hashlib.sha256(provider.script_yaml.encode("utf-8", "surrogatepass")).digest()
    if digest in _CHECKED_SCRIPTS:
        _CHECKED_SCRIPTS.move_to_end(digest)
        return
    load_script(provider.script_yaml, name=provider.script_name or "<script>")
    _CHECKED_SCRIPTS[digest] = None
    while len(_CHECKED_SCRIPTS) > _CHECKED_LIMIT:
        _CHECKED_SCRIPTS.popitem(last=False)


class SessionRequests:
    def __init__(self, orchestrator: Orchestrator):
        self.orchestrator = orchestrator

    def submit(self, request: Request, body: SubmitTask) -> Message | None:
        """Start a session (idempotent by the client's session id); reply once durable."""
        existing = self.orchestrator.sessions.get(body.session_id)
        if existing is not None:
            if existing.committing:
                existing.waiters.append(request)
                return None
            return SessionAccepted(session=existing.snapshot)
        self._validate(body)

        def looked_up(reply: Any, error: AcodeError | None) -> None:
            if error is None:
                self.orchestrator.reply(request, SessionAccepted(session=reply.session))  # a resend after we restarted
            elif isinstance(error, NotFoundError):
                self._check_hold(request, body)
            else:
                self.orchestrator.reply(request, Error(error=error.info()))

        self.orchestrator.persist(GetSession(session_id=body.session_id), looked_up, body.session_id)
        return None

    @staticmethod
    def _validate(body: SubmitTask) -> None:
        check_task(body.task)  # the CLI checked it already; another client may not have
        if not os.path.isabs(body.workspace) or not os.path.isdir(body.workspace):
            raise CliError(f"workspace {body.workspace!r} is not an existing directory (absolute path); "
                           "create it or pass --workspace DIR", code="ACODE-CLI-003")
        provider = body.settings.provider
        if provider is None:
            raise ModelError("no model configured; pass --provider ollama --model NAME, or set model: in the config",
                             code="ACODE-LLM-001")
        if isinstance(provider, ScriptedProvider):
            _check_script(provider)
        missing = [s for s in STAGES if s not in body.settings.stage_timeouts]
        if missing:
            raise CliError(f"settings lack a timeout for {', '.join(missing)}", code="ACODE-CFG-001")

    def _check_hold(self, request: Request, body: SubmitTask) -> None:
        """Create the session unless an unfinished one holds its workspace (and ``force`` is off)."""

        def listed(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.orchestrator.reply(request, Error(error=error.info()))
                return
            holders = [s for s in reply.sessions if s.id != body.session_id and _same_dir(s.workspace, body.workspace)]
            self._create(request, body, holders[0] if holders else None)

        self.orchestrator.persist(ListSessions(statuses=list(_HOLDING), limit=100_000), listed, body.session_id)

    def _create(self, request: Request, body: SubmitTask, holder: SessionSnapshot | None = None) -> None:
        if body.session_id in self.orchestrator.sessions:  # two resends raced through the lookup
            self.orchestrator.sessions[body.session_id].waiters.append(request)
            return
        holder = holder or next((s.snapshot for s in self.orchestrator.sessions.values()
                                 if s.snapshot.status in _HOLDING and _same_dir(s.snapshot.workspace, body.workspace)),
                                None)  # a submit that raced ours through the lookups
        if holder is not None and not body.force:
            what = f"paused ({holder.pause.kind})" if holder.status == "paused" and holder.pause else holder.status
            error = CliError(
                f"workspace {body.workspace} is held by session {holder.id} ({what}); one session works on a "
                f"workspace at a time: follow it with `acode attach {holder.id}`, continue it with `acode resume "
                f"{holder.id}` or end it with `acode cancel {holder.id}`; or start anyway with --force",
                code="ACODE-CLI-006")
            self.orchestrator.reply(request, Error(error=error.info()))
            return
        decision = machine.create(body.session_id, body.task, body.workspace, body.settings, time.time(),
                                  overrode_hold=holder.id if holder is not None else "")
        if holder is not None:
            self.orchestrator.log.warning("workspace_hold_overridden", session_id=body.session_id, holder=holder.id,
                                          workspace=body.workspace)
        session = Session(snapshot=decision.snapshot)
        self.orchestrator.sessions[session.id] = session
        self.orchestrator.log.info("session_submitted", session_id=session.id, workspace=body.workspace)
        self.orchestrator.apply(session, decision, request)

    def _load(self, request: Request, session_id: str, then: Callable[[Session], None]) -> None:
        session = self.orchestrator.sessions.get(session_id)
        if session is not None:
            then(session)
            return

        def found(reply: Any, error: AcodeError | None) -> None:
            if isinstance(error, NotFoundError):
                error = CliError(f"session {session_id} not found; list them with `acode sessions`",
                                 code="ACODE-CLI-002")
            if error is not None:
                self.orchestrator.reply(request, Error(error=error.info()))
                return
            loaded = Session(snapshot=reply.session)
            if loaded.snapshot.status in ("running", "paused", "failed") \
                    and loaded.snapshot.id not in self.orchestrator.sessions:
                self.orchestrator.sessions[loaded.id] = loaded
            then(self.orchestrator.sessions.get(loaded.id, loaded))

        self.orchestrator.persist(GetSession(session_id=session_id), found, session_id)

    def cancel(self, request: Request, body: CancelSession) -> None:
        def decide(snap: SessionSnapshot, session: Session) -> Decision:
            decision = human.cancel(snap, body.reason, time.time())  # refused when already finished
            self.orchestrator.abandon(session)
            return decision

        def act(session: Session) -> None:
            self.orchestrator.decide(session, lambda snap: decide(snap, session), reply_to=request)

        self._load(request, body.session_id, act)

    def resume(self, request: Request, body: ResumeSession) -> None:
        def act(session: Session) -> None:
            def go() -> None:
                self.orchestrator.decide(
                    session, lambda snap: human.resume(snap, time.time(), body.answers, body.overrides),
                    reply_to=request)

            if session.snapshot.status == "failed":  # it held nothing while failed: another may hold it now
                self._unless_held(request, session.snapshot, lambda: self._with_plan(session, go))
            else:
                self._with_plan(session, go)

        self._load(request, body.session_id, act)

    def rewind(self, request: Request, body: RewindSession) -> None:
        """``acode rewind``: the executor goes on from the checkpoint's step (the CLI had the
        sandbox restore the workspace first)."""
        def act(session: Session) -> None:
            def decide(snap: SessionSnapshot) -> Decision:
                decision = human.rewind(snap, session.plan, time.time(), checkpoint=body.checkpoint, task=body.task,
                                        step=body.step, steering=body.steering)
                self.orchestrator.sessions.setdefault(session.id, session)  # a completed one is active again
                return decision

            def go() -> None:
                self.orchestrator.decide(session, decide, reply_to=request)

            if session.snapshot.status in ("failed", "completed"):  # it held nothing: another may hold it now
                self._unless_held(request, session.snapshot, lambda: self._with_plan(session, go))
            else:
                self._with_plan(session, go)

        self._load(request, body.session_id, act)

    def _with_plan(self, session: Session, then: Callable[[], None]) -> None:
        """``then()`` once the session's plan is loaded (a session loaded from persistence has none yet)."""
        if session.plan is None and session.snapshot.plan_version:
            def loaded(reply: Any, error: AcodeError | None) -> None:
                session.plan = reply.plan if error is None else None
                then()

            self.orchestrator.persist(GetPlan(session_id=session.id, version=session.snapshot.plan_version),
                                      loaded, session.id)
        else:
            then()

    def decide_approval(self, request: Request, body: DecideApproval) -> None:
        """Record a human's decision on the call a session waits on, and retry its attempt
        (one commit: answered once durable; a crash before it loses only this request)."""

        def decide(snap: SessionSnapshot) -> Decision:
            return human.decide_call(snap, body.decision, time.time(), always=body.always, reason=body.reason,
                                     by=body.by, key=body.key)

        self._decide_with_plan(request, body.session_id, decide)

    def _act(self, request: Request, session_id: str, decide: Callable[[SessionSnapshot], Decision | None]) -> None:
        """Load the session and apply ``decide`` to it, answering ``request`` once durable."""
        self._load(request, session_id, lambda session: self.orchestrator.decide(session, decide, reply_to=request))

    def pause(self, request: Request, body: PauseSession) -> None:
        """``acode pause``: recorded, then the stage at work is told (a repeat changes nothing)."""
        self._act(request, body.session_id, lambda snap: human.request_pause(snap, time.time()))

    def steer(self, request: Request, body: SteerSession) -> None:
        """``acode steer``: kept in the session, then the stage at work is told."""
        self._act(request, body.session_id, lambda snap: human.steer(snap, body.text, time.time()))

    def approve_plan(self, request: Request, body: ApprovePlan) -> None:
        """``acode approve`` of a plan under review: the executor starts on it."""
        self._decide_with_plan(request, body.session_id, lambda snap: human.approve_plan(snap, time.time()))

    def replan(self, request: Request, body: ReplanSession) -> None:
        """``acode replan``: the planner plans the next version with the user's feedback."""
        self._decide_with_plan(request, body.session_id,
                               lambda snap: human.replan(snap, body.feedback, time.time()))

    def _decide_with_plan(self, request: Request, session_id: str,
                          decide: Callable[[SessionSnapshot], Decision | None]) -> None:
        """As :meth:`_act`, with the session's current plan loaded first (the dispatch sends it)."""
        self._load(request, session_id, lambda session: self._with_plan(
            session, lambda: self.orchestrator.decide(session, decide, reply_to=request)))

    def _unless_held(self, request: Request, snap: SessionSnapshot, then: Callable[[], None]) -> None:
        """``then()``, unless another unfinished session holds ``snap``'s workspace (ACODE-CLI-006)."""

        def listed(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.orchestrator.reply(request, Error(error=error.info()))
                return
            holders = [s for s in reply.sessions if s.id != snap.id and _same_dir(s.workspace, snap.workspace)]
            if not holders:
                then()
                return
            holder = holders[0]
            error_ = CliError(f"workspace {snap.workspace} is held by session {holder.id} ({holder.status}); finish "
                              f"or `acode cancel {holder.id}` it, then resume {snap.id}", code="ACODE-CLI-006")
            self.orchestrator.reply(request, Error(error=error_.info()))

        self.orchestrator.persist(ListSessions(statuses=list(_HOLDING), limit=100_000), listed, snap.id)
