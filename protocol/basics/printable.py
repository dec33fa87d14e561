"""Text a model or a command produced, made safe to show on a terminal.

A terminal obeys the control characters in what it prints: ``ESC ] 52 ; c ; … BEL`` (OSC 52)
writes the user's clipboard, OSC 8 makes a fake hyperlink, OSC 0 sets the window title, CSI
moves the cursor and repaints lines, DCS/SOS/PM/APC carry payloads some terminals act on,
and the 8-bit forms (``\\x9b`` for CSI, ``\\x9d`` for OSC, …) do the same on terminals that
take C1 controls. Bidirectional overrides and isolates (U+202A–202E, U+2066–2069, and the
marks U+200E, U+200F, U+061C) reorder what the user reads (``Trojan Source``).

Every such sequence starts with a control character, so :func:`printable` escapes each
control character on its own and no sequence survives, whether terminated, nested or cut
off: ESC becomes the four characters ``\\x1b``, the rest of the sequence stays as plain text
the user can read. One character class, one pass; text with nothing to escape comes back
as it is (the same object). What is escaped, and how:

- C0 controls (U+0000–U+001F) except LF and TAB, and DEL: ``\\x00`` … ``\\x1f``, ``\\x7f``;
  a CR is ``\\r`` unless a LF follows (a lone CR moves the cursor back and lets the rest of
  the line overwrite what came before; CRLF only ends a line);
- C1 controls (U+0080–U+009F): ``\\x80`` … ``\\x9f``;
- the bidi controls above: ``\\u202e`` and so on;
- lone surrogates (U+D800–U+DFFF, which no terminal encoding can print): ``\\udcff``.

``printable(text, lines=False)`` escapes LF, TAB and every CR as well, for a value shown
within one line (a path, a command, a rule), so it cannot start a line of its own.

:func:`json_printable` is for ``--json``: JSON encoders escape C0 but leave DEL, C1 and the
bidi controls raw; it makes them ``\\u`` escapes, which every JSON parser reads back as
the same characters.
"""

from __future__ import annotations

import re

__all__ = ["json_printable", "printable"]

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]|\r(?!\n)")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")  # what JSON encoders leave raw
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def printable(text: str, *, lines: bool = True) -> str:
    """``text`` with every control, bidi control and lone surrogate escaped (see the module
    docstring); LF and TAB kept unless ``lines`` is false."""
    return (_UNSAFE if lines else _UNSAFE_IN_LINE).sub(_escaped, text)


def json_printable(text: str) -> str:
    """JSON ``text`` with DEL, C1 and bidi controls as ``\\u`` escapes: still valid JSON for
    the same values. Outside strings JSON holds only ASCII, so each one is inside a string."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
