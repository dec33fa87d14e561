"""Tool calls written as text: every shape small models use, precise problems, and checks."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.llm.toolcalls import (
    ParseProblem,
    bare_control,
    check,
    file_blocks,
    from_text,
    parse,
    repair_native,
    signature,
    storable,
    storable_answer,
    unnamed_code,
)
from protocol import codec
from protocol.calls.tools import TOOL_ARGS
from protocol.plans.results import ModelAnswer, ModelToolCall
from tests.protocol.strategies import arguments, json_values

NAMES = frozenset(TOOL_ARGS)
READ = {"path": "src/app.py"}


def calls(text: str) -> list[tuple[str, str, dict[str, Any], str]]:
    found = from_text(text, NAMES)
    assert not isinstance(found, ParseProblem), found.message
    return [(c.id, c.name, c.arguments, c.invalid_arguments) for c in found]


@pytest.mark.parametrize("text", [
    '{"name": "read_file", "arguments": {"path": "src/app.py"}}',
    '```json\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n```',
    '```\n{"name": "read_file", "parameters": {"path": "src/app.py"}}\n```',
    'I will read it first.\n{"tool": "read_file", "args": {"path": "src/app.py"}}\nThen I will edit it.',
    '<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>',
    '{"type": "function", "function": {"name": "read_file", "arguments": "{\\"path\\": \\"src/app.py\\"}"}}',
    '{"tool_name": "read_file", "input": {"path": "src/app.py"}}',
    '{"read_file": {"path": "src/app.py"}}',
    '{"name": "read_file", "path": "src/app.py"}',
    '{"tool_calls": [{"id": "x", "function": {"name": "read_file", "arguments": {"path": "src/app.py"}}}]}',
    '```json\n{"name": "read_file", "arguments": {"path": "src/app.py"}}',  # the fence never closed
], ids=["bare", "json-fence", "plain-fence", "in-prose", "qwen-tags", "openai-string-args", "tool-name-input",
        "name-as-key", "flattened", "tool-calls-wrapper", "unclosed-fence"])
def test_every_shape_of_a_text_call_gives_the_same_call(text: str) -> None:
    assert calls(text) == [("text_0", "read_file", READ, "")]


def test_a_list_and_several_objects_give_calls_in_order_with_deterministic_ids() -> None:
    listed = json.dumps([{"name": "read_file", "arguments": READ}, {"name": "step_complete",
                                                                     "arguments": {"summary": "ok"}}])
    assert [(i, n) for i, n, _, _ in calls(listed)] == [("text_0", "read_file"), ("text_1", "step_complete")]
    lines = ('{"name": "write_file", "arguments": {"path": "a", "content": "1"}}\n'
             '{"name": "write_file", "arguments": {"path": "b", "content": "2"}}')
    assert [a["path"] for _, _, a, _ in calls(lines)] == ["a", "b"]
    fences = ('```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```\nand\n'
              '```json\n{"name": "read_file", "arguments": {"path": "b"}}\n```')
    assert [(i, a["path"]) for i, _, a, _ in calls(fences)] == [("text_0", "a"), ("text_1", "b")]


def test_raw_newlines_inside_strings_are_accepted() -> None:
    text = '{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\ny = 2\n"}}'
    assert calls(text)[0][2] == {"path": "a.py", "content": "x = 1\ny = 2\n"}


def test_text_without_a_call_gives_no_calls() -> None:
    assert calls("") == []
    assert calls("The step is done; I wrote the file.") == []
    assert calls('Here is package.json:\n```json\n{"name": "my-app", "version": "1.0.0"}\n```') == []
    assert calls("```python\nprint({'a': 1})\n```") == []
    assert calls('{"path": "a.py"}') == []
    assert calls("```json\n{\"broken\": \n```") == []  # broken JSON that does not try to call anything


def test_arguments_that_are_not_an_object_are_kept_for_check_to_refuse() -> None:
    assert calls('{"name": "read_file", "arguments": ["src/app.py"]}') == [
        ("text_0", "read_file", {}, '["src/app.py"]')]
    assert calls('{"name": "read_file", "arguments": "src/app.py"}') == [("text_0", "read_file", {}, "src/app.py")]
    assert calls('{"name": "list_directory", "arguments": ""}') == [("text_0", "list_directory", {}, "")]


def test_an_attempted_call_with_invalid_json_is_a_problem_that_says_where() -> None:
    # repair cannot help: a value is missing, and the string key appears twice
    problem = from_text('{"name": "write_file", "arguments": {"path": "a.py", "content": }}', NAMES)
    assert isinstance(problem, ParseProblem)
    assert problem.message.startswith("your tool call is not valid JSON: Expecting value at line 1 column 65 (near ")
    assert problem.message.endswith('e.g. {"name": "read_file", "arguments": {"path": "<path>"}} (ACODE-EXEC-007)')

    # an answer cut at the token limit is never completed into a call (it would write half a file)
    cut = from_text('```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "def f(', NAMES)
    assert isinstance(cut, ParseProblem) and "Unterminated string" in cut.message


# What Qwen2.5-Coder-1.5B sent seven times running at temperature 0 (issue 25): a docstring's
# quotes left unescaped inside write_file's content.
DOCSTRING_CALL = ('```json\n{"name": "write_file", "arguments": {"path": "solution.py", "content": '
                  '"def f(x):\\n    """Return x."""\\n    return x\\n"}}\n```')


def test_unescaped_quotes_in_a_string_argument_are_repaired_and_the_call_is_marked_repaired() -> None:
    parsed = parse(DOCSTRING_CALL, NAMES)
    assert parsed.problem is None and parsed.repaired == {"text_0"}
    [call] = parsed.calls
    assert (call.name, call.arguments) == (
        "write_file", {"path": "solution.py", "content": 'def f(x):\n    """Return x."""\n    return x\n'})
    inner = parse('<tool_call>{"name": "write_file", "arguments": {"content": "say("hi")\\n", "path": "a.py"}}'
                  "</tool_call>", NAMES)
    assert [c.arguments for c in inner.calls] == [{"content": 'say("hi")\n', "path": "a.py"}]


def test_json_repair_mends_single_quotes_and_trailing_commas_of_a_recognised_call() -> None:
    parsed = parse("```json\n{'name': 'read_file', 'arguments': {'path': 'a.py',},}\n```", NAMES)
    assert parsed.problem is None and parsed.repaired == {"text_0"}
    assert [(c.name, c.arguments) for c in parsed.calls] == [("read_file", {"path": "a.py"})]
    assert parse('{"name": "read_file", "arguments": {"path": "a.py"}}', NAMES).repaired == frozenset()


def test_a_repair_that_does_not_make_a_valid_call_of_a_known_tool_is_refused() -> None:
    # json-repair alone reads the docstring's quotes as the end of content and a new key: refused by the Struct
    assert isinstance(from_text('{"name": "write_file", "arguments": {"path": "a.py", "content": "x", "content": '
                                '"say("hi")"}}', NAMES), ParseProblem)
    assert isinstance(from_text("{'name': 'delete_file', 'arguments': {'path': 'a.py'},}", NAMES), ParseProblem)
    assert isinstance(from_text("{'name': 'read_file', 'arguments': {'path': 'a.py', 'lines': 3},}", NAMES),
                      ParseProblem)
    # prose is never handed to the repair: only text recognised as an attempted call
    assert from_text("I would call {read the file} and then {'write': it}", NAMES) == []


def test_a_string_never_closed_is_not_repaired_into_one_that_took_the_objects_braces() -> None:
    unclosed = '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "' + '{"a": [' * 19 + '}}\n```'
    assert isinstance(from_text(unclosed, NAMES), ParseProblem)
    nested = parse('```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "x = {"a": {"b": 1}}"}}'
                   '\n```', NAMES)
    assert [c.arguments["content"] for c in nested.calls] == ['x = {"a": {"b": 1}}']


def test_text_too_nested_for_json_repair_to_read_quickly_is_refused_at_once() -> None:
    deep = '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "' + '{"a": [' * 5_000 + '}}\n```'
    started = time.monotonic()
    assert isinstance(from_text(deep, NAMES), ParseProblem)
    assert time.monotonic() - started < 2, "json-repair's time grows with the square of the nesting"


def test_native_arguments_that_do_not_decode_are_repaired_only_into_valid_arguments() -> None:
    broken = ModelToolCall(id="c1", name="write_file",
                           invalid_arguments='{"path": "solution.py", "content": "x = "a"\\n"}')
    fixed = repair_native(broken)
    assert fixed is not None
    assert (fixed.id, fixed.arguments, fixed.invalid_arguments) == (
        "c1", {"path": "solution.py", "content": 'x = "a"\n'}, "")
    assert repair_native(ModelToolCall(id="c2", name="write_file", invalid_arguments='{"path": "a.py"')) is None
    assert repair_native(ModelToolCall(id="c3", name="nope", invalid_arguments="{'path': 'a.py'}")) is None
    assert repair_native(ModelToolCall(id="c4", name="read_file", invalid_arguments='["a.py"]')) is None


# What Qwen2.5-Coder-1.5B sent twice at temperature 0 (issue 25): Python's \' inside a JSON string,
# an escape JSON does not have ("Invalid \escape"); its \n are the two characters, valid JSON.
CONTRACTION_CALL = ('```json\n{\n  "name": "modify_file",\n  "arguments": {\n    "path": "tests/test_core.py",\n'
                    '    "content": "def test_contractions_are_one_word(self):\\n    assert count_words('
                    '\'don\\\'t stop\') == {\'don\\\'t\': 1, \'stop\': 1}\\n"\n  }\n}\n```')
CONTRACTION_TEST = ("def test_contractions_are_one_word(self):\n"
                    "    assert count_words('don't stop') == {'don't': 1, 'stop': 1}\n")


def test_a_python_escaped_quote_in_a_string_is_read_as_a_quote_and_the_call_is_marked_repaired() -> None:
    assert "count_words('don\\'t stop')" in CONTRACTION_CALL  # a backslash and a quote, as the model sent it
    parsed = parse(CONTRACTION_CALL, NAMES)
    assert parsed.problem is None and parsed.repaired == {"text_0"}
    [call] = parsed.calls
    assert (call.name, call.arguments) == ("modify_file", {"path": "tests/test_core.py", "content": CONTRACTION_TEST})


@pytest.mark.parametrize(("written", "meant"), [
    (r"re.match('\d+', s)", "re.match('\\d+', s)"),  # \d: a backslash and d
    (r"print('it\'s')", "print('it's')"),  # \': a quote
    (r"path = 'C:\Users'", "path = 'C:\\Users'"),  # \U: a backslash and U
    (r"x = '\u12' # \'", "x = '\\u12' # '"),  # a \u without four hex digits: a backslash and u
    (r"say(\"hi\")\n\t\d", 'say("hi")\n\t\\d'),  # the valid escapes stay what they are
    (r"a\\\'b \\d", "a\\'b \\d"),  # the backslashes are read in pairs from the left
])
def test_escapes_json_does_not_have_are_read_as_the_model_meant_them(written: str, meant: str) -> None:
    arguments = '{"path": "a.py", "content": "' + written + '"}'
    with pytest.raises(ValueError, match="Invalid"):
        json.loads(arguments)
    parsed = parse('{"name": "write_file", "arguments": ' + arguments + "}", NAMES)
    assert parsed.problem is None, parsed.problem.message
    assert parsed.repaired == {"text_0"}
    assert [c.arguments for c in parsed.calls] == [{"path": "a.py", "content": meant}]
    native = repair_native(ModelToolCall(id="c1", name="write_file", invalid_arguments=arguments))
    assert native is not None and native.arguments == {"path": "a.py", "content": meant}


def test_a_bad_escape_is_mended_only_in_a_recognised_call_and_the_result_must_still_be_a_valid_call() -> None:
    # an unknown tool, a stray argument, or an answer cut short: still refused after the mending
    assert isinstance(from_text('{"name": "delete_file", "arguments": {"path": "it\\\'s.py"}}', NAMES), ParseProblem)
    assert isinstance(from_text('{"name": "read_file", "arguments": {"path": "it\\\'s.py", "lines": 3}}', NAMES),
                      ParseProblem)
    cut = from_text('```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "it\\\'s', NAMES)
    assert isinstance(cut, ParseProblem)
    # prose with a backslash is not a call
    assert from_text("I can't use \\d here {really}", NAMES) == []
    # in a single-quoted string \' ends no string: it is not mended into a quote that lets the
    # string take the object's closing brace (content "it's'}")
    single = parse("{'name': 'write_file', 'arguments': {'path': 'a.py', 'content': 'it\\'s'}}", NAMES)
    assert [c.arguments["content"] for c in single.calls] in ([], ["it's"]), single.calls


def test_check_names_the_available_tools_for_an_unknown_one() -> None:
    assert check(ModelToolCall(id="c", name="delete_file", arguments=READ)) == (
        "tool 'delete_file' is not available; call one of: read_file, write_file, modify_file, create_directory, "
        "list_directory, search_code, run_terminal, step_complete, step_failed (ACODE-SBX-001)")


def test_check_gives_the_validation_error_and_the_signature_for_bad_arguments() -> None:
    assert check(ModelToolCall(id="c", name="read_file", arguments={"path": "a", "lines": 3})) == (
        "invalid arguments for read_file: Object contains unknown field `lines`; it takes "
        "read_file(path: string, offset?: integer, limit?: integer) (ACODE-EXEC-007)")
    assert check(ModelToolCall(id="c", name="step_complete")) == (
        "invalid arguments for step_complete: Object missing required field `summary`; it takes "
        "step_complete(summary: string) (ACODE-EXEC-007)")


def test_check_refuses_arguments_that_were_not_a_json_object() -> None:
    assert check(ModelToolCall(id="c", name="read_file", invalid_arguments="src/app.py")) == (
        "arguments must be a JSON object: the arguments of read_file were 'src/app.py' (not JSON: Expecting value "
        "at column 1); call it again as read_file(path: string, offset?: integer, limit?: integer) (ACODE-EXEC-007)")
    assert check(ModelToolCall(id="c", name="read_file", invalid_arguments='["a.py"]')) == (
        "arguments must be a JSON object: the arguments of read_file were '[\"a.py\"]'; call it again as "
        "read_file(path: string, offset?: integer, limit?: integer) (ACODE-EXEC-007)")


def test_check_accepts_a_valid_call_and_lax_scalars() -> None:
    assert check(ModelToolCall(id="c", name="read_file", arguments={"path": "a", "limit": "5"})) is None
    assert signature("write_file") == "write_file(path: string, content: string)"


# -- text with no UTF-8 form (lone surrogates) ------------------------------------------------

SURROGATE_FIX = ("which is not text; send it again as valid UTF-8 text (write characters as themselves; a \\u "
                 "escape of a surrogate is only valid as half of a pair)")


def test_a_surrogate_escape_in_a_text_call_gives_a_storable_call_that_check_refuses_by_argument() -> None:
    text = ('[{"name": "modify_file", "arguments": {"path": "a.py", "edits": [{"search": "x", "replace": "y"}, '
            '{"search": "caf\\udcff", "replace": "z"}]}}, {"name": "run_terminal", "arguments": "{\\"command\\": '
            '\\"echo \\\\ud800\\"}"}]')
    found = from_text(text, NAMES)
    assert not isinstance(found, ParseProblem), found.message
    first, second = found
    assert (first.arguments, second.arguments) == ({}, {})
    assert first.invalid_arguments == ('{"path": "a.py", "edits": [{"search": "x", "replace": "y"}, '
                                       '{"search": "caf\\udcff", "replace": "z"}]}')
    codec.encode(found)  # the wire, the record and the journal take it
    assert check(first) == (
        f"invalid arguments for modify_file: `$.edits[1].search` holds a lone UTF-16 surrogate (\\udcff) at character "
        f"offset 3, {SURROGATE_FIX}; it takes modify_file(path: string, edits?: array, diff?: string) (ACODE-EXEC-007)")
    assert check(second) == (
        f"invalid arguments for run_terminal: `$.command` holds a lone UTF-16 surrogate (\\ud800) at character "
        f"offset 5, {SURROGATE_FIX}; it takes run_terminal(command: string, timeout_s?: number) (ACODE-EXEC-007)")


def test_a_surrogate_in_native_arguments_is_refused_as_it_is_and_after_storable() -> None:
    raw = ModelToolCall(id="call_1", name="write_file", arguments={"path": "a\udcff.txt", "content": "x"})
    kept = storable(raw)
    assert (kept.arguments, kept.invalid_arguments) == ({}, '{"path": "a\\udcff.txt", "content": "x"}')
    expected = (f"invalid arguments for write_file: `$.path` holds a lone UTF-16 surrogate (\\udcff) at character "
                f"offset 1, {SURROGATE_FIX}; it takes write_file(path: string, content: string) (ACODE-EXEC-007)")
    assert check(raw) == expected  # decode_args refuses it too, whichever way it arrives
    assert check(kept) == expected
    assert storable(kept) is kept


def test_a_storable_answer_has_its_text_scrubbed_and_encodes() -> None:
    answer = ModelAnswer(content="I think \udcff so", tool_calls=[
        ModelToolCall(id="c\ud800", name="read\udcff", arguments={"path": "a"}),
        ModelToolCall(id="c2", name="read_file", invalid_arguments='{"path": "\udcff"'),
        ModelToolCall(id="c3", name="read_file", arguments={"path": "fine"})], format_error="bad \udcff")
    kept = storable_answer(answer)
    assert kept.content == "I think \ufffd so" and kept.format_error == "bad \ufffd"
    assert [(c.id, c.name, c.invalid_arguments) for c in kept.tool_calls] == [
        ("c\ufffd", "read\ufffd", ""), ("c2", "read_file", '{"path": "\\udcff"'), ("c3", "read_file", "")]
    assert kept.tool_calls[2] is answer.tool_calls[2]
    codec.encode(kept)
    assert "(ACODE-SBX-001)" in (check(kept.tool_calls[0]) or "")
    clean = ModelAnswer(content="fine", tool_calls=[ModelToolCall(id="c", name="read_file", arguments=READ)])
    assert storable_answer(clean) is clean


# -- fuzz: never raises ------------------------------------------------------------------------

_pieces = st.sampled_from(['{"name": ', '"read_file"', '"arguments": ', "{", "}", "[", "]", ",", ":", '"',
                           "```json\n", "```", "<tool_call>", "</tool_call>", "\\", "\n", '"path"', "'",
                           '{"function": ', '{"tool_calls": [', '{"read_file": ', "null", "1e999", " ",
                           "\\udcff", "\\ud83d", "\\ude00"])
_jsonish = st.lists(_pieces | st.text(max_size=5), max_size=40).map("".join)
_shaped = st.builds(lambda name, args, wrap: wrap(name, args), st.sampled_from([*NAMES, "x", ""]), json_values,
                    st.sampled_from([
                        lambda n, a: json.dumps({"name": n, "arguments": a}),
                        lambda n, a: json.dumps({"function": {"name": n, "arguments": json.dumps(a)}}),
                        lambda n, a: "```json\n" + json.dumps([{"tool": n, "args": a}]) + "\n```",
                        lambda n, a: json.dumps({n: a}),
                    ]))


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300) | _jsonish | _shaped)
def test_from_text_never_raises_and_gives_calls_or_a_problem(text: str) -> None:
    found = from_text(text, NAMES)
    if isinstance(found, ParseProblem):
        assert found.message.endswith("(ACODE-EXEC-007)")
    else:
        assert [c.id for c in found] == [f"text_{i}" for i in range(len(found))]
        codec.encode(found)  # storable: no lone surrogate left anywhere
        for c in found:
            assert isinstance(c.name, str) and isinstance(c.arguments, dict)
            problem = check(c)
            assert problem is None or problem.endswith(")")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*NAMES, "nope", ""]) | st.text(max_size=10), arguments, st.text(max_size=20))
def test_check_never_raises(name: str, args: dict[str, Any], invalid: str) -> None:
    result = check(ModelToolCall(id="c", name=name, arguments=args, invalid_arguments=invalid))
    assert result is None or result.endswith(")")


def test_a_deeply_nested_attempt_does_not_raise() -> None:
    assert isinstance(from_text('{"name": ' + "[" * 100_000, NAMES), ParseProblem | list)
    assert isinstance(from_text("[" * 100_000 + '{"name": "read_file"}', NAMES), ParseProblem | list)


# -- file blocks: a path line, then the whole file fenced (aider's "whole" format) ------------

IMPLEMENTATION = "def add(a, b):\n    return a + b\n"


def blocks(text: str) -> list[tuple[str, str, dict[str, Any]]]:
    parsed = parse(text, NAMES, blocks=True)
    assert parsed.problem is None, parsed.problem
    assert parsed.from_blocks <= {c.id for c in parsed.calls if c.name == "write_file"}
    return [(c.name, c.id in parsed.from_blocks and "block" or "json", c.arguments) for c in parsed.calls]


@pytest.mark.parametrize("line", ["solution.py", "`solution.py`", "**solution.py**", "**`solution.py`**",
                                  "File: solution.py", "# File: solution.py", "File: `solution.py`",
                                  "  solution.py  "])
def test_a_path_line_and_a_fence_is_a_write_file_call(line: str) -> None:
    text = f"{line}\n```python\n{IMPLEMENTATION}```\n"
    assert blocks(text) == [("write_file", "block", {"path": "solution.py", "content": IMPLEMENTATION})]
    # the caller decides: without ``blocks`` it is no call, as before
    assert parse(text, NAMES).calls == []


@pytest.mark.parametrize("path", ["src/pkg/mod.py", "Makefile/x", ".gitignore", "a-b_c.d/e.txt", "setup.cfg"])
def test_paths_with_an_extension_or_a_slash_are_accepted(path: str) -> None:
    assert blocks(f"{path}\n\n\n```\nx\n```") == [("write_file", "block", {"path": path, "content": "x\n"})]


@pytest.mark.parametrize("line", ["README", "/etc/passwd", "../outside.py", "src/../../x.py", "my file.py",
                                  "Here is solution.py", "solution.py:", "src/", "1.5", "https://x.org/a.py",
                                  "~/a.py", "`solution.py", "src//a.py"])
def test_other_lines_before_a_fence_are_no_path_line(line: str) -> None:
    assert blocks(f"{line}\n```python\n{IMPLEMENTATION}```\n") == []


def test_a_code_block_without_a_path_line_is_not_a_write() -> None:
    assert blocks(f"```python\n{IMPLEMENTATION}```\n") == []
    assert blocks(f"The fix:\n```python\n{IMPLEMENTATION}```\n") == []
    # the path line must come right before the fence (blank lines aside), not before prose
    assert blocks(f"solution.py\nshould become:\n```python\n{IMPLEMENTATION}```\n") == []


def test_unnamed_code_is_a_closed_code_block_without_a_path_line() -> None:
    assert unnamed_code(f"Here:\n```python\n{IMPLEMENTATION}```")
    assert unnamed_code(f"```\n{IMPLEMENTATION}```")
    assert not unnamed_code(f"solution.py\n```python\n{IMPLEMENTATION}```")  # a file block
    assert not unnamed_code('```json\n{"name": "step_complete", "arguments": {}}\n```')  # a call's fence
    assert not unnamed_code('```\n{"name": "step_complete", "arguments": {}}\n```')
    assert not unnamed_code(f"```python\n{IMPLEMENTATION}")  # never closed
    assert not unnamed_code("no code at all")


def test_a_fence_never_closed_writes_nothing() -> None:
    assert blocks(f"solution.py\n```python\n{IMPLEMENTATION}") == []


def test_several_file_blocks_are_several_writes_in_order() -> None:
    text = ("I will write both.\n\nsolution.py\n```python\nA = 1\n```\n\nand the test:\n\n"
            "test_solution.py\n```python\nfrom solution import A\n```\n")
    assert blocks(text) == [
        ("write_file", "block", {"path": "solution.py", "content": "A = 1\n"}),
        ("write_file", "block", {"path": "test_solution.py", "content": "from solution import A\n"})]


def test_json_calls_outside_the_blocks_join_them_in_order() -> None:
    text = ('{"name": "run_terminal", "arguments": {"command": "python -m pytest -q"}}\n'
            "solution.py\n```python\nx = {\"name\": \"read_file\", \"arguments\": {}}\n```\n"
            '```json\n{"name": "step_complete", "arguments": {"summary": "done"}}\n```')
    assert blocks(text) == [
        ("run_terminal", "json", {"command": "python -m pytest -q"}),
        ("write_file", "block", {"path": "solution.py",
                                 "content": 'x = {"name": "read_file", "arguments": {}}\n'}),  # code, not a call
        ("step_complete", "json", {"summary": "done"})]
    assert [c.id for c in parse(text, NAMES, blocks=True).calls] == ["text_0", "text_1", "text_2"]


def test_a_json_write_wins_over_file_blocks() -> None:
    call = json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": "a.py\n```\nx\n```\n"}})
    assert blocks(f"b.py\n```\ny\n```\n{call}") == [
        ("write_file", "json", {"path": "a.py", "content": "a.py\n```\nx\n```\n"})]


def test_a_longer_fence_holds_a_shorter_one_and_crlf_reads_as_lf() -> None:
    readme = "# Use\n```\npip install x\n```\n"
    assert blocks(f"docs/use.md\n````markdown\n{readme}````\n") == [
        ("write_file", "block", {"path": "docs/use.md", "content": readme})]
    crlf = "**solution.py**\r\n\r\n```python\r\ndef f():\r\n    return 1\r\n```\r\n"
    assert blocks(crlf) == [("write_file", "block", {"path": "solution.py", "content": "def f():\n    return 1\n"})]


def test_broken_json_outside_the_blocks_is_still_a_problem() -> None:
    text = 'solution.py\n```python\nA = 1\n```\n{"name": "step_complete", "arguments": {"summary": }'
    parsed = parse(text, NAMES, blocks=True)
    # the answer is sent again whole: a write alone would leave the model unsure what ran
    assert parsed.problem is not None and "not valid JSON" in parsed.problem.message and parsed.calls == []


@pytest.mark.parametrize(("text", "expected"), [
    ("step_complete", ("step_complete", {"summary": "done"})),
    ("`step_complete`: wrote the --top option", ("step_complete", {"summary": "wrote the --top option"})),
    ("step_failed: No tool call found in your answer.",
     ("step_failed", {"reason": "No tool call found in your answer."})),
    ("**step_failed**", ("step_failed", {"reason": "no reason given"})),
    ("I will call step_complete once the tests pass.", None),
    ("step_complete\n\nNow I will write the tests:\n" + "x" * 600, None),
    ('step_complete {"summary": "x"}', None),
])
def test_a_control_call_written_as_its_bare_name_is_that_call(text: str, expected: object) -> None:
    assert bare_control(text, TOOL_ARGS) == expected
    parsed = parse(text, TOOL_ARGS)
    if expected is not None:
        assert [(c.name, c.arguments) for c in parsed.calls] == [expected]


def test_a_placeholder_path_line_is_no_file_block() -> None:
    assert file_blocks("<path>\n```python\nprint(1)\n```\n") == []
