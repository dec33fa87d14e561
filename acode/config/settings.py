"""What a resolved configuration (:func:`acode.config.loader.resolve`) becomes: the settings a session
is submitted with (:func:`session_settings`: its model, its sandbox policy, its limits), and
the coordinator's options for ``acode up`` (:func:`up_options`).

A value acode cannot honour is refused here (ConfigError), before anything starts: a
per-stage option it does not do, token budgets over 100 %, a remote model server not
allowed, a secret-looking ``pass_env``, a read or write path that would expose the home,
MCP servers without the MCP extra installed (ACODE-MCP-010: the CLI looks for the ``mcp``
package, never imports it).

A session's MCP servers (:func:`mcp_servers`) are the resolved config's ``mcp.servers``:
the user's, and a workspace's only under the trust rule (:mod:`acode.config.trust`: an
untrusted workspace config adds none and changes none, each ignored entry named in a
warning); they are stored with the session, whole, and a resume keeps them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from acode.config.schema import AcodeConfig, ApprovalsSection, StageName, StageOptions, Workers
from protocol.calls.autonomy import Approvals
from protocol.calls.mcp import McpServerRef
from protocol.calls.tools import OFFER_ORDER
from protocol.errors import ConfigError
from protocol.plans.script import load_script
from protocol.plans.stages import STAGES
from protocol.policy.anomalies import AnomalyThresholds
from protocol.policy.budget import Budget
from protocol.policy.checkpoints import CheckpointSettings
from protocol.policy.hooks import HookSettings
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.profiles import ModelProfile, profile_for, unknown_tools
from protocol.sessions.session import (
    CycleKind,
    OllamaProvider,
    OpenAIProvider,
    ProviderSpec,
    ScriptedProvider,
    SessionSettings,
)

if TYPE_CHECKING:
    from actors.coordinator.actor import CoordinatorOptions

__all__ = ["CONTEXT_STRATEGIES", "approvals_of", "mcp_servers", "model_profile", "provider_spec", "sandbox_policy",
           "session_settings", "up_options"]


# What each stage shows its model (seed 000's context_strategy names), fixed by acode's design
CONTEXT_STRATEGIES: dict[str, str] = {"planner": "full", "executor": "focused", "verifier": "minimal",
                                      "reviewer": "summary"}


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
    servers = mcp_servers(config)
    if servers and importlib.util.find_spec("mcp") is None:
        names = ", ".join(ref.name for ref in servers)
        raise ConfigError(f"the config names MCP servers ({names}), but MCP support is not installed; run "
                          "`pip install acode[mcp]`, or remove mcp.servers (or set enabled: false) to run without "
                          "them", code="ACODE-MCP-010")
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
        budget=Budget(**{f: getattr(config.budget, f) for f in Budget.__struct_fields__
                         if getattr(config.budget, f) is not None}),
        hooks=HookSettings(**{f: getattr(config.hooks, f) for f in HookSettings.__struct_fields__
                              if getattr(config.hooks, f) is not None}),
        anomalies=AnomalyThresholds(**{f: getattr(config.anomalies, f) for f in AnomalyThresholds.__struct_fields__
                                       if getattr(config.anomalies, f) is not None}),
        mcp_servers=servers,
    )


def mcp_servers(config: AcodeConfig) -> list[McpServerRef]:
    """The enabled servers of the resolved config's ``mcp.servers``, by name, each checked
    (:func:`acode.config.mcp.servers`, ACODE-MCP-006): what a session is submitted with."""
    from acode.config.mcp import servers  # here: the loader is imported by it

    return [ref for ref in servers(config, "your configuration") if ref.config.enabled]


def model_profile(config: AcodeConfig, provider: ProviderSpec | None) -> ModelProfile:
    """The profile of the model that answers the executor (:mod:`protocol.sessions.profiles`): a
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
    c = config.checkpoints
    values["checkpoints"] = CheckpointSettings(**{f: getattr(c, f) for f in CheckpointSettings.__struct_fields__
                                                  if getattr(c, f, None) is not None})
    return SandboxPolicy(**values)


def up_options(config: AcodeConfig) -> tuple[CoordinatorOptions, float, int]:
    """The coordinator's options, heartbeat interval and liveness for ``acode up``."""
    # imported here: only ``acode up`` needs the coordinator's types, client commands stay light
    from actors.coordinator.actor import CoordinatorOptions
    from actors.coordinator.supervisor import SupervisionOptions
    from actors.logrotate import LogLimits

    s = config.supervision
    supervision = SupervisionOptions(**{f: getattr(s, f) for f in SupervisionOptions.__struct_fields__
                                        if getattr(s, f, None) is not None})
    workers = {f: getattr(config.workers, f) for f in Workers.__struct_fields__ if getattr(config.workers, f)}
    logs = LogLimits(**{f: getattr(config.logs, f) for f in LogLimits.__struct_fields__
                        if getattr(config.logs, f) is not None})  # keep: 0 is a value
    options = CoordinatorOptions(workers=workers, supervision=supervision,
                                 synchronous=config.storage.synchronous or "full", logs=logs)
    return options, s.heartbeat_interval or 1.0, s.liveness or 3
