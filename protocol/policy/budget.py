"""A session's budget: what it may spend in all, what it has spent, and how a human extends it.

Four limits bound a whole session (config ``budget:``, flags ``--budget-…`` on ``acode run``
and ``acode resume``): model tokens in and out together (``tokens``), tool calls the
models asked for (``tool_calls``: the executor's calls and the verifier's checks, not
acode's own reads of the workspace), minutes the session ran (``wall_minutes``: not while
it was paused or acode was down) and minutes spent waiting for the model
(``model_minutes``). A limit of 0 is no limit.

What a session has spent (:class:`Spent`) is counted from durable records only: each
model answer once, when persistence first stores it, and each tool call once, when its
``tool_called`` event is first stored (``counted``). A stage killed mid-way and run again
replays the answers and calls recorded before the kill: they cost nothing and count
nothing twice, and an answer that was never recorded is asked for, and counted, again.

At :data:`WARN_AT` of a limit a ``budget_warning`` event is written, once per limit value;
a call that would cross a limit is not made: the session pauses ``budget_exhausted``
(ACODE-ORCH-013, exit 24) and that call is made after ``acode resume --budget-…`` raises
the limit (seed 002 S10: only a human raises one).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

__all__ = ["FLAGS", "KINDS", "WARN_AT", "Budget", "BudgetChange", "BudgetKind", "Spent", "extended", "figure",
           "limit_of", "parse_change", "show", "spent_on"]

BudgetKind = Literal["tokens", "tool_calls", "wall_minutes", "model_minutes"]
KINDS: tuple[BudgetKind, ...] = ("tokens", "tool_calls", "wall_minutes", "model_minutes")
FLAGS: dict[str, str] = {"tokens": "--budget-tokens", "tool_calls": "--budget-tool-calls",  # run, resume
                                "wall_minutes": "--budget-minutes", "model_minutes": "--budget-model-minutes"}
WARN_AT = 0.8

_Count = Annotated[int, msgspec.Meta(ge=0, le=10**12)]
_Minutes = Annotated[float, msgspec.Meta(ge=0, le=10**7)]


class Budget(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The limits of one session (0: none). The defaults leave an ordinary task on a local
    model alone and stop a runaway session within the hour."""

    tokens: _Count = 2_000_000
    tool_calls: _Count = 500
    wall_minutes: _Minutes = 60.0
    model_minutes: _Minutes = 45.0


class Spent(msgspec.Struct, frozen=True, kw_only=True):
    """What a session has spent so far (``running_s``: time it ran, from the coordinator's
    snapshot; the rest from persistence's records)."""

    tokens_in: _Count = 0
    tokens_out: _Count = 0
    tool_calls: _Count = 0
    model_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    running_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0

    def plus(self, other: Spent) -> Spent:
        return Spent(tokens_in=self.tokens_in + other.tokens_in, tokens_out=self.tokens_out + other.tokens_out,
                     tool_calls=self.tool_calls + other.tool_calls, model_ms=self.model_ms + other.model_ms,
                     running_s=self.running_s + other.running_s)


class BudgetChange(msgspec.Struct, frozen=True, kw_only=True):
    """``acode resume --budget-tokens``: a new limit (``set``), or more of it: ``add`` N, or
    ``percent`` N of the current limit."""

    value: Annotated[float, msgspec.Meta(ge=0, le=10**12)]
    how: Literal["set", "add", "percent"] = "set"


def spent_on(spent: Spent, kind: BudgetKind) -> float:
    """What ``spent`` counts against the limit ``kind``, in that limit's unit."""
    match kind:
        case "tokens":
            return spent.tokens_in + spent.tokens_out
        case "tool_calls":
            return spent.tool_calls
        case "wall_minutes":
            return spent.running_s / 60
        case "model_minutes":
            return spent.model_ms / 60_000


def limit_of(budget: Budget, kind: BudgetKind) -> float:
    value: float = getattr(budget, kind)
    return value


_CHANGE = re.compile(r"^(\+)?(\d+(?:\.\d+)?)(%)?$")


def parse_change(text: str) -> BudgetChange:
    """``"500"`` (the new limit), ``"+500"`` (that much more), ``"+50%"`` (half as much
    again); ValueError naming the forms otherwise."""
    found = _CHANGE.match(text.strip().replace("_", "").replace(",", ""))
    if found is None or (found.group(3) and not found.group(1)):
        raise ValueError(f"{text!r} is not a budget: give the new limit (500), more of it (+500), or a "
                         "share more of it (+50%)")
    value = float(found.group(2))
    return BudgetChange(value=value, how="percent" if found.group(3) else "add" if found.group(1) else "set")


def extended(limit: float, change: BudgetChange, *, whole: bool) -> float:
    """``limit`` after ``change`` (``whole``: a count, rounded up). Extending no limit (0)
    leaves none."""
    match change.how:
        case "set":
            value = change.value
        case "add":
            value = limit + change.value if limit else 0.0
        case "percent":
            value = limit * (1 + change.value / 100)
    return float(-(-value // 1)) if whole else round(value, 2)


def figure(kind: BudgetKind, value: float) -> str:
    """A bare figure in its limit's unit: ``2,000,000`` (a count), ``12.5`` (minutes)."""
    return f"{value:,.0f}" if kind in ("tokens", "tool_calls") else f"{value:,.1f}".removesuffix(".0")


def show(kind: BudgetKind, value: float) -> str:
    """A figure in its limit's unit, for a human: ``12,500 tokens``, ``3.5 min``."""
    unit = {"tokens": "tokens", "tool_calls": "tool calls", "wall_minutes": "min running",
            "model_minutes": "min of model time"}[kind]
    return f"{figure(kind, value)} {unit}"
