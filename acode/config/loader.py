"""Configuration files, environment and flags, resolved in one function.

Precedence (highest first): CLI flags > ``ACODE_<SECTION>__<KEY>`` environment >
workspace ``.agent/config.yml`` > user ``$ACODE_HOME/config.yml`` > defaults. The
workspace's own file may only tighten safety settings unless the user trusts it
(:mod:`acode.config.trust`, ``acode trust``): flags, environment and the user file are the user's.

Files are YAML decoded into the Structs of :mod:`acode.config.schema`, which forbid unknown
keys, so a typo fails loudly with the file, the key and what is valid. Every field is
optional in a file; a layer only overrides what it sets. ``acode up`` uses the user config,
environment and flags (supervision, storage, workers, logs); ``acode run`` adds the workspace
config (orchestration, planner, executor, verification, sandbox, model). What the resolved
configuration becomes (a session's settings, the coordinator's options) is :mod:`acode.config.settings`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import msgspec.yaml

from acode.config import trust
from acode.config.schema import AcodeConfig, Hooks, Section
from actors.private import USER_UMASK_ENV
from protocol.basics.printable import printable
from protocol.errors import ConfigError
from protocol.policy.conditions import ConditionError, compile_condition
from protocol.policy.hooks import FACTS, POINTS
from protocol.sessions.progress import INTERVAL_ENV

__all__ = ["ALIASES", "check_hooks", "decode_file", "load_file", "resolve", "workspace_layer"]


_SCALARS = frozenset({"autonomy"})  # top-level settings that are not sections (ACODE_AUTONOMY, --autonomy)


def _merge(base: AcodeConfig, over: AcodeConfig) -> AcodeConfig:
    """``over``'s set fields win, section by section; a point's hooks add up (the user's
    first: a trusted workspace adds hooks, it never replaces the user's)."""
    sections: dict[str, Any] = {"autonomy": _pick(base.autonomy, over.autonomy)}
    for name in AcodeConfig.__struct_fields__:
        if name in _SCALARS:
            continue
        low, high = getattr(base, name), getattr(over, name)
        pick = _add if name == "hooks" else _pick
        values = {f: pick(getattr(low, f), getattr(high, f)) for f in type(low).__struct_fields__}
        sections[name] = type(low)(**values)
    return AcodeConfig(**sections)


def _add(low: Any, high: Any) -> Any:
    if isinstance(low, list) and isinstance(high, list):
        return [*low, *(item for item in high if item not in low)]
    return high if high is not None else low


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
    check_hooks(config.hooks, path)
    script = config.model.script
    if script and not os.path.isabs(script):
        config = msgspec.structs.replace(config, model=msgspec.structs.replace(
            config.model, script=str((path.parent / script).resolve())))
    return config


def check_hooks(hooks: Hooks, path: Path) -> None:
    """Each hook as its action needs it, its condition compiled against its point's facts:
    ACODE-CFG-006 with the position for a condition that is none (an unknown name...)."""
    for point in POINTS:
        for index, spec in enumerate(getattr(hooks, point) or ()):
            where = f"hooks.{point}[{index}] in {path}"
            if spec.action == "script" and not spec.run:
                raise ConfigError(f"{where} is a script hook without run: give the program and its arguments, "
                                  'e.g. run: ["notify-send", "acode"]')
            if spec.action != "script" and spec.run:
                raise ConfigError(f"{where} has run: but action {spec.action}; run: is for action: script")
            if spec.action == "webhook" and not spec.url.startswith(("http://", "https://")):
                raise ConfigError(f"{where} is a webhook hook without an http(s) url: give url: "
                                  "http://127.0.0.1:PORT/PATH")
            if spec.on_failure in ("deny", "allow") and point != "pre_tool":
                raise ConfigError(f"{where} says on_failure: {spec.on_failure}, which only pre_tool hooks decide; "
                                  "use continue, or leave it out")
            if spec.condition:
                try:
                    compile_condition(spec.condition, FACTS[point], where=point)
                except ConditionError as exc:
                    raise ConfigError(f"{where}: {exc.message}", code=exc.code) from exc


def workspace_layer(home: Path, workspace: Path, user: AcodeConfig,
                    notices: list[str]) -> tuple[AcodeConfig, bytes | None]:
    """``workspace``'s own ``.agent/config.yml`` as it may apply (:mod:`acode.config.trust`): whole
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


def _container(section: Section, field: str) -> str:
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
