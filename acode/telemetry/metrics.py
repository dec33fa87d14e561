"""Sessions' event logs counted in the Prometheus text exposition format (``acode metrics``).

Every figure comes from what ``acode show`` reads (the session and its events), so the
two agree: transitions are ``transitioned`` events, stage runs and their times, tokens and
model time are the ``stage_finished`` events (the per-stage table of ``acode show``),
escalations are ``session_paused`` events by kind, tool calls are ``tool_called`` events.
Restarts are the one figure not in any log: the coordinator counts them per actor
instance since it started (``acode status``), and the caller passes them in.

A model is labelled as its ``stage_finished`` event names it; events from before acode
recorded that say ``unknown``. Histograms use fixed buckets (seconds) fit for local models
and tools: a stage takes seconds to half an hour, a tool call milliseconds to minutes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.plans.stages import SessionStatus
from protocol.sessions.events import (
    AnomalyDetected,
    Event,
    SessionPaused,
    StageFinished,
    StageRetried,
    ToolCalled,
    Transitioned,
)
from protocol.sessions.session import SessionSnapshot

__all__ = ["STAGE_BUCKETS", "TOOL_BUCKETS", "Restarts", "SessionRecord", "exposition"]

STAGE_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
TOOL_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
_STATUSES: tuple[SessionStatus, ...] = ("running", "paused", "completed", "failed", "cancelled")

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SessionRecord:
    session: SessionSnapshot
    events: list[Event]


@dataclass(frozen=True)
class Restarts:
    """One actor instance's restarts since the coordinator started (``acode status``)."""

    actor: str
    instance: str
    restarts: int


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.series: dict[Labels, list[float]] = {}

    def observe(self, labels: Labels, value: float) -> None:
        self.series.setdefault(labels, []).append(value)

    def lines(self, name: str) -> list[str]:
        out = []
        for labels, values in sorted(self.series.items()):
            for bound in self.buckets:
                out.append(_sample(f"{name}_bucket", (*labels, ("le", _number(bound))),
                                   sum(1 for v in values if v <= bound)))
            out.append(_sample(f"{name}_bucket", (*labels, ("le", "+Inf")), len(values)))
            out.append(_sample(f"{name}_sum", labels, round(sum(values), 6)))
            out.append(_sample(f"{name}_count", labels, len(values)))
        return out


def exposition(records: Iterable[SessionRecord], restarts: Iterable[Restarts] = ()) -> str:
    """The metrics of ``records`` (and the coordinator's ``restarts``) as Prometheus text."""
    sessions: Counter[Labels] = Counter({(("status", s),): 0 for s in _STATUSES})
    transitions: Counter[Labels] = Counter()
    runs: Counter[Labels] = Counter()
    retries: Counter[Labels] = Counter()
    tools: Counter[Labels] = Counter()
    tokens: Counter[Labels] = Counter()
    model_seconds: dict[Labels, float] = {}
    model_calls: Counter[Labels] = Counter()
    escalations: Counter[Labels] = Counter()
    anomalies: Counter[Labels] = Counter()
    stage_time, tool_time = _Histogram(STAGE_BUCKETS), _Histogram(TOOL_BUCKETS)
    for record in records:
        sessions[(("status", record.session.status),)] += 1
        for event in record.events:
            match event:
                case Transitioned(source=source, target=target):
                    transitions[(("source", source), ("target", target))] += 1
                case StageFinished(stage=stage):
                    model = event.model or "unknown"
                    runs[(("stage", stage), ("ok", str(event.ok).lower()))] += 1
                    stage_time.observe((("stage", stage),), event.duration_ms / 1000)
                    tokens[(("stage", stage), ("model", model), ("type", "input"))] += event.tokens_in
                    tokens[(("stage", stage), ("model", model), ("type", "output"))] += event.tokens_out
                    key = (("stage", stage), ("model", model))
                    model_seconds[key] = model_seconds.get(key, 0.0) + event.model_ms / 1000
                    model_calls[(("stage", stage), ("model", model))] += event.model_calls
                case StageRetried(stage=stage):
                    retries[(("stage", stage),)] += 1
                case ToolCalled(tool=tool, risk=risk, outcome=outcome, ok=ok):
                    tools[(("tool", tool), ("risk", risk), ("outcome", outcome), ("ok", str(ok).lower()))] += 1
                    tool_time.observe((("tool", tool),), event.duration_ms / 1000)
                case SessionPaused(kind=kind):
                    escalations[(("kind", kind),)] += 1
                case AnomalyDetected(kind=kind):
                    anomalies[(("kind", kind),)] += 1
    restarted: Counter[Labels] = Counter()
    for actor in restarts:
        restarted[(("actor", actor.actor), ("instance", actor.instance))] += actor.restarts
    out: list[str] = []
    _family(out, "acode_sessions", "gauge", "Sessions by status.", sessions)
    _family(out, "acode_transitions_total", "counter", "Stage transitions (transitioned events).", transitions)
    _family(out, "acode_stage_runs_total", "counter", "Stage attempts that finished (stage_finished events).", runs)
    _family(out, "acode_stage_retries_total", "counter", "Stage attempts retried (stage_retried events).", retries)
    _header(out, "acode_stage_duration_seconds", "histogram", "How long each finished stage attempt took.")
    out += stage_time.lines("acode_stage_duration_seconds")
    _family(out, "acode_tool_calls_total", "counter", "Tool calls with a result (tool_called events).", tools)
    _header(out, "acode_tool_call_duration_seconds", "histogram", "How long each tool call took.")
    out += tool_time.lines("acode_tool_call_duration_seconds")
    _family(out, "acode_model_tokens_total", "counter",
            "Tokens by stage and model as the server counted them (stage_finished events).", tokens)
    _family(out, "acode_model_seconds_total", "counter", "Time spent waiting for model answers.", model_seconds)
    _family(out, "acode_model_calls_total", "counter", "Model calls, replayed ones included.", model_calls)
    _family(out, "acode_escalations_total", "counter", "Sessions paused for a human, by kind (session_paused).",
            escalations)
    _family(out, "acode_anomalies_total", "counter", "Anomalies detected, by kind (anomaly_detected).", anomalies)
    _family(out, "acode_actor_restarts_total", "counter",
            "Actor restarts since the coordinator started, by actor instance.", restarted)
    return "\n".join(out) + "\n"


def _header(out: list[str], name: str, kind: str, help_text: str) -> None:
    out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def _family(out: list[str], name: str, kind: str, help_text: str, series: Mapping[Labels, float]) -> None:
    _header(out, name, kind, help_text)
    out += [_sample(name, labels, value) for labels, value in sorted(series.items())]


def _sample(name: str, labels: Labels, value: float) -> str:
    shown = ",".join(f'{key}="{_escape(value_)}"' for key, value_ in labels)
    return f"{name}{{{shown}}} {_number(value)}" if shown else f"{name} {_number(value)}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(round(float(value), 6))
