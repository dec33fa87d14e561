"""Hook conditions: compiled once against the names a hook point offers, evaluated per hook (pure).

A hook in the config may carry a condition (seed 001, "Hook Condition Expressions")::

    condition: 'tool == "run_terminal" && !(args matches "^git status")'

:func:`compile_condition` reads it (the grammar is in :mod:`protocol.policy.condition_syntax`)
against the names its hook point offers, each declared ``str``, ``int``, ``bool`` or
``object`` (any of those), and refuses what it can see would go wrong: an unknown name, a
type mismatch, a condition that is not true/false. :meth:`Condition.evaluate` never
raises: what only a value shows (modulo by zero, a name declared ``object`` holding the
wrong type, a value no condition holds) makes the condition false with the reason in
:attr:`Outcome.error`, so the caller skips the hook with a warning (seed 001).

The types; nothing converts, nothing is true or false by itself:

- ``==`` ``!=`` compare two values of one type; ``<`` ``>`` ``<=`` ``>=`` two numbers or two
  strings; ``%`` takes two numbers (Python's: the result takes the divisor's sign);
- ``&&`` ``||`` ``!`` take true/false; ``&&`` and ``||`` stop at the operand that decides, so
  an operand never reached cannot fail;
- ``x in "text"`` is a substring test, ``x in [1, 2]`` membership in a list of one type;
- ``s matches "re"`` is :func:`re.search` (anywhere in ``s``); a regex a name holds is
  compiled when evaluated;
- a name's value may be ``None`` (nothing there at this hook point): it equals only another
  ``None``; any other operator on it is an evaluation error.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never, cast

from protocol.policy.condition_syntax import (
    CODE,
    RESERVED,
    Binary,
    Chain,
    ConditionError,
    Const,
    Items,
    Kind,
    Name,
    Node,
    Not,
    Value,
    compile_regex,
    kind_of,
    parse,
    start,
)

__all__ = ["CODE", "Condition", "ConditionError", "Outcome", "compile_condition"]

_WORDS: dict[Kind, str] = {"int": "a number", "str": "a string", "bool": "true/false", "list": "a list",
                           "none": "not set", "any": "any value"}
_PLURALS: dict[Kind, str] = {"int": "numbers", "str": "strings", "bool": "true/false values"}
_DECLARABLE: dict[type, Kind] = {str: "str", int: "int", bool: "bool", object: "any"}
_ORDER: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, ">": operator.gt, "<=": operator.le,
                                                 ">=": operator.ge}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMPARE_IT = 'compare it: step > 0, stage == "plan"'
REGEX_TIMEOUT_S = 0.5  # a ``matches`` evaluation at most (see _search)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A condition's result: ``value``; false with ``error`` when it could not be evaluated."""

    value: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition :func:`compile_condition` made: its ``text`` as written and the names it reads."""

    text: str
    names_used: frozenset[str]
    _root: Node = field(repr=False)
    _declared: tuple[tuple[str, Kind], ...] = field(repr=False)

    def evaluate(self, values: Mapping[str, object]) -> Outcome:
        """The condition's value for ``values`` (name -> str, int, bool or None); never raises."""
        bound = _bind(self._declared, values)
        if isinstance(bound, str):
            return Outcome(False, bound)
        try:
            result = _value(self._root, bound)
        except _Failed as exc:
            return Outcome(False, str(exc))
        if not isinstance(result, bool):
            return Outcome(False, f"the condition is {_WORDS[kind_of(result) or 'any']}, not true/false")
        return Outcome(result)


def compile_condition(text: str, names: Mapping[str, type], *, where: str = "") -> Condition:
    """``text`` compiled against ``names`` (name -> ``str``, ``int``, ``bool`` or ``object``);
    ``where`` names the hook point in messages. Raises :class:`ConditionError` for a text
    that is no condition here, ValueError for a declaration that is none."""
    declared = _declarations(names)
    root = parse(text)
    checker = _Checker(text, declared, where)
    kind = checker.kind(root)
    if kind not in ("bool", "any"):
        raise ConditionError(f"the condition is {_WORDS[kind]}, not true/false", expression=text,
                             column=start(root), hint=_COMPARE_IT)
    used = sorted(checker.used)
    return Condition(text, frozenset(used), root, tuple((name, declared[name]) for name in used))


def _declarations(names: Mapping[str, type]) -> dict[str, Kind]:
    declared: dict[str, Kind] = {}
    for name, cls in names.items():
        if not _IDENTIFIER.fullmatch(name) or name in RESERVED:
            raise ValueError(f"{name!r} cannot be a condition's name: a name is letters, digits and _, no keyword")
        if cls not in _DECLARABLE:
            raise ValueError(f"{name!r} is declared {cls!r}; declare str, int, bool or object")
        declared[name] = _DECLARABLE[cls]
    return declared


def _either(kinds: tuple[Kind, ...]) -> str:
    words = [_WORDS[kind] for kind in kinds]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


# -- compile time: the kinds the declarations tell -------------------------------------------

class _Checker:
    """The kind of each node as far as the declarations tell; a mismatch it sees is refused."""

    def __init__(self, text: str, declared: dict[str, Kind], where: str):
        self.text, self.declared, self.where = text, declared, where
        self.used: set[str] = set()

    def fail(self, reason: str, column: int, hint: str = "") -> ConditionError:
        return ConditionError(reason, expression=self.text, column=column, hint=hint)

    def kind(self, node: Node) -> Kind:
        match node:
            case Const():
                return kind_of(node.value) or "any"
            case Items():
                return "list"
            case Name():
                return self.name(node)
            case Not():
                self.want(node.operand, ("bool",), "!")
                return "bool"
            case Chain():
                wanted: Kind = "int" if node.op == "%" else "bool"
                for operand in node.operands:
                    self.want(operand, (wanted,), node.op)
                for operand, column in zip(node.operands[1:], node.columns, strict=True):
                    if wanted == "int" and isinstance(operand, Const) and operand.value == 0:
                        raise self.fail("modulo by zero", column)
                return wanted
            case Binary():
                if node.op == "in":
                    self.membership(node)
                else:
                    self.comparison(node)
                return "bool"
            case _:
                assert_never(node)

    def name(self, node: Name) -> Kind:
        if node.name in self.declared:
            self.used.add(node.name)
            return self.declared[node.name]
        known = sorted(self.declared)
        hints = [f"did you mean '{close}'?" for close in difflib.get_close_matches(node.name, known, n=1)]
        place = f" at {self.where}" if self.where else ""
        hints.append(f"known names{place}: {', '.join(known)}" if known else f"no names are known{place}")
        raise self.fail(f"unknown name '{node.name}'", node.column, "\n".join(hints))

    def want(self, node: Node, kinds: tuple[Kind, ...], op: str) -> Kind:
        kind = self.kind(node)
        if kind in kinds or kind == "any":
            return kind
        hint = ("a list is only ever the right side of 'in'" if kind == "list"
                else _COMPARE_IT if kinds == ("bool",) else "")
        raise self.fail(f"'{op}' takes {_either(kinds)}; this is {_WORDS[kind]}", start(node), hint)

    def comparison(self, node: Binary) -> None:
        kinds: tuple[Kind, ...] = (("int", "str", "bool") if node.op in ("==", "!=")
                                   else ("str",) if node.op == "matches" else ("int", "str"))
        left = self.want(node.left, kinds, node.op)
        right = self.want(node.right, kinds, node.op)
        if "any" not in (left, right) and left != right:
            raise self.fail(f"'{node.op}' compares {_WORDS[left]} with {_WORDS[right]}", node.column,
                            "both sides must be of one type")

    def membership(self, node: Binary) -> None:
        left = self.want(node.left, ("int", "str", "bool"), "in")
        if isinstance(node.right, Items):
            inner = kind_of(node.right.values[0]) if node.right.values else None
            if inner is not None and left not in (inner, "any"):
                raise self.fail(f"'in' looks for {_WORDS[left]} in a list of {_PLURALS[inner]}", node.column,
                                "both sides must be of one type")
            return
        self.want(node.right, ("str", "list"), "in")
        if left not in ("str", "any"):
            raise self.fail(f"'in' looks for {_WORDS[left]} in a string", node.column,
                            "a substring test takes two strings; a list is written [1, 2]")


# -- evaluation ----------------------------------------------------------------------------

class _Failed(Exception):
    """Why a condition could not be evaluated: it becomes :attr:`Outcome.error`."""


def _bind(declared: tuple[tuple[str, Kind], ...], values: Mapping[str, object]) -> dict[str, Value] | str:
    """The values of the names used, each of its declared kind or None; else why not."""
    bound: dict[str, Value] = {}
    for name, kind in declared:
        if name not in values:
            return f"no value for '{name}'"
        value = values[name]
        found = kind_of(value)
        if found is None or found == "list":
            return f"'{name}' holds a {type(value).__name__}; a condition takes strings, numbers, true/false or None"
        if kind != "any" and found not in (kind, "none"):
            return f"'{name}' should be {_WORDS[kind]}; it is {_WORDS[found]}"
        bound[name] = cast(Value, value)
    return bound


def _value(node: Node, values: Mapping[str, Value]) -> Value:
    match node:
        case Const():
            return node.value
        case Items():
            return node.values
        case Name():
            return values[node.name]
        case Not():
            return not _truth(node.operand, values, "!", node.column)
        case Chain():
            return _chain(node, values)
        case Binary():
            return _binary(node, values)
        case _:
            assert_never(node)


def _mismatch(op: str, column: int, side: Node, value: Value, kinds: tuple[Kind, ...]) -> _Failed:
    what = f"'{side.name}'" if isinstance(side, Name) else "its operand"
    return _Failed(f"'{op}' at column {column + 1} takes {_either(kinds)}; {what} is {_WORDS[kind_of(value) or 'any']}")


def _truth(node: Node, values: Mapping[str, Value], op: str, column: int) -> bool:
    value = _value(node, values)
    if isinstance(value, bool):
        return value
    raise _mismatch(op, column, node, value, ("bool",))


def _number(node: Node, values: Mapping[str, Value], op: str, column: int) -> int:
    value = _value(node, values)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _mismatch(op, column, node, value, ("int",))


def _chain(node: Chain, values: Mapping[str, Value]) -> Value:
    columns = (node.columns[0], *node.columns)  # the operator beside each operand
    pairs = zip(node.operands, columns, strict=True)
    if node.op == "&&":
        return all(_truth(operand, values, "&&", column) for operand, column in pairs)
    if node.op == "||":
        return any(_truth(operand, values, "||", column) for operand, column in pairs)
    result = _number(node.operands[0], values, "%", columns[0])
    for operand, column in zip(node.operands[1:], node.columns, strict=True):
        divisor = _number(operand, values, "%", column)
        if divisor == 0:
            raise _Failed(f"modulo by zero at column {column + 1}")
        result %= divisor
    return result


def _kind(node: Binary, side: Node, value: Value, kinds: tuple[Kind, ...]) -> Kind:
    kind = kind_of(value)
    if kind in kinds and kind is not None:
        return kind
    raise _mismatch(node.op, node.column, side, value, kinds)


def _same(node: Binary, left: Kind, right: Kind) -> None:
    if left != right:
        raise _Failed(f"'{node.op}' at column {node.column + 1} compares {_WORDS[left]} with {_WORDS[right]}")


def _binary(node: Binary, values: Mapping[str, Value]) -> bool:
    left, right = _value(node.left, values), _value(node.right, values)
    if node.op in ("==", "!="):
        if left is None or right is None:
            equal = left is right
        else:
            _same(node, _kind(node, node.left, left, ("int", "str", "bool")),
                  _kind(node, node.right, right, ("int", "str", "bool")))
            equal = left == right
        return equal if node.op == "==" else not equal
    if node.op == "in":
        kind = _kind(node, node.left, left, ("int", "str", "bool"))
        if isinstance(right, tuple):
            if right:
                _same(node, kind, kind_of(right[0]) or "any")
            return left in right
        _same(node, kind, _kind(node, node.right, right, ("str",)))
        return cast(str, left) in cast(str, right)
    if node.op == "matches":
        _kind(node, node.left, left, ("str",))
        _kind(node, node.right, right, ("str",))
        pattern = node.pattern or _runtime_regex(node, cast(str, right))
        return _search(node, pattern, cast(str, left))
    _same(node, _kind(node, node.left, left, ("int", "str")), _kind(node, node.right, right, ("int", "str")))
    return _ORDER[node.op](left, right)


def _search(node: Binary, pattern: re.Pattern[str], text: str) -> bool:
    """``pattern`` searched in ``text`` (which a model may have written) within
    :data:`REGEX_TIMEOUT_S`: a regex that backtracks without end cannot stall the process
    that evaluates it (``regex``, the engine acode's search uses, has a timeout; ``re`` has none)."""
    import regex  # a condition with ``matches`` pays for it when it is evaluated

    try:
        return regex.search(pattern.pattern, text, flags=pattern.flags & ~re.UNICODE,
                            timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError as exc:
        raise _Failed(f"'matches' at column {node.column + 1} took over {REGEX_TIMEOUT_S:g}s on a value of "
                      f"{len(text):,} characters") from exc


def _runtime_regex(node: Binary, source: str) -> re.Pattern[str]:
    pattern, reason, _ = compile_regex(source)
    if pattern is None:
        what = f"'{node.right.name}'" if isinstance(node.right, Name) else "the right side"
        raise _Failed(f"'matches' at column {node.column + 1}: {what} holds no usable regex ({reason})")
    return pattern
