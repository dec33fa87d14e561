"""Tool calls a model wrote as text, and the check every call passes before it runs.

Small local models (qwen2.5-coder 7B and the like) often answer a tool call as text
instead of a native function call: a JSON object, bare or in a ```json fence or
``<tool_call>`` tags, in one of several shapes::

    {"name": "read_file", "arguments": {"path": "a.py"}}      (also "parameters", "args", "input")
    {"tool": "read_file", "args": {"path": "a.py"}}           (also "tool_name")
    {"function": {"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}}
    {"read_file": {"path": "a.py"}}                           (a known tool name as the only key)
    [call, call, ...]  or  {"tool_calls": [call, ...]}

:func:`from_text` finds them (arguments given as a JSON string are decoded; arguments that
are not an object are kept in ``invalid_arguments`` for :func:`check` to refuse). Text that
plainly tries to call a tool but is not valid JSON is repaired when it can be
(:mod:`actors.llm.repair`: only into one valid call of a known tool; :func:`parse` says
which calls were repaired, :func:`repair_native` does the same for a native call's
arguments), else gives a :class:`ParseProblem` saying where it breaks, so the model can
fix it; JSON that is not shaped like a call (a
``package.json`` shown in prose) is ignored. A *file block*, a path on its own line and
then the file in a fenced code block (aider's "whole" edit format, which small models
write far more reliably than a whole file inside a JSON string), is read as a write_file
call when the caller asks for it (:func:`parse` with ``blocks``; :func:`file_blocks`).
:func:`check` validates a call, native or from text, against its tool's argument Struct
and returns the correction to send back.

Text with no UTF-8 form (a lone UTF-16 surrogate, which the ``json`` module makes from an
escape such as ``"\\udcff"``: :mod:`protocol.basics.text`) never stays in a call or an answer this
module hands on, so nothing downstream (the record, the sandbox's wire, the journal, logs,
events) meets it: :func:`storable` moves arguments holding one into ``invalid_arguments``,
as JSON text with the surrogate escaped, and scrubs the name and the id (U+FFFD);
:func:`storable_answer` does that to an answer's calls and scrubs its text. Every answer a
provider gives passes it before it is recorded (:mod:`actors.llm.recorded`), and
:func:`from_text` makes its calls storable. :func:`check` then refuses such a call with
ACODE-EXEC-007 naming the argument and the character offset, as it refuses any invalid
arguments: the model sees a tool error, its next turn may send valid text, and a replay
makes the same refusal from the same record.

All are pure, deterministic and never raise: ids are ``text_0``, ``text_1``, … in order,
so a replayed stage rebuilds the same conversation.

Size: finding calls and checking them are one contract: every call :func:`parse` hands on
is :func:`storable`, and :func:`check` refuses what that set aside, with the signatures and
examples its corrections show; split, a refusal would be explained a file away from the
parse that caused it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import msgspec

from actors.llm import repair
from protocol.basics.text import escape, find_bad_text, has_bad_text, scrub
from protocol.calls.tools import TOOL_ARGS, decode_args, tool_definitions
from protocol.plans.results import ModelAnswer, ModelToolCall

__all__ = ["CALL_EXAMPLE", "ParseProblem", "Parsed", "check", "code_blocks", "example_call", "file_blocks", "from_text",
           "parse", "repair_native", "signature", "storable", "storable_answer", "unnamed_code"]

# a placeholder, never a real-looking path: small models copy example paths into their work (issue 25)
CALL_EXAMPLE = '{"name": "read_file", "arguments": {"path": "<path>"}}'

_NAME_KEYS = ("name", "tool", "tool_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
_LIST_KEYS = ("tool_calls", "calls")
_JSONISH_LABELS = frozenset({"", "json", "jsonc", "json5", "tool_call", "tool_calls", "tool", "tool_code",
                             "function_call"})
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_TAG = re.compile(r"<(tool_call|tool_calls|function_call)>(.*?)(?:</\1>|\Z)", re.S)
_KEYS = r"name|tool|tool_name|function|tool_calls|arguments|parameters"
_FILE_WRITES = frozenset({"write_file", "modify_file"})
_OPEN_FENCE = re.compile(r"[ \t]{0,3}(`{3,})[ \t]*([A-Za-z0-9_+.#-]*)[ \t]*$")
_CLOSE_FENCE = re.compile(r"[ \t]{0,3}(`{3,})[ \t]*$")
_FILE_LABEL = re.compile(r"(?:#[ \t]*)?[Ff]ile:[ \t]*(.*)")
_PATH = re.compile(r"[\w.+@/-]{1,300}")
_WRAPS = (("**`", "`**"), ("`**", "**`"), ("**", "**"), ("`", "`"))
_MAX_STARTS = 64  # candidate positions tried in one text: bounds the work on hostile input
_MAX_TEXT = 1_000_000
_decoder = json.JSONDecoder(strict=False)  # small models put raw newlines inside strings
_Raw = tuple[str, dict[str, Any], str, bool]  # name, arguments, invalid_arguments, repaired


@dataclass(frozen=True, slots=True)
class ParseProblem:
    """Text that tries to call a tool but is not valid JSON; ``message`` is for the model."""

    message: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """What :func:`parse` found: the calls, or the problem; ``repaired`` holds the ids of
    calls whose broken JSON was repaired (:mod:`actors.llm.repair`)."""

    calls: list[ModelToolCall]
    problem: ParseProblem | None = None
    repaired: frozenset[str] = frozenset()
    from_blocks: frozenset[str] = frozenset()  # ids of write_file calls read from file blocks


def from_text(content: str, tool_names: Collection[str]) -> list[ModelToolCall] | ParseProblem:
    """The tool calls written in ``content`` (``[]`` if there are none), or the problem."""
    parsed = parse(content, tool_names)
    return parsed.problem if parsed.problem is not None else parsed.calls


def parse(content: str, tool_names: Collection[str], *, blocks: bool = False) -> Parsed:
    """:func:`from_text`, saying which calls were repaired and, with ``blocks``, which were
    file blocks.

    With ``blocks`` (the executor under whole-file edits, whose prompt asks for them) a file
    block (:func:`file_blocks`) is a write_file call. The JSON calls of an answer
    that holds file blocks are those outside the blocks, in order with them; when those
    JSON calls write files themselves (write_file, modify_file), they alone count, as in an
    answer without file blocks."""
    text = content[:_MAX_TEXT] if content else ""
    names = frozenset(tool_names)
    found_blocks = file_blocks(text) if blocks and "write_file" in names else []
    if not found_blocks:
        if "{" not in text:
            bare = bare_control(text, names)
            return _parsed([((bare[0], bare[1], "", False), False)]) if bare else Parsed([])
        found = _scan_all(text, names)
        return _parsed([(item, False) for item in found]) if isinstance(found, list) else Parsed([], found)
    whole = _scan_all(text, names) if "{" in text else []
    if isinstance(whole, list) and any(name in _FILE_WRITES for name, *_ in whole):
        return _parsed([(item, False) for item in whole])  # JSON writes win: the blocks may be inside their strings
    raw: list[tuple[_Raw, bool]] = []
    position = 0
    for start, end, path, body in found_blocks:
        found = _scan_all(text[position:start], names) if "{" in text[position:start] else []
        if isinstance(found, ParseProblem):
            return Parsed([], found)
        raw += [(item, False) for item in found]
        raw.append((("write_file", {"path": path, "content": body}, "", False), True))
        position = end
    found = _scan_all(text[position:], names) if "{" in text[position:] else []
    if isinstance(found, ParseProblem):
        return Parsed([], found)
    return _parsed(raw + [(item, False) for item in found])


_BARE_CONTROL = re.compile(r"[\s`*\"']*(step_complete|step_failed)[\s`*\"']*(?:[:(-]\s*(.*?))?[\s)`*\"']*",
                           re.DOTALL)
_BARE_FIELD = {"step_complete": "summary", "step_failed": "reason"}


def bare_control(text: str, tool_names: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    """A control call written as its bare name: an answer that is only ``step_complete`` or
    ``step_failed``, perhaps followed by ``: <summary>`` (small models answer so after a
    write), as ``(name, arguments)``; None for anything else. Only short answers without
    JSON count: a control call ends the step and the verifier still checks its work."""
    if len(text) > 500 or "{" in text:
        return None
    found = _BARE_CONTROL.fullmatch(text)
    if found is None or found.group(1) not in tool_names:
        return None
    name = found.group(1)
    said = " ".join((found.group(2) or "").split()) or ("done" if name == "step_complete" else "no reason given")
    return name, {_BARE_FIELD[name]: said}


def file_blocks(text: str) -> list[tuple[int, int, str, str]]:
    """The file blocks in ``text``, in order, as (start, end, path, content): a line that is
    only a relative file path (bare, in backticks, bold, or after ``File:`` / ``# File:``;
    no spaces, no ``..``, not absolute, with an extension or a slash), then, blank lines
    allowed, a fenced code block (three or more backticks, an optional language) closed by
    a fence at least as long; content is the block's lines with a final newline (CRLF read
    as LF). A fence without such a path line, or never closed, is no file block."""
    return [(start, end, path, body) for start, end, path, body, _ in _fences(text) if path is not None]


def code_blocks(text: str) -> list[tuple[str | None, str, str]]:
    """Every closed fenced block in ``text``, in order, as (path, content, language): path
    the line naming it as :func:`file_blocks` reads one, else None."""
    return [(path, body, label) for _, _, path, body, label in _fences(text)]


def unnamed_code(text: str) -> bool:
    """Whether ``text`` holds a closed fenced code block, not JSON, without a path line before
    it: code the model may have meant as a file (:func:`file_blocks`) but did not name. A
    block labelled as JSON, or unlabelled holding an object or a list, is a call's fence."""
    return any(path is None and (label.lower() not in _JSONISH_LABELS if label else body.lstrip()[:1] not in "{[")
               for _, _, path, body, label in _fences(text))


def _fences(text: str) -> list[tuple[int, int, str | None, str, str]]:
    """The closed fenced blocks in ``text``, in order, as (start, end, path, content, language):
    ``path`` the path line's (start is then where that line starts), else None."""
    if "```" not in text:
        return []
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    found: list[tuple[int, int, str | None, str, str]] = []
    index, floor = 0, 0  # floor: the first line after the last fence, where a path line may be
    while index < len(lines):
        opening = _OPEN_FENCE.match(lines[index].rstrip("\r"))
        if opening is None:
            index += 1
            continue
        ticks = len(opening.group(1))
        close = next((j for j in range(index + 1, len(lines))
                      if (m := _CLOSE_FENCE.match(lines[j].rstrip("\r"))) and len(m.group(1)) >= ticks), None)
        if close is None:
            break  # never closed: a cut answer writes nothing
        head = index - 1
        while head >= floor and not lines[head].strip():
            head -= 1
        path = _block_path(lines[head]) if head >= floor else None
        body = "".join(line.removesuffix("\r") + "\n" for line in lines[index + 1:close])
        found.append((offsets[head] if path is not None else offsets[index], min(offsets[close + 1], len(text)),
                      path, body, opening.group(2)))
        index = floor = close + 1
    return found


def _block_path(line: str) -> str | None:
    """The path a file block's path line names, or None when it is not a path line."""
    text = line.strip()
    labelled = _FILE_LABEL.fullmatch(text)
    if labelled is not None:
        text = labelled.group(1).strip()
    for before, after in _WRAPS:
        if len(text) > len(before) + len(after) and text.startswith(before) and text.endswith(after):
            text = text[len(before):-len(after)]
            break
    if _PATH.fullmatch(text) is None or text.startswith("/") or text.endswith("/") or not re.search("[A-Za-z]", text):
        return None
    parts = text.split("/")
    if ".." in parts or "" in parts:
        return None
    if len(parts) == 1 and not re.search(r"\.[A-Za-z0-9]+$", text):
        return None  # a bare word is no path: a file path has an extension or a slash
    return text


def _scan_all(text: str, names: frozenset[str]) -> list[_Raw] | ParseProblem:
    """The JSON calls in ``text``: those in its JSON fences and tags, else anywhere in it."""
    start = _start_pattern(names)
    raw: list[_Raw] = []
    for block in _blocks(text):
        found = _scan(block, names, start)
        if isinstance(found, ParseProblem):
            return found
        raw += found
    return raw or _scan(text, names, start)


def _parsed(raw: list[tuple[_Raw, bool]]) -> Parsed:
    calls = [storable(ModelToolCall(id=f"text_{i}", name=name, arguments=args, invalid_arguments=invalid))
             for i, ((name, args, invalid, _), _block) in enumerate(raw)]
    return Parsed(calls, repaired=frozenset(f"text_{i}" for i, (item, _) in enumerate(raw) if item[3]),
                  from_blocks=frozenset(f"text_{i}" for i, (_, block) in enumerate(raw) if block))


def repair_native(call: ModelToolCall) -> ModelToolCall | None:
    """A native call whose arguments did not decode, with the arguments they mean
    (:func:`actors.llm.repair.arguments`), or None when they cannot be repaired."""
    if not call.invalid_arguments or call.name not in TOOL_ARGS or _bad_text(call.invalid_arguments):
        return None
    fixed = repair.arguments(call.name, call.invalid_arguments)
    if fixed is None:
        return None
    return storable(msgspec.structs.replace(call, arguments=fixed, invalid_arguments=""))


def example_call(tool: str, path: str = "") -> str:
    """An exact call of ``tool`` as one JSON object, its path filled in (a placeholder
    without one): what a model that keeps sending broken JSON is shown."""
    target = path or "<path>"
    examples: dict[str, dict[str, Any]] = {
        "read_file": {"path": target},
        "write_file": {"path": target, "content": '<first line>\n<a line with "quotes">\n'},
        "modify_file": {"path": target, "edits": [{"search": "<exact old text>", "replace": "<new text>"}]},
        "create_directory": {"path": target},
        "list_directory": {"path": path or "."},
        "search_code": {"query": "<text>"},
        "run_terminal": {"command": "<program> <arguments>"},
        "step_complete": {"summary": "<what was done>"},
        "step_failed": {"reason": "<why it cannot be done>"},
    }
    return json.dumps({"name": tool, "arguments": examples.get(tool, {})}, ensure_ascii=False)


def storable(call: ModelToolCall) -> ModelToolCall:
    """``call`` with no lone surrogate left (the same object if it had none): arguments
    holding one become ``invalid_arguments``, JSON text with each surrogate escaped, so
    :func:`check` finds it again; the name and the id are scrubbed."""
    invalid, arguments = call.invalid_arguments, call.arguments
    if has_bad_text(arguments):
        invalid, arguments = json.dumps(arguments, ensure_ascii=False, default=str), {}
    changed = {"id": scrub(call.id), "name": scrub(call.name), "invalid_arguments": escape(invalid)}
    if arguments is call.arguments and all(value is getattr(call, key) for key, value in changed.items()):
        return call
    return msgspec.structs.replace(call, arguments=arguments, **changed)


def storable_answer(answer: ModelAnswer) -> ModelAnswer:
    """``answer`` with no lone surrogate left (the same object if it had none): its text
    scrubbed, its tool calls made :func:`storable`."""
    calls = [storable(call) for call in answer.tool_calls]
    changed = {"content": scrub(answer.content), "finish_reason": scrub(answer.finish_reason),
               "format_error": scrub(answer.format_error)}
    if all(new is old for new, old in zip(calls, answer.tool_calls, strict=True)) \
            and all(value is getattr(answer, key) for key, value in changed.items()):
        return answer
    return msgspec.structs.replace(answer, tool_calls=calls, **changed)


def check(call: ModelToolCall) -> str | None:
    """Why ``call`` cannot run as it is (a short correction for the model), or None."""
    if call.name not in TOOL_ARGS:
        return (f"tool {_quote(call.name)} is not available; call one of: {', '.join(TOOL_ARGS)} "
                "(ACODE-SBX-001)")
    if call.invalid_arguments:
        bad = _bad_text(call.invalid_arguments)
        if bad:
            return f"invalid arguments for {call.name}: {bad}; it takes {signature(call.name)} (ACODE-EXEC-007)"
        return (f"arguments must be a JSON object: the arguments of {call.name} were {_quote(call.invalid_arguments)}"
                f"{_json_problem(call.invalid_arguments)}; call it again as {signature(call.name)} (ACODE-EXEC-007)")
    try:
        decode_args(call.name, call.arguments)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        return f"invalid arguments for {call.name}: {exc}; it takes {signature(call.name)} (ACODE-EXEC-007)"
    return None


def _bad_text(text: str) -> str:
    """What is wrong with arguments that decode to an object holding a lone surrogate
    (:func:`storable` or a provider put them there), or ''."""
    try:
        value = _decoder.decode(text.strip())
    except (ValueError, RecursionError):
        return ""
    bad = find_bad_text(value) if isinstance(value, dict) else None
    return bad.describe() if bad is not None else ""


def _json_problem(text: str) -> str:
    """`` (not JSON: <why>)`` for text that does not decode, '' for JSON that is not an object."""
    try:
        _decoder.decode(text.strip())
    except json.JSONDecodeError as exc:
        return f" (not JSON: {exc.msg} at column {exc.colno})"
    except (ValueError, RecursionError):
        return " (not JSON)"
    return ""


def signature(tool: str) -> str:
    """``write_file(path: string, content: string)``; optional arguments end with ``?``."""
    return _SIGNATURES.get(tool, tool)


# -- finding candidate JSON -------------------------------------------------------------------


def _blocks(text: str) -> list[str]:
    """Fenced blocks that may hold JSON and ``<tool_call>`` bodies, in the order they appear."""
    found = [(m.start(), m.group(2)) for m in _TAG.finditer(text)]
    found += [(m.start(), m.group(2)) for m in _FENCE.finditer(text) if m.group(1).lower() in _JSONISH_LABELS]
    return [body for _, body in sorted(found, key=lambda item: item[0])]


def _start_pattern(names: frozenset[str]) -> re.Pattern[str]:
    keys = "|".join([_KEYS, *(re.escape(n) for n in sorted(names))])
    # an object (or a list of objects) whose first key names a call; quotes optional, so a
    # call with single quotes or bare keys is still recognised as an attempt
    return re.compile(r"(?:\[\s*)?\{\s*[\"']?(?:" + keys + r")[\"']?\s*:")


def _scan(text: str, names: frozenset[str], start: re.Pattern[str]) -> list[_Raw] | ParseProblem:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return _calls(_decoder.decode(stripped), names)
        except (ValueError, RecursionError):
            pass  # several values, prose around one, or broken: the scan below tells which
    calls: list[_Raw] = []
    position = 0
    for tries, match in enumerate(start.finditer(text)):
        if tries >= _MAX_STARTS:
            break
        if match.start() < position:
            continue
        try:
            value, position = _decoder.raw_decode(text, match.start())
        except json.JSONDecodeError as exc:
            fixed = repair.call(text[match.start():], names, lambda v: _repairable(v, names))
            if fixed is None:
                return _problem(text, exc)
            calls.append((*fixed, "", True))
            break  # where the broken call ended is a guess: nothing after it is read as a call
        except RecursionError:
            return ParseProblem(f"your tool call is not valid JSON (it nests too deeply); write it again as one "
                                f"JSON object, e.g. {CALL_EXAMPLE} (ACODE-EXEC-007)")
        calls += _calls(value, names)
    return calls


def _problem(text: str, exc: json.JSONDecodeError) -> ParseProblem:
    near = text[max(0, exc.pos - 30):exc.pos + 30]
    return ParseProblem(
        f"your tool call is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (near "
        f"{_quote(near)}); write it again as one JSON object with double-quoted keys and strings, quotes and "
        f"backslashes inside strings escaped, e.g. {CALL_EXAMPLE} (ACODE-EXEC-007)")


# -- from JSON values to calls -------------------------------------------------------------


def _calls(value: Any, names: frozenset[str], depth: int = 0) -> list[_Raw]:
    if depth > 3:
        return []
    if isinstance(value, list):
        return [call for item in value[:100] for call in _calls(item, names, depth + 1)]
    if not isinstance(value, dict):
        return []
    for key in _LIST_KEYS:
        if isinstance(value.get(key), list):
            return _calls(value[key], names, depth + 1)
    call = _one(value, names)
    return [call] if call is not None else []


def _repairable(value: Any, names: frozenset[str]) -> tuple[str, dict[str, Any]] | None:
    """The one call a repaired JSON value holds, or None."""
    found = _calls(value, names)
    if len(found) != 1 or found[0][2]:
        return None
    return found[0][0], found[0][1]


def _one(obj: dict[str, Any], names: frozenset[str]) -> _Raw | None:
    function = obj.get("function")
    if isinstance(function, dict):  # the OpenAI shape
        obj = function
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None and isinstance(function, str):
        name = function
    if name is None:
        if len(obj) == 1:
            (only, args), = obj.items()
            if only in names and isinstance(args, dict | str | None):
                return only, *_arguments(args), False
        return None
    name = name.strip()
    if not name:
        return None
    arg_key = next((k for k in _ARG_KEYS if k in obj), None)
    if arg_key is not None:
        return name, *_arguments(obj[arg_key]), False
    if name not in names:
        return None  # {"name": "my-app", "version": "1.0"} is a package.json, not a call
    # arguments flattened beside the name: {"name": "read_file", "path": "a.py"}
    rest = {k: v for k, v in obj.items() if k not in (*_NAME_KEYS, "function", "type", "id")}
    return name, rest, "", False


def _arguments(value: Any) -> tuple[dict[str, Any], str]:
    """(arguments, invalid_arguments): a JSON string is decoded; anything but an object is invalid."""
    if value is None:
        return {}, ""
    if isinstance(value, dict):
        return value, ""
    if isinstance(value, str):
        if not value.strip():
            return {}, ""
        try:
            decoded = _decoder.decode(value.strip())
        except (ValueError, RecursionError):
            return {}, value
        return (decoded, "") if isinstance(decoded, dict) else ({}, value)
    return {}, json.dumps(value)[:1_000]


def _quote(text: str, limit: int = 80) -> str:
    shown = text if len(text) <= limit else text[:limit] + "…"
    return repr(shown)


def _signatures() -> dict[str, str]:
    out = {}
    for definition in tool_definitions():
        function = definition["function"]
        params = function["parameters"]
        required = set(params.get("required", []))
        parts = []
        for name, schema in params.get("properties", {}).items():
            kind = schema.get("type") or next(
                (s.get("type") for s in schema.get("anyOf", []) if s.get("type") != "null"), "value")
            parts.append(f"{name}{'' if name in required else '?'}: {kind}")
        out[function["name"]] = f"{function['name']}({', '.join(parts)})"
    return out


_SIGNATURES = _signatures()
