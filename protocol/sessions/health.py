"""A session's health (0-100), read from its records (issue 28 §2).

:func:`session_health` is :func:`protocol.policy.anomalies.health` of what the session's events
and spending say: each ``anomaly_detected`` event's score; its retries (a step's tries after
the first, ``step_retried``; a stage attempted again, ``stage_retried``; a stage entered
afresh after a failure, a ``transitioned`` revisit whose reason is a stage retry); its
escalations (pauses that say something went wrong, :data:`TROUBLE`: not the user's own
pause, a plan review, an approval, the planner's questions, nor a spent budget, which the
budget share counts); and the largest share of a budget limit it has spent. Everything
comes from durable records, so the figure is the same after a restart, and persistence
stamps it on each ``anomaly_detected`` event as it stores it. ``acode show`` and ``acode
status`` print it.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.plans.stages import PauseKind
from protocol.policy import budget as budgets
from protocol.policy.anomalies import health
from protocol.policy.budget import Budget, Spent
from protocol.sessions.events import AnomalyDetected, Event, SessionPaused, StageRetried, StepRetried, Transitioned

__all__ = ["TROUBLE", "budget_share", "session_health"]

#: pause kinds that count as escalations (the others wait for a human without anything having gone wrong)
TROUBLE: frozenset[PauseKind] = frozenset({"cycle_limit", "stage_timeout", "actor_failed", "escalation",
                                           "model_unavailable", "invalid_plan", "anomaly"})


def budget_share(budget: Budget, spent: Spent) -> float:
    """The largest share of one of ``budget``'s limits that ``spent`` used (limits of 0 are none)."""
    shares = [budgets.spent_on(spent, kind) / limit for kind in budgets.KINDS
              if (limit := budgets.limit_of(budget, kind))]
    return max(shares, default=0.0)


def session_health(events: Iterable[Event], budget: Budget, spent: Spent) -> int:
    """The session's health from its ``events`` and what it ``spent`` against ``budget``."""
    anomalies: list[AnomalyDetected] = []
    retries = escalations = 0
    for event in events:
        match event:
            case AnomalyDetected():
                anomalies.append(event)
            case StepRetried() | StageRetried():
                retries += 1
            case Transitioned(source=source, target=target, reason=reason) if source == target \
                    and reason.startswith("stage retry"):
                retries += 1
            case SessionPaused(kind=kind) if kind in TROUBLE:
                escalations += 1
    return health(anomalies, retries, budget_share(budget, spent), escalations)
