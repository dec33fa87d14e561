"""Trust flows from the user: a workspace's own ``.agent/config.yml`` may only tighten safety.

A repository the user clones, or a command the model ran, can write
``WORKSPACE/.agent/config.yml``; it must not grant itself more than the user gives. So
every setting of :class:`~acode.config.schema.AcodeConfig` is classified, in exactly one of two
tables (a test fails when a new setting is in neither):

- :data:`TIGHTEN_ONLY`: safety settings. The workspace file's value is kept only when it
  is at least as strict as what the user gives (the user file, ``ACODE_*`` environment
  and flags, over the defaults); a looser value is dropped, one warning line per key
  naming the file, the key, both values and ``acode trust DIR``. Lists that grant
  (``extra_commands``, ``allowed_commands``, ``shell_commands``, ``pass_env``,
  ``read_paths``, ``write_paths``) keep only the items the user already grants.
- :data:`WORKSPACE_OK`: what the model sees and how long it may take (prompts' context,
  models and their profiles, budgets, stage and command timeouts, verification commands,
  cycle limits).

The order of strictness per key: ``autonomy`` lower; ``approvals.*`` auto < unset (the
level decides) = prompt < deny; ``non_interactive_policy`` auto < skip = fail; booleans
that allow something (``allow_inline_code``, ``network``, ``read_opt``,
``model.allow_remote``) false; ``require_isolation``/``min_isolation`` higher; resource
limits lower and never 0 (none) under a limit; ``model.api_key_env`` (which variable's
value is sent to the server) and, when the user allows a remote server, ``model.base_url``
(where the code is sent) only the user's own; the planner's
``orchestration.stages.planner.require_human_approval`` never turned off; checkpoints
(``checkpoints.*``) never turned off, capped lower, kept shorter or skipping a directory the
user's do not skip; anomaly thresholds (``anomalies.*``) never higher: a workspace may make
acode notice a model going off the rails sooner, never later.

``mcp.servers`` (MCP servers run programs and reach services as the user) only entries
the user's config already has, identical: a workspace adds no server and changes none
(each dropped entry is named in the warning, ``mcp.servers.NAME``) until it is trusted.

``acode trust DIR`` records the sha256 of ``DIR/.agent/config.yml`` (by its resolved path)
in :data:`STORE_NAME` in acode's home, which neither the model's file tools nor its
commands can reach; a file whose bytes still hash to the recorded value is taken whole.
A changed file is untrusted again, with a warning saying so. The store is a separate file,
not a section of the user's hand-written ``config.yml``, so recording never rewrites
(and loses the comments of) what the user wrote.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import msgspec.yaml

from protocol.errors import ConfigError
from protocol.policy.anomalies import AnomalyThresholds
from protocol.policy.budget import Budget
from protocol.policy.checkpoints import DEFAULT_SKIP_DIRS, CheckpointSettings
from protocol.policy.hooks import POINTS
from protocol.policy.sandbox import SandboxPolicy

if TYPE_CHECKING:
    from acode.config.schema import AcodeConfig

__all__ = ["CLIENT_SET", "MIXED", "STAGE_TIGHTEN_ONLY", "STAGE_WORKSPACE_OK", "STORE_NAME", "TIGHTEN_ONLY",
           "WORKSPACE_OK", "TrustStore", "config_file", "digest", "grants", "load_store", "save_store", "tighten",
           "warning"]

STORE_NAME = "trusted.yml"
Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


class TrustStore(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``$ACODE_HOME/trusted.yml``: resolved path of a workspace config -> sha256 of its bytes."""

    files: dict[str, Sha256] = {}


def config_file(workspace: Path) -> Path:
    """The workspace config's path, the directory resolved (the key of :class:`TrustStore`)."""
    return workspace.resolve() / ".agent" / "config.yml"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_store(home: Path) -> TrustStore:
    path = home / STORE_NAME
    try:
        return msgspec.yaml.decode(path.read_bytes(), type=TrustStore)
    except FileNotFoundError:
        return TrustStore()
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ConfigError(f"trust store {path} is invalid: {exc}; fix or delete it, then `acode trust DIR` "
                          "again") from exc


def save_store(home: Path, store: TrustStore) -> None:
    """Written whole and renamed over the old one, private to the user."""
    import tempfile  # only `acode trust` writes the store
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=home, prefix=".trusted.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(msgspec.yaml.encode(store))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, home / STORE_NAME)
    except BaseException:
        os.unlink(tmp)
        raise


# -- the strictness rules ---------------------------------------------------------------------
# A rule: (what the user gives, the workspace's value, the user's whole config) -> the value
# kept (None: dropped) and, when something was dropped, what (for the warning).
Rule = Callable[[Any, Any, "AcodeConfig"], tuple[Any, str | None]]


def _ranked(order: dict[Any, int]) -> Rule:
    def rule(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
        return (value, None) if order[value] >= order[base] else (None, repr(value))
    return rule


def _false_unless(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    return (value, None) if not value or base else (None, repr(value))


def _limit(base: int, value: int, user: AcodeConfig) -> tuple[Any, str | None]:
    """A resource limit: lower is stricter; 0 means none, the loosest."""
    looser = (value == 0 and base != 0) or (value > base and base != 0)
    return (None, repr(value)) if looser else (value, None)


def _at_most(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    """Less is stricter (an anomaly threshold: found sooner)."""
    return (value, None) if value <= base else (None, repr(value))


def _subset(granted: Callable[[Any, AcodeConfig], set[str]]) -> Rule:
    def rule(base: Any, value: list[str], user: AcodeConfig) -> tuple[Any, str | None]:
        allowed = granted(base, user)
        extra = [item for item in value if item not in allowed]
        kept = [item for item in value if item in allowed]
        return (kept or None), (", ".join(extra) if extra else None)
    return rule


def _own(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    return (value, None) if value == base else (None, repr(value))


def _none(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    """What only the user may set (hooks run programs on the host): a workspace sets none of it."""
    return (None, repr(value)) if value else (value, None)


def _servers(base: Any, value: dict[str, Any], user: AcodeConfig) -> tuple[Any, str | None]:
    """MCP servers run programs and reach services as the user: a workspace may repeat a
    server of the user's exactly, never add one or change one (its command, its ``trusted``,
    its ``risk:``)."""
    mine = base or {}
    kept = {name: server for name, server in value.items() if mine.get(name) == server}
    extra = [name for name in value if name not in kept]
    return (kept or None), (", ".join(f"mcp.servers.{name}" for name in extra) if extra else None)


def _base_url(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    """Where the code goes: checked as local when the user does not allow a remote server."""
    return (None, repr(value)) if user.model.allow_remote and value != base else (value, None)


def _allowlist(base: Any, user: AcodeConfig) -> set[str]:
    from actors.sandbox.confinement.policy import (
        DEFAULT_ALLOW,  # the sandbox's code only when a workspace sets commands
    )

    s = user.sandbox
    return set(s.allowed_commands if s.allowed_commands is not None else DEFAULT_ALLOW) | set(s.extra_commands or ())


def _listed(base: Any, user: AcodeConfig) -> set[str]:
    return set(base or ())


def _true_only(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    """A safeguard that is on unless the user turns it off: a workspace may only turn it on."""
    return (value, None) if value or base is False else (None, repr(value))


def _at_least(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    """More is stricter (a larger size cap, longer retention)."""
    return (value, None) if value >= base else (None, repr(value))


def _skipped(base: Any, user: AcodeConfig) -> set[str]:
    """The directories the user already leaves out of checkpoints (a workspace may leave out fewer)."""
    return set(base if base is not None else DEFAULT_SKIP_DIRS)


_ISOLATION = {"process": 0, "landlock": 1, "bubblewrap": 2}


def _isolation(base: Any, value: Any, user: AcodeConfig) -> tuple[Any, str | None]:
    levels = [lv for lv in (user.sandbox.require_isolation, user.sandbox.min_isolation) if lv is not None]
    strongest = max((_ISOLATION[lv] for lv in levels), default=0)
    return (value, None) if _ISOLATION[value] >= strongest else (None, repr(value))


_CLASS = _ranked({"auto": 0, None: 1, "prompt": 1, "deny": 2})
_DEFAULT_POLICY = SandboxPolicy()

#: dotted key -> its rule and the default the user gets when the user sets nothing
TIGHTEN_ONLY: dict[str, tuple[Rule, Any]] = {
    "autonomy": (_ranked({3: 0, 2: 1, 1: 2, 0: 3}), 2),
    "approvals.file_write": (_CLASS, None),
    "approvals.file_delete": (_CLASS, None),
    "approvals.terminal_commands": (_CLASS, None),
    "approvals.non_interactive_policy": (_ranked({"auto": 0, "skip": 1, "fail": 1}), "fail"),
    "sandbox.allowed_commands": (_subset(_allowlist), None),
    "sandbox.extra_commands": (_subset(_allowlist), []),
    "sandbox.allow_inline_code": (_false_unless, _DEFAULT_POLICY.allow_inline_code),
    "sandbox.shell_commands": (_subset(_listed), []),
    "sandbox.require_isolation": (_isolation, "process"),
    "sandbox.min_isolation": (_isolation, "process"),
    "sandbox.network": (_false_unless, _DEFAULT_POLICY.network),
    "sandbox.memory_limit_mb": (_limit, _DEFAULT_POLICY.memory_limit_mb),
    "sandbox.file_size_limit_mb": (_limit, _DEFAULT_POLICY.file_size_limit_mb),
    "sandbox.max_processes": (_limit, _DEFAULT_POLICY.max_processes),
    "sandbox.pass_env": (_subset(_listed), []),
    "sandbox.read_paths": (_subset(_listed), []),
    "sandbox.write_paths": (_subset(_listed), []),
    "sandbox.read_opt": (_false_unless, _DEFAULT_POLICY.read_opt),
    # checkpoints: a workspace may make them cover more and keep them longer, never less
    "checkpoints.enabled": (_true_only, True),
    "checkpoints.max_file_mb": (_at_least, CheckpointSettings().max_file_mb),
    "checkpoints.skip_dirs": (_subset(_skipped), None),
    "checkpoints.keep_days": (_at_least, 7.0),
    # budgets: a workspace may lower them, never raise one or lift it (0: no limit)
    "budget.tokens": (_limit, Budget().tokens),
    "budget.tool_calls": (_limit, Budget().tool_calls),
    "budget.wall_minutes": (_limit, Budget().wall_minutes),
    "budget.model_minutes": (_limit, Budget().model_minutes),
    # hooks run the user's programs on the host: a workspace's only when the user trusts the file
    **{f"hooks.{point}": (_none, None) for point in POINTS},
    "hooks.allow_hosts": (_none, None),
    # anomaly thresholds: a workspace may make them stricter (lower) or leave them, never looser
    **{f"anomalies.{field}": (_at_most, getattr(AnomalyThresholds(), field))
       for field in AnomalyThresholds.__struct_fields__},
    # MCP servers (docs/mcp.md) run programs and reach services: only the user's, or a trusted workspace's
    "mcp.servers": (_servers, None),
    "model.allow_remote": (_false_unless, False),
    "model.api_key_env": (_own, None),
    "model.base_url": (_base_url, None),
    # whether another agent may approve calls through `acode mcp serve`: the user's alone
    "mcp.serve": (_none, None),
}

#: fields of the session's policy that the client sets and no config file can (the config
#: schema has no key for them): ``sandbox.path`` is the PATH of the ``acode run`` itself;
#: ``sandbox.checkpoints`` is made from the ``checkpoints:`` section (its keys are tighten-only above)
CLIENT_SET = frozenset({"sandbox.path", "sandbox.checkpoints"})

#: settings a workspace sets freely: what the model sees, which model, budgets and timeouts
WORKSPACE_OK = frozenset({
    *(f"orchestration.{k}" for k in (
        "planner_timeout", "executor_timeout", "verifier_timeout", "reviewer_timeout", "stage_retry_limit",
        "step_retry_limit", "cycle_limit", "verify_cycle_limit", "review_cycle_limit", "token_budget",
        "stage_retry_limits")),
    *(f"planner.{k}" for k in ("context_tokens", "clarification_timeout", "max_complexity", "context_includes",
                               "context_excludes")),
    *(f"executor.{k}" for k in ("max_turns_per_step", "tool_result_tokens", "step_timeout_seconds",
                                "tool_retry_limit", "tool_retry_backoff", "workspace_only")),
    "verification.commands",  # each one goes through the same classification and gate as the model's
    "sandbox.command_timeout", "sandbox.output_limit_bytes",
    *(f"model.{k}" for k in ("provider", "script", "model", "stage_models", "num_ctx", "temperature", "seed",
                             "connect_timeout", "first_token_timeout", "idle_timeout", "max_retries",
                             "backoff_initial", "backoff_max", "max_tokens", "stage_max_tokens",
                             # which tools are offered (a subset of the same tools, the control
                             # tools always), how they are described, the temperature: nothing a
                             # tool may do or an approval asks changes (protocol/sessions/profiles.py)
                             "profiles")),
    # read by `acode up` only, which never reads a workspace file
    *(f"supervision.{k}" for k in ("heartbeat_interval", "liveness", "restart_intensity", "restart_period",
                                   "backoff_initial", "backoff_max", "ready_timeout", "stop_timeout")),
    "storage.synchronous", "logs.max_mb", "logs.keep",
    *(f"workers.{k}" for k in ("planner", "executor", "verifier", "reviewer")),
})
#: settings classified key by key below them: ``orchestration.stages.<stage>.<key>``, where
#: the plan review stays on when the user turned it on, and the rest is the workspace's
MIXED = frozenset({"orchestration.stages"})
STAGE_TIGHTEN_ONLY = frozenset({"require_human_approval"})
STAGE_WORKSPACE_OK = frozenset({"context_strategy", "parallel_steps", "auto_retry_on_failure"})


def _get(config: AcodeConfig, dotted: str) -> Any:
    section, _, field = dotted.partition(".")
    return getattr(config, section) if not field else getattr(getattr(config, section), field)


def tighten(user: AcodeConfig, workspace: AcodeConfig) -> tuple[AcodeConfig, list[tuple[str, str, str]]]:
    """``workspace`` without what would loosen ``user`` (every layer the user controls,
    merged); each dropped setting as ``(key, the workspace's value, the user's)``."""
    dropped: list[tuple[str, str, str]] = []
    changes: dict[str, dict[str, Any]] = {}
    for dotted, (rule, default) in TIGHTEN_ONLY.items():
        value = _get(workspace, dotted)
        if value is None:
            continue
        base = _get(user, dotted)
        kept, what = rule(default if base is None else base, value, user)
        if what is not None:
            shown = default if base is None else base
            dropped.append((dotted, what, "unset" if shown is None else repr(shown)))
            section, _, field = dotted.partition(".")
            changes.setdefault(section, {})[field or section] = kept
    stages = workspace.orchestration.stages
    mine = (user.orchestration.stages or {}).get("planner")
    if stages and mine is not None and mine.require_human_approval and "planner" in stages \
            and not stages["planner"].require_human_approval:
        planner = msgspec.structs.replace(stages["planner"], require_human_approval=True)
        if stages["planner"].require_human_approval is False:
            dropped.append(("orchestration.stages.planner.require_human_approval", "False", "True"))
        changes.setdefault("orchestration", {})["stages"] = {**stages, "planner": planner}
    profiles = workspace.model.profiles or {}
    if any(o.review == "checks" for o in profiles.values()):  # skipping the model's review is the user's to choose
        for pattern, override in profiles.items():
            if override.review == "checks":
                dropped.append((f"model.profiles.{pattern}.review", "'checks'", "the profile's own"))
        changes.setdefault("model", {})["profiles"] = {
            pattern: msgspec.structs.replace(o, review=None) if o.review == "checks" else o
            for pattern, o in profiles.items()}
    result = workspace
    for section, fields in changes.items():
        if section == "autonomy":
            result = msgspec.structs.replace(result, autonomy=fields["autonomy"])
        else:
            result = msgspec.structs.replace(result, **{
                section: msgspec.structs.replace(getattr(result, section), **fields)})
    return result, dropped


def grants(user: AcodeConfig, workspace: AcodeConfig) -> list[tuple[str, str, str]]:
    """What trusting ``workspace`` would grant beyond ``user``: the settings :func:`tighten` drops."""
    return tighten(user, workspace)[1]


def warning(path: Path, key: str, value: str, base: str) -> str:
    """One line per ignored key, naming the file, the key and what to do."""
    return (f"{path} sets {key}: {value}, looser than yours ({base}); ignored (a workspace's own config may only "
            f"tighten safety settings). If you trust this file, run `acode trust {path.parent.parent}` "
            "(ACODE-CFG-005)")
