"""A human's setting overrides (``acode resume --max-turns 20`` ...), applied to a session's settings.

Pure: the machine calls :func:`apply` when a resume carries overrides, records the lines
it returns as a ``settings_changed`` event, and the session uses the new settings from
then on. Nothing else changes a session's settings (seed 002, S10: only a human raises a
limit).
"""

from __future__ import annotations

import msgspec

from protocol.policy import budget as budgets
from protocol.sessions.session import ProviderSpec, SessionSettings, SettingsOverride

__all__ = ["apply", "describe"]


def apply(settings: SessionSettings, overrides: SettingsOverride) -> tuple[SessionSettings, list[str]]:
    """``settings`` with ``overrides`` applied, and one line per setting that changed."""
    changes: list[str] = []
    values: dict[str, object] = {}
    timeouts = {**settings.stage_timeouts, **overrides.stage_timeouts}
    if timeouts != settings.stage_timeouts:
        values["stage_timeouts"] = timeouts
        changes += [f"{s}_timeout: {settings.stage_timeouts.get(s, 300.0):g}s -> {t:g}s"
                    for s, t in overrides.stage_timeouts.items() if settings.stage_timeouts.get(s) != t]
    if overrides.step_timeout_s is not None and overrides.step_timeout_s != settings.step_timeout_s:
        values["step_timeout_s"] = overrides.step_timeout_s
        changes.append(f"step_timeout: {settings.step_timeout_s:g}s -> {overrides.step_timeout_s:g}s")
    if overrides.cycle_limit is not None:
        limits = dict.fromkeys(settings.cycle_limits or ("verify", "review"), overrides.cycle_limit)
        if limits != settings.cycle_limits:
            values["cycle_limits"] = limits
            changes.append(f"cycle_limit: {settings.cycle_limits} -> {overrides.cycle_limit}")
    turns = overrides.max_turns_per_step
    if turns is not None and turns != settings.max_turns_per_step:
        values["max_turns_per_step"] = turns
        changes.append(f"max_turns_per_step: {settings.max_turns_per_step} -> {turns}")
    if overrides.provider is not None and overrides.provider != settings.provider:
        values["provider"] = overrides.provider
        changes.append(f"model: {describe(settings.provider)} -> {describe(overrides.provider)}")
    if overrides.budget:
        budget = settings.budget
        for kind, change in overrides.budget.items():
            old = budgets.limit_of(budget, kind)
            new = budgets.extended(old, change, whole=kind in ("tokens", "tool_calls"))
            if new != old:
                budget = msgspec.structs.replace(budget, **{kind: int(new) if kind in ("tokens", "tool_calls")
                                                            else new})
                changes.append(f"budget.{kind}: {budgets.figure(kind, old)} -> {budgets.figure(kind, new)}")
        if budget != settings.budget:
            values["budget"] = budget
    return (msgspec.structs.replace(settings, **values) if values else settings), changes


def describe(provider: ProviderSpec | None) -> str:
    if provider is None:
        return "none"
    model = getattr(provider, "model", None) or getattr(provider, "script_name", "") or "?"
    where = getattr(provider, "base_url", "")
    return f"{provider.__struct_config__.tag} {model}" + (f" at {where}" if where else "")
