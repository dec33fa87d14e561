"""The configuration files' schema: ``$ACODE_HOME/config.yml`` and a workspace's
``.agent/config.yml`` decode into :class:`AcodeConfig`, one Struct per section.

Every Struct forbids unknown keys, so a typo fails loudly with the file, the key and what is
valid; every field is optional (None: not set), so a layer overrides only what it sets
(:mod:`acode.config.loader` merges the layers); every number has its bounds.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.calls.mcp import McpServerConfig
from protocol.policy.hooks import HookSpec
from protocol.sessions.profiles import ProfileOverride

__all__ = ["AcodeConfig", "AnomaliesSection", "ApprovalsSection", "BudgetSection", "Checkpoints", "Executor",
           "Hooks", "Logs", "Mcp", "McpServe", "Model", "Orchestration", "Planner", "Sandbox", "Section", "StageName",
           "StageOptions", "Storage", "Supervision", "Verification", "Workers"]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]


class Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A section of the file: unknown keys refused, unset keys left out when encoded."""


Percent = Annotated[int, msgspec.Meta(ge=1, le=100)]
Patterns = list[Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]]


StageName = Literal["planner", "executor", "verifier", "reviewer"]


class StageOptions(Section, frozen=True):
    """Seed 000's ``orchestration.stages.<stage>`` block (its ``timeout`` and
    ``retry_limit`` are aliases, see :data:`ALIASES`): each key is accepted with the value
    that describes what acode does, and refused (ACODE-CFG-003) with one it cannot honour."""

    context_strategy: Literal["full", "focused", "minimal", "summary"] | None = None
    parallel_steps: bool | None = None
    auto_retry_on_failure: bool | None = None
    require_human_approval: bool | None = None


class Orchestration(Section, frozen=True):
    planner_timeout: Seconds | None = None
    executor_timeout: Seconds | None = None
    verifier_timeout: Seconds | None = None
    reviewer_timeout: Seconds | None = None
    stage_retry_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    step_retry_limit: Annotated[int, msgspec.Meta(ge=1, le=10)] | None = None
    cycle_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    verify_cycle_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    review_cycle_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    # percent of the model's context (less the answer's reserve) per stage; see docs/pipeline.md "Token budgets"
    token_budget: dict[StageName, Percent] | None = None
    stage_retry_limits: dict[StageName, Annotated[int, msgspec.Meta(ge=0, le=10)]] | None = None
    stages: dict[StageName, StageOptions] | None = None


class Planner(Section, frozen=True):
    context_tokens: Annotated[int, msgspec.Meta(ge=500, le=2_000_000)] | None = None
    clarification_timeout: Annotated[float, msgspec.Meta(ge=0, le=30 * 86_400)] | None = None
    max_complexity: Literal[1, 2, 3, 5, 8, 13, 21, 34] | None = None
    context_includes: Patterns | None = None
    context_excludes: Patterns | None = None


class Executor(Section, frozen=True):
    max_turns_per_step: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    tool_result_tokens: Annotated[int, msgspec.Meta(ge=100, le=1_000_000)] | None = None
    step_timeout_seconds: Seconds | None = None
    tool_retry_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    tool_retry_backoff: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    workspace_only: bool | None = None  # always true: acode's tools never leave the workspace


class Verification(Section, frozen=True):
    """The workspace's own checks (e.g. its test suite), run by the verifier every time."""

    commands: list[Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]] | None = None


Names = list[Annotated[str, msgspec.Meta(min_length=1, max_length=256)]]


class Sandbox(Section, frozen=True):
    """Tool limits and the command policy (see README "Sandbox"; defaults in protocol/policy/sandbox.py)."""

    command_timeout: Seconds | None = None
    output_limit_bytes: Annotated[int, msgspec.Meta(ge=1_024, le=10_000_000)] | None = None
    allowed_commands: Names | None = None
    extra_commands: Names | None = None
    allow_inline_code: bool | None = None
    shell_commands: list[Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]] | None = None
    require_isolation: Literal["process", "landlock", "bubblewrap"] | None = None
    network: bool | None = None
    memory_limit_mb: Annotated[int, msgspec.Meta(ge=0, le=1_048_576)] | None = None
    file_size_limit_mb: Annotated[int, msgspec.Meta(ge=0, le=1_048_576)] | None = None
    max_processes: Annotated[int, msgspec.Meta(ge=8, le=100_000)] | None = None
    pass_env: Names | None = None
    min_isolation: Literal["process", "landlock", "bubblewrap"] | None = None  # require_isolation's issue name
    read_paths: list[Annotated[str, msgspec.Meta(min_length=1, max_length=4_096)]] | None = None
    write_paths: list[Annotated[str, msgspec.Meta(min_length=1, max_length=4_096)]] | None = None
    read_opt: bool | None = None


ModelName = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class Model(Section, frozen=True):
    """Which model answers the stages (see README "Models"); defaults in protocol/sessions/session.py."""

    provider: Literal["scripted", "ollama", "openai"] | None = None
    script: str | None = None
    model: ModelName | None = None
    base_url: Annotated[str, msgspec.Meta(min_length=1, max_length=2_048)] | None = None
    stage_models: dict[Literal["planner", "executor", "verifier", "reviewer"], ModelName] | None = None
    num_ctx: Annotated[int, msgspec.Meta(ge=512, le=2_097_152)] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] | None = None
    connect_timeout: Seconds | None = None
    first_token_timeout: Seconds | None = None
    idle_timeout: Seconds | None = None
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    backoff_initial: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    backoff_max: Annotated[float, msgspec.Meta(ge=0, le=600)] | None = None
    allow_remote: bool | None = None
    api_key_env: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(ge=16, le=1_048_576)] | None = None
    stage_max_tokens: dict[Literal["planner", "executor", "verifier", "reviewer"],
                           Annotated[int, msgspec.Meta(ge=16, le=1_048_576)]] | None = None
    # model-name pattern -> what to change in the profile it gets (protocol/sessions/profiles.py)
    profiles: dict[Annotated[str, msgspec.Meta(min_length=1, max_length=256)], ProfileOverride] | None = None


class Supervision(Section, frozen=True):
    heartbeat_interval: Annotated[float, msgspec.Meta(ge=0.05, le=60)] | None = None
    liveness: Annotated[int, msgspec.Meta(ge=2, le=100)] | None = None
    restart_intensity: Annotated[int, msgspec.Meta(ge=0, le=1_000)] | None = None
    restart_period: Seconds | None = None
    backoff_initial: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    backoff_max: Annotated[float, msgspec.Meta(ge=0, le=600)] | None = None
    ready_timeout: Seconds | None = None
    stop_timeout: Seconds | None = None


class Storage(Section, frozen=True):
    synchronous: Literal["full", "normal"] | None = None


class Logs(Section, frozen=True):
    """The actors' logs in ``run/logs`` (README "Configuration"; actors/logrotate.py): a log
    past ``max_mb`` MiB is rotated, the ``keep`` newest rotated files are kept (0: none)."""

    max_mb: Annotated[float, msgspec.Meta(gt=0, le=1_000_000)] | None = None
    keep: Annotated[int, msgspec.Meta(ge=0, le=100)] | None = None


class Workers(Section, frozen=True):
    planner: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    executor: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    verifier: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    reviewer: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None


ClassPolicy = Literal["auto", "prompt", "deny"]


class ApprovalsSection(Section, frozen=True):
    """Seed 004's ``approvals:`` block: refines the autonomy level per risk class
    (protocol/calls/autonomy.py has the table); ``non_interactive_policy`` decides a prompt when
    ``acode run`` is not on a terminal."""

    file_write: ClassPolicy | None = None
    file_delete: ClassPolicy | None = None
    terminal_commands: ClassPolicy | None = None
    non_interactive_policy: Literal["auto", "skip", "fail"] | None = None


class Checkpoints(Section, frozen=True):
    """What the checkpoint before each call covers and how long it is kept (README
    "Checkpoints and undo"; defaults in protocol/policy/checkpoints.py)."""

    enabled: bool | None = None
    max_file_mb: Annotated[float, msgspec.Meta(ge=0, le=100_000)] | None = None
    skip_dirs: list[Annotated[str, msgspec.Meta(min_length=1, max_length=255, pattern=r"^[^/\x00]+$")]] | None = None
    keep_days: Annotated[float, msgspec.Meta(gt=0, le=36_500)] | None = None


class BudgetSection(Section, frozen=True):
    """What a whole session may spend (README "Budgets"; defaults and meaning in
    protocol/policy/budget.py); 0 is no limit."""

    tokens: Annotated[int, msgspec.Meta(ge=0, le=10**12)] | None = None
    tool_calls: Annotated[int, msgspec.Meta(ge=0, le=10**9)] | None = None
    wall_minutes: Annotated[float, msgspec.Meta(ge=0, le=10**7)] | None = None
    model_minutes: Annotated[float, msgspec.Meta(ge=0, le=10**7)] | None = None


class Hooks(Section, frozen=True):
    """The user's scripts and webhooks at a session's turning points (README "Hooks";
    protocol/policy/hooks.py): a list of hooks per point, and the hosts a webhook may reach
    besides loopback. A workspace config's hooks apply only when the user trusts it."""

    session_start: list[HookSpec] | None = None
    session_end: list[HookSpec] | None = None
    stage_start: list[HookSpec] | None = None
    stage_end: list[HookSpec] | None = None
    step_start: list[HookSpec] | None = None
    step_end: list[HookSpec] | None = None
    pre_tool: list[HookSpec] | None = None
    post_tool: list[HookSpec] | None = None
    on_pause: list[HookSpec] | None = None
    on_resume: list[HookSpec] | None = None
    allow_hosts: list[Annotated[str, msgspec.Meta(min_length=1, max_length=255)]] | None = None


class AnomaliesSection(Section, frozen=True):
    """When a model counts as gone off the rails (README "Anomalies and health"; defaults and
    meaning in protocol/policy/anomalies.py); lower is stricter for each."""

    repeated_invalid: Annotated[int, msgspec.Meta(ge=1, le=1_000)] | None = None
    repeated_error: Annotated[int, msgspec.Meta(ge=1, le=1_000)] | None = None
    edits_undone: Annotated[int, msgspec.Meta(ge=1, le=1_000)] | None = None
    no_progress: Annotated[int, msgspec.Meta(ge=1, le=1_000)] | None = None
    burn_turns: Annotated[int, msgspec.Meta(ge=2, le=1_000)] | None = None
    burn_growth: Annotated[float, msgspec.Meta(ge=1.0, le=1_000.0)] | None = None
    spike_factor: Annotated[float, msgspec.Meta(ge=1.0, le=1_000.0)] | None = None
    spike_floor: Annotated[int, msgspec.Meta(ge=0, le=100_000_000)] | None = None
    spike_history: Annotated[int, msgspec.Meta(ge=1, le=1_000)] | None = None
    error_streak: Annotated[int, msgspec.Meta(ge=1, le=1_000)] | None = None
    verify_repeats: Annotated[int, msgspec.Meta(ge=2, le=1_000)] | None = None


class McpServe(Section, frozen=True):
    """``acode mcp serve`` (read from the user's own file only): ``allow_approvals`` offers the
    delegating agent ``approve``/``deny``; unset or false, approvals stay a human's."""

    allow_approvals: bool | None = None


class Mcp(Section, frozen=True):
    """MCP (README "MCP servers"; docs/mcp.md): the user's servers, ``servers.NAME`` a
    :class:`~protocol.calls.mcp.McpServerConfig`, checked further (its name, one transport) by
    :func:`acode.config.mcp.servers`; and ``serve``, the options of ``acode mcp serve``."""

    servers: dict[Annotated[str, msgspec.Meta(min_length=1, max_length=64)], McpServerConfig] | None = None
    serve: McpServe | None = None


class AcodeConfig(Section, frozen=True):
    # 0 ask before anything but reads, 1 edits run, 2 allowlisted commands run too (default),
    # 3 everything the sandbox allows runs; read when a session starts, stored with it
    autonomy: Annotated[int, msgspec.Meta(ge=0, le=3)] | None = None
    approvals: ApprovalsSection = ApprovalsSection()
    orchestration: Orchestration = Orchestration()
    planner: Planner = Planner()
    executor: Executor = Executor()
    verification: Verification = Verification()
    sandbox: Sandbox = Sandbox()
    model: Model = Model()
    supervision: Supervision = Supervision()
    storage: Storage = Storage()
    workers: Workers = Workers()
    logs: Logs = Logs()
    checkpoints: Checkpoints = Checkpoints()
    budget: BudgetSection = BudgetSection()
    hooks: Hooks = Hooks()
    anomalies: AnomaliesSection = AnomaliesSection()
    mcp: Mcp = Mcp()
