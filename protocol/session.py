"""A session's durable state, and the settings it runs with.

:class:`SessionSnapshot` is what persistence stores beside the event log (written in the
same transaction as the events that produced it) and what the coordinator rebuilds a
session from after a restart. :class:`SessionSettings` is the resolved configuration a
session was submitted with; it travels with the session so recovery uses the same
limits the user asked for.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from protocol.errors import ErrorInfo
from protocol.results import StageResult
from protocol.sandbox import SandboxPolicy
from protocol.stages import (
    CYCLE_KINDS,
    STAGES,
    TERMINAL,
    CycleKind,
    PauseKind,
    SessionStatus,
    Stage,
)

__all__ = [
    "CYCLE_KINDS",
    "STAGES",
    "TERMINAL",
    "CycleKind",
    "Feedback",
    "FeedbackItem",
    "PauseInfo",
    "PauseKind",
    "ScriptedProvider",
    "SessionSettings",
    "SessionSnapshot",
    "SessionStatus",
    "Stage",
]


Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]
SmallCount = Annotated[int, msgspec.Meta(ge=0, le=1_000)]


class _Wire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class ScriptedProvider(_Wire, tag="scripted", tag_field="kind", kw_only=True):
    """The deterministic model: answers come from a YAML script (see protocol.script)."""

    script_yaml: Annotated[str, msgspec.Meta(max_length=5_000_000)]
    script_name: str = ""


ProviderSpec = ScriptedProvider


class SessionSettings(_Wire, kw_only=True):
    """Resolved limits and model for one session (defaults match the seeds)."""

    stage_timeouts: dict[Stage, Seconds] = msgspec.field(
        default_factory=lambda: dict.fromkeys(STAGES, 300.0))
    stage_retry_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] = 2
    cycle_limits: dict[CycleKind, Annotated[int, msgspec.Meta(ge=0, le=10)]] = msgspec.field(
        default_factory=lambda: dict.fromkeys(CYCLE_KINDS, 3))
    max_turns_per_step: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    command_timeout: Seconds = 120.0
    output_limit_bytes: Annotated[int, msgspec.Meta(ge=1_024, le=10_000_000)] = 64_000
    sandbox: SandboxPolicy = SandboxPolicy()
    provider: ProviderSpec | None = None


class FeedbackItem(_Wire, kw_only=True):
    label: str
    problem: str
    detail: str = ""


class Feedback(_Wire, kw_only=True):
    """What a later stage tells an earlier one when it sends the session back."""

    source: Stage
    summary: str
    items: list[FeedbackItem] = []


class PauseInfo(_Wire, kw_only=True):
    kind: PauseKind
    code: str
    message: str


class SessionSnapshot(_Wire, kw_only=True):
    id: str
    task: str
    workspace: str
    status: SessionStatus = "running"
    stage: Stage | None = "planner"
    visits: dict[Stage, SmallCount] = {}
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)] = 1
    timeouts: SmallCount = 0
    cycles: dict[CycleKind, SmallCount] = {}
    plan_version: SmallCount = 0
    feedback: Feedback | None = None
    last_result: StageResult | None = None  # the previous stage's answer, input of the next
    pause: PauseInfo | None = None
    error: ErrorInfo | None = None
    exit_code: Annotated[int, msgspec.Meta(ge=0, le=255)] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    finished_at: float | None = None
    settings: SessionSettings = SessionSettings()

    @property
    def visit(self) -> int:
        """How many times the current stage has been entered (1 on the first entry)."""
        return self.visits.get(self.stage, 0) if self.stage else 0
