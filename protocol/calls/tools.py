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

What small models send (issue 25): :func:`tolerant_args` rewrites a few forms of
``modify_file`` whose meaning is plain into the documented one before decoding, so the
executor's check, the approval preview and the sandbox all read the same call: a
single ``search``/``replace`` pair at the top level (or an ``edits`` object instead of a
list) becomes a one-edit list, and the usual other names of the pair (``old``/``new``,
``old_str``/``new_str``, ``old_string``/``new_string``, ``find``/``replace``) become
``search``/``replace``, each only where the documented key is absent and exactly one
other name is given. ``content`` (a whole new text) is a field of :class:`ModifyFile`,
not offered in its schema (:data:`_UNOFFERED`): the sandbox replaces the whole file, as
write_file would, and says so.

Definitions (:func:`tool_definitions`) come in :data:`OFFER_ORDER`, ``write_file`` first,
its description steering a new or small file to it and a small change in a large file to
``modify_file``. ``compact=True`` (a small context: :mod:`protocol.sessions.profiles` decides)
gives each tool its one-line description only, drops the schema's bounds, defaults and
``additionalProperties`` (the decoder still checks them all) and offers neither
modify_file's ``diff`` nor run_terminal's ``timeout_s`` (both still accepted): 2,351
characters instead of 4,358 (about 500 tokens fewer at 4 characters a token).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal

import msgspec

from protocol.basics.text import find_bad_text

__all__ = [
    "CONTROL_TOOLS",
    "INTERNAL_TOOLS",
    "INTERNAL_TOOL_ARGS",
    "OFFER_ORDER",
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
    "tolerant_args",
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
    """Create or replace a file with the given content (missing directories are created).
    Use it for a new file and to change a small file (under about 100 lines): send the whole
    new text."""

    path: Path
    content: Annotated[str, msgspec.Meta(max_length=10_000_000)]


class Edit(_Args, frozen=True, kw_only=True):
    # ``line`` (1-based) picks, among several matches of ``search``, the one at or nearest
    # that line (actors.sandbox.tools.edits); a search matching once ignores it. No docstring: it
    # would be sent inside modify_file's schema.
    search: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)]
    replace: Annotated[str, msgspec.Meta(max_length=1_000_000)]
    line: Annotated[int, msgspec.Meta(ge=1, le=100_000_000)] | None = None


class ModifyFile(_Args, frozen=True, kw_only=True):
    """Make a small change in a large text file, with exactly one of `edits` or `diff`; all of it applies
    or nothing does. edits: search/replace pairs; each search is copied exactly from the file (without
    read_file's line numbers) and must match exactly once (or give `line`, the line number of the match
    meant). diff: a unified diff of this one file: '@@ -l,n +l,n @@' hunks of ' ' context, '-' removed and
    '+' added lines; '---'/'+++' headers are optional and must name this path; '--- /dev/null' creates the
    file. For a small file, write_file with the whole new text is simpler."""

    path: Path
    edits: Annotated[list[Edit], msgspec.Meta(min_length=1, max_length=100)] | None = None
    diff: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)] | None = None
    # Not offered (_UNOFFERED): what small models send instead of edits; the whole new text
    # of an existing file, written as write_file would (actors.sandbox.tools.files.modify_file).
    content: Annotated[str, msgspec.Meta(max_length=10_000_000)] | None = None


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

#: The order the model is offered the tools in: whole-file writes first (a small model
#: copes with them best), then reading, then the rest.
OFFER_ORDER = ("write_file", "read_file", "modify_file", "run_terminal", "list_directory", "search_code",
               "create_directory", "step_complete", "step_failed")
#: Fields a tool accepts but does not offer in its schema (what small models send anyway).
_UNOFFERED: dict[str, frozenset[str]] = {"modify_file": frozenset({"content"})}
#: Schema keys a compact definition leaves out: bounds and defaults the decoder checks anyway.
_COMPACT_DROPS = frozenset({"maxLength", "minLength", "maximum", "minimum", "exclusiveMinimum",
                            "exclusiveMaximum", "maxItems", "minItems", "default", "additionalProperties"})
#: Optional fields a compact definition does not offer (still accepted): the forms a small
#: model rarely gets right or needs.
_COMPACT_UNOFFERED: dict[str, frozenset[str]] = {"modify_file": frozenset({"diff"}),
                                                 "run_terminal": frozenset({"timeout_s"})}
#: A compact definition's whole description.
_SHORT: dict[str, str] = {
    "write_file": "Create or replace a file with its whole new text. Use it for new and small files.",
    "read_file": "Read a file; its lines are shown numbered (the numbers are not part of the file).",
    "modify_file": "Change part of a large file: edits, each search copied exactly from the file and matching "
                   "once (or give line).",
    "run_terminal": "Run a command (no shell) in the workspace; returns its exit code and output.",
    "list_directory": "List a directory of the workspace.",
    "search_code": "Search the workspace's files for a string.",
    "create_directory": "Create a directory.",
    "step_complete": "Declare the step done, with a one-line summary.",
    "step_failed": "Declare the step impossible, with the reason.",
}

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


# Other names models give the search/replace pair, by role; each is read as the documented
# key only when that key is absent and exactly one other name of its role is present.
_SEARCH_NAMES = ("old", "old_str", "old_string", "old_text", "find")
_REPLACE_NAMES = ("new", "new_str", "new_string", "new_text")


def _renamed(edit: dict[str, Any]) -> dict[str, Any]:
    """``edit`` with the other names of ``search`` and ``replace`` read as those."""
    out = dict(edit)
    for key, others in (("search", _SEARCH_NAMES), ("replace", _REPLACE_NAMES)):
        given = [name for name in others if name in out]
        if key not in out and len(given) == 1:
            out[key] = out.pop(given[0])
    return out


def tolerant_args(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with the forms of a ``modify_file`` call whose meaning is plain rewritten
    into the documented one (see the module docstring); any other call, and any form that
    could mean two things, is returned unchanged (the decoder then says what is wrong)."""
    if tool != "modify_file" or not isinstance(arguments, dict):
        return arguments
    out = dict(arguments)
    edits = out.get("edits")
    if isinstance(edits, dict):
        out["edits"] = edits = [edits]
    if isinstance(edits, list):
        out["edits"] = [_renamed(edit) if isinstance(edit, dict) else edit for edit in edits]
    elif edits is None and "diff" not in out:
        top = _renamed({k: v for k, v in out.items() if k in ("search", "replace", "line", *_SEARCH_NAMES,
                                                               *_REPLACE_NAMES)})
        if "search" in top and "replace" in top and set(top) <= {"search", "replace", "line"}:
            for key in (*_SEARCH_NAMES, *_REPLACE_NAMES, "search", "replace", "line"):
                out.pop(key, None)
            out["edits"] = [top]
    return out if out != arguments else arguments


def decode_args(tool: str, arguments: dict[str, Any], *, internal: bool = False) -> _Args:
    """Validate a tool call's arguments against its Struct; ``internal`` also accepts the
    internal tools (only the sandbox's dispatcher passes it). The arguments are read through
    :func:`tolerant_args` first.

    Raises msgspec.ValidationError, also for an unknown tool, and for text with no UTF-8
    form (a lone surrogate: :mod:`protocol.basics.text`), named by argument and offset, before
    msgspec sees it (its messages quote unknown argument names). Conversion is lax on
    purpose (``"5"`` becomes 5, ``"true"`` True): small models quote numbers and booleans.
    """
    args_type = TOOL_ARGS.get(tool) or (INTERNAL_TOOL_ARGS.get(tool) if internal else None)
    if args_type is None:
        raise msgspec.ValidationError(f"unknown tool {tool!r}; available: {', '.join(TOOL_ARGS)}")
    bad = find_bad_text(arguments)
    if bad is not None:
        raise msgspec.ValidationError(bad.describe())
    return msgspec.convert(tolerant_args(tool, arguments), args_type, strict=False)


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


def _compact(schema: Any) -> Any:
    """``schema`` without bounds and defaults, an optional ``T | None`` offered as ``T``."""
    if isinstance(schema, dict):
        options = schema.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            return _compact(next(option for option in options if option != {"type": "null"}))
        return {k: ({name: _compact(sub) for name, sub in v.items()} if k == "properties" else _compact(v))
                for k, v in schema.items() if k not in _COMPACT_DROPS and k != "description"
                and not (k == "required" and not v)}
    if isinstance(schema, list):
        return [_compact(v) for v in schema]
    return schema


def _parameters(args_type: type[_Args], name: str = "", compact: bool = False) -> dict[str, Any]:
    raw = msgspec.json.schema(args_type)
    params: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    params.pop("description", None)
    hidden = _UNOFFERED.get(name, frozenset()) | (_COMPACT_UNOFFERED.get(name, frozenset()) if compact
                                                  else frozenset())
    params["properties"] = {k: v for k, v in params.get("properties", {}).items() if k not in hidden}
    return _compact(params) if compact else params


def tool_definitions(names: frozenset[str] | None = None, *, compact: bool = False) -> list[dict[str, Any]]:
    """OpenAI/Ollama function-calling definitions for the named tools (all by default), in
    :data:`OFFER_ORDER`. ``compact``: one-line descriptions and no bounds or defaults."""
    out = []
    for name in OFFER_ORDER:
        if names is not None and name not in names:
            continue
        args_type = TOOL_ARGS[name]
        out.append({
            "type": "function",
            "function": {
                "name": name,
                "description": _SHORT[name] if compact else inspect.cleandoc(args_type.__doc__ or ""),
                "parameters": _parameters(args_type, name, compact),
            },
        })
    return out
