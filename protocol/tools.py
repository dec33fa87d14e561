"""The executor's tools: argument Structs, risk classes and function-calling definitions.

The JSON schemas the model sees are generated from these Structs, so the schema and
the decoder can never disagree. ``step_complete`` and ``step_failed`` are control tools:
the executor handles them itself; every other tool runs in the sandbox.

``baseline_workspace`` and ``diff_workspace`` are *internal* sandbox tools: acode's own
stages call them (the planner records the workspace when a session begins, the verifier
and reviewer read the diff since), the model never does. They are not in
:data:`TOOL_ARGS`, so they are not offered to the model (:func:`tool_definitions`) and the
executor refuses them by name like any unknown tool; :func:`decode_args` accepts them only
with ``internal=True``, which is what the sandbox's dispatcher passes.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal

import msgspec

from protocol.text import find_bad_text

__all__ = [
    "CONTROL_TOOLS",
    "INTERNAL_TOOLS",
    "INTERNAL_TOOL_ARGS",
    "RERUN_SAFE_TOOLS",
    "SANDBOX_TOOLS",
    "TOOL_ARGS",
    "BaselineWorkspace",
    "CreateDirectory",
    "DiffWorkspace",
    "Edit",
    "ListDirectory",
    "ModifyFile",
    "ReadFile",
    "Risk",
    "RunTerminal",
    "SearchCode",
    "SearchCodeTerms",
    "StepComplete",
    "StepFailed",
    "ToolArgs",
    "WriteFile",
    "decode_args",
    "risk_of",
    "tool_definitions",
]

Path = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
Risk = Literal["read", "write", "execute", "network", "destructive"]


class _Args(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    pass


class ReadFile(_Args, frozen=True, kw_only=True):
    """Read a text file of the workspace. Each line is shown after its number (from 1) and a
    tab; the numbers are not part of the file. offset skips that many lines first."""

    path: Path
    offset: Annotated[int, msgspec.Meta(ge=0, le=10_000_000)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None


class WriteFile(_Args, frozen=True, kw_only=True):
    """Create or replace a file of the workspace with the given content."""

    path: Path
    content: Annotated[str, msgspec.Meta(max_length=10_000_000)]


class Edit(_Args, frozen=True, kw_only=True):
    search: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)]
    replace: Annotated[str, msgspec.Meta(max_length=1_000_000)]


class ModifyFile(_Args, frozen=True, kw_only=True):
    """Change a text file, with exactly one of `edits` or `diff`; all of it applies or nothing does.
    edits: search/replace pairs; each search is copied exactly from the file (without read_file's line
    numbers) and must match exactly once. diff: a unified diff of this one file: '@@ -l,n +l,n @@' hunks
    of ' ' context, '-' removed and '+' added lines; '---'/'+++' headers are optional and must name this
    path; '--- /dev/null' creates the file."""

    path: Path
    edits: Annotated[list[Edit], msgspec.Meta(min_length=1, max_length=100)] | None = None
    diff: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)] | None = None


class CreateDirectory(_Args, frozen=True, kw_only=True):
    """Create a directory (and missing parents) inside the workspace."""

    path: Path


class ListDirectory(_Args, frozen=True, kw_only=True):
    """List a directory of the workspace."""

    path: Path = "."
    depth: Annotated[int, msgspec.Meta(ge=1, le=10)] = 1


class SearchCode(_Args, frozen=True, kw_only=True):
    """Search the workspace's text files for a literal string (or a regex)."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]
    path: Path = "."
    regex: bool = False


class RunTerminal(_Args, frozen=True, kw_only=True):
    """Run a command (no shell) in the workspace and return its exit code and output."""

    command: Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3_600)] | None = None


class StepComplete(_Args, frozen=True, kw_only=True):
    """Declare the current step done, with a one-line summary of what it achieved."""

    summary: Annotated[str, msgspec.Meta(max_length=4_000)]


class StepFailed(_Args, frozen=True, kw_only=True):
    """Declare the current step impossible, with the reason."""

    reason: Annotated[str, msgspec.Meta(max_length=4_000)]


class BaselineWorkspace(_Args, frozen=True, kw_only=True):
    """Internal: record the workspace as it is now, as the session's baseline (the first call wins)."""


class DiffWorkspace(_Args, frozen=True, kw_only=True):
    """Internal: the unified diff between the session's baseline and the workspace now.
    max_bytes caps the output (default: the request's output limit)."""

    max_bytes: Annotated[int, msgspec.Meta(ge=1_024, le=10_000_000)] | None = None


class SearchCodeTerms(_Args, frozen=True, kw_only=True):
    """Internal: search_code for each of several queries, walking the tree once (the
    planner's context preparation); each query's output follows a ``[query N of M]`` line."""

    queries: Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]],
                       msgspec.Meta(min_length=1, max_length=16)]
    path: Path = "."
    regex: bool = False


ToolArgs = (
    ReadFile | WriteFile | ModifyFile | CreateDirectory | ListDirectory | SearchCode | RunTerminal
    | StepComplete | StepFailed | BaselineWorkspace | DiffWorkspace | SearchCodeTerms
)

TOOL_ARGS: dict[str, type[_Args]] = {
    "read_file": ReadFile,
    "write_file": WriteFile,
    "modify_file": ModifyFile,
    "create_directory": CreateDirectory,
    "list_directory": ListDirectory,
    "search_code": SearchCode,
    "run_terminal": RunTerminal,
    "step_complete": StepComplete,
    "step_failed": StepFailed,
}
CONTROL_TOOLS = frozenset({"step_complete", "step_failed"})
#: The sandbox tools the model may call.
SANDBOX_TOOLS = frozenset(TOOL_ARGS) - CONTROL_TOOLS
#: Sandbox tools only acode's stages call; never offered to the model.
INTERNAL_TOOL_ARGS: dict[str, type[_Args]] = {
    "baseline_workspace": BaselineWorkspace,
    "diff_workspace": DiffWorkspace,
    "search_code_terms": SearchCodeTerms,
}
INTERNAL_TOOLS = frozenset(INTERNAL_TOOL_ARGS)

#: Calls run again whenever no result is journaled, so their intent is not journaled first:
#: those without side effects, and the session's baseline, whose first record stands (a
#: second call moves nothing). The sandbox's ``ToolCall.rerun_safe`` decides by the decoded
#: arguments; these are their names.
RERUN_SAFE_TOOLS = frozenset({"read_file", "list_directory", "search_code", "search_code_terms", "diff_workspace",
                              "baseline_workspace"})

_RISK: dict[str, Risk] = {
    "read_file": "read",
    "list_directory": "read",
    "search_code": "read",
    "write_file": "write",
    "modify_file": "write",
    "create_directory": "write",
    "run_terminal": "execute",
    # the baseline writes only git objects, a private ref and acode's own store: nothing the user sees
    "baseline_workspace": "read",
    "diff_workspace": "read",
    "search_code_terms": "read",
}


def risk_of(tool: str) -> Risk:
    """The risk class approval gates use: control tools touch nothing (read); unknown
    tools count as destructive."""
    if tool in CONTROL_TOOLS:
        return "read"
    return _RISK.get(tool, "destructive")


def decode_args(tool: str, arguments: dict[str, Any], *, internal: bool = False) -> _Args:
    """Validate a tool call's arguments against its Struct; ``internal`` also accepts the
    internal tools (only the sandbox's dispatcher passes it).

    Raises msgspec.ValidationError, also for an unknown tool, and for text with no UTF-8
    form (a lone surrogate: :mod:`protocol.text`), named by argument and offset, before
    msgspec sees it (its messages quote unknown argument names). Conversion is lax on
    purpose (``"5"`` becomes 5, ``"true"`` True): small models quote numbers and booleans.
    """
    args_type = TOOL_ARGS.get(tool) or (INTERNAL_TOOL_ARGS.get(tool) if internal else None)
    if args_type is None:
        raise msgspec.ValidationError(f"unknown tool {tool!r}; available: {', '.join(TOOL_ARGS)}")
    bad = find_bad_text(arguments)
    if bad is not None:
        raise msgspec.ValidationError(bad.describe())
    return msgspec.convert(arguments, args_type, strict=False)


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """Replace ``$ref`` with the definition it names: function-calling schemas are flat."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if ref is not None:
            return _inline(defs[ref.rsplit("/", 1)[-1]], defs)
        return {k: ({name: _inline(sub, defs) for name, sub in v.items()} if k == "properties"
                    else _inline(v, defs))
                for k, v in schema.items() if k not in ("$defs", "title")}
    if isinstance(schema, list):
        return [_inline(v, defs) for v in schema]
    return schema


def _parameters(args_type: type[_Args]) -> dict[str, Any]:
    raw = msgspec.json.schema(args_type)
    params: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    params.pop("description", None)
    return params


def tool_definitions(names: frozenset[str] | None = None) -> list[dict[str, Any]]:
    """OpenAI/Ollama function-calling definitions for the named tools (all by default)."""
    out = []
    for name, args_type in TOOL_ARGS.items():
        if names is not None and name not in names:
            continue
        out.append({
            "type": "function",
            "function": {
                "name": name,
                "description": inspect.cleandoc(args_type.__doc__ or ""),
                "parameters": _parameters(args_type),
            },
        })
    return out
