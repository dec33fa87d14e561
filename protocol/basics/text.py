"""Text with no UTF-8 form: lone UTF-16 surrogates in what a model sent.

A Python ``str`` may hold a code point between U+D800 and U+DFFF, which no UTF-8 encoder
takes: msgpack, JSON, SQLite and every hash raise ``UnicodeEncodeError`` on it. Python's
``json`` module makes one from an escape that is not half of a pair (``"\\udcff"``), and
models write such escapes (for a byte they could not spell, or a cut emoji); msgspec's
decoder refuses that JSON outright. Bytes that are not UTF-8, read with
``errors="surrogateescape"`` (a command line's arguments, a file), arrive as surrogates too.
So a model's text is made safe where it enters acode:

- :func:`find_bad_text`: where the first surrogate in a tool call's arguments is (the
  argument, as msgspec names it, ``$.edits[0].search``, and the character offset), for the
  correction the model gets (:func:`protocol.calls.tools.decode_args` refuses such arguments);
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
    return _find(value, where)


def has_bad_text(value: Any) -> bool:
    return _find(value, "$") is not None


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the same object if it has none)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def escape(text: str) -> str:
    """``text`` with each lone surrogate written as a JSON escape (``\\udcff``): JSON text
    that encodes, and decodes (by the ``json`` module) to the same value."""
    return _SURROGATE.sub(lambda m: _escaped(m.group()), text) if _SURROGATE.search(text) else text


def _escaped(char: str) -> str:
    return f"\\u{ord(char):04x}"


def _find(value: Any, where: str) -> BadText | None:
    # depth first, in order, with a stack of its own: JSON nested deeper than Python's
    # recursion limit is still searched, and nothing raises
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            match = _SURROGATE.search(item)
            if match:
                return BadText(at, match.start(), match.group())
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                if isinstance(key, str):
                    match = _SURROGATE.search(key)
                    if match:
                        children.append((_Name(match.start(), match.group()), at))
                        break  # what follows a bad name is not reached
                children.append((child, f"{at}.{key}"))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(child, f"{at}[{index}]") for index, child in enumerate(item)]))
        elif isinstance(item, _Name):
            return BadText(at, item.offset, item.char, in_name=True)
    return None


@dataclass(frozen=True, slots=True)
class _Name:
    """A bad argument name, found in its turn among the values."""

    offset: int
    char: str
