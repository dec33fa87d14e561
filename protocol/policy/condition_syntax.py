"""The syntax of hook conditions: text to a tree of frozen nodes, or a :class:`ConditionError`.

:mod:`protocol.policy.conditions` gives the conditions their meaning (names, types, evaluation);
this module only reads them, with a tokenizer and a recursive-descent parser (nothing
reaches Python's ``eval`` or ``ast``). The grammar, loosest first; nothing else is in the
language (no function call, attribute, index, import, or arithmetic but ``%``)::

    either     := both ("||" both)*
    both       := negation ("&&" negation)*
    negation   := "!" negation | comparison
    comparison := modulo [("==" | "!=" | "<" | ">" | "<=" | ">=" | "in" | "matches") modulo]
    modulo     := atom ("%" atom)*
    atom       := INT | STRING | "true" | "false" | NAME | "(" either ")" | "[" [literal ("," literal)*] "]"

- ``!`` binds looser than a comparison, as Python's ``not`` does: ``!a == b`` is
  ``!(a == b)``. Comparisons do not chain: ``a < b < c`` is refused (``a < b && b < c``).
- Integers are decimal digits, with no sign. Strings take double or single quotes and the
  escapes ``\\"`` ``\\'`` ``\\\\`` ``\\n`` ``\\t``; any other backslash is refused, so a
  regex's ``\\d`` is written ``"\\\\d"``. A list holds literals of one type, no trailing comma.
- ``matches`` with a literal regex compiles it here (Python's :mod:`re`): an invalid one is
  refused at the column where it goes wrong.
- Limits: :data:`MAX_LENGTH` characters, :data:`MAX_DEPTH` levels of ``(`` and ``!`` (so no
  config can exhaust the stack; ``&&``, ``||`` and ``%`` make flat nodes, however long),
  :data:`MAX_REGEX` characters of regex.

A :class:`ConditionError` (a :class:`~protocol.errors.ConfigError`, code ``ACODE-CFG-006``)
carries the text, the 0-based ``column``, and what to do; its message shows the text with
a caret under the column::

    unknown name 'tol' at column 1 in condition (ACODE-CFG-006)
      tol == "run_terminal"
      ^
      did you mean 'tool'?
      known names at pre_tool: args, path, risk, session, stage, step, tool
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from protocol.errors import ConfigError

__all__ = ["CODE", "MAX_DEPTH", "MAX_LENGTH", "MAX_REGEX", "Binary", "Chain", "ConditionError", "Const", "Items",
           "Kind", "Name", "Node", "Not", "RESERVED", "Scalar", "Value", "compile_regex", "kind_of", "parse", "start"]

CODE = "ACODE-CFG-006"
MAX_LENGTH = 1_000  # characters of condition
MAX_DEPTH = 32  # nested "(" and "!"
MAX_REGEX = 500  # characters of one regex

Scalar: TypeAlias = str | int | bool
Value: TypeAlias = Scalar | None | tuple[Scalar, ...]
Kind: TypeAlias = Literal["int", "str", "bool", "list", "none", "any"]  # "any": declared `object`

_COMPARISONS = frozenset({"==", "!=", "<", ">", "<=", ">=", "in", "matches"})


class ConditionError(ConfigError):
    """A condition that does not compile: ``reason`` at ``column`` (0-based) of ``expression``,
    and ``hint``, what to do. The message ends its first line with the code, then shows the
    expression with a caret under the column."""

    default_code = CODE

    def __init__(self, reason: str, *, expression: str, column: int, hint: str = ""):
        shown, caret = _excerpt(expression, column)
        lines = [f"{reason} at column {column + 1} in condition ({CODE})", f"  {shown}", f"  {caret}"]
        lines += [f"  {line}" for line in hint.splitlines()]
        super().__init__("\n".join(lines), code=CODE)
        self.reason, self.expression, self.column, self.hint = reason, expression, column, hint


def _excerpt(text: str, column: int, width: int = 72) -> tuple[str, str]:
    """The text on one line (controls shown as ``?``), cut to ``width`` around ``column``,
    and the caret line under it."""
    flat = "".join(" " if ch.isspace() else ch if ch.isprintable() else "?" for ch in text)
    if len(flat) <= width:
        return flat, " " * column + "^"
    first = max(0, min(column - width // 2, len(flat) - width))
    head = "..." if first else ""
    tail = "..." if first + width < len(flat) else ""
    return f"{head}{flat[first:first + width]}{tail}", " " * (len(head) + column - first) + "^"


# -- tokens ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["int", "str", "bool", "name", "op", "end"]
    text: str  # as written
    column: int
    value: Scalar = ""
    spans: tuple[int, ...] = ()  # a string's column of each character it holds, then of its closing quote


_SPACE = re.compile(r"\s+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[0-9]+")
_OPERATORS = ("==", "!=", "<=", ">=", "&&", "||", "<", ">", "%", "!", "(", ")", "[", "]", ",", ".")
_WORD_OPERATORS = frozenset({"in", "matches"})
_BOOLEANS = {"true": True, "false": False}
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "n": "\n", "t": "\t"}
_ARITHMETIC = "the only arithmetic is %"
_STRAY = {"=": "write == to compare", "&": "write && for 'and'", "|": "write || for 'or'",
          "+": _ARITHMETIC, "-": _ARITHMETIC + " (numbers have no sign)", "*": _ARITHMETIC, "/": _ARITHMETIC}
_PYTHONISMS = {"and": "write && for 'and'", "or": "write || for 'or'", "not": "write ! for 'not'",
               "True": "write true", "False": "write false",
               "None": "there is no None: a name not set equals only another one not set"}
RESERVED = frozenset({"true", "false", "in", "matches", *_PYTHONISMS})  # never a name
_POSTFIX = {"(": "function calls are not part of conditions", "[": "indexing is not part of conditions",
            ".": "attribute access is not part of conditions"}


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while at < len(text):
        if space := _SPACE.match(text, at):
            at = space.end()
        elif text[at] in "\"'":
            found.append(_string(text, at))
            at = found[-1].spans[-1] + 1
        elif digits := _INT.match(text, at):
            if text[digits.end():digits.end() + 1] == "." or _NAME.match(text, digits.end()):
                raise ConditionError("not a whole number", expression=text, column=at,
                                     hint="numbers are decimal digits only")
            found.append(_Token("int", digits.group(), at, int(digits.group())))
            at = digits.end()
        elif name := _NAME.match(text, at):
            word = name.group()
            if word in _BOOLEANS:
                found.append(_Token("bool", word, at, _BOOLEANS[word]))
            else:
                found.append(_Token("op" if word in _WORD_OPERATORS else "name", word, at, word))
            at = name.end()
        elif op := next((op for op in _OPERATORS if text.startswith(op, at)), None):
            found.append(_Token("op", op, at))
            at += len(op)
        else:
            raise ConditionError(f"unexpected character {text[at]!r}", expression=text, column=at,
                                 hint=_STRAY.get(text[at], ""))
    return [*found, _Token("end", "", len(text))]


def _string(text: str, start: int) -> _Token:
    quote, chars, spans, at = text[start], [], [], start + 1
    while at < len(text) and text[at] != quote:
        if text[at] == "\\":
            escaped = text[at + 1:at + 2]
            if not escaped:  # a backslash last: the quote it might escape is missing
                at = len(text)
                break
            if escaped not in _ESCAPES:
                raise ConditionError(f"unknown escape '\\{escaped}'", expression=text, column=at,
                                     hint='escapes are \\" \\\' \\\\ \\n \\t; a regex\'s \\d is written "\\\\d"')
            chars.append(_ESCAPES[escaped])
            spans.append(at)
            at += 2
        else:
            chars.append(text[at])
            spans.append(at)
            at += 1
    if at >= len(text):
        raise ConditionError("string not closed", expression=text, column=start, hint=f"end it with {quote}")
    return _Token("str", text[start:at + 1], start, "".join(chars), (*spans, at))


# -- the tree ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Const:
    value: Scalar
    column: int
    spans: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Items:
    values: tuple[Scalar, ...]
    column: int


@dataclass(frozen=True, slots=True)
class Name:
    name: str
    column: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    column: int


@dataclass(frozen=True, slots=True)
class Chain:
    """``a && b && c``, ``a || b``, ``a % b % c`` (``%`` folds from the left)."""

    op: Literal["&&", "||", "%"]
    operands: tuple[Node, ...]
    columns: tuple[int, ...]  # of each operator


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # one of _COMPARISONS
    left: Node
    right: Node
    column: int  # of the operator
    pattern: re.Pattern[str] | None = None  # a `matches` with a literal regex


Node: TypeAlias = Const | Items | Name | Not | Chain | Binary
_Level: TypeAlias = Callable[[], Node]


def start(node: Node) -> int:
    """The column a node's text starts at (inside any parentheses around it)."""
    match node:
        case Binary():
            return start(node.left)
        case Chain():
            return start(node.operands[0])
        case _:
            return node.column


def kind_of(value: object) -> Kind | None:
    """The kind of a value, or None for one no condition holds (a float, a dict, ...)."""
    if value is None:
        return "none"
    if isinstance(value, bool):  # before int: a bool is an int to Python, not here
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "str"
    return "list" if isinstance(value, tuple) else None


def compile_regex(source: str) -> tuple[re.Pattern[str] | None, str, int | None]:
    """The compiled regex, or why not and where in ``source`` (a regex Python warns about,
    such as a possible nested set, is refused: its meaning is due to change)."""
    if len(source) > MAX_REGEX:
        return None, f"regex of {len(source):,} characters; the limit is {MAX_REGEX}", None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return re.compile(source), "", None
    except re.error as exc:
        return None, f"invalid regex: {exc.msg}", exc.pos
    except Warning as exc:
        return None, f"regex Python warns about: {exc}", None


# -- parsing -----------------------------------------------------------------------------

class _Parser:
    """Recursive descent over the tokens, one method per level of the grammar."""

    def __init__(self, text: str, tokens: list[_Token]):
        self.text, self.tokens, self.at, self.depth = text, tokens, 0, 0

    def fail(self, reason: str, column: int, hint: str = "") -> ConditionError:
        return ConditionError(reason, expression=self.text, column=column, hint=hint)

    def unexpected(self, token: _Token, hint: str) -> ConditionError:
        what = "end of the condition" if token.kind == "end" else repr(token.text)
        hint = _PYTHONISMS.get(token.text, hint) if token.kind == "name" else hint
        return self.fail(f"unexpected {what}", token.column, hint)

    def peek(self, *ops: str) -> bool:
        token = self.tokens[self.at]
        return token.kind == "op" and token.text in ops

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at = min(self.at + 1, len(self.tokens) - 1)
        return token

    def nest(self, token: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels", token.column,
                            "split the condition, or drop redundant parentheses and !")

    def condition(self) -> Node:
        node = self.either()
        token = self.take()
        if token.kind != "end":
            hint = "no ( opens it" if token.text == ")" else "expected && or || or the end of the condition"
            raise self.unexpected(token, hint)
        return node

    def chain(self, op: Literal["&&", "||", "%"], operand: _Level) -> Node:
        operands, columns = [operand()], []
        while self.peek(op):
            columns.append(self.take().column)
            operands.append(operand())
        return Chain(op, tuple(operands), tuple(columns)) if columns else operands[0]

    def either(self) -> Node:
        return self.chain("||", self.both)

    def both(self) -> Node:
        return self.chain("&&", self.negation)

    def negation(self) -> Node:
        if not self.peek("!"):
            return self.comparison()
        bang = self.take()
        self.nest(bang)
        operand = self.negation()
        self.depth -= 1
        return Not(operand, bang.column)

    def comparison(self) -> Node:
        left = self.modulo()
        if not self.peek(*_COMPARISONS):
            return left
        op = self.take()
        right = self.modulo()
        if self.peek(*_COMPARISONS):
            raise self.fail("comparisons do not chain", self.tokens[self.at].column, "join them: a < b && b < c")
        pattern = self.pattern(right) if op.text == "matches" else None
        return Binary(op.text, left, right, op.column, pattern)

    def pattern(self, node: Node) -> re.Pattern[str] | None:
        if not isinstance(node, Const) or not isinstance(node.value, str):
            return None  # compiled when evaluated, if a name holds the regex
        compiled, reason, position = compile_regex(node.value)
        if compiled is None:
            column = node.spans[min(position, len(node.spans) - 1)] if position is not None else node.column
            raise self.fail(reason, column, "the regex is Python's re syntax, searched anywhere in the text")
        return compiled

    def modulo(self) -> Node:
        return self.chain("%", self.atom)

    def atom(self) -> Node:
        token = self.take()
        node: Node
        if token.kind in ("int", "str", "bool"):
            node = Const(token.value, token.column, token.spans)
        elif token.kind == "name" and token.text not in _PYTHONISMS:
            node = Name(token.text, token.column)
        elif token.text == "(" and token.kind == "op":
            self.nest(token)
            node = self.either()
            self.depth -= 1
            self.close(")", token)
        elif token.text == "[" and token.kind == "op":
            node = self.items(token)
        else:
            raise self.unexpected(token, "expected a value: a name, a number, a string, true, false, ( or [")
        self.no_postfix()
        return node

    def close(self, closing: str, opening: _Token) -> None:
        token = self.take()
        if not (token.kind == "op" and token.text == closing):
            raise self.unexpected(token, f"expected {closing} to close the {opening.text} at column "
                                         f"{opening.column + 1}")

    def no_postfix(self) -> None:
        token = self.tokens[self.at]
        if token.kind == "op" and token.text in _POSTFIX:
            raise self.fail(_POSTFIX[token.text], token.column,
                            "a condition is names, literals and the operators == != < > <= >= % && || ! in matches")

    def items(self, opening: _Token) -> Items:
        values: list[Scalar] = []
        if not self.peek("]"):
            values.append(self.item())
            while self.peek(","):
                self.take()
                values.append(self.item())
        self.close("]", opening)
        if len({kind_of(value) for value in values}) > 1:
            raise self.fail("a list mixes types", opening.column, "make every item of one type")
        return Items(tuple(values), opening.column)

    def item(self) -> Scalar:
        token = self.take()
        if token.kind not in ("int", "str", "bool"):
            raise self.unexpected(token, "a list holds literals: numbers, strings, true, false")
        return token.value


def parse(text: str) -> Node:
    """The tree of ``text``; raises :class:`ConditionError` for anything but a condition."""
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"condition over {MAX_LENGTH:,} characters ({len(text):,})", expression=text,
                             column=MAX_LENGTH, hint="split it across hooks, or fold alternatives into one regex")
    tokens = _tokens(text)
    if tokens[0].kind == "end":
        raise ConditionError("empty condition", expression=text, column=0,
                             hint="write one such as: iteration % 3 == 0, or leave condition out to run the hook "
                                  "always")
    return _Parser(text, tokens).condition()
