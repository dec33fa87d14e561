"""One session's events as a tree of spans (the OpenTelemetry GenAI semantic conventions).

The tree, built from the event log alone (``seq`` order)::

    invoke_agent acode                      the session (root)
    ├─ invoke_agent planner                 a stage visit: (stage, visit), every attempt in it
    │  ├─ chat {model}                      its model calls, summed (see below)
    │  └─ execute_tool {tool}               a call the stage made itself (context reads)
    ├─ invoke_agent executor
    │  └─ step T1/S1                        an executor step, every try in it
    │     ├─ execute_tool read_file         the step's context reads
    │     └─ chat {model}                   one executor turn (``turn_answered``)
    │        └─ execute_tool write_file     the calls that turn asked for
    └─ hook {point} {name}                  a hook that ran (under the stage at work, if any)

Model calls are what the log records of them. The executor records each turn
(``turn_answered``: tokens, duration, first-token time, replayed or not), so each is a
span of its own. The planner, verifier and reviewer record only their totals per attempt
(``stage_finished``: calls, tokens, model time), so each attempt that asked a model has
one ``chat`` span with ``acode.model.summed`` set: it starts with the attempt and lasts
its summed model time, and ``acode.model.calls`` says how many calls it stands for.
A model call abandoned at its deadline, or whose turn event a crash lost, is in no span.

Tool calls hang under the turn that asked for them, found by the call's key (the
executor's keys are ``<step key>[:k<try>]:t<turn>:c<index>``), else under the step whose
key they extend, else under the stage at work when they were logged, else the session.

Pauses, resumes, retries, approvals, anomalies and the like are span events on the stage
at work (or the session); a checkpoint taken before a call is an event of that call's
span. Ids are derived (:mod:`protocol.basics.tracing`): the trace id from the session id, each
span id from what the span is (a stage visit, a step, a turn, a call's key), so building
twice gives the same tree, and a crash and a resume add to the same spans rather than
starting new ones.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

from protocol.basics.tracing import span_id, trace_id
from protocol.sessions.events import (
    AnomalyDetected,
    ApprovalDecided,
    BudgetWarning,
    CheckpointTaken,
    CheckRan,
    Event,
    HookRan,
    HookStarted,
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
from protocol.sessions.session import SessionSnapshot, model_of

__all__ = ["Attr", "Span", "SpanEvent", "Trace", "build_trace", "step_key"]

Attr = str | int | float | bool | list[str]
Kind = Literal["internal", "client"]
Status = Literal["unset", "ok", "error"]

_TEXT = 300  # characters of free text kept in an attribute
_TURN_OF_CALL = re.compile(r"^(.*:t\d+):c\d+")


@dataclass
class SpanEvent:
    name: str
    at: float
    attributes: dict[str, Attr] = field(default_factory=dict)


@dataclass
class Span:
    """One span; times are Unix seconds. ``parent`` is ``""`` for the root."""

    span_id: str
    parent: str
    name: str
    start: float
    end: float
    kind: Kind = "internal"
    attributes: dict[str, Attr] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    status: Status = "unset"
    message: str = ""


@dataclass
class Trace:
    trace_id: str
    session_id: str
    spans: list[Span]  # the root first, then each span after its parent

    @property
    def root(self) -> Span:
        return self.spans[0]


def step_key(session_id: str, visit: int, task: str, step: str) -> str:
    """The key the executor's calls of a step start with (``actors.stages.execution.step._base_key``)."""
    where = f"{task}/{step}"
    if len(where) > 40:
        where = hashlib.sha256(where.encode()).hexdigest()[:24]
    return f"{session_id}:e{visit}:{where}"


def build_trace(session_id: str, events: list[Event], session: SessionSnapshot | None = None) -> Trace:
    """The session's spans: one tree, whatever crashed, paused or resumed along the way."""
    builder = _Builder(session_id)
    for event in sorted(events, key=lambda e: e.seq):
        builder.add(event)
    return builder.finish(session)


def _int(attributes: dict[str, Attr], name: str) -> int:
    value = attributes.get(name, 0)
    return value if isinstance(value, int) else 0


def _text(value: str) -> str:
    return value if len(value) <= _TEXT else value[:_TEXT - 1] + "…"


class _Builder:
    def __init__(self, session_id: str):
        self.session_id = session_id
        self.root = Span(span_id(session_id, "session"), "", "invoke_agent acode", 0.0, 0.0, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "acode",
            "gen_ai.conversation.id": session_id, "acode.session.id": session_id})
        self.spans: dict[str, Span] = {self.root.span_id: self.root}
        self.stages: dict[tuple[str, int], Span] = {}
        self.steps: dict[tuple[int, str, str], Span] = {}
        self.tries: dict[tuple[int, str, str], int] = {}  # the step's try under way (step_retried)
        self.turns: dict[str, Span] = {}  # by the key prefix of the calls each turn asked for
        self.step_keys: dict[str, Span] = {}
        self.current: Span | None = None  # the stage visit at work
        self.calls: list[tuple[ToolCalled, Span | None]] = []
        self.checkpoints: list[CheckpointTaken] = []  # taken before a call: an event of its span
        self.first: float | None = None
        self.last = 0.0
        self.finished: SessionFinished | None = None

    # -- spans ---------------------------------------------------------------------------

    def _span(self, key: tuple[object, ...], parent: Span, name: str, at: float, kind: Kind = "internal",
              attributes: dict[str, Attr] | None = None) -> Span:
        ident = span_id(self.session_id, *key)
        span = self.spans.get(ident)
        if span is None:
            span = Span(ident, parent.span_id, name, at, at, kind, dict(attributes or {}))
            self.spans[ident] = span
        return span

    def _stage(self, stage: str, visit: int, at: float) -> Span:
        span = self.stages.get((stage, visit))
        if span is None:
            span = self._span(("stage", stage, visit), self.root, f"invoke_agent {stage}", at, attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": stage,
                "gen_ai.conversation.id": self.session_id, "acode.stage": stage, "acode.visit": visit})
            self.stages[(stage, visit)] = span
        return span

    def _step(self, visit: int, task: str, step: str, at: float) -> Span:
        span = self.steps.get((visit, task, step))
        if span is None:
            parent = self._stage("executor", visit, at)
            span = self._span(("step", visit, task, step), parent, f"step {task}/{step}", at,
                              attributes={"acode.task": task, "acode.step": step, "acode.visit": visit})
            self.steps[(visit, task, step)] = span
            self.step_keys[step_key(self.session_id, visit, task, step)] = span
        return span

    def _note(self, event: Event, name: str, attributes: dict[str, Attr] | None = None) -> None:
        """A span event on the stage at work, else on the session."""
        (self.current or self.root).events.append(SpanEvent(name, event.at, attributes or {}))

    # -- events --------------------------------------------------------------------------

    def add(self, event: Event) -> None:  # noqa: C901 - one case per event type, flat
        at = event.at
        self.first = at if self.first is None else min(self.first, at)
        self.last = max(self.last, at)
        match event:
            case SessionCreated(task=task, workspace=workspace):
                self.root.attributes.update({"acode.task": _text(task), "acode.workspace": workspace})
                self.first = at
            case Transitioned(target="completed"):
                self.current = None
            case Transitioned(source=source, target=target, visit=visit, reason=reason, cycle_kind=kind):
                span = self._stage(target, visit, at)
                span.start = min(span.start, at)
                attributes: dict[str, Attr] = {"acode.source": source, "acode.reason": _text(reason)}
                if kind is not None:
                    attributes["acode.cycle_kind"] = kind
                span.events.append(SpanEvent("transitioned", at, attributes))
                self.current = span
            case StageRetried(stage=stage, visit=visit, attempt=attempt, reason=reason):
                self.current = self._stage(stage, visit, at)
                self._note(event, "stage_retried", {"acode.attempt": attempt, "acode.reason": _text(reason)})
            case StageFinished():
                self._stage_finished(event)
            case PlanRecorded(version=version, tasks=tasks, steps=steps):
                self._note(event, "plan_recorded", {"acode.plan.version": version, "acode.plan.tasks": tasks,
                                                      "acode.plan.steps": steps})
            case StepStarted(visit=visit, task=task, step=step, title=title):
                span = self._step(visit, task, step, at)
                span.start = min(span.start, at)
                if title:
                    span.attributes["acode.step.title"] = _text(title)
            case StepRetried(visit=visit, task=task, step=step, attempt=attempt, code=code, reason=reason):
                self.tries[(visit, task, step)] = attempt
                self._step(visit, task, step, at).events.append(SpanEvent("step_retried", at, {
                    "acode.try": attempt, "error.type": code or "_OTHER", "acode.reason": _text(reason)}))
            case StepFinished(visit=visit, task=task, step=step, status=status, summary=summary):
                span = self._step(visit, task, step, at)
                span.end = max(span.end, at)
                span.attributes.update({"acode.step.status": status, "acode.summary": _text(summary)})
                span.status = "ok" if status == "completed" else "error" if status == "failed" else "unset"
                span.message = _text(summary) if status == "failed" else ""
            case TurnAnswered():
                self._turn(event)
            case ToolCalled():
                self.calls.append((event, self.current))
            case HookRan(point=point, hook=hook, decision=decision, failed=failed, duration_ms=ms):
                span = self._span(("hook", event.id), self.current or self.root, f"hook {point} {hook}",
                                  at - ms / 1000, attributes={"acode.hook.point": point, "acode.hook.name": hook,
                                                              "acode.hook.decision": decision})
                span.end = at
                if failed:
                    span.status, span.message = "error", _text(failed)
            case SessionPaused(kind=kind, code=code, message=message):
                self._note(event, "session_paused", {"acode.pause.kind": kind, "error.type": code,
                                                       "acode.message": _text(message)})
            case SessionResumed(reason=reason):
                self._note(event, "session_resumed", {"acode.reason": _text(reason)})
            case SessionFinished():
                self.finished = event
            case CheckRan(visit=visit, label=label, passed=passed, exit_code=code):
                self._stage("verifier", visit, at).events.append(SpanEvent("check_ran", at, {
                    "acode.check.label": label, "acode.check.passed": passed,
                    **({"acode.check.exit_code": code} if code is not None else {})}))
            case ReworkChosen(rule=rule, rerun=rerun):
                self._note(event, "rework_chosen", {"acode.rework.rule": rule, "acode.rework.rerun": rerun})
            case ApprovalDecided(tool=tool, decision=decision, risk=risk, by=by):
                self._note(event, "approval_decided", {"gen_ai.tool.name": tool, "acode.decision": decision,
                                                         "acode.tool.risk": risk, "acode.by": by})
            case AnomalyDetected(kind=kind, score=score, response=response):
                self._note(event, "anomaly_detected", {"acode.anomaly.kind": kind, "acode.anomaly.score": score,
                                                         "acode.anomaly.response": response})
            case BudgetWarning(kind=kind, used=used, limit=limit):
                self._note(event, "budget_warning", {"acode.budget.kind": kind, "acode.budget.used": used,
                                                       "acode.budget.limit": limit})
            case SettingsChanged(changes=changes):
                self._note(event, "settings_changed", {"acode.changes": changes})
            case CheckpointTaken(key=key) if key:
                self.checkpoints.append(event)
            case Steered() | PauseRequested() | HookStarted() | CheckpointTaken() | WorkspaceRestored():
                self._note(event, str(event.__struct_config__.tag))

    def _stage_finished(self, event: StageFinished) -> None:
        at = event.at
        span = self._stage(event.stage, event.visit, at)
        began = at - event.duration_ms / 1000
        span.start = min(span.start, began)
        span.end = max(span.end, at)
        attrs = span.attributes
        attrs["acode.attempts"] = max(_int(attrs, "acode.attempts"), event.attempt)
        for name, value in (("gen_ai.usage.input_tokens", event.tokens_in),
                            ("gen_ai.usage.output_tokens", event.tokens_out),
                            ("acode.model_calls", event.model_calls)):
            attrs[name] = _int(attrs, name) + value
        if event.model:
            attrs.update({"gen_ai.provider.name": event.provider, "gen_ai.request.model": event.model})
        span.status = "ok" if event.ok else "error"
        span.message = "" if event.ok else _text(event.error.message if event.error else event.summary)
        if event.error is not None:
            attrs["error.type"] = event.error.code
        span.events.append(SpanEvent("stage_finished", at, {
            "acode.attempt": event.attempt, "acode.ok": event.ok, "acode.summary": _text(event.summary)}))
        if event.stage != "executor" and (event.model_calls or event.tokens_in or event.tokens_out or event.model_ms):
            self._summed_model(span, event, began)

    def _summed_model(self, stage: Span, event: StageFinished, began: float) -> None:
        """The planner's, verifier's or reviewer's model calls of one attempt, as one span."""
        span = self._span(("model", event.id), stage, f"chat {event.model}" if event.model else "chat", began,
                          "client", {"gen_ai.operation.name": "chat", "acode.model.summed": True,
                                     "acode.model.calls": event.model_calls,
                                     "acode.model.replayed_calls": event.replayed_model_calls,
                                     "gen_ai.usage.input_tokens": event.tokens_in,
                                     "gen_ai.usage.output_tokens": event.tokens_out,
                                     "acode.attempt": event.attempt})
        if event.model:
            span.attributes.update({"gen_ai.provider.name": event.provider, "gen_ai.request.model": event.model})
        if event.tokens_cached:
            span.attributes["gen_ai.usage.cache_read.input_tokens"] = event.tokens_cached
        span.end = began + event.model_ms / 1000

    def _turn(self, event: TurnAnswered) -> None:
        where = (event.visit, event.task, event.step)
        step = self._step(*where, event.at - event.duration_ms / 1000)
        attempt = self.tries.get(where, 1)
        span = self._span(("turn", *where, attempt, event.turn), step, f"chat {event.model}" if event.model else "chat",
                          event.at - event.duration_ms / 1000, "client", {
                              "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": event.prompt_tokens,
                              "gen_ai.usage.output_tokens": event.completion_tokens, "acode.turn": event.turn,
                              "acode.try": attempt, "acode.tool_calls": event.tool_calls,
                              "acode.replayed": event.replayed, "acode.usage.estimated": event.estimated})
        span.end = event.at
        if event.model:
            span.attributes.update({"gen_ai.provider.name": event.provider, "gen_ai.request.model": event.model})
        if event.finish_reason:
            span.attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
        if event.first_token_ms:
            span.attributes["gen_ai.response.time_to_first_chunk"] = round(event.first_token_ms / 1000, 4)
        if event.correction:
            span.attributes["acode.correction"] = _text(event.correction)
        prefix = step_key(self.session_id, *where) + (f":k{attempt}" if attempt > 1 else "")
        self.turns[f"{prefix}:t{event.turn}"] = span
        step.end = max(step.end, event.at)

    def _tool(self, event: ToolCalled, stage: Span | None) -> None:
        match = _TURN_OF_CALL.match(event.key)
        parent = self.turns.get(match.group(1)) if match else None
        if parent is None:
            bases = [key for key in self.step_keys if event.key.startswith(key + ":")]
            parent = self.step_keys[max(bases, key=len)] if bases else stage or self.root
        began = event.at - event.duration_ms / 1000
        span = self._span(("tool", event.key), parent, f"execute_tool {event.tool}", began, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool, "gen_ai.tool.call.id": event.key,
            "gen_ai.tool.type": "function", "acode.tool.risk": event.risk, "acode.tool.outcome": event.outcome,
            "acode.tool.ok": event.ok})
        span.end = event.at
        if event.target:
            span.attributes["acode.tool.target"] = _text(event.target)
        if event.isolation:
            span.attributes["acode.tool.isolation"] = event.isolation
        span.status = "ok" if event.ok else "error"
        span.message = "" if event.ok else _text(event.summary)

    # -- the tree ------------------------------------------------------------------------

    def finish(self, session: SessionSnapshot | None) -> Trace:
        for call, stage in self.calls:
            self._tool(call, stage)
        for taken in self.checkpoints:
            span = self.spans.get(span_id(self.session_id, "tool", taken.key))
            (span or self.root).events.append(SpanEvent("checkpoint_taken", taken.at, {
                "acode.checkpoint": taken.checkpoint, "acode.checkpoint.files": taken.files,
                "acode.checkpoint.took_ms": taken.took_ms}))
        root = self.root
        root.start = self.first or 0.0
        finished = self.finished
        root.end = finished.at if finished is not None else self.last
        status = finished.status if finished is not None else session.status if session is not None else "running"
        root.attributes["acode.session.status"] = status
        if finished is not None:
            root.attributes["acode.exit_code"] = finished.exit_code
            root.status = "ok" if status == "completed" else "error" if status == "failed" else "unset"
            root.message = _text(finished.error.message) if finished.error is not None else ""
            if finished.error is not None:
                root.attributes["error.type"] = finished.error.code
        if session is not None:
            provider, model = model_of(session.settings.provider, "executor")
            if model:
                root.attributes.update({"gen_ai.provider.name": provider, "gen_ai.request.model": model})
        ordered = _ordered(self.spans, root)
        reach: dict[str, tuple[float, float]] = {}  # the time a span and all below it cover
        for span in reversed(ordered):  # children first: a stage or step lasts as long as what it holds
            span.end = max(span.end, span.start)
            low, high = reach.get(span.span_id, (span.start, span.end))
            if span.kind == "internal":  # a model call's time is the model's alone
                span.start, span.end = min(span.start, low), max(span.end, high)
            low, high = min(low, span.start), max(high, span.end)
            if span.parent:
                was = reach.get(span.parent)
                reach[span.parent] = (low, high) if was is None else (min(was[0], low), max(was[1], high))
        return Trace(trace_id(self.session_id), self.session_id, ordered)


def _ordered(spans: dict[str, Span], root: Span) -> list[Span]:
    """Depth first from the root, children in start order (then id: stable)."""
    children: dict[str, list[Span]] = {}
    for span in spans.values():
        if span is not root:
            children.setdefault(span.parent, []).append(span)
    out: list[Span] = []
    stack = [root]
    while stack:
        span = stack.pop()
        out.append(span)
        stack += sorted(children.get(span.span_id, []), key=lambda s: (s.start, s.span_id), reverse=True)
    return out
