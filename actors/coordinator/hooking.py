"""The hooks of a session's turning points the coordinator sees: session and stage start and end, pause, resume.

Each trigger is an event the coordinator committed (:data:`TRIGGERS`): ``session_created``
→ ``session_start``, a transition into a stage → ``stage_start``, ``stage_finished`` →
``stage_end``, ``session_paused`` → ``on_pause`` (every pause kind: an approval, a plan
review, an escalation, a budget...), ``session_resumed`` → ``on_resume``,
``session_finished`` → ``session_end``. Once the event is durable, the session's hooks
for that point run on one worker thread, in the order the events came (:mod:`actors.hooks`
runs each), and what they answered is committed as ``hook_ran`` events, under ids stable
for the trigger (its event id is the occurrence), then acted on as the user's own
command would be: ``pause`` (and ``confirm``) is ``acode pause``, ``abort`` is ``acode
cancel``, ``modify_context`` is ``acode steer``.

After a coordinator restart, :meth:`CoordinatorHooks.recover` looks at each session
with hooks (running, paused, or ended within the last hour): a trigger whose ``hook_ran``
events are missing fires then, so a crash loses no hook; one whose are recorded does not
fire again. A script or webhook's intent (``hook_started``) is made durable before it runs:
one found without its result may have run before the crash, so it is not run again but
recorded failed, its outcome unknown (:func:`actors.hooks.run_point`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from actors import hooks as running
from actors.coordinator import human, machine
from actors.coordinator.machine import Decision
from protocol.errors import AcodeError, TransitionError
from protocol.messages import Commit, GetEvents
from protocol.plans.stages import STAGES
from protocol.policy.hooks import HookDecision, HookPoint, point_hooks
from protocol.sessions.events import (
    Event,
    HookRan,
    HookStarted,
    SessionCreated,
    SessionFinished,
    SessionPaused,
    SessionResumed,
    StageFinished,
    Transitioned,
)
from protocol.sessions.session import MAX_STEERING_CHARS, SessionSnapshot

__all__ = ["INTENT_WAIT_S", "CoordinatorHooks", "trigger"]

INTENT_WAIT_S = 30.0


def trigger(event: Event, snap: SessionSnapshot) -> tuple[HookPoint, dict[str, object]] | None:
    """The hook point ``event`` is, with its facts (protocol.policy.hooks.FACTS); None for other events."""
    base: dict[str, object] = {"session": snap.id, "task": snap.task, "workspace": snap.workspace,
                               "status": snap.status, "stage": snap.stage or "", "iteration": snap.visit}
    match event:
        case SessionCreated():
            return "session_start", {**base, "status": "running", "stage": "planner", "iteration": 1}
        case Transitioned(target=target, visit=visit) if target in STAGES:
            return "stage_start", {**base, "stage": target, "visit": visit, "iteration": visit}
        case StageFinished(stage=stage, visit=visit, ok=ok, summary=summary):
            return "stage_end", {**base, "stage": stage, "visit": visit, "iteration": visit, "ok": ok,
                                 "summary": summary[:4_000]}
        case SessionPaused(kind=kind, code=code, message=message, command=command):
            return "on_pause", {**base, "status": "paused", "kind": kind, "code": code, "message": message[:4_000],
                                "command": command}
        case SessionResumed(reason=reason):
            return "on_resume", {**base, "status": "running", "reason": reason[:4_000]}
        case SessionFinished(status=status, exit_code=exit_code):
            return "session_end", {**base, "status": status, "exit_code": exit_code}
    return None


class CoordinatorHooks:
    """Runs the coordinator's hook points for the orchestrator (see the module)."""

    def __init__(self, orchestrator: Any):
        self.orchestrator = orchestrator
        self.log = orchestrator.log
        self._pool: ThreadPoolExecutor | None = None

    def committed(self, snap: SessionSnapshot, events: list[Event],
                  dispatch: Callable[[], None] | None = None) -> None:
        """``events`` of ``snap``'s session are durable: fire the hooks they trigger. A
        decision that dispatches a stage (``dispatch``) waits for them: a ``stage_start``
        hook answers before the stage starts, and may pause the session there."""
        hooks = snap.settings.hooks
        jobs = []
        for event in events if hooks.any() else ():
            found = trigger(event, snap)
            if found is not None and point_hooks(hooks, found[0]):
                jobs.append((found[0], found[1], event.id))
        if not jobs:
            if dispatch is not None:
                dispatch()
            return
        self._submit(snap, jobs, dispatch)

    def recover(self, snap: SessionSnapshot) -> None:
        """After a restart: fire what the session's triggers lack (see the module)."""
        if not snap.settings.hooks.any():
            return

        def read(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.log.warning("hooks_recovery_failed", session_id=snap.id, error=str(error))
                return
            recorded = {e.id: running.recorded(e) for e in reply.events if isinstance(e, HookRan)}
            begun = frozenset(e.id for e in reply.events if isinstance(e, HookStarted))
            jobs = []
            for event in reply.events:
                found = trigger(event, snap)
                if found is None:
                    continue
                point, facts = found
                wanted = [running.event_id(snap.id, point, event.id, i)
                          for i in range(len(point_hooks(snap.settings.hooks, point)))]
                if any(w not in recorded for w in wanted):  # run_point skips the recorded, stops where they did
                    jobs.append((point, facts, event.id))
            if jobs:
                self._submit(snap, jobs, None, recorded, begun)

        self.orchestrator.persist(GetEvents(session_id=snap.id, limit=100_000), read, snap.id)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # -- running, then acting ----------------------------------------------------------------

    def _submit(self, snap: SessionSnapshot, jobs: list[tuple[HookPoint, dict[str, object], str]],
                dispatch: Callable[[], None] | None, recorded: dict[str, HookDecision] | None = None,
                begun: frozenset[str] = frozenset()) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="hooks")  # one: in the order the events came
        loop = self.orchestrator.owner.loop
        known = recorded or {}

        def work() -> None:
            ran: list[HookRan] = []
            for point, facts, occurrence in jobs:
                try:
                    ran += running.run_point(snap.settings.hooks, point, facts, session_id=snap.id,
                                             occurrence=occurrence, cwd=snap.workspace, recorded=known,
                                             begun=begun, started=self._durable)
                except Exception as exc:  # noqa: BLE001 - a hook's failure never takes the coordinator down
                    self.log.error("hook_failed", session_id=snap.id, point=point, error=str(exc))
            fresh = [event for event in ran if event.id not in known]  # the recorded were acted on before
            loop.call_soon_threadsafe(lambda: self._record(snap.id, fresh, dispatch))

        self._pool.submit(work)

    def _durable(self, intent: HookStarted) -> None:
        """Make a hook's intent durable before it runs (called on the hooks' worker thread: the
        commit goes through the coordinator's loop, and this waits for it, at most
        :data:`INTENT_WAIT_S`; a hook whose intent could not be stored runs anyway)."""
        done = threading.Event()
        loop = self.orchestrator.owner.loop

        def stored(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.log.warning("hook_intent_not_stored", session_id=intent.session_id, hook=intent.hook,
                                 error=str(error))
            done.set()

        loop.call_soon_threadsafe(lambda: self.orchestrator.persist(
            Commit(session_id=intent.session_id, events=[intent]), stored, intent.session_id))
        done.wait(INTENT_WAIT_S)

    def _record(self, session_id: str, ran: list[HookRan], dispatch: Callable[[], None] | None) -> None:
        """Commit what the hooks answered, then act on it; then the dispatch that waited,
        unless a hook paused or ended the session."""
        if not ran:
            self._go_on(session_id, [], dispatch)
            return

        def done(reply: Any, error: AcodeError | None) -> None:
            if error is not None:
                self.log.warning("hook_record_retrying", session_id=session_id, error=str(error))
                self.orchestrator.owner.loop.call_later(1.0, lambda: self._record(session_id, ran, dispatch))
                return
            self._go_on(session_id, ran, dispatch)

        self.orchestrator.persist(Commit(session_id=session_id, events=list(ran)), done, session_id)

    def _go_on(self, session_id: str, ran: list[HookRan], dispatch: Callable[[], None] | None) -> None:
        session = self.orchestrator.sessions.get(session_id)
        if session is None:
            return  # finished: nothing left to pause, stop or steer
        now = time.time()
        stop = next((e for e in ran if e.decision in ("pause", "abort")), None)
        for event in ran:
            if event.decision == "modify_context" and event.context:
                self.orchestrator.decide(session, lambda snap, text=event.context: _steer(snap, text, now))
        if stop is not None:
            self.log.info("hook_decided", session_id=session_id, hook=stop.hook, decision=stop.decision)
            self.orchestrator.decide(session, lambda snap: _stop(snap, stop, now, held=dispatch is not None))
        elif dispatch is not None:
            dispatch()


def _steer(snap: SessionSnapshot, text: str, now: float) -> Decision | None:
    if snap.status not in ("running", "paused"):
        return None
    return human.steer(snap, text[:MAX_STEERING_CHARS], now)


def _stop(snap: SessionSnapshot, event: HookRan, now: float, *, held: bool) -> Decision | None:
    """A hook's pause or abort: a stage held back for the hook does not start (the session
    pauses ``hook`` there); a stage at work stops at its next safe point (``acode pause``)."""
    why = f"hook {event.hook} at {event.point}: {event.reason or event.decision}"
    try:
        if event.decision == "abort":
            return human.cancel(snap, why, now) if snap.status in ("running", "paused") else None
        if snap.status != "running":
            return None
        if held:
            return machine.pause(snap, "hook", "ACODE-ORCH-014", f"{why}; `acode resume {snap.id[:8]}` starts the "
                                 f"{snap.stage}", now)
        return human.request_pause(snap, now)
    except TransitionError:
        return None
