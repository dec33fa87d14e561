"""Hook conditions: every operator and its precedence, literals, the compile errors with
their columns, evaluation errors as a false outcome, and two properties (printed trees
evaluate as a reference does; no text raises anything but ConditionError)."""

from __future__ import annotations

import operator
import re
import time
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from protocol.errors import ConfigError, from_info
from protocol.policy.condition_syntax import MAX_DEPTH, MAX_LENGTH, MAX_REGEX
from protocol.policy.conditions import Condition, ConditionError, Outcome, compile_condition

PRE_TOOL: dict[str, type] = {"tool": str, "args": str, "path": str, "risk": str, "session": str, "stage": str,
                             "step": int}
NAMES: dict[str, type] = {**PRE_TOOL, "iteration": int, "d": int, "flag": bool, "x": object, "y": object}


def check(text: str, **values: Any) -> Outcome:
    return compile_condition(text, NAMES).evaluate(values)


def refused(text: str, names: dict[str, type] | None = None) -> ConditionError:
    with pytest.raises(ConditionError) as caught:
        compile_condition(text, NAMES if names is None else names, where="pre_tool")
    return caught.value


# --- the seed's examples and the issue's ---------------------------------------------------


@pytest.mark.parametrize(("text", "true_at", "false_at"), [
    ("iteration % 5 == 0", [0, 5, 10], [1, 4, 6]),
    ("iteration > 10", [11, 50], [0, 10]),
    ("iteration % 3 == 0 && iteration > 5", [6, 9, 12], [3, 5, 7]),
])
def test_the_seeds_iteration_examples_hold_where_the_seed_says(text: str, true_at: list[int],
                                                               false_at: list[int]) -> None:
    condition = compile_condition(text, {"iteration": int})
    assert [condition.evaluate({"iteration": n}) for n in true_at] == [Outcome(True)] * len(true_at)
    assert [condition.evaluate({"iteration": n}) for n in false_at] == [Outcome(False)] * len(false_at)


def test_the_seeds_stage_example_with_its_escaped_quotes() -> None:
    condition = compile_condition('stage == "research"', {"stage": str})
    assert condition.evaluate({"stage": "research"}) == Outcome(True)
    assert condition.evaluate({"stage": "refine"}) == Outcome(False)


def test_a_pre_tool_condition_skips_git_status_and_nothing_else() -> None:
    condition = compile_condition('tool == "run_terminal" && !(args matches "^git status")', PRE_TOOL,
                                  where="pre_tool")
    assert condition.text == 'tool == "run_terminal" && !(args matches "^git status")'
    assert condition.names_used == frozenset({"tool", "args"})
    assert condition.evaluate({"tool": "run_terminal", "args": "git status -s"}) == Outcome(False)
    assert condition.evaluate({"tool": "run_terminal", "args": "rm -rf build"}) == Outcome(True)
    assert condition.evaluate({"tool": "read_file", "args": "x", "path": None}) == Outcome(False)


# --- operators, precedence, literals ---------------------------------------------------------


@pytest.mark.parametrize(("text", "values", "expected"), [
    ("step == 3", {"step": 3}, True), ("step != 3", {"step": 3}, False),
    ("step < 3", {"step": 2}, True), ("step < 3", {"step": 3}, False),
    ("step > 3", {"step": 4}, True), ("step <= 3", {"step": 3}, True), ("step >= 3", {"step": 2}, False),
    ('stage < "b"', {"stage": "a"}, True), ('stage >= "b"', {"stage": "a"}, False),  # strings in code-point order
    ("step % 4 == 1", {"step": 9}, True), ("step % 4 % 3 == 0", {"step": 11}, True),  # (11 % 4) % 3
    ("flag == true", {"flag": True}, True), ("flag != false", {"flag": False}, False),
    ("flag && step > 1", {"flag": True, "step": 2}, True), ("flag && step > 1", {"flag": False, "step": 2}, False),
    ("flag || step > 1", {"flag": False, "step": 2}, True), ("flag || step > 1", {"flag": False, "step": 1}, False),
    ("!flag", {"flag": False}, True), ("!!flag", {"flag": False}, False),
    ('"git" in args', {"args": "a git b"}, True), ('"git" in args', {"args": "g i t"}, False),
    ('tool in ["read_file", "list_directory"]', {"tool": "list_directory"}, True),
    ('tool in ["read_file", "list_directory"]', {"tool": "read"}, False),
    ("step in [1, 2, 3]", {"step": 2}, True), ("flag in [true]", {"flag": False}, False),
    ("step in []", {"step": 2}, False), ('tool in ""', {"tool": ""}, True),
    ('args matches "^git (status|diff)"', {"args": "git diff x"}, True),
    ('args matches "^git (status|diff)"', {"args": "ls; git diff"}, False),
    ('args matches "rm\\\\s+-rf"', {"args": "sudo rm  -rf /"}, True),  # re.search: anywhere
    ("true", {}, True), ("false", {}, False), ("(((true)))", {}, True),
])
def test_each_operator_gives_its_value(text: str, values: dict[str, Any], expected: bool) -> None:
    assert check(text, **values) == Outcome(expected)


@pytest.mark.parametrize(("text", "values", "expected"), [
    # ! binds looser than a comparison: !(flag == false), not (!flag) == false
    ("!flag == false", {"flag": False}, False),
    ("!step == 3", {"step": 3}, False),
    # && binds tighter than ||: true || (false && false), not (true || false) && false
    ("true || false && false", {}, True),
    ("false && false || true", {}, True),
    ("flag || step > 1 && step < 3", {"flag": True, "step": 9}, True),
    # % binds tighter than a comparison, and ! than && (!flag && flag is (!flag) && flag)
    ("step % 3 == 0", {"step": 6}, True),
    ("!flag && flag", {"flag": False}, False),
    ("!(flag && false)", {"flag": True}, True),
])
def test_precedence_is_or_then_and_then_not_then_comparison_then_modulo(text: str, values: dict[str, Any],
                                                                        expected: bool) -> None:
    assert check(text, **values) == Outcome(expected)


@pytest.mark.parametrize(("literal", "value"), [
    ('"say \\"hi\\""', 'say "hi"'), ('"back\\\\slash"', "back\\slash"), ('"two\\nlines"', "two\nlines"),
    ('"a\\tb"', "a\tb"), ("'single'", "single"), ("'it\\'s'", "it's"), ("'say \"hi\"'", 'say "hi"'),
    ('"it\'s"', "it's"), ('""', ""), ('"é ü 中"', "é ü 中"),
])
def test_strings_take_either_quote_and_the_five_escapes(literal: str, value: str) -> None:
    assert check(f"tool == {literal}", tool=value) == Outcome(True)
    assert check(f"tool != {literal}", tool=value + "x") == Outcome(True)


def test_whitespace_anywhere_between_tokens_and_none_needed() -> None:
    assert check('\n  step%2==0&&tool=="a"\t', step=2, tool="a") == Outcome(True)


def test_a_name_not_set_equals_only_another_not_set() -> None:
    assert check('path == "src"', path=None) == Outcome(False)
    assert check('path != "src"', path=None) == Outcome(True)
    assert check("path == risk", path=None, risk=None) == Outcome(True)
    assert check("path == risk", path="a", risk=None) == Outcome(False)


def test_only_the_names_used_need_values_and_others_are_ignored() -> None:
    condition = compile_condition("step > 1", NAMES)
    assert condition.names_used == frozenset({"step"})
    assert condition.evaluate({"step": 2, "tool": 3.5, "unrelated": object()}) == Outcome(True)


# --- compile errors ----------------------------------------------------------------------


def test_an_unknown_name_shows_the_caret_a_guess_and_the_names_known_there() -> None:
    err = refused('tol == "run_terminal"', PRE_TOOL)
    assert str(err) == err.message == (
        "unknown name 'tol' at column 1 in condition (ACODE-CFG-006)\n"
        '  tol == "run_terminal"\n'
        "  ^\n"
        "  did you mean 'tool'?\n"
        "  known names at pre_tool: args, path, risk, session, stage, step, tool")
    assert (err.code, err.reason, err.column, err.expression) == (
        "ACODE-CFG-006", "unknown name 'tol'", 0, 'tol == "run_terminal"')


@pytest.mark.parametrize(("text", "reason", "column"), [
    ("stage == 'a' && tol == 'b'", "unknown name 'tol'", 16),
    ("f(x)", "function calls are not part of conditions", 1),
    ('__import__("os")', "function calls are not part of conditions", 10),
    ("tool.upper", "attribute access is not part of conditions", 4),
    ('"a".join', "attribute access is not part of conditions", 3),
    ("tool[0] == 'a'", "indexing is not part of conditions", 4),
    ("import os", "unexpected 'os'", 7),
    ('tool == "run', "string not closed", 8),
    ("tool == 'run", "string not closed", 8),
    ('tool == "run\\', "string not closed", 8),
    ('tool == "a\\q"', "unknown escape '\\q'", 10),
    ('tool == "a" "b"', "unexpected '\"b\"'", 12),
    ('tool == "a" )', "unexpected ')'", 12),
    ('(tool == "a"', "unexpected end of the condition", 12),
    ("tool ==", "unexpected end of the condition", 7),
    ("&& flag", "unexpected '&&'", 0),
    ("", "empty condition", 0),
    (" \n\t", "empty condition", 0),
    ("step = 3", "unexpected character '='", 5),
    ("step + 1 > 2", "unexpected character '+'", 5),
    ("step > -1", "unexpected character '-'", 7),
    ("tool == $HOME", "unexpected character '$'", 8),
    ("step > 1.5", "not a whole number", 7),
    ("flag and true", "unexpected 'and'", 5),
    ("not flag", "unexpected 'not'", 0),
    ("flag == True", "unexpected 'True'", 8),
    ("1 < step < 3", "comparisons do not chain", 9),
    ("step == '3'", "'==' compares a number with a string", 5),
    ("tool < 3", "'<' compares a string with a number", 5),
    ("flag < true", "'<' takes a number or a string; this is true/false", 0),
    ("step matches 'a'", "'matches' takes a string; this is a number", 0),
    ("step && flag", "'&&' takes true/false; this is a number", 0),
    ("flag || tool", "'||' takes true/false; this is a string", 8),
    ("!tool", "'!' takes true/false; this is a string", 1),
    ("tool % 2 == 0", "'%' takes a number; this is a string", 0),
    ("step % 0 == 1", "modulo by zero", 5),
    ("step % (0) == 1", "modulo by zero", 5),
    ("step in ['a', 'b']", "'in' looks for a number in a list of strings", 5),
    ("step in 'abc'", "'in' looks for a number in a string", 5),
    ("tool in 3", "'in' takes a string or a list; this is a number", 8),
    ("tool in ['a', 1]", "a list mixes types", 8),
    ("tool in ['a',]", "unexpected ']'", 13),
    ("tool in [stage]", "unexpected 'stage'", 9),
    ("tool == ['a']", "'==' takes a number, a string or true/false; this is a list", 8),
    ("['a'] in ['a']", "'in' takes a number, a string or true/false; this is a list", 0),
    ("step", "the condition is a number, not true/false", 0),
    ("step % 2", "the condition is a number, not true/false", 0),
    ("args matches 'a(b'", "invalid regex: missing ), unterminated subpattern", 15),
    ("args matches 'x\\\\d(['", "invalid regex: unterminated character set", 19),
    ("args matches '[[a]'", "regex Python warns about: Possible nested set at position 1", 13),
])
def test_each_compile_error_names_its_reason_and_column(text: str, reason: str, column: int) -> None:
    err = refused(text)
    assert (err.reason, err.column) == (reason, column)
    assert err.message.startswith(f"{reason} at column {column + 1} in condition (ACODE-CFG-006)\n")
    shown, caret = err.message.splitlines()[1:3]
    assert caret == "  " + " " * column + "^"
    assert shown == "  " + re.sub(r"\s", " ", text)


def test_a_python_word_is_refused_with_the_operator_to_write() -> None:
    assert refused("flag and true").hint == "write && for 'and'"
    assert refused("not flag").hint == "write ! for 'not'"
    assert refused("flag == True").hint == "write true"
    assert refused("step = 3").hint == "write == to compare"


def test_the_known_names_hint_says_where_and_copes_with_no_names() -> None:
    with pytest.raises(ConditionError) as caught:
        compile_condition("x", {"step": int})
    assert caught.value.hint == "known names: step"
    assert refused("x", {}).hint == "no names are known at pre_tool"


def test_the_length_limit_counts_characters_and_points_past_it() -> None:
    fits = 'tool == "' + "a" * (MAX_LENGTH - 10) + '"'
    assert len(fits) == MAX_LENGTH
    compile_condition(fits, NAMES)
    err = refused(fits + " && true")
    assert (err.reason, err.column) == (f"condition over {MAX_LENGTH:,} characters ({len(fits) + 8:,})", MAX_LENGTH)


def test_a_long_condition_is_shown_cut_around_the_caret() -> None:
    text = 'tool == "a" && ' * 20 + 'tol == "b"'
    shown, caret = refused(text).message.splitlines()[1:3]
    assert shown == "  ..." + text[-72:]  # the caret is near the end: the last 72 characters
    assert shown[caret.index("^"):] == 'tol == "b"'


def test_control_characters_in_a_condition_do_not_reach_the_message() -> None:
    err = refused('tool == "\x1b[2J" && stage == "\u202e" && tol')
    shown, caret = err.message.splitlines()[1:3]
    assert "\x1b" not in err.message and "\u202e" not in err.message
    assert shown[caret.index("^"):] == "tol"


@pytest.mark.parametrize(("depth", "opener"), [(MAX_DEPTH, "("), (MAX_DEPTH, "!")])
def test_nesting_is_allowed_to_the_limit_and_refused_one_past(depth: int, opener: str) -> None:
    closer = ")" if opener == "(" else ""
    assert check(opener * depth + "true" + closer * depth) == Outcome(True)
    err = refused(opener * (depth + 1) + "true" + closer * (depth + 1))
    assert (err.reason, err.column) == (f"nested deeper than {MAX_DEPTH} levels", depth)


def test_long_flat_chains_are_not_nesting() -> None:
    text = " && ".join(["flag"] * 90) + " || " + " % ".join(["step"] * 30) + " == 0"
    assert len(text) < MAX_LENGTH
    assert check(text, flag=True, step=3) == Outcome(True)


def test_a_literal_regex_is_limited_in_length() -> None:
    compile_condition(f'args matches "{"a" * MAX_REGEX}"', NAMES)
    err = refused(f'args matches "{"a" * (MAX_REGEX + 1)}"')
    assert (err.reason, err.column) == (f"regex of {MAX_REGEX + 1:,} characters; the limit is {MAX_REGEX}", 13)


def test_a_condition_error_is_a_config_error_and_crosses_processes_as_one() -> None:
    err = refused("tol")
    assert isinstance(err, ConfigError) and isinstance(err, ValueError)
    back = from_info(err.info())
    assert (type(back), back.code, str(back)) == (ConfigError, "ACODE-CFG-006", str(err))


@pytest.mark.parametrize(("names", "message"), [
    ({"in": str}, "'in' cannot be a condition's name"),
    ({"and": str}, "'and' cannot be a condition's name"),
    ({"a-b": str}, "'a-b' cannot be a condition's name"),
    ({"x": float}, "'x' is declared <class 'float'>; declare str, int, bool or object"),
])
def test_a_declaration_that_is_none_is_the_callers_value_error(names: dict[str, type], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        compile_condition("true", names)


# --- evaluation errors: false, with the reason ---------------------------------------------


@pytest.mark.parametrize(("text", "values", "error"), [
    ("x < 3", {"x": "a"}, "'<' at column 3 compares a string with a number"),
    ("x == 3", {"x": "3"}, "'==' at column 3 compares a string with a number"),
    ("x < y", {"x": True, "y": False}, "'<' at column 3 takes a number or a string; 'x' is true/false"),
    ("x % 2 == 0", {"x": "a"}, "'%' at column 3 takes a number; 'x' is a string"),
    ("iteration % d == 0", {"iteration": 4, "d": 0}, "modulo by zero at column 11"),
    ("iteration % (d % 2) == 0", {"iteration": 4, "d": 2}, "modulo by zero at column 11"),
    ("x && true", {"x": 1}, "'&&' at column 3 takes true/false; 'x' is a number"),
    ("true && x", {"x": 1}, "'&&' at column 6 takes true/false; 'x' is a number"),
    ("false || x", {"x": None}, "'||' at column 7 takes true/false; 'x' is not set"),
    ("!x", {"x": "s"}, "'!' at column 1 takes true/false; 'x' is a string"),
    ("x", {"x": 3}, "the condition is a number, not true/false"),
    ("x in [1, 2]", {"x": "1"}, "'in' at column 3 compares a string with a number"),
    ("x in 'abc'", {"x": 1}, "'in' at column 3 compares a number with a string"),
    ("tool in x", {"tool": "a", "x": 1}, "'in' at column 6 takes a string; 'x' is a number"),
    ("path matches '^src/'", {"path": None}, "'matches' at column 6 takes a string; 'path' is not set"),
    ("path in ['a']", {"path": None}, "'in' at column 6 takes a number, a string or true/false; 'path' is not set"),
    ("step > 1", {"step": None}, "'>' at column 6 takes a number or a string; 'step' is not set"),
    ("tool matches x", {"tool": "a", "x": "a("},
     "'matches' at column 6: 'x' holds no usable regex (invalid regex: missing ), unterminated subpattern)"),
    ("tool matches x", {"tool": "a", "x": "a" * (MAX_REGEX + 1)},
     f"'matches' at column 6: 'x' holds no usable regex (regex of {MAX_REGEX + 1} characters; the limit is 500)"),
    ("step > 1", {}, "no value for 'step'"),
    ("step > 1", {"step": "3"}, "'step' should be a number; it is a string"),
    ("step > 1", {"step": True}, "'step' should be a number; it is true/false"),
    ("step > 1", {"step": 1.5}, "'step' holds a float; a condition takes strings, numbers, true/false or None"),
    ("x == 1", {"x": (1,)}, "'x' holds a tuple; a condition takes strings, numbers, true/false or None"),
])
def test_an_evaluation_error_makes_the_condition_false_with_the_reason(text: str, values: dict[str, Any],
                                                                        error: str) -> None:
    assert check(text, **values) == Outcome(False, error)


def test_a_regex_a_name_holds_is_used_when_it_is_valid() -> None:
    assert check("tool matches x", tool="read_file", x="^read_") == Outcome(True)


@pytest.mark.parametrize(("text", "expected"), [("false && x < 3", False), ("true || x < 3", True),
                                                ("flag && x", False)])
def test_and_and_or_stop_at_the_operand_that_decides(text: str, expected: bool) -> None:
    assert check(text, x="not comparable", flag=False) == Outcome(expected)


# --- properties ----------------------------------------------------------------------------

# A tree is a tuple: ("lit", v), ("var", name), ("()", x), ("list", values), ("!", x), or
# (op, left, right) for every binary operator. The printer writes the fewest parentheses the
# documented precedence allows (plus the "()" nodes), so a precedence bug changes a value.
TYPES: dict[str, type] = {"a": int, "b": int, "s": str, "t": str, "p": bool, "q": bool}
WORDS = ["", "a", "ab", "ba", "git status", 'say "hi"', "back\\slash", "tab\there"]
REGEXES = ["^git", "a+b?", "^$", "s$", "\\w+ \\w+", '"', "\\\\"]
PRECEDENCE = {"||": 1, "&&": 2, "!": 3, "==": 4, "!=": 4, "<": 4, ">": 4, "<=": 4, ">=": 4, "in": 4,
              "matches": 4, "%": 5}


def _leaf(names: tuple[str, ...], literals: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.one_of(literals.map(lambda v: ("lit", v)), st.sampled_from(names).map(lambda n: ("var", n)))


def _not_zero(node: tuple[Any, ...]) -> bool:
    return node != ("lit", 0)  # a literal 0 divisor is a compile error; one that comes to 0, an evaluation error


def _fold(op: str, operands: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """``a op b op c`` as the left-nested tree ``((a op b) op c)``, which prints without parentheses."""
    tree = operands[0]
    for operand in operands[1:]:
        tree = (op, tree, operand)
    return tree


_INT_LEAF = _leaf(("a", "b"), st.integers(0, 30))
INTS = st.recursive(
    st.one_of(_INT_LEAF, st.lists(_INT_LEAF.filter(_not_zero), min_size=2, max_size=4).map(lambda v: _fold("%", v))),
    lambda inner: st.tuples(st.just("%"), inner, inner.filter(_not_zero)), max_leaves=4)
STRS = _leaf(("s", "t"), st.sampled_from(WORDS))
COMPARISONS = st.one_of(
    st.tuples(st.sampled_from(["==", "!=", "<", ">", "<=", ">="]), INTS, INTS),
    st.tuples(st.sampled_from(["==", "!=", "<", ">=", "in"]), STRS, STRS),
    st.tuples(st.just("in"), INTS, st.lists(st.integers(0, 5), max_size=3).map(lambda v: ("list", tuple(v)))),
    st.tuples(st.just("matches"), STRS, st.sampled_from(REGEXES).map(lambda v: ("lit", v))),
)

def _bool_operators(inner: st.SearchStrategy[tuple[Any, ...]]) -> st.SearchStrategy[tuple[Any, ...]]:
    logic = st.tuples(st.sampled_from(["&&", "||"]), inner, inner)  # weighted: mixing them is what tests precedence
    return st.one_of(logic, logic, logic, logic, st.tuples(st.sampled_from(["==", "!="]), inner, inner),
                     inner.map(lambda x: ("!", x)), inner.map(lambda x: ("()", x)))


BOOLS = st.recursive(st.one_of(_leaf(("p", "q"), st.booleans()), COMPARISONS), _bool_operators, max_leaves=10)
# Flat text through every level at once: a && !b < c % d || e && f (an || of &&s of operands).
_OPERAND = st.one_of(_leaf(("p", "q"), st.booleans()), COMPARISONS).flatmap(
    lambda x: st.sampled_from([x, ("!", x)]))
LAYERED = st.lists(st.lists(_OPERAND, min_size=1, max_size=3).map(lambda v: _fold("&&", v)),
                   min_size=1, max_size=3).map(lambda v: _fold("||", v))


def nesting(node: tuple[Any, ...]) -> int:
    """At least the ( and ! levels of the printed tree (every node counts as one)."""
    children = [child for child in node[1:] if isinstance(child, tuple) and child and isinstance(child[0], str)]
    return (1 if node[0] != "lit" else 0) + max((nesting(child) for child in children), default=0)


def show(node: tuple[Any, ...], need: int = 0) -> str:
    kind = node[0]
    if kind == "lit":
        return literal(node[1])
    if kind == "var":
        return node[1]
    if kind == "list":
        return "[" + ", ".join(literal(v) for v in node[1]) + "]"
    if kind == "()":
        return "(" + show(node[1]) + ")"
    prec = PRECEDENCE[kind]
    if kind == "!":
        text = "!" + show(node[1], prec)
    elif prec == 4:  # comparisons do not chain: both sides are tighter
        text = f"{show(node[1], 5)} {kind} {show(node[2], 5)}"
    else:  # left-associative
        text = f"{show(node[1], prec)} {kind} {show(node[2], prec + 1)}"
    return f"({text})" if prec < need else text


def literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def reference(node: tuple[Any, ...], env: dict[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "var":
        return env[node[1]]
    if kind == "list":
        return node[1]
    if kind == "()":
        return reference(node[1], env)
    if kind == "!":
        return not reference(node[1], env)
    if kind == "&&":
        return reference(node[1], env) and reference(node[2], env)
    if kind == "||":
        return reference(node[1], env) or reference(node[2], env)
    left, right = reference(node[1], env), reference(node[2], env)
    if kind == "matches":
        return re.search(right, left) is not None
    return {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le,
            ">=": operator.ge, "%": operator.mod, "in": lambda x, y: x in y}[kind](left, right)


ENVS = st.fixed_dictionaries({"a": st.integers(0, 12), "b": st.integers(0, 12), "s": st.sampled_from(WORDS),
                              "t": st.sampled_from(WORDS), "p": st.booleans(), "q": st.booleans()})


@settings(max_examples=200, deadline=None)
@given(tree=st.one_of(LAYERED, BOOLS), env=ENVS)
def test_a_printed_tree_evaluates_as_the_reference_does(tree: tuple[Any, ...], env: dict[str, Any]) -> None:
    assume(nesting(tree) <= MAX_DEPTH)
    text = show(tree)
    condition = compile_condition(text, TYPES)
    try:
        expected = reference(tree, env)
    except ZeroDivisionError:
        outcome = condition.evaluate(env)
        assert outcome.value is False and outcome.error is not None and "modulo by zero" in outcome.error, text
        return
    assert condition.evaluate(env) == Outcome(expected), text


TOKENS = ["tool", "step", "x", "flag", "tol", "and", "True", "==", "!=", "<", ">=", "%", "&&", "||", "!", "in",
          "matches", "(", ")", "[", "]", ",", ".", "0", "3", "12", '"a"', "'b'", '"^g(it"', '"[["', '"\\\\d+"',
          '"', "'", "\\", "=", "&", "|", "-", "true", "false", "f(", "$"]
TEXTS = st.one_of(st.text(max_size=60), st.lists(st.sampled_from(TOKENS), max_size=20).map(" ".join),
                  st.lists(st.sampled_from(TOKENS), max_size=20).map("".join))
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8), st.floats())


@settings(max_examples=250, deadline=None)
@given(text=TEXTS, values=st.fixed_dictionaries({"tool": VALUES, "step": VALUES, "x": VALUES, "flag": VALUES}))
def test_any_text_compiles_or_raises_a_condition_error_and_never_raises_when_evaluated(
        text: str, values: dict[str, Any]) -> None:
    try:
        condition = compile_condition(text, {"tool": str, "step": int, "x": object, "flag": bool})
    except ConditionError as err:
        assert err.code == "ACODE-CFG-006" and 0 <= err.column <= len(text)
        return
    assert isinstance(condition, Condition)
    outcome = condition.evaluate(values)
    assert isinstance(outcome.value, bool) and (outcome.error is None or outcome.value is False)


def test_a_regex_that_backtracks_without_end_is_stopped_and_the_condition_is_false() -> None:
    condition = compile_condition('args matches "^(a|aa)+$"', {"args": str})
    started = time.monotonic()
    outcome = condition.evaluate({"args": "a" * 40 + "!"})  # exponential backtracking (~0.5 s at 31 characters)
    assert time.monotonic() - started < 5
    assert outcome.value is False and outcome.error is not None and "took over 0.5s" in outcome.error
    assert condition.evaluate({"args": "aaaa"}).value is True
