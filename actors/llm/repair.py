"""Repairing a tool call a model wrote as broken JSON, before it is refused.

Small models break the JSON of a call in a few ways over and over: a quote inside a string
left unescaped (a Python docstring's ``\"\"\"`` in write_file's ``content``), single quotes,
a trailing comma, a missing closing brace. Refusing such a call costs a turn, and at
temperature 0 the model sends the same broken text again (issue 25: seven turns running).

Repair is conservative. It only ever sees the text of something already recognised as an
attempted call (a ```json fence or ``<tool_call>`` body from the first key that names a
call, or a native call's arguments), never prose; that text must end its object (an
answer cut at the token limit is not completed); and its result is kept only when it
decodes to exactly one call of a known tool whose arguments pass that tool's Struct
(unknown keys are refused, so a repair that split a string into a stray key fails) and
every string in it comes from the text (nothing invented, not even an empty value); an
argument given twice is not repaired (which one was meant is a guess).

First, escapes JSON does not have in a double-quoted string are read as the model meant
them (:func:`_escapes`): ``\\'`` is ``'`` (Python's escape, ``'don\\'t'``), and any other
``\\X`` whose X is not one of ``"\\/bfnrtu`` is a backslash followed by X (``\\d`` in a
regex); a ``\\u`` without four hex digits is a backslash and ``u``. Valid escapes are kept
as they are. Then two ways are tried, in order:

1. the tool's own argument names: when each of them appears once as ``"key": "``, the
   string after it runs to the quote that closes it before the next key (``", "next":``)
   or the end of the object (``"}``); quotes inside it are escaped. This is what
   ``json-repair`` cannot know (it guesses that ``"\"\"Return x.\"\"\"`` starts a new key);
2. the ``json-repair`` library, for everything else (quotes, commas, braces), on text of
   at most 20,000 characters and 400 brackets (its time grows with the square of the
   nesting; a clock would make a replay repair differently).

Both are pure and deterministic, so a replayed stage repairs a recorded answer the same
way; :func:`call` and :func:`arguments` never raise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from typing import Any

import msgspec
from json_repair import repair_json

from protocol.calls.tools import TOOL_ARGS, decode_args

__all__ = ["arguments", "call"]

_decoder = json.JSONDecoder(strict=False)
_UNESCAPED_QUOTE = re.compile(r'(?<!\\)"')
_BEFORE_NEXT_KEY = re.compile(r'(.*)"\s*,\s*', re.S)
_BEFORE_END = re.compile(r'(.*)"\s*\}[\s}]*', re.S)
_MAX_CHARS = 200_000  # a call this long is not repaired
# json-repair's time grows with the square of the nesting (4,000 open brackets: 26 s), and a
# time limit would make a replay repair differently: it sees only text this small
_LIBRARY_CHARS = 20_000
_LIBRARY_BRACKETS = 400
# a double-quoted string, escapes and all, to its closing quote or the end of the text
_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.S)
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt]|.)', re.S)  # one backslash and what it escapes
_NAME = re.compile(r'"(?:name|tool|tool_name)"\s*:\s*"([A-Za-z_][\w-]*)"')

# (name, arguments) of one call from a decoded JSON value, or None (toolcalls gives this)
Extract = Callable[[Any], "tuple[str, dict[str, Any]] | None"]


def call(text: str, names: Collection[str], extract: Extract) -> tuple[str, dict[str, Any]] | None:
    """The one valid call ``text`` (from the start of an attempted call) means, or None.

    ``extract`` turns a decoded JSON value into (name, arguments) as the caller reads
    calls; the name must be in ``names`` and the arguments must pass its Struct."""
    if not _closed(text):
        return None
    mended = _escapes(text)
    named = _NAME.search(mended)
    candidates: list[tuple[Callable[[], Any], str]] = []
    if named is not None and named.group(1) in TOOL_ARGS:
        keys = TOOL_ARGS[named.group(1)].__struct_fields__
        if _repeated(mended, keys):
            return None
        candidates.append((lambda: _decoder.decode(_escape_strings(mended, keys, ends=2)), mended))
    candidates += _library_candidates(text, mended)
    for candidate, source in candidates:
        try:
            value = candidate()
        except (ValueError, RecursionError, TypeError, IndexError):
            continue
        found = extract(value)
        if found is not None and found[0] in names and _valid(*found) and _faithful(found[1], source):
            return found
    return None


def arguments(tool: str, text: str) -> dict[str, Any] | None:
    """The valid arguments of ``tool`` that ``text`` (a native call's arguments that did not
    decode) means, or None."""
    if tool not in TOOL_ARGS or not _closed(text):
        return None
    mended = _escapes(text)
    keys = TOOL_ARGS[tool].__struct_fields__
    if _repeated(mended, keys):
        return None
    candidates: list[tuple[Callable[[], Any], str]] = [
        (lambda: _decoder.decode(_escape_strings(mended, keys, ends=1)), mended), *_library_candidates(text, mended)]
    for candidate, source in candidates:
        try:
            value = candidate()
        except (ValueError, RecursionError, TypeError, IndexError):
            continue
        if isinstance(value, dict) and _valid(tool, value) and _faithful(value, source):
            return value
    return None


def _library_candidates(text: str, mended: str) -> list[tuple[Callable[[], Any], str]]:
    """json-repair on the mended text, then on the text as written when the mending changed
    it (in a single-quoted string, ``\\'`` is json-repair's to read)."""
    found: list[tuple[Callable[[], Any], str]] = [(lambda: _library(mended), mended)]
    if mended != text:
        found.append((lambda: _library(text), text))
    return found


def _escapes(text: str) -> str:
    """``text`` with the escapes JSON does not have, inside its double-quoted strings, written
    as the model meant them: ``\\'`` as ``'``, any other invalid ``\\X`` as an escaped
    backslash and X. The backslashes are read in pairs from the left, so ``\\\\'`` (an
    escaped backslash, then a quote) stays; a single-quoted string's ``\\'`` is left to
    json-repair (it ends no string there)."""
    return _STRING.sub(lambda string: _ESCAPE.sub(_mend, string.group(0)), text)


def _mend(match: re.Match[str]) -> str:
    escaped = match.group(1)
    if len(escaped) == 5 or escaped in '"\\/bfnrt':
        return match.group(0)
    return "'" if escaped == "'" else "\\\\" + escaped


def _repeated(text: str, keys: tuple[str, ...]) -> bool:
    """Is an argument given twice? Which one the model meant is a guess: no repair."""
    return any(len(re.findall(r'["\']' + re.escape(key) + r'["\']\s*:', text)) > 1 for key in keys)


def _closed(text: str) -> bool:
    """Does ``text`` end its object? An answer cut at the token limit is never completed into
    a call (``"content": "def f(`` would write half a file)."""
    return len(text) <= _MAX_CHARS and text.rstrip().endswith(("}", "]"))


def _valid(tool: str, args: dict[str, Any]) -> bool:
    if tool not in TOOL_ARGS:
        return False
    try:
        decode_args(tool, args)
    except (msgspec.ValidationError, TypeError, ValueError):
        return False
    return True


def _faithful(value: Any, text: str) -> bool:
    """Does every string of ``value`` come from ``text``, and end before the object does? A
    repair may mend quotes, never invent a value (json-repair answers ``"content": }`` with
    an empty content) nor let a string that was never closed take the closing braces."""
    if isinstance(value, dict):
        return all(_faithful(item, text) for item in value.values())
    if isinstance(value, list):
        return all(_faithful(item, text) for item in value)
    if not isinstance(value, str):
        return True
    if not value:
        return '""' in text or "''" in text
    tail = value.rstrip()[-40:]
    if tail and text.rstrip().endswith(tail):  # the string ran on to the object's end and took its braces
        return False
    head = value[:40]
    escaped = json.dumps(head, ensure_ascii=False)[1:-1]
    plain = text.replace('\\"', '"')  # quotes as written, escaped or not
    return head in text or escaped in text or escaped.replace('\\"', '"') in plain


def _library(text: str) -> Any:
    """json-repair's reading of ``text`` (the first object when it reads several values);
    ValueError for text too long or too nested for it to read quickly."""
    if len(text) > _LIBRARY_CHARS or text.count("{") + text.count("[") > _LIBRARY_BRACKETS:
        raise ValueError("too large for json-repair")
    value = repair_json(text, return_objects=True)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0]
    return value


def _escape_strings(text: str, keys: tuple[str, ...], *, ends: int) -> str:
    """``text`` with the quotes inside the string values of ``keys`` escaped, when each key
    appears once (else ValueError); ``ends``: closing braces the last value may be followed by."""
    pattern = re.compile(r'"(' + "|".join(re.escape(k) for k in keys) + r')"\s*:\s*"')
    found = list(pattern.finditer(text))
    if not found or len({m.group(1) for m in found}) != len(found):
        raise ValueError("no string argument, or one given twice")
    out = [text[:found[0].start()]]
    for index, match in enumerate(found):
        last = index + 1 == len(found)
        region = text[match.end():found[index + 1].start() if not last else len(text)]
        shape = _BEFORE_END if last else _BEFORE_NEXT_KEY
        whole = shape.fullmatch(region)
        if whole is None or (last and region.count("}", whole.end(1)) > ends):
            raise ValueError("a string argument does not end where the object says it does")
        value = whole.group(1)
        out.append(text[match.start():match.end()] + _UNESCAPED_QUOTE.sub(r'\\"', value) + region[len(value):])
    return "".join(out)
