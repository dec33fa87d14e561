"""Model profiles: settings chosen by the model's name, the way aider keeps settings per model.

A :class:`ModelProfile` says how the executor's tool surface suits a model: its edit style
(``search_replace``: modify_file is offered; ``whole_file``: it is not, and a file is
changed by writing its whole new text with write_file, what a small model gets right), the
other tools offered (the control tools always are; a tool left out is still accepted when
the model calls it), whether the tool definitions are compact (:func:`protocol.calls.tools.tool_definitions`),
a temperature, a prompt style for the stages that have a compact prompt, and a step style
(``file``: a step that changes one file is answered as that whole file, and acode runs the
checks after each answer, :mod:`actors.stages.execution.filestep`; ``tools``: the tool loop), and a
review style (``checks``: a change whose criteria all passed, one at least by a command, is
approved by them when the reviewer's model is this one; ``model``: the reviewer's model
judges every change).

It is resolved once, when the session is submitted (:func:`profile_for`, called by
:func:`acode.config.settings.session_settings`), and travels in :class:`protocol.sessions.session.SessionSettings`,
so a replayed stage offers the same tools in the same words. The choice, for the model
answering the executor:

1. the config's ``model.profiles`` entries, keyed by a pattern matched against the model
   name case-insensitively (a glob when it holds ``*``, ``?`` or ``[``, else a substring),
   in the order given; the first that matches sets the fields it names over 2 or 3;
2. else the built-in profiles (:data:`BUILTIN`): a name pattern and a size limit read
   from the name (``1.5b``, ``-3B-``); a name with no size never matches a limit;
3. else the default profile, which is today's behaviour for every model: every tool,
   search/replace edits, the model section's temperature, the full prompt.

Compact tool definitions (``compact_tools``): on when the profile says so, off when it
says not, and otherwise on exactly when the model's context (``num_ctx``) is at most
:data:`SMALL_CONTEXT` tokens: there the tool definitions' ~1,100 tokens are a seventh of
the window (the compact ones take ~600).
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from protocol.calls.tools import CONTROL_TOOLS, TOOL_ARGS, tool_definitions

if TYPE_CHECKING:
    from protocol.sessions.session import SessionSettings

__all__ = ["BUILTIN", "SMALL_CONTEXT", "EditStyle", "ModelProfile", "ProfileOverride", "PromptStyle", "ReviewStyle",
           "StepStyle",
           "model_size", "offered_tools", "profile_for", "tool_surface", "unknown_tools"]

EditStyle = Literal["search_replace", "whole_file"]
PromptStyle = Literal["full", "compact"]
StepStyle = Literal["tools", "file"]
ReviewStyle = Literal["model", "checks"]
SMALL_CONTEXT = 8_192
ToolName = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
_SIZE = re.compile(r"(?<![\w.])(\d{1,4}(?:\.\d{1,2})?)b(?![a-z0-9])")


class ModelProfile(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """How the executor's tools suit one model; the defaults are acode's behaviour for any model.
    ``name``: what chose it (a built-in profile's name, ``config:<pattern>``), shown, never matched."""

    name: Annotated[str, msgspec.Meta(max_length=300)] = ""
    edit_style: EditStyle = "search_replace"
    tools: Annotated[list[ToolName], msgspec.Meta(max_length=16)] = []  # offered tools; empty: all
    compact_tools: bool | None = None  # None: compact when num_ctx <= SMALL_CONTEXT
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None  # None: the model section's
    prompt_style: PromptStyle = "full"
    # "file": a step that changes one file asks for the whole file in a code block, and acode
    # runs the task's checks after each answer (actors.stages.execution.filestep); "tools": the tool loop
    step_style: StepStyle = "tools"
    # "checks": when the reviewer's model is this one, a change whose criteria all passed, one at
    # least by a command, is approved by those checks without asking it (actors.stages.judging.reviewer)
    review: ReviewStyle = "model"


class ProfileOverride(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One ``model.profiles.<pattern>`` entry of config.yml: the fields it sets win."""

    edit_style: EditStyle | None = None
    tools: Annotated[list[ToolName], msgspec.Meta(min_length=1, max_length=16)] | None = None
    compact_tools: bool | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    prompt_style: PromptStyle | None = None
    step_style: StepStyle | None = None
    review: ReviewStyle | None = None


_SMALL = ModelProfile(name="small", edit_style="whole_file", compact_tools=True, prompt_style="compact",
                      step_style="file", review="checks",
                      tools=["write_file", "read_file", "run_terminal", "list_directory"])

#: Built-in profiles: (name pattern, the largest size in billions of parameters it covers, profile).
BUILTIN: tuple[tuple[str, float, ModelProfile], ...] = (
    ("*qwen2.5-coder*", 6.9, _SMALL),
)


def model_size(model: str) -> float | None:
    """The parameter count in billions a model name states (``qwen2.5-coder:1.5b`` → 1.5), or None."""
    found = _SIZE.findall(model.lower())
    return float(found[-1]) if found else None


def _matches(pattern: str, model: str) -> bool:
    pattern, model = pattern.lower(), model.lower()
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(model, pattern)
    return pattern in model


def profile_for(model: str | None, overrides: dict[str, ProfileOverride] | None = None) -> ModelProfile:
    """The profile for ``model`` (None: no model, the default): the first matching config
    entry over the built-in or default profile it would otherwise get."""
    if model is None:
        return ModelProfile()
    base = ModelProfile()
    size = model_size(model)
    for pattern, largest, profile in BUILTIN:
        if _matches(pattern, model) and size is not None and size <= largest:
            base = profile
            break
    for pattern, override in (overrides or {}).items():
        if _matches(pattern, model):
            fields = {f: getattr(override, f) for f in ProfileOverride.__struct_fields__
                      if getattr(override, f) is not None}
            return msgspec.structs.replace(base, name=f"config:{pattern}", **fields)
    return base


def unknown_tools(names: list[str]) -> list[str]:
    """The names in ``names`` that are no tool the model can be offered."""
    return [name for name in names if name not in TOOL_ARGS]


def offered_tools(profile: ModelProfile) -> frozenset[str]:
    """The tools offered under ``profile``: its list (or all) with the control tools, and
    modify_file exactly when its edit style is ``search_replace`` (the edit style decides it)."""
    names = set(profile.tools or TOOL_ARGS) | CONTROL_TOOLS
    if profile.edit_style == "whole_file":
        names.discard("modify_file")
    else:
        names.add("modify_file")
    return frozenset(names & set(TOOL_ARGS))


def tool_surface(settings: SessionSettings) -> list[dict[str, Any]]:
    """The executor's tool definitions for a session: its profile's tools, compact when the
    profile says so or, when it does not say, when the model's context is small."""
    return tool_definitions(offered_tools(settings.profile), compact=compact_tools(settings))


def compact_tools(settings: SessionSettings) -> bool:
    """Whether a session's tool definitions are compact: the profile says so or, when it
    does not say, the model's context is small (MCP tools' descriptions are cut shorter too)."""
    compact = settings.profile.compact_tools
    if compact is None:
        num_ctx = getattr(settings.provider, "num_ctx", None)
        compact = num_ctx is not None and num_ctx <= SMALL_CONTEXT
    return compact
