"""Configuration files, environment and flags, resolved in one function.

Precedence (highest first): CLI flags > ``ACODE_<SECTION>__<KEY>`` environment >
workspace ``.agent/config.yml`` > user ``$ACODE_HOME/config.yml`` > defaults. The
workspace's own file may only tighten safety settings unless the user trusts it
(:mod:`cli.trust`, ``acode trust``): flags, environment and the user file are the user's.

Files are YAML decoded into Structs that forbid unknown keys, so a typo fails loudly
with the file, the key and what is valid. Every field is optional in a file; a layer
only overrides what it sets. ``acode up`` uses the user config, environment and flags
(supervision, storage, workers); ``acode run`` adds the workspace config (orchestration,
planner, executor, verification, sandbox, model).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
import msgspec.yaml

from actors.private import USER_UMASK_ENV
from cli import trust
from cli.thinking import INTERVAL_ENV
from protocol.autonomy import Approvals
from protocol.errors import ConfigError
from protocol.printable import printable
from protocol.profiles import ModelProfile, ProfileOverride, profile_for, unknown_tools
from protocol.sandbox import SandboxPolicy
from protocol.script import load_script
from protocol.session import CycleKind, OllamaProvider, OpenAIProvider, ProviderSpec, ScriptedProvider, SessionSettings
from protocol.stages import STAGES
from protocol.tools import OFFER_ORDER

if TYPE_CHECKING:
    from actors.coordinator.actor import CoordinatorOptions

__all__ = ["AcodeConfig", "approvals_of", "load_file", "model_profile", "provider_spec", "resolve", "sandbox_policy",
           "session_settings", "up_options", "decode_file", "workspace_layer"]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    pass


Percent = Annotated[int, msgspec.Meta(ge=1, le=100)]
Patterns = list[Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]]


StageName = Literal["planner", "executor", "verifier", "reviewer"]
# What each stage shows its model (seed 000's context_strategy names), fixed by acode's design
CONTEXT_STRATEGIES: dict[str, str] = {"planner": "full", "executor": "focused", "verifier": "minimal",
                                      "reviewer": "summary"}


class StageOptions(_Section, frozen=True):
    """Seed 000's ``orchestration.stages.<stage>`` block (its ``timeout`` and
    ``retry_limit`` are aliases, see :data:`ALIASES`): each key is accepted with the value
    that describes what acode does, and refused (ACODE-CFG-003) with one it cannot honour."""

    context_strategy: Literal["full", "focused", "minimal", "summary"] | None = None
    parallel_steps: bool | None = None
    auto_retry_on_failure: bool | None = None
    require_human_approval: bool | None = None


class Orchestration(_Section, frozen=True):
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


class Planner(_Section, frozen=True):
    context_tokens: Annotated[int, msgspec.Meta(ge=500, le=2_000_000)] | None = None
    clarification_timeout: Annotated[float, msgspec.Meta(ge=0, le=30 * 86_400)] | None = None
    max_complexity: Literal[1, 2, 3, 5, 8, 13, 21, 34] | None = None
    context_includes: Patterns | None = None
    context_excludes: Patterns | None = None


class Executor(_Section, frozen=True):
    max_turns_per_step: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    tool_result_tokens: Annotated[int, msgspec.Meta(ge=100, le=1_000_000)] | None = None
    step_timeout_seconds: Seconds | None = None
    tool_retry_limit: Annotated[int, msgspec.Meta(ge=0, le=10)] | None = None
    tool_retry_backoff: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    workspace_only: bool | None = None  # always true: acode's tools never leave the workspace


class Verification(_Section, frozen=True):
    """The workspace's own checks (e.g. its test suite), run by the verifier every time."""

    commands: list[Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]] | None = None


Names = list[Annotated[str, msgspec.Meta(min_length=1, max_length=256)]]


class Sandbox(_Section, frozen=True):
    """Tool limits and the command policy (see README "Sandbox"; defaults in protocol/sandbox.py)."""

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


class Model(_Section, frozen=True):
    """Which model answers the stages (see README "Models"); defaults in protocol/session.py."""

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
    # model-name pattern -> what to change in the profile it gets (protocol/profiles.py)
    profiles: dict[Annotated[str, msgspec.Meta(min_length=1, max_length=256)], ProfileOverride] | None = None


class Supervision(_Section, frozen=True):
    heartbeat_interval: Annotated[float, msgspec.Meta(ge=0.05, le=60)] | None = None
    liveness: Annotated[int, msgspec.Meta(ge=2, le=100)] | None = None
    restart_intensity: Annotated[int, msgspec.Meta(ge=0, le=1_000)] | None = None
    restart_period: Seconds | None = None
    backoff_initial: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    backoff_max: Annotated[float, msgspec.Meta(ge=0, le=600)] | None = None
    ready_timeout: Seconds | None = None
    stop_timeout: Seconds | None = None


class Storage(_Section, frozen=True):
    synchronous: Literal["full", "normal"] | None = None


class Workers(_Section, frozen=True):
    planner: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    executor: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    verifier: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    reviewer: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None


ClassPolicy = Literal["auto", "prompt", "deny"]


class ApprovalsSection(_Section, frozen=True):
    """Seed 004's ``approvals:`` block: refines the autonomy level per risk class
    (protocol/autonomy.py has the table); ``non_interactive_policy`` decides a prompt when
    ``acode run`` is not on a terminal."""

    file_write: ClassPolicy | None = None
    file_delete: ClassPolicy | None = None
    terminal_commands: ClassPolicy | None = None
    non_interactive_policy: Literal["auto", "skip", "fail"] | None = None


class AcodeConfig(_Section, frozen=True):
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


_SCALARS = frozenset({"autonomy"})  # top-level settings that are not sections (ACODE_AUTONOMY, --autonomy)


def _merge(base: AcodeConfig, over: AcodeConfig) -> AcodeConfig:
    """``over``'s set fields win, section by section."""
    sections: dict[str, Any] = {"autonomy": _pick(base.autonomy, over.autonomy)}
    for name in AcodeConfig.__struct_fields__:
        if name in _SCALARS:
            continue
        low, high = getattr(base, name), getattr(over, name)
        values = {f: _pick(getattr(low, f), getattr(high, f)) for f in type(low).__struct_fields__}
        sections[name] = type(low)(**values)
    return AcodeConfig(**sections)


def _pick(low: Any, high: Any) -> Any:
    """A setting of the higher layer wins; mappings (token_budget, stage_models) merge key by key."""
    if isinstance(low, dict) and isinstance(high, dict):
        return {**low, **high}
    return high if high is not None else low


# Keys of the seeds' sample configurations that acode names otherwise: (section, key) ->
# (the key's path in acode's config, conversion). Each is accepted with a deprecation notice.
ALIASES: dict[tuple[str, str], tuple[tuple[str, ...], Callable[[Any], Any]]] = {
    ("planner", "timeout"): (("orchestration", "planner_timeout"), lambda v: v),
    ("planner", "max_context_tokens"): (("planner", "context_tokens"), lambda v: v),
    ("executor", "retry_count"): (("executor", "tool_retry_limit"), lambda v: v),
    ("executor", "retry_backoff_base_ms"): (("executor", "tool_retry_backoff"),
                                            lambda v: v / 1000 if isinstance(v, int | float) else v),
    ("executor", "token_budget_percent"): (("orchestration", "token_budget", "executor"), lambda v: v),
    ("executor", "allowed_commands"): (("sandbox", "allowed_commands"), lambda v: v),
}


def _stage_aliases(raw: dict[str, Any]) -> list[tuple[tuple[str, ...], tuple[str, ...], Callable[[Any], Any]]]:
    """The per-stage aliases present in ``orchestration.stages`` (seed 000's advanced block):
    ``timeout`` and ``retry_limit`` of each stage."""
    stages = raw.get("orchestration", {}).get("stages") if isinstance(raw.get("orchestration"), dict) else None
    if not isinstance(stages, dict):
        return []
    found: list[tuple[tuple[str, ...], tuple[str, ...], Callable[[Any], Any]]] = []
    for stage, options in stages.items():
        if isinstance(options, dict) and isinstance(stage, str):
            base = ("orchestration", "stages", stage)
            found.append(((*base, "timeout"), ("orchestration", f"{stage}_timeout"), _same))
            found.append(((*base, "retry_limit"), ("orchestration", "stage_retry_limits", stage), _same))
    return found


def _same(value: Any) -> Any:
    return value


def _dealias(raw: Any, path: Path, notices: list[str]) -> Any:
    """``raw`` (a decoded file) with every alias moved to acode's key, one notice each. An
    alias and its key both set to different values is a contradiction (ACODE-CFG-002)."""
    if not isinstance(raw, dict):
        return raw
    aliases = [((section, key), target, convert) for (section, key), (target, convert) in ALIASES.items()]
    for (*where_path, key), target, convert in [*aliases, *_stage_aliases(raw)]:
        values: Any = raw
        for part in where_path:
            values = values.get(part) if isinstance(values, dict) else None
        section = ".".join(where_path)
        if not isinstance(values, dict) or key not in values:
            continue
        value = convert(values.pop(key))
        where: dict[str, Any] = raw
        for part in target[:-1]:
            nested = where.setdefault(part, {})
            if not isinstance(nested, dict):
                break
            where = nested
        else:
            new = ".".join(target)
            if target[-1] in where and where[target[-1]] != value:
                raise ConfigError(f"config file {path} sets both {section}.{key} ({value!r}) and {new} "
                                  f"({where[target[-1]]!r}); {section}.{key} is the old name of {new}: keep only "
                                  f"{new}", code="ACODE-CFG-002")
            where[target[-1]] = value
            notices.append(f"config file {path}: {section}.{key} is deprecated; use {new}"
                           + (" (in seconds)" if key.endswith("_ms") else ""))
    return raw


def load_file(path: Path, notices: list[str] | None = None) -> AcodeConfig:
    """Decode one config file (a missing file is an empty layer); relative script paths
    are taken from the file's directory. The seeds' names for settings acode names
    otherwise (:data:`ALIASES`) are accepted, each adding a deprecation notice to ``notices``."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return AcodeConfig()
    return decode_file(path, text, notices)


def decode_file(path: Path, text: bytes, notices: list[str] | None) -> AcodeConfig:
    """:func:`load_file` on bytes already read (``path`` names them in messages)."""
    try:
        raw = msgspec.yaml.decode(text) if text.strip() else None
        raw = _dealias(raw, path, notices if notices is not None else [])
        config = msgspec.convert(raw, AcodeConfig) if raw is not None else AcodeConfig()
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ConfigError(f"config file {path} is invalid: {exc}; valid sections: "
                          f"{', '.join(AcodeConfig.__struct_fields__)} (see README 'Configuration')") from exc
    script = config.model.script
    if script and not os.path.isabs(script):
        config = msgspec.structs.replace(config, model=msgspec.structs.replace(
            config.model, script=str((path.parent / script).resolve())))
    return config


def workspace_layer(home: Path, workspace: Path, user: AcodeConfig,
                    notices: list[str]) -> tuple[AcodeConfig, bytes | None]:
    """``workspace``'s own ``.agent/config.yml`` as it may apply (:mod:`cli.trust`): whole
    when the user trusts these exact bytes, otherwise without what would loosen ``user``
    (every layer the user controls), one notice per key dropped. Also the bytes read (None:
    no file), so what is judged is what was hashed."""
    path = trust.config_file(workspace)
    try:
        text = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return AcodeConfig(), None
    config = decode_file(path, text, notices)
    recorded = trust.load_store(home).files.get(str(path))
    if recorded == trust.digest(text):
        return config, text
    tightened, dropped = trust.tighten(user, config)
    if dropped and recorded is not None:
        notices.append(f"{path} changed since you trusted it; it is untrusted again until you run "
                       f"`acode trust {path.parent.parent}` (ACODE-CFG-005)")
    notices.extend(trust.warning(path, key, value, base) for key, value, base in dropped)
    return tightened, text


def _env_value(section: str, field: str, value: str) -> Any:
    """A list setting from the environment: a JSON array, or names separated by commas; a
    mapping (``model.stage_models``): a JSON object, or ``stage=model`` pairs separated by commas."""
    kind = _container(getattr(AcodeConfig(), section), field)
    if kind == "dict":
        if value.lstrip().startswith("{"):
            try:
                return msgspec.json.decode(value)
            except msgspec.DecodeError as exc:
                raise ConfigError(f"ACODE_{section.upper()}__{field.upper()} is not a JSON object: {exc}") from exc
        pairs = [item.partition("=") for item in value.split(",") if item.strip()]
        return {key.strip(): val.strip() for key, _, val in pairs}
    if kind != "list":
        return value
    if value.lstrip().startswith("["):
        try:
            return msgspec.json.decode(value)
        except msgspec.DecodeError as exc:
            raise ConfigError(f"ACODE_{section.upper()}__{field.upper()} is not a JSON array: {exc}") from exc
    return [item.strip() for item in value.split(",") if item.strip()]


def _container(section: _Section, field: str) -> str:
    """"list", "dict" or "" for a scalar setting."""
    info = msgspec.inspect.type_info(type(section))
    assert isinstance(info, msgspec.inspect.StructType)
    kind = next(f.type for f in info.fields if f.name == field)
    options = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
    if any(isinstance(option, msgspec.inspect.ListType) for option in options):
        return "list"
    if any(isinstance(option, msgspec.inspect.DictType) for option in options):
        return "dict"
    return ""


def _from_env(env: Mapping[str, str]) -> AcodeConfig:
    from actors.sandbox.confinement.isolation import (
        FORCE_ENV,  # here, not at the top: a client command loads no sandbox
    )

    raw: dict[str, dict[str, str]] = {}
    scalars: dict[str, str] = {}
    for key, value in env.items():
        if not key.startswith("ACODE_") or key == "ACODE_HOME" or key.startswith("ACODE_FAULT_") \
                or key in FORCE_ENV.values() or key in (USER_UMASK_ENV, INTERVAL_ENV):
            continue  # read by the processes (or the CLI's thinking line), not settings
        name = key[len("ACODE_"):].lower()
        if name in _SCALARS:
            scalars[name] = value
            continue
        section, sep, field = name.partition("__")
        if not sep or section not in AcodeConfig.__struct_fields__:
            raise ConfigError(f"environment variable {key} is not an acode setting; use "
                              "ACODE_<SECTION>__<KEY>, e.g. ACODE_ORCHESTRATION__CYCLE_LIMIT=5")
        known = getattr(AcodeConfig(), section).__struct_fields__
        if field not in known:
            raise ConfigError(f"environment variable {key} names no setting of {section}; its settings are "
                              f"{', '.join(known)}")
        raw.setdefault(section, {})[field] = _env_value(section, field, value)
    try:
        return msgspec.convert({**raw, **scalars}, AcodeConfig, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"ACODE_* environment setting is invalid: {exc}") from exc


def resolve(*, home: Path, workspace: Path | None = None, env: Mapping[str, str] | None = None,
            flags: Mapping[str, Any] | None = None, notices: list[str] | None = None) -> AcodeConfig:
    """Every layer merged: defaults < user < workspace < environment < flags, the workspace
    layer tightened first (:func:`workspace_layer`). Deprecation notices and the workspace's
    ignored settings go to ``notices``, or to stderr (one line each, ``acode: …``) when it is None."""
    found: list[str] = []
    user = load_file(home / "config.yml", found)
    from_env = _from_env(os.environ if env is None else env)
    from_flags = _from_flags(flags or {})
    config = user
    if workspace is not None:
        layer, _ = workspace_layer(home, workspace, _merge(_merge(user, from_env), from_flags), found)
        config = _merge(config, layer)
    if notices is None:
        for notice in found:
            print(printable(f"acode: {notice}"), file=sys.stderr)  # a workspace's words, escaped
    else:
        notices.extend(found)
    return _merge(_merge(config, from_env), from_flags)


def _from_flags(flags: Mapping[str, Any]) -> AcodeConfig:
    sections: dict[str, Any] = {}
    for dotted, value in flags.items():
        if value is not None and dotted in _SCALARS:
            sections[dotted] = value
        elif value is not None:
            section, _, field = dotted.partition(".")
            sections.setdefault(section, {})[field] = value
    try:
        return msgspec.convert(sections, AcodeConfig, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid option: {exc}") from exc


def _stage_options(stages: Mapping[StageName, StageOptions]) -> bool:
    """Check seed 000's per-stage options against what acode does (ACODE-CFG-003 for a value
    it cannot honour); True when the verifier's ``auto_retry_on_failure`` is false."""
    no_verify_cycle = False
    for stage, options in stages.items():
        where = f"orchestration.stages.{stage}"
        if options.context_strategy is not None and options.context_strategy != CONTEXT_STRATEGIES[stage]:
            raise ConfigError(f"{where}.context_strategy is {options.context_strategy!r}, but acode's {stage} always "
                              f"works with {CONTEXT_STRATEGIES[stage]!r} context (see README 'The pipeline'); remove "
                              f"it or set it to {CONTEXT_STRATEGIES[stage]!r}", code="ACODE-CFG-003")
        if options.parallel_steps:
            raise ConfigError(f"{where}.parallel_steps is true, but acode runs one step at a time (steps share the "
                              "workspace); remove it or set it to false", code="ACODE-CFG-003")
        if options.require_human_approval and stage != "planner":
            raise ConfigError(f"{where}.require_human_approval is true, but only the planner's plan waits for a "
                              "human (plan review; approvals of tool calls are the autonomy settings); remove it or "
                              "set it to false", code="ACODE-CFG-003")
        if options.auto_retry_on_failure is not None and stage != "verifier":
            raise ConfigError(f"{where}.auto_retry_on_failure is for the verifier (a failed verification goes back "
                              "to the executor); remove it here", code="ACODE-CFG-003")
        if options.auto_retry_on_failure is False:
            no_verify_cycle = True
    return no_verify_cycle


def session_settings(config: AcodeConfig, *, home: Path | None = None) -> SessionSettings:
    """What a session is submitted with; the scripted model's file is read here. ``home``
    (acode's) is kept out of the sandbox's read and write paths."""
    defaults = SessionSettings()
    o = config.orchestration
    timeouts = {s: getattr(o, f"{s}_timeout") or defaults.stage_timeouts[s] for s in STAGES}
    cycle = o.cycle_limit
    limits: dict[CycleKind, int | None] = {
        "verify": o.verify_cycle_limit if o.verify_cycle_limit is not None else cycle,
        "review": o.review_cycle_limit if o.review_cycle_limit is not None else cycle}
    if config.executor.workspace_only is False:
        raise ConfigError("executor.workspace_only is false, but acode's tools always stay inside the workspace; "
                          "remove the setting or set it to true", code="ACODE-CFG-003")
    budget = {**defaults.token_budget, **(o.token_budget or {})}
    if sum(budget.values()) > 100:
        shares = ", ".join(f"{stage} {percent}" for stage, percent in budget.items())
        raise ConfigError(f"orchestration.token_budget adds up to {sum(budget.values())}% ({shares}); the stages "
                          "share one context: make the percentages add up to 100 at most", code="ACODE-CFG-002")
    p, e = config.planner, config.executor
    if _stage_options(o.stages or {}):
        limits["verify"] = 0  # the verifier's auto_retry_on_failure: false: a failed verification pauses
    provider = provider_spec(config)
    profile = model_profile(config, provider)
    if profile.temperature is not None and config.model.temperature is None \
            and isinstance(provider, OllamaProvider | OpenAIProvider):
        provider = msgspec.structs.replace(provider, temperature=profile.temperature)
    return SessionSettings(
        stage_timeouts=timeouts,
        stage_retry_limit=o.stage_retry_limit if o.stage_retry_limit is not None else defaults.stage_retry_limit,
        cycle_limits={k: v if v is not None else defaults.cycle_limits[k] for k, v in limits.items()},
        max_turns_per_step=config.executor.max_turns_per_step or defaults.max_turns_per_step,
        command_timeout=config.sandbox.command_timeout or defaults.command_timeout,
        output_limit_bytes=config.sandbox.output_limit_bytes or defaults.output_limit_bytes,
        sandbox=sandbox_policy(config, home=home),
        provider=provider,
        verify_commands=config.verification.commands or [],
        planner_context_tokens=config.planner.context_tokens or defaults.planner_context_tokens,
        tool_result_tokens=config.executor.tool_result_tokens or defaults.tool_result_tokens,
        clarification_timeout_s=(config.planner.clarification_timeout
                                 if config.planner.clarification_timeout is not None
                                 else defaults.clarification_timeout_s),
        step_retry_limit=o.step_retry_limit or defaults.step_retry_limit,
        step_timeout_s=config.executor.step_timeout_seconds or defaults.step_timeout_s,
        token_budget=budget,
        max_task_complexity=p.max_complexity or defaults.max_task_complexity,
        context_includes=p.context_includes or [],
        context_excludes=p.context_excludes or [],
        stage_retry_limits=dict(o.stage_retry_limits or {}),
        tool_retry_limit=e.tool_retry_limit if e.tool_retry_limit is not None else defaults.tool_retry_limit,
        tool_retry_backoff_s=(e.tool_retry_backoff if e.tool_retry_backoff is not None
                              else defaults.tool_retry_backoff_s),
        plan_review=bool((o.stages or {}).get("planner", StageOptions()).require_human_approval),
        autonomy=config.autonomy if config.autonomy is not None else defaults.autonomy,
        approvals=approvals_of(config),
        profile=profile,
    )


def model_profile(config: AcodeConfig, provider: ProviderSpec | None) -> ModelProfile:
    """The profile of the model that answers the executor (:mod:`protocol.profiles`): a
    ``model.profiles`` entry naming a tool that does not exist is refused (ACODE-CFG-001)."""
    overrides = config.model.profiles or {}
    for pattern, override in overrides.items():
        wrong = unknown_tools(override.tools or [])
        if wrong:
            raise ConfigError(f"model.profiles.{pattern}.tools names {', '.join(map(repr, wrong))}, which is not a "
                              f"tool; the tools are {', '.join(OFFER_ORDER)}")
    model = provider.model_for("executor") if isinstance(provider, OllamaProvider | OpenAIProvider) else None
    return profile_for(model, overrides)


def approvals_of(config: AcodeConfig) -> Approvals:
    """The ``approvals:`` block as stored with a session."""
    a = config.approvals
    values = {f: getattr(a, f) for f in ApprovalsSection.__struct_fields__ if getattr(a, f) is not None}
    return Approvals(**values)


_HTTP_FIELDS = {  # config key -> provider spec field
    "model": "model", "base_url": "base_url", "stage_models": "stage_models", "num_ctx": "num_ctx",
    "temperature": "temperature", "seed": "seed", "connect_timeout": "connect_timeout_s",
    "first_token_timeout": "first_token_timeout_s", "idle_timeout": "idle_timeout_s", "max_retries": "max_retries",
    "backoff_initial": "backoff_initial_s", "backoff_max": "backoff_max_s",
    "allow_remote": "allow_remote", "max_tokens": "max_tokens", "stage_max_tokens": "stage_max_tokens",
}


def provider_spec(config: AcodeConfig) -> ProviderSpec | None:
    """The model section as a provider spec (None when no model is configured). The
    scripted model's file is read and checked here, before anything starts."""
    model = config.model
    kind = model.provider or ("scripted" if model.script else None)
    if kind is None:
        if model.model or model.base_url:
            raise ConfigError("model.model or model.base_url is set but model.provider is not; set "
                              "model.provider to ollama or openai (or pass --provider)")
        return None
    if kind == "scripted":
        if not model.script:
            raise ConfigError("the scripted provider needs a script: pass --script FILE or set model.script")
        path = Path(model.script)
        try:
            text = path.read_text(errors="surrogateescape")  # bytes that are not UTF-8: load_script says so
        except OSError as exc:
            raise ConfigError(f"cannot read the scripted model file {path}: {exc.strerror}; check the path") from exc
        load_script(text, name=str(path))
        return ScriptedProvider(script_yaml=text, script_name=str(path))
    if not model.model:
        example = "qwen2.5-coder:7b" if kind == "ollama" else "qwen2.5-coder-7b-instruct"
        raise ConfigError(f"the {kind} provider needs a model name: pass --model NAME or set model.model "
                          f"(e.g. {example})")
    values = {spec_field: getattr(model, key) for key, spec_field in _HTTP_FIELDS.items()
              if getattr(model, key) is not None}
    from actors.llm.locality import check_base_url  # refuse a remote server before anything is submitted

    base_url = values.get("base_url") or (OllamaProvider(model="m").base_url if kind == "ollama"
                                          else OpenAIProvider(model="m").base_url)
    check_base_url(base_url, allow_remote=bool(model.allow_remote))
    if kind == "ollama":
        if model.api_key_env:
            raise ConfigError("model.api_key_env is for the openai provider; Ollama takes no key. Remove it")
        return OllamaProvider(**values)
    if model.api_key_env:
        values["api_key_env"] = model.api_key_env
    return OpenAIProvider(**values)


def sandbox_policy(config: AcodeConfig, *, home: Path | None = None) -> SandboxPolicy:
    """The sandbox section's command policy and limits; a secret-looking ``pass_env`` name,
    and a read or write path that is not absolute, does not exist, is ``/``, the home
    directory or an ancestor of it, or holds acode's ``home`` or a credential store, are
    refused here, before a session starts (the sandbox checks them again).
    ``min_isolation`` and ``require_isolation`` name one setting: the stronger applies.
    ``path`` is this client's PATH (what ``python`` resolves on: actors/sandbox/confinement/toolchain.py),
    never a config file's."""
    # imported here, not at the top: a client command that needs no policy loads no sandbox code
    from actors.paths import RunPaths
    from actors.sandbox.confinement.isolation import LEVELS, is_secret_name
    from actors.sandbox.confinement.visible import check_paths

    sandbox = config.sandbox
    secret = [name for name in sandbox.pass_env or () if is_secret_name(name)]
    if secret:
        raise ConfigError(f"sandbox.pass_env names {', '.join(secret)}, which look like secrets (KEY, TOKEN, "
                          "SECRET, PASSWORD, CREDENTIAL, AUTH); commands never get those. Remove them, or pass a "
                          "non-secret setting instead")
    hidden = [str(home), str(RunPaths(home).sock_dir)] if home is not None else []
    user_home = os.path.expanduser("~")
    for key in ("read_paths", "write_paths"):
        check_paths(f"sandbox.{key}", getattr(sandbox, key) or (), home=user_home, hidden=hidden)
    values = {f: getattr(sandbox, f) for f in SandboxPolicy.__struct_fields__ if getattr(sandbox, f, None) is not None}
    values["path"] = os.environ.get("PATH", os.defpath)  # the user's, from this client: no config file sets it
    levels = [level for level in (sandbox.require_isolation, sandbox.min_isolation) if level is not None]
    if levels:
        values["require_isolation"] = max(levels, key=LEVELS.index)
    return SandboxPolicy(**values)


def up_options(config: AcodeConfig) -> tuple[CoordinatorOptions, float, int]:
    """The coordinator's options, heartbeat interval and liveness for ``acode up``."""
    # imported here: only ``acode up`` needs the coordinator's types, client commands stay light
    from actors.coordinator.actor import CoordinatorOptions
    from actors.coordinator.supervisor import SupervisionOptions

    s = config.supervision
    supervision = SupervisionOptions(**{f: getattr(s, f) for f in SupervisionOptions.__struct_fields__
                                        if getattr(s, f, None) is not None})
    workers = {f: getattr(config.workers, f) for f in Workers.__struct_fields__ if getattr(config.workers, f)}
    options = CoordinatorOptions(workers=workers, supervision=supervision,
                                 synchronous=config.storage.synchronous or "full")
    return options, s.heartbeat_interval or 1.0, s.liveness or 3
