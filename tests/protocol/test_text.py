"""Text with no UTF-8 form (lone UTF-16 surrogates): found by argument and offset, scrubbed, escaped."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.basics.text import BadText, escape, find_bad_text, has_bad_text, scrub
from protocol.calls.tools import decode_args

# any code point, and often a surrogate (hypothesis leaves category Cs out by default; a pair
# written as two code points is no more encodable than a lone one)
_any_text = st.text(st.characters(codec=None, categories=None, exclude_categories=())
                    | st.sampled_from("\ud800\udbff\udc00\udcff\udfff\ud83d\ude00"), max_size=40)


@pytest.mark.parametrize(("value", "found"), [
    ("a\udcffb", BadText("$", 1, "\udcff")),
    ({"path": "src/\ud800x"}, BadText("$.path", 4, "\ud800")),
    ({"path": "ok", "edits": [{"search": "a", "replace": "b"}, {"search": "c\udfff", "replace": "d"}]},
     BadText("$.edits[1].search", 1, "\udfff")),
    ({"queries": ["fine", ["deep", "\udcff"]]}, BadText("$.queries[1][1]", 0, "\udcff")),
    ({"pa\udcffth": "ok"}, BadText("$", 2, "\udcff", in_name=True)),
    ({"a": "\udc00", "b": "\udc01"}, BadText("$.a", 0, "\udc00")),  # the first, in order
])
def test_the_first_lone_surrogate_is_found_with_its_argument_and_offset(value: Any, found: BadText) -> None:
    assert find_bad_text(value) == found
    assert has_bad_text(value)


@pytest.mark.parametrize("value", [
    "", "plain", "é ü 中文", "emoji \U0001f600 outside the BMP", "\ufffd replacement", "a\x00b",
    {"path": "a.txt", "n": 3, "flag": True, "none": None, "list": [1.5, "x", {"k": "v"}]},
])
def test_valid_text_has_no_bad_text(value: Any) -> None:
    assert find_bad_text(value) is None
    assert not has_bad_text(value)


def test_the_description_names_the_argument_the_offset_and_the_fix_in_ascii() -> None:
    text = BadText("$.edits[0].search", 7, "\udcff").describe()
    assert text == ("`$.edits[0].search` holds a lone UTF-16 surrogate (\\udcff) at character offset 7, which is "
                    "not text; send it again as valid UTF-8 text (write characters as themselves; a \\u escape of a "
                    "surrogate is only valid as half of a pair)")
    assert text.isascii()
    assert BadText("$", 0, "\ud800", in_name=True).describe().startswith(
        "the name of an argument in `$` holds a lone UTF-16 surrogate (\\ud800) at character offset 0")


def test_decode_args_refuses_a_surrogate_before_msgspec_quotes_it() -> None:
    with pytest.raises(msgspec.ValidationError) as refused:
        decode_args("write_file", {"path": "a.txt", "content": "ok", "x\udcff": 1})
    assert str(refused.value).startswith("the name of an argument in `$` holds a lone UTF-16 surrogate (\\udcff)")
    with pytest.raises(msgspec.ValidationError, match=r"`\$\.command` holds a lone UTF-16 surrogate"):
        decode_args("run_terminal", {"command": "echo \udcff"})


@given(_any_text)
def test_scrub_and_escape_always_give_text_that_encodes(text: str) -> None:
    scrubbed = scrub(text)
    scrubbed.encode("utf-8")
    assert len(scrubbed) == len(text) and not has_bad_text(scrubbed)
    escape(text).encode("utf-8")
    if not has_bad_text(text):
        assert scrub(text) is text and escape(text) is text


@given(st.dictionaries(_any_text, _any_text | st.lists(_any_text, max_size=3), max_size=4))
def test_escaped_json_text_decodes_to_the_same_value(value: dict[str, Any]) -> None:
    """What storable() keeps: JSON text that encodes, which the json module reads back as it was."""
    kept = escape(json.dumps(value, ensure_ascii=False))
    kept.encode("utf-8")
    assert json.loads(kept) == value


def test_text_nested_deeper_than_the_recursion_limit_is_still_searched() -> None:
    deep: Any = "\udcff"
    for _ in range(5_000):
        deep = [deep]
    assert find_bad_text({"path": deep}) == BadText("$.path" + "[0]" * 5_000, 0, "\udcff")
