"""The Python client: everything ``acode`` does with a running actor set, from code.

:class:`Client` talks to the coordinator, persistence and (for an undo) the sandbox of one
acode home, through the broker, as the CLI does: the CLI is built on it (``cli/`` parses
arguments, renders and prompts; every message it sends goes through here). Errors are the
:mod:`protocol.errors` tree with their stable codes; nothing is printed.

A session submitted from code never waits for a human it does not have: a call its
autonomy level does not allow is decided by the session's ``non_interactive_policy``
(``fail`` unless configured), unless the caller says it decides them itself
(``approvals="wait"``, then :meth:`Client.approve`/:meth:`Client.deny`).

Sessions are named by their id or a unique prefix of one, as on the command line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from acode.checkpoints import checkpoint_store, listed
from acode.connection import Connection
from acode.events import AnyEvent, typed
from acode.inputs import budget_changes, collect_answers, provider_override, steering_text
from acode.stream import iter_events, read_events, snapshot
from protocol.basics.ids import new_id
from protocol.errors import CliError, ModelError
from protocol.messages import (
    ApprovePlan,
    CancelSession,
    DecideApproval,
    GetPlan,
    GetSession,
    GetStatus,
    ListSessions,
    Message,
    PauseSession,
    ReplanSession,
    ResumeSession,
    SteerSession,
    SubmitTask,
)
from protocol.plans.plan import TaskPlan
from protocol.plans.stages import STAGES, Stage
from protocol.policy.budget import Budget, Spent
from protocol.sessions.session import Clarification, SessionSnapshot, SettingsOverride

if TYPE_CHECKING:
    from protocol.messages import Restored, StatusReport
    from protocol.sessions.progress import ModelProgress

__all__ = ["PROVIDERS", "Client", "Session", "SessionView"]

PROVIDERS = ("ollama", "openai", "scripted")
Approvals = Literal["policy", "wait"]


class SessionView(msgspec.Struct, frozen=True, kw_only=True):
    """One session whole, as ``acode show`` shows it: its state, its plan (tasks with their
    real status), every event, its budget's limits and use, its health."""

    session: SessionSnapshot
    plan: TaskPlan | None
    events: list[AnyEvent]
    budget: BudgetView
    health: int  # 0-100 (protocol.sessions.health.session_health)


class BudgetView(msgspec.Struct, frozen=True, kw_only=True):
    limits: Budget
    spent: Spent


class Session:
    """A handle on one session of a :class:`Client`: its id, and the client's methods for it."""

    def __init__(self, client: Client, session_id: str):
        self.client = client
        self.id = session_id

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def events(self, after_seq: int = 0, *, follow: bool = True) -> Iterator[AnyEvent]:
        return self.client.events(self.id, after_seq, follow=follow)

    def wait(self, timeout: float | None = None) -> SessionSnapshot:
        return self.client.wait(self.id, timeout=timeout)

    def snapshot(self) -> SessionSnapshot:
        return self.client.session(self.id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """``approve``, ``deny``, ``pause``, ``resume``, ``steer``, ``answer``, ``replan``,
        ``cancel``, ``show``, ``undo``, ``checkpoints``, ``rewind``: the client's, for this session."""
        if name not in _PER_SESSION:
            raise AttributeError(name)
        method = getattr(self.client, name)
        return lambda *args, **kwargs: method(self.id, *args, **kwargs)


_PER_SESSION = frozenset({"approve", "deny", "pause", "resume", "steer", "answer", "replan", "cancel", "show",
                          "undo", "checkpoints", "rewind"})


class Client:
    """A connection to the actor set of one acode home (``home``: ``$ACODE_HOME`` or
    ``~/.acode`` when None).

    ``reconnect_s``: how long :meth:`events` and :meth:`wait` keep trying while acode is
    down (a killed coordinator takes every actor with it until ``acode up``) before they
    raise :class:`~protocol.errors.NotRunning`. One client per thread.
    """

    def __init__(self, home: str | Path | None = None, *, reconnect_s: float = 120.0):
        self.connection = Connection(Path(home) if home is not None else None)
        self.home = self.connection.paths.home
        self.reconnect_s = reconnect_s

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    # --- sessions ------------------------------------------------------------------------

    def session_id(self, given: str) -> str:
        """The full id of the session ``given`` names (its id or a unique prefix; ACODE-CLI-002)."""
        if len(given) >= 36:
            return given
        matches = [s.id for s in self.sessions(limit=100_000) if s.id.startswith(given)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise CliError(f"no session starts with {given!r}; list them with `acode sessions`",
                           code="ACODE-CLI-002")
        raise CliError(f"{len(matches)} sessions start with {given!r}; give more characters", code="ACODE-CLI-002")

    def submit(self, task: str, workspace: str | Path = ".", *, approvals: Approvals = "policy",
               force: bool = False, approve_plan: bool = False, provider: str | None = None,
               model: str | None = None, base_url: str | None = None, script: str | Path | None = None,
               stage_timeout: float | None = None, cycle_limit: int | None = None, max_turns: int | None = None,
               autonomy: int | None = None, budget_tokens: int | None = None, budget_tool_calls: int | None = None,
               budget_minutes: float | None = None, budget_model_minutes: float | None = None) -> Session:
        """Start a session on ``task`` in ``workspace``, with the configuration ``acode run``
        would resolve there (user file, trusted workspace file, environment) and these
        settings on top. ``approvals="wait"``: the caller decides each call the autonomy
        level does not allow (:meth:`approve`/:meth:`deny`); else the session's
        ``non_interactive_policy`` does. ``approve_plan``: pause for a review of the plan."""
        from acode.config.loader import resolve
        from acode.config.settings import session_settings
        from protocol.basics.text import find_bad_text
        from protocol.plans.task import check_task

        root = Path(workspace).expanduser().resolve()
        if not root.is_dir():
            raise CliError(f"workspace {str(workspace)!r} is not a directory; create it or pass another one")
        bad = find_bad_text(str(root))
        if bad is not None:  # a path's bytes that are not UTF-8 arrive as lone surrogates, which no message carries
            raise CliError(f"workspace {str(root)!r} is not a UTF-8 path (the byte \\x{ord(bad.char) & 0xff:02x} at "
                           f"character {bad.offset}); rename the directory to a UTF-8 name")
        if provider is not None and provider not in PROVIDERS:
            raise ModelError(f"provider {provider!r} is not available; available: {', '.join(PROVIDERS)}",
                             code="ACODE-LLM-001")
        check_task(task)
        flags: dict[str, Any] = {
            "model.provider": provider, "model.script": str(Path(script).resolve()) if script else None,
            "model.model": model, "model.base_url": base_url, "orchestration.cycle_limit": cycle_limit,
            "executor.max_turns_per_step": max_turns, "autonomy": autonomy, "budget.tokens": budget_tokens,
            "budget.tool_calls": budget_tool_calls, "budget.wall_minutes": budget_minutes,
            "budget.model_minutes": budget_model_minutes}
        for stage in STAGES:
            flags[f"orchestration.{stage}_timeout"] = stage_timeout
        settings = session_settings(resolve(home=self.home, workspace=root, flags=flags), home=self.home)
        if approve_plan:
            settings = msgspec.structs.replace(settings, plan_review=True)
        mode = "wait" if approvals == "wait" else settings.approvals.non_interactive_policy
        settings = msgspec.structs.replace(settings, approval_mode=mode)
        if settings.provider is None:
            raise ModelError("no model configured; pass --provider ollama --model NAME (or --provider scripted "
                             "--script FILE; from Python: provider=, model=, script=), or set model: in "
                             ".agent/config.yml (README 'Models')", code="ACODE-LLM-001")
        self.connection.require_running()
        session_id = new_id()
        self.connection.coordinator(SubmitTask(session_id=session_id, task=task, workspace=str(root),
                                               settings=settings, force=force), timeout=30.0)
        return Session(self, session_id)

    def events(self, session: str, after_seq: int = 0, *, follow: bool = True,
               on_progress: Callable[[ModelProgress], None] | None = None) -> Iterator[AnyEvent]:
        """The session's events after ``after_seq``, in order, each once. ``follow``: go on
        live until the session finishes or pauses (that event is the last), across restarts
        of any actor; else only those stored now. ``on_progress`` hears a model at work."""
        session_id = self.session_id(session)
        if not follow:
            yield from read_events(self.connection, session_id, after_seq)
            return
        yield from iter_events(self.connection, session_id, after_seq=after_seq, on_progress=on_progress,
                               reconnect_s=self.reconnect_s)

    def wait(self, session: str, *, timeout: float | None = None) -> SessionSnapshot:
        """Block until the session finishes or pauses; its state then. ``timeout``: seconds,
        then :class:`~protocol.errors.RequestTimeout` (ACODE-NET-001)."""
        from protocol.errors import RequestTimeout

        session_id = self.session_id(session)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = snapshot(self.connection, session_id, reconnect_s=self.reconnect_s)
            if current.status != "running":
                return current
            if deadline is not None and time.monotonic() >= deadline:
                raise RequestTimeout(f"session {session_id} still runs after {timeout:g} s", code="ACODE-NET-001")
            time.sleep(0.1)

    def session(self, session: str) -> SessionSnapshot:
        """The session's state now."""
        return snapshot(self.connection, self.session_id(session))

    def sessions(self, statuses: list[str] | None = None, *, limit: int = 50) -> list[SessionSnapshot]:
        """Sessions, newest first (only those in ``statuses`` when given)."""
        found: list[SessionSnapshot] = self.connection.persistence(
            ListSessions(statuses=statuses or [], limit=limit)).sessions
        return found

    def status(self) -> StatusReport:
        """Every actor: pid, state, epoch, restarts, uptime, last heartbeat."""
        report: StatusReport = self.connection.coordinator(GetStatus())
        return report

    def spent(self, session: str) -> Spent:
        """What the session spent against its budget so far."""
        found = self.connection.persistence(GetSession(session_id=self.session_id(session)))
        return found.spent or Spent(running_s=found.session.running_s)

    def plan(self, session: str, version: int = 0) -> TaskPlan:
        """A plan version of the session (0: the latest), each task with its real status."""
        session_id = self.session_id(session)
        plan: TaskPlan = self.connection.persistence(GetPlan(session_id=session_id, version=version)).plan
        return self._real_status(snapshot(self.connection, session_id), plan)

    def show(self, session: str) -> SessionView:
        """One session whole: state, plan, events, budget, health (``acode show --json``)."""
        from protocol.sessions.health import session_health

        session_id = self.session_id(session)
        found = self.connection.persistence(GetSession(session_id=session_id))
        current: SessionSnapshot = found.session
        spent = found.spent or Spent(running_s=current.running_s)
        events = read_events(self.connection, session_id)
        plan = None
        if current.plan_version:
            plan = self._real_status(current, self.connection.persistence(GetPlan(session_id=session_id)).plan)
        return SessionView(session=current, plan=plan, events=events,
                           budget=BudgetView(limits=current.settings.budget, spent=spent),
                           health=session_health(typed(events), current.settings.budget, spent))

    def _real_status(self, current: SessionSnapshot, plan: TaskPlan) -> TaskPlan:
        """``plan`` with each task's status as the session has it now: a plan version is
        stored as the planner made it; the session's verifications complete its tasks. For
        the current version that is the session's ``completed_tasks``; for an older one, the
        tasks the next version carried over as completed (same id)."""
        from protocol.plans.plan import with_status

        if plan.version >= current.plan_version:
            return with_status(plan, current.completed_tasks)
        after = self.connection.persistence(GetPlan(session_id=current.id, version=plan.version + 1)).plan
        carried = {t.id for t in after.tasks if t.status == "completed"}
        return with_status(plan, [t.label for t in plan.tasks if t.id in carried or t.status == "completed"])

    # --- a human's hand ------------------------------------------------------------------

    def send(self, body: Message) -> SessionSnapshot | None:
        """One request to the coordinator; the session as it answered (None for a bare ack)."""
        reply = self.connection.coordinator(body)
        return getattr(reply, "session", None)

    @staticmethod
    def decision(current: SessionSnapshot, decision: Literal["approve", "deny"], *, always: bool = False,
                 reason: str = "", by: str = "") -> Message:
        """What an approve or deny sends for what the session (as ``current`` has it) waits on:
        the call it shows (``awaiting_approval``) or, for an approve, the plan under review
        (ACODE-CLI-004 when it waits on neither)."""
        kind = current.pause.kind if current.pause is not None and current.status == "paused" else None
        match kind:
            case "awaiting_approval":
                key = current.approval.key if current.approval is not None else ""
                return DecideApproval(session_id=current.id, decision=decision, always=always, reason=reason,
                                      by=by or f"acode {decision}", key=key)
            case "plan_review" if decision == "approve":
                return ApprovePlan(session_id=current.id)
            case "plan_review":
                raise CliError(f"session {current.id} waits for the review of its plan: send it back with your "
                               f'feedback, `acode replan {current.id[:8]} "what to change"`, or `acode cancel '
                               f'{current.id[:8]}`', code="ACODE-CLI-004")
            case _:
                state = f"paused ({kind})" if kind else current.status
                raise CliError(f"session {current.id} is {state}: there is nothing to {decision}; see `acode show "
                               f"{current.id}`", code="ACODE-CLI-004")

    def approve(self, session: str, *, always: bool = False) -> SessionSnapshot | None:
        """Approve the call (or the plan) the session waits for; it goes on. ``always``:
        later calls of the same rule in this session too."""
        return self.send(self.decision(self.session(session), "approve", always=always, by="acode.Client"))

    def deny(self, session: str, reason: str = "denied by the user") -> SessionSnapshot | None:
        """Deny the call the session waits for: the model is told "the user denied this: REASON"."""
        return self.send(self.decision(self.session(session), "deny", reason=reason, by="acode.Client"))

    def pause(self, session: str, *, wait: bool = False, timeout: float = 600.0) -> SessionSnapshot:
        """Pause the session at its next safe point; ``wait``: until it has stopped (at most
        ``timeout`` seconds). A second pause changes nothing."""
        session_id = self.session_id(session)
        current: SessionSnapshot = self.connection.coordinator(PauseSession(session_id=session_id)).session
        deadline = time.monotonic() + timeout
        while wait and current.status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            current = snapshot(self.connection, session_id)
        return current

    def resume(self, session: str, *, answers: list[Clarification] | None = None, **overrides: Any) -> SessionSnapshot:
        """Continue a paused or failed session; ``overrides`` change its settings from now on
        (recorded as an event): ``stage_timeout``, ``planner_timeout`` … ``reviewer_timeout``,
        ``step_timeout``, ``cycle_limit``, ``max_turns``, ``provider``, ``model``,
        ``base_url``, ``script``, ``budget_tokens``/``budget_tool_calls``/``budget_minutes``/
        ``budget_model_minutes`` (a new limit, or ``"+N"``/``"+N%"`` more)."""
        session_id = self.session_id(session)
        override = self.overrides(session_id, **overrides)
        reply: SessionSnapshot = self.connection.coordinator(ResumeSession(
            session_id=session_id, answers=answers or [], overrides=None if override.is_empty() else override)).session
        return reply

    def overrides(self, session: str, *, stage_timeout: float | None = None, planner_timeout: float | None = None,
                  executor_timeout: float | None = None, verifier_timeout: float | None = None,
                  reviewer_timeout: float | None = None, step_timeout: float | None = None,
                  cycle_limit: int | None = None, max_turns: int | None = None, provider: str | None = None,
                  model: str | None = None, base_url: str | None = None, script: str | Path | None = None,
                  budget_tokens: str | int | None = None, budget_tool_calls: str | int | None = None,
                  budget_minutes: str | float | None = None,
                  budget_model_minutes: str | float | None = None) -> SettingsOverride:
        """What a resume changes, checked (ACODE-CLI-003 and others name the bad value)."""
        timeouts: dict[Stage, float | None] = {"planner": planner_timeout, "executor": executor_timeout,
                                               "verifier": verifier_timeout, "reviewer": reviewer_timeout}
        given = {"--stage-timeout": stage_timeout, "--step-timeout": step_timeout,
                 **{f"--{s}-timeout": t for s, t in timeouts.items()}}
        for flag, value in given.items():
            if value is not None and not 0 < value <= 86_400:
                raise CliError(f"{flag} {value:g} is out of range; give seconds above 0, at most 86400")
        if cycle_limit is not None and not 0 <= cycle_limit <= 10:
            raise CliError(f"--cycle-limit {cycle_limit} is out of range; give 0 to 10 cycles per kind")
        if max_turns is not None and not 1 <= max_turns <= 100:
            raise CliError(f"--max-turns {max_turns} is out of range; give 1 to 100 turns per step")
        if provider is not None and provider not in PROVIDERS:
            raise ModelError(f"provider {provider!r} is not available; available: {', '.join(PROVIDERS)}",
                             code="ACODE-LLM-001")
        budget = budget_changes({"tokens": budget_tokens, "tool_calls": budget_tool_calls,
                                  "wall_minutes": budget_minutes, "model_minutes": budget_model_minutes})
        spec = None
        if provider or model or base_url or script:
            current = snapshot(self.connection, self.session_id(session))
            spec = provider_override(current, provider=provider, model=model, base_url=base_url,
                                     script=Path(script) if script else None, home=self.home)
        stages: dict[Stage, float] = dict.fromkeys(STAGES, stage_timeout) if stage_timeout else {}
        stages.update({s: t for s, t in timeouts.items() if t is not None})
        return SettingsOverride(stage_timeouts=stages, step_timeout_s=step_timeout, cycle_limit=cycle_limit,
                                max_turns_per_step=max_turns, provider=spec, budget=budget)

    def steer(self, session: str, text: str) -> SessionSnapshot:
        """Guide the session: the stage at work reads ``text`` from its next model turn on, and
        every later stage too (fenced as untrusted text)."""
        text = steering_text(text, "steering text")
        found: SessionSnapshot = self.connection.coordinator(
            SteerSession(session_id=self.session_id(session), text=text)).session
        return found

    def answer(self, session: str, answers: Mapping[str, str] | None = None, *, defaults: bool = False,
               ask: Callable[[Any], str] | None = None) -> SessionSnapshot:
        """Answer the planner's questions of a session paused for them (``answers``: label →
        answer, an option's number picks it; the rest from ``ask(question)`` or, with
        ``defaults``, each one's default), and resume it."""
        session_id = self.session_id(session)
        plan = self.waiting_questions(session_id)
        chosen = collect_answers(plan, [f"{k}={v}" for k, v in (answers or {}).items()], defaults=defaults, ask=ask)
        return self.resume(session_id, answers=chosen)

    def waiting_questions(self, session: str) -> TaskPlan:
        """The plan whose questions a session paused ``needs_input`` waits on (ACODE-CLI-004 otherwise)."""
        current = snapshot(self.connection, self.session_id(session))
        if current.pause is None or current.pause.kind != "needs_input":
            state = f"paused for {current.pause.kind}" if current.pause else current.status
            raise CliError(f"session {current.id} is {state}, not waiting for answers; see `acode show "
                           f"{current.id[:8]}`", code="ACODE-CLI-004")
        plan: TaskPlan = self.connection.persistence(GetPlan(session_id=current.id,
                                                             version=current.plan_version)).plan
        return plan

    def replan(self, session: str, feedback: str) -> SessionSnapshot | None:
        """Send a plan under review back to the planner with ``feedback``."""
        return self.send(ReplanSession(session_id=self.session_id(session), feedback=steering_text(feedback,
                                                                                                   "feedback")))

    def cancel(self, session: str) -> SessionSnapshot:
        """End a running or paused session (cancelled, exit code 23)."""
        found: SessionSnapshot = self.connection.coordinator(CancelSession(session_id=self.session_id(session))).session
        return found

    # --- checkpoints ---------------------------------------------------------------------

    def checkpoints(self, session: str) -> list[dict[str, Any]]:
        """The session's checkpoints, oldest first: the start, one before each call that could
        change the workspace, one before each undo (read from the store: works without
        ``acode up``). ``files``: changed since the previous one listed."""
        full, _, _, records = checkpoint_store(self.home, session)
        return listed(full, records)

    def paused(self, session: str, what: str) -> SessionSnapshot:
        """The session's state, refused while it runs (ACODE-CLI-010: its calls would race ``what``)."""
        current = snapshot(self.connection, self.session_id(session))
        if current.status == "running":
            raise CliError(f"session {current.id} is running: its calls would race the {what}; pause it first "
                           f"(`acode pause {current.id[:8]}`), then {what}", code="ACODE-CLI-010")
        return current

    def undo(self, session: str, *, to: str | None = None, last: bool = False, force: bool = False,
             apply: bool = True) -> Restored:
        """Put the workspace back as it was before the session began (or before checkpoint
        ``to``, or one call back with ``last``). ``apply=False``: only say what would change.
        ``force``: also what someone else changed since."""
        from protocol.messages import RestoreWorkspace

        if to and last:
            raise CliError("give --to CHECKPOINT or --last, not both", code="ACODE-CLI-003")
        current = self.paused(session, "undo")
        body = RestoreWorkspace(session_id=current.id, workspace=current.workspace, to=to or "", last=last,
                                force=force, policy=current.settings.sandbox, apply=apply)
        return self.restore(body)

    def restore(self, body: Any) -> Restored:
        """A ``RestoreWorkspace`` done by the sandbox (the only process that writes a workspace)."""
        from protocol.messages import Restored

        done = self.connection.sandbox(body, timeout=300 if body.apply else 60)
        assert isinstance(done, Restored)
        return done

    def rewind_target(self, current: SessionSnapshot, to: str) -> Any:
        """The checkpoint ``to`` names, checked to be one the session (``current``, as
        :meth:`paused` gave it) can go on from: its start or one its executor took before a
        step (ACODE-CLI-003 otherwise)."""
        from actors.paths import RunPaths
        from actors.paths import checkpoint_store as store_of
        from actors.sandbox.workspace.checkpoints import Checkpoints
        from protocol.errors import NotFoundError

        try:
            record = Checkpoints(store_of(RunPaths.for_home(self.home).checkpoints, current.workspace),
                                 current.workspace).find(to)
        except NotFoundError as exc:
            raise CliError(str(exc), code="ACODE-CLI-003") from exc
        meta = record.meta
        if meta.session != current.id or not (meta.kind == "start" or meta.stage == "executor" and meta.task):
            raise CliError(f"checkpoint {to!r} is not one the session can go on from: rewind goes to the session's "
                           f"start or to a checkpoint its executor took before a step (`acode checkpoints "
                           f"{current.id[:8]}` lists them, with the stage); `acode undo --to {to}` only puts the "
                           "workspace back", code="ACODE-CLI-003")
        return record

    def rewind(self, session: str, to: str, *, steer: str | None = None, force: bool = False) -> SessionSnapshot | None:
        """Put the workspace back at checkpoint ``to`` and continue the session from that step
        (``steer``: guidance for the work redone)."""
        from protocol.messages import RestoreWorkspace

        current = self.paused(session, "rewind")
        record = self.rewind_target(current, to)
        self.restore(RestoreWorkspace(session_id=current.id, workspace=current.workspace, to=record.id,
                                      force=force, by="rewind", policy=current.settings.sandbox, apply=True))
        return self.send(self.rewind_body(current.id, record, steer))

    @staticmethod
    def rewind_body(session_id: str, record: Any, steer: str | None) -> Message:
        from protocol.messages import RewindSession

        return RewindSession(session_id=session_id, checkpoint=record.id, task=record.meta.task,
                             step=record.meta.step, steering=steer or "")
