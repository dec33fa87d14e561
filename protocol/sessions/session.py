"""A session's durable state, and the settings it runs with.

:class:`SessionSnapshot` is what persistence stores beside the event log (written in the
same transaction as the events that produced it) and what the coordinator rebuilds a
session from after a restart. :class:`SessionSettings` is the resolved configuration a
session was submitted with; it travels with the session so recovery uses the same
limits the user asked for.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.calls.autonomy import ApprovalDecision, ApprovalMode, ApprovalRequest, Approvals, Level
from protocol.calls.mcp import McpServerRef
from protocol.errors import ErrorInfo
from protocol.plans.results import StageResult, WorkspaceChanges
from protocol.plans.stages import (
    CYCLE_KINDS,
    STAGES,
    TERMINAL,
    CycleKind,
    PauseKind,
    ResumeMode,
    SessionStatus,
    Stage,
)
from protocol.policy.anomalies import AnomalyThresholds, Response, VerifySeen
from protocol.policy.budget import Budget, BudgetChange, BudgetKind
from protocol.policy.hooks import HookSettings
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.profiles import ModelProfile

__all__ = [
    "CYCLE_KINDS",
    "DEFAULT_TOKEN_BUDGET",
    "MAX_STEERING_CHARS",
    "MAX_STEERING_NOTES",
    "STAGES",
    "STAGE_MAX_TOKENS",
    "Clarification",
    "TERMINAL",
    "CycleKind",
    "Feedback",
    "FeedbackItem",
    "FeedbackSource",
    "PauseInfo",
    "PauseKind",
    "OllamaProvider",
    "OpenAIProvider",
    "ProviderSpec",
    "ScriptedProvider",
    "SessionSettings",
    "SessionSnapshot",
    "SettingsOverride",
    "SessionStatus",
    "Stage",
    "SteeringNote",
    "model_of",
]


Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]
Percent = Annotated[int, msgspec.Meta(ge=1, le=100)]
DEFAULT_TOKEN_BUDGET: dict[Stage, int] = {"planner": 25, "executor": 45, "verifier": 15, "reviewer": 15}
OutputTokens = Annotated[int, msgspec.Meta(ge=16, le=1_048_576)]
# What each stage's answer may take when ``max_tokens`` and ``stage_max_tokens`` say
# nothing: a plan of a few tasks, a tool call writing a whole file, a verdict, a review.
# Each request is also capped to the context left after its prompt (actors.llm.http).
STAGE_MAX_TOKENS: dict[Stage, int] = {"planner": 4_096, "executor": 4_096, "verifier": 1_024, "reviewer": 2_048}
SmallCount = Annotated[int, msgspec.Meta(ge=0, le=1_000)]


class _Wire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class ScriptedProvider(_Wire, frozen=True, tag="scripted", tag_field="kind", kw_only=True):
    """The deterministic model: answers come from a YAML script (see protocol.plans.script)."""

    script_yaml: Annotated[str, msgspec.Meta(max_length=5_000_000)]
    script_name: str = ""

    def model_for(self, stage: Stage) -> str:
        """What stands for a model's name in traces and metrics: ``scripted``."""
        return "scripted"


class _HttpProvider(_Wire, frozen=True, kw_only=True):
    """A model server reached over HTTP (fields shared by the Ollama and OpenAI-compatible kinds).

    ``model`` answers every stage unless ``stage_models`` names another for a stage.
    Timeouts: ``connect_timeout_s`` to open the connection, ``first_token_timeout_s`` for
    the first byte of the answer (a local model may think for minutes), ``idle_timeout_s``
    between two chunks of a stream once it has started. Transient failures (connection
    refused or reset, 429, 5xx, timeouts) are retried ``max_retries`` times with
    exponential backoff and jitter. A ``base_url`` that is not loopback or private is
    refused unless ``allow_remote`` (the seeds forbid external API calls).

    ``max_tokens`` caps every answer (sent as ``max_tokens`` / ``options.num_predict``);
    ``stage_max_tokens`` overrides it per stage; without either a stage gets its
    :data:`STAGE_MAX_TOKENS` default.
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
    max_tokens: OutputTokens | None = None
    stage_max_tokens: dict[Stage, OutputTokens] = {}

    def model_for(self, stage: Stage) -> str:
        return self.stage_models.get(stage, self.model)

    def max_tokens_for(self, stage: Stage) -> int:
        """The answer cap for ``stage``: its override, else ``max_tokens``, else its default."""
        return self.stage_max_tokens.get(stage) or self.max_tokens or STAGE_MAX_TOKENS[stage]


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


def model_of(provider: ProviderSpec | None, stage: Stage) -> tuple[str, str]:
    """The provider's kind and the model's name ``stage`` asks (``("", "")``: none set)."""
    if provider is None:
        return "", ""
    return str(provider.__struct_config__.tag), provider.model_for(stage)


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
    # Each stage's prompt budget, in percent of the model's context less the answer's
    # reserve (seed 000 FR-047..053; see actors/stages/prompting/budget.py).
    token_budget: dict[Stage, Percent] = msgspec.field(default_factory=lambda: dict(DEFAULT_TOKEN_BUDGET))
    # The planner (seed 003's planner block): a task's complexity may not exceed
    # ``max_task_complexity``; files matching ``context_excludes`` (gitignore-style
    # patterns) are never shown to it, and when ``context_includes`` is set only files
    # matching it are shown for matching the task (key project files still are).
    max_task_complexity: Annotated[int, msgspec.Meta(ge=1, le=34)] = 34
    context_includes: list[Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]] = []
    context_excludes: list[Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]] = []
    # Transient tool failures are retried this many times, after 1x, 2x, 4x ... this wait (seed 004 FR-064/065)
    tool_retry_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] = 3
    tool_retry_backoff_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
    # A stage's own retry limit (seed 000's orchestration.stages.<stage>.retry_limit), else stage_retry_limit
    stage_retry_limits: dict[Stage, Annotated[int, msgspec.Meta(ge=0, le=10)]] = {}
    # The executor's step ladder: a failed step (step_failed, turn limit, step timeout, a
    # repeated call) is tried at most ``step_retry_limit`` times, each try from a fresh
    # window; ``step_timeout_s`` bounds one try (an answer still coming then is abandoned).
    step_retry_limit: Annotated[int, msgspec.Meta(ge=1, le=10)] = 3
    step_timeout_s: Seconds = 120.0
    # Plan review (``orchestration.stages.planner.require_human_approval``, ``acode run
    # --approve-plan``): a ready plan pauses the session (``plan_review``) until the user
    # approves it or sends it back with feedback.
    plan_review: bool = False
    # What a tool call needs before it runs (protocol.calls.autonomy): the autonomy level, the
    # approvals block's refinements, and how a prompt is decided (resolved at submit: a human
    # waits to be asked, or the non_interactive_policy decides). Read once, at session start;
    # nothing changes them afterwards (seed 002 S9), `acode resume` included.
    autonomy: Level = 2
    approvals: Approvals = Approvals()
    approval_mode: ApprovalMode = "wait"
    # How the executor's tools suit the model (protocol.sessions.profiles): chosen by the model's
    # name when the session is submitted; the default is every model's behaviour.
    profile: ModelProfile = ModelProfile()
    # What the whole session may spend (protocol.policy.budget); only a human raises it (``acode resume --budget-…``).
    budget: Budget = Budget()
    # The user's hooks (protocol.policy.hooks), fixed when the session was submitted, like its autonomy.
    hooks: HookSettings = HookSettings()
    # When a model counts as gone off the rails (protocol.policy.anomalies; config ``anomalies:``).
    anomalies: AnomalyThresholds = AnomalyThresholds()
    # The MCP servers whose tools the executor offers (protocol.calls.mcp), each with its whole
    # configuration as resolved at submit (the user's ``mcp.servers``, a trusted workspace's):
    # the risk of every MCP call is computed from this stored copy, never from the model's
    # words, and a resume keeps it, like the autonomy level.
    mcp_servers: list[McpServerRef] = []


class SettingsOverride(_Wire, frozen=True, kw_only=True):
    """What ``acode resume`` changes in a session's settings (unset fields keep their value).

    Only a human raises a limit (seed 002, S10): these come from the resume command and
    are recorded as a ``settings_changed`` event; nothing in the orchestrator makes one.
    """

    stage_timeouts: dict[Stage, Seconds] = {}
    step_timeout_s: Seconds | None = None
    cycle_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    max_turns_per_step: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    provider: ProviderSpec | None = None
    budget: dict[BudgetKind, BudgetChange] = {}

    def is_empty(self) -> bool:
        return not self.stage_timeouts and self.step_timeout_s is None and self.cycle_limit is None \
            and self.max_turns_per_step is None and self.provider is None and not self.budget


class FeedbackItem(_Wire, frozen=True, kw_only=True):
    label: str
    problem: str
    detail: str = ""


FeedbackSource = Literal["planner", "executor", "verifier", "reviewer", "user"]


class Feedback(_Wire, frozen=True, kw_only=True):
    """What a later stage tells an earlier one when it sends the session back (``target``:
    the stage it goes to), or, in a session's history, what a re-plan changed (source
    ``planner``). Source ``user``: a human's feedback on a plan under review (``acode
    replan``), fenced like any untrusted text when a stage shows it to its model."""

    source: FeedbackSource
    summary: str
    items: list[FeedbackItem] = []
    target: Stage | None = None
    cycle: SmallCount = 0


class Clarification(_Wire, frozen=True, kw_only=True):
    """A planner's question and the user's answer, or its default (``defaulted``): chosen
    by the user (``acode answer --defaults``), or taken when the wait ran out
    (``timed_out``, ``planner.clarification_timeout``)."""

    label: str
    question: str
    answer: str
    defaulted: bool = False
    timed_out: bool = False


MAX_STEERING_CHARS = 4_000  # of one ``acode steer`` text
MAX_STEERING_NOTES = 20  # kept in a session (the oldest are dropped)


class SteeringNote(_Wire, frozen=True, kw_only=True):
    """Guidance a human gave a running session (``acode steer``); ``id`` is its ``steered``
    event's, so a stage that hears of it twice (dispatch and control message) adds it once."""

    id: str
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STEERING_CHARS)]


class PauseInfo(_Wire, frozen=True, kw_only=True):
    """Why a session waits for a human, and how it goes on.

    ``fix`` is what to do first (e.g. ``ollama serve``), ``command`` the exact command
    that continues, ``resume`` what that command does (see :data:`ResumeMode`); ``task``
    and ``step`` name the step whose outcome paused the session, if one did."""

    kind: PauseKind
    code: str
    message: str
    stage: Stage | None = None
    task: str = ""
    step: str = ""
    fix: str = ""
    command: str = ""
    resume: ResumeMode = "retry"


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
    # Finished work of the current plan version, as the last verification judged it: steps
    # (``task/step``) the executor does not run again, and every task that is completed
    # (those the plan carried over completed, until a verification says otherwise).
    kept_steps: list[str] = []
    completed_tasks: list[str] = []
    history: list[Feedback] = []  # every cycle's feedback and re-plan summary, oldest first (the reviewer's)
    retries: SmallCount = 0  # stage retries (fresh visits) of the current stage since it was entered
    failure_print: str = ""  # the last verify failure's fingerprint (loop detection)
    attempt_floor: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 0  # the attempt a human resumed at
    # ``acode pause``: when the user asked (wall clock), kept until the session resumes; while
    # the session still runs, the stage stops at its next safe point and no stage is dispatched.
    pause_requested_at: float = 0.0
    steering: list[SteeringNote] = []  # ``acode steer`` guidance, sent with every dispatch from then on
    approval: ApprovalRequest | None = None  # the call an awaiting_approval pause waits on
    approvals: list[ApprovalDecision] = []  # every human decision on a call, oldest first (the sandbox checks them)
    changes: WorkspaceChanges | None = None  # the last comparison of the workspace with its baseline (None: none yet)
    running_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # time spent running until updated_at (not paused or down)
    # The last failed verifications (at most VERIFY_KEPT) and the responses made so far to
    # their anomaly (verify_repeat: a note, then a pause); a human's resume starts both afresh.
    verifications: list[VerifySeen] = []
    verify_responses: list[Response] = []

    @property
    def visit(self) -> int:
        """How many times the current stage has been entered (1 on the first entry)."""
        return self.visits.get(self.stage, 0) if self.stage else 0
