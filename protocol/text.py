"""Text with no UTF-8 form: lone UTF-16 surrogates in what a model sent.

A Python ``str`` may hold a code point between U+D800 and U+DFFF, which no UTF-8 encoder
takes: msgpack, JSON, SQLite and every hash raise ``UnicodeEncodeError`` on it. Python's
``json`` module makes one from an escape that is not half of a pair (``"\\udcff"``), and
models write such escapes (for a byte they could not spell, or a cut emoji); msgspec's
decoder refuses that JSON outright. So a model's text is made safe where it enters acode:

- :func:`find_bad_text`: where the first surrogate in a tool call's arguments is (the
  argument, as msgspec names it, ``$.edits[0].search``, and the character offset), for the
  correction the model gets (:func:`protocol.tools.decode_args` refuses such arguments);
- :func:`scrub`: each surrogate replaced by U+FFFD, for text only read or shown (a model's
  prose, a tool's name);
- :func:`escape`: each surrogate written as its JSON escape, for JSON text kept to be
  decoded again (the ``json`` module gives the same surrogate back, so a refusal made from
  it is the same after a replay).

Pure functions; nothing here raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["BadText", "escape", "find_bad_text", "has_bad_text", "scrub"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DEPTH = 64  # deeper values are not searched (msgspec refuses them long before)


@dataclass(frozen=True, slots=True)
class BadText:
    """The first surrogate found: in the argument at ``where`` (its name if ``in_name``),
    ``offset`` characters from the start of that string."""

    where: str
    offset: int
    char: str
    in_name: bool = False

    def describe(self) -> str:
        """What is wrong, where, and what to do; ASCII only (the surrogate is escaped)."""
        what = f"the name of an argument in `{self.where}`" if self.in_name else f"`{self.where}`"
        return (f"{what} holds a lone UTF-16 surrogate ({_escaped(self.char)}) at character offset {self.offset}, "
                "which is not text; send it again as valid UTF-8 text (write characters as themselves; a \\u escape "
                "of a surrogate is only valid as half of a pair)")


def find_bad_text(value: Any, where: str = "$") -> BadText | None:
    """The first lone surrogate in ``value`` (strings, and the keys and items of dicts and
    lists, searched in order), or None."""
    return _find(value, where, 0)


def has_bad_text(value: Any) -> bool:
    return _find(value, "$", 0) is not None


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the same object if it has none)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def escape(text: str) -> str:
    """``text`` with each lone surrogate written as a JSON escape (``\\udcff``): JSON text
    that encodes, and decodes (by the ``json`` module) to the same value."""
    return _SURROGATE.sub(lambda m: _escaped(m.group()), text) if _SURROGATE.search(text) else text


def _escaped(char: str) -> str:
    return f"\\u{ord(char):04x}"


def _find(value: Any, where: str, depth: int) -> BadText | None:
    if isinstance(value, str):
        match = _SURROGATE.search(value)
        return BadText(where, match.start(), match.group()) if match else None
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                match = _SURROGATE.search(key)
                if match:
                    return BadText(where, match.start(), match.group(), in_name=True)
            found = _find(item, f"{where}.{key}", depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _find(item, f"{where}[{index}]", depth + 1)
            if found is not None:
                return found
    return None
