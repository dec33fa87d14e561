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
    "Clarification",
    "TERMINAL",
    "CycleKind",
    "Feedback",
    "FeedbackItem",
    "PauseInfo",
    "PauseKind",
    "OllamaProvider",
    "OpenAIProvider",
    "ProviderSpec",
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


class ScriptedProvider(_Wire, frozen=True, tag="scripted", tag_field="kind", kw_only=True):
    """The deterministic model: answers come from a YAML script (see protocol.script)."""

    script_yaml: Annotated[str, msgspec.Meta(max_length=5_000_000)]
    script_name: str = ""


class _HttpProvider(_Wire, frozen=True, kw_only=True):
    """A model server reached over HTTP (fields shared by the Ollama and OpenAI-compatible kinds).

    ``model`` answers every stage unless ``stage_models`` names another for a stage.
    Timeouts: ``connect_timeout_s`` to open the connection, ``first_token_timeout_s`` for
    the first byte of the answer (a local model may think for minutes), ``idle_timeout_s``
    between two chunks of a stream once it has started. Transient failures (connection
    refused or reset, 429, 5xx, timeouts) are retried ``max_retries`` times with
    exponential backoff and jitter. A ``base_url`` that is not loopback or private is
    refused unless ``allow_remote`` (the seeds forbid external API calls).
    """

    base_url: Annotated[str, msgspec.Meta(min_length=1, max_length=2_048)]
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    stage_models: dict[Stage, Annotated[str, msgspec.Meta(min_length=1, max_length=256)]] = {}
    num_ctx: Annotated[int, msgspec.Meta(ge=512, le=2_097_152)] = 8_192
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] = 0.0
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] | None = None
    connect_timeout_s: Seconds = 10.0
    first_token_timeout_s: Seconds = 600.0
    idle_timeout_s: Seconds = 120.0
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=10)] = 3
    backoff_initial_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
    backoff_max_s: Annotated[float, msgspec.Meta(ge=0, le=600)] = 30.0
    allow_remote: bool = False

    def model_for(self, stage: Stage) -> str:
        return self.stage_models.get(stage, self.model)


class OllamaProvider(_HttpProvider, frozen=True, tag="ollama", tag_field="kind", kw_only=True):
    """Ollama's native API: ``POST {base_url}/api/chat``, NDJSON streaming."""

    base_url: Annotated[str, msgspec.Meta(min_length=1, max_length=2_048)] = "http://127.0.0.1:11434"


class OpenAIProvider(_HttpProvider, frozen=True, tag="openai", tag_field="kind", kw_only=True):
    """An OpenAI-compatible server (LM Studio, llama.cpp's server, vLLM):
    ``POST {base_url}/chat/completions``, SSE streaming. ``base_url`` includes ``/v1``.
    ``api_key_env`` names an environment variable of the stage actors holding a key; the
    key itself never enters settings (settings are stored with the session)."""

    base_url: Annotated[str, msgspec.Meta(min_length=1, max_length=2_048)] = "http://127.0.0.1:1234/v1"
    api_key_env: Annotated[str, msgspec.Meta(max_length=256)] = ""


ProviderSpec = ScriptedProvider | OllamaProvider | OpenAIProvider


class SessionSettings(_Wire, frozen=True, kw_only=True):
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
    # The workspace's own checks (``verification.commands`` in .agent/config.yml), run by
    # the verifier on every visit beside the plan's acceptance checks.
    verify_commands: list[Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]] = []
    # Token budgets (estimated at 4 characters a token): the planner's whole prompt, and
    # one tool result shown to the executor's model (longer ones are cut with a note).
    planner_context_tokens: Annotated[int, msgspec.Meta(ge=500, le=2_000_000)] = 6_000
    tool_result_tokens: Annotated[int, msgspec.Meta(ge=100, le=1_000_000)] = 10_000
    # How long a needs_input pause waits for ``acode answer`` before the planner goes on
    # with each question's default (its first option); 0 waits for ever.
    clarification_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=30 * 86_400)] = 0.0


class FeedbackItem(_Wire, frozen=True, kw_only=True):
    label: str
    problem: str
    detail: str = ""


class Feedback(_Wire, frozen=True, kw_only=True):
    """What a later stage tells an earlier one when it sends the session back."""

    source: Stage
    summary: str
    items: list[FeedbackItem] = []


class Clarification(_Wire, frozen=True, kw_only=True):
    """A planner's question and the user's answer (or its default, when the wait ran out)."""

    label: str
    question: str
    answer: str
    defaulted: bool = False


class PauseInfo(_Wire, frozen=True, kw_only=True):
    kind: PauseKind
    code: str
    message: str


class SessionSnapshot(_Wire, frozen=True, kw_only=True):
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
    clarifications: list[Clarification] = []  # every answer given so far, oldest first
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
