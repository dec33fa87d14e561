"""Command lines read as the program reads them (pure, no I/O): options, operands, wrappers.

One parser, shared by the sandbox's argument rules (:mod:`actors.sandbox.confinement.policy`) and the
risk classes (:mod:`protocol.calls.commands`), so both see the same program and the same options.

**Options.** A :class:`Spec` lists a program's long options (which take a value) and its
short ones (which take a value, which name a long one). :func:`parse` reads arguments
as GNU ``getopt_long`` and git's parse-options do: a long option may be given by any
unique prefix (``git reset --ha`` is ``--hard``, ``sed --in`` is ``--in-place``; an exact
name wins over a longer one it prefixes); a prefix of several is ambiguous (the program
refuses it, and so does the policy); ``--name=value`` or ``--name value`` for a required
value, only ``--name=value`` for an optional one; short options cluster (``-fdx``) until
one that takes a value, which takes the rest of the word or the next word (``-ofile``,
``-o file``); ``--`` ends the options; GNU programs and git read options after operands
too (``permute``), the wrappers and awk stop at the first operand. Each option comes out
with a canonical name (``--hard``, ``--force`` for ``-f``, ``-x`` for a short one with no
long name) and, when it is not one name, every name it may be (:attr:`Option.candidates`).

**Wrappers.** :func:`unwrap` finds the real program behind ``env`` (``-i``, ``-u VAR``,
``--unset=VAR``, ``NAME=VALUE`` words), ``nice``, ``timeout`` (and its duration),
``nohup``, ``stdbuf``, ``ionice``, ``time`` and ``command``, each parsed with its own spec:
``env -u VAR rm -rf src`` runs ``rm``, not ``VAR``. Whether a wrapper may run at all is the
allowlist's decision, not this module's.

The tables themselves live in :mod:`protocol.calls.cmdtables`; tests check them against the
installed programs (a prefix means there what it means here).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["WRAPPERS", "Option", "Parsed", "Spec", "Wrapped", "parse", "resolve", "spec", "unwrap"]

Arity = Literal["none", "required", "optional"]


@dataclass(frozen=True)
class Spec:
    """A program's options. ``long``: name (no dashes) -> arity; ``short``: letter -> arity;
    ``alias``: letter -> the long name it stands for; ``negatable``: git's ``--no-NAME``
    for every long option; ``permute``: options may follow operands."""

    long: dict[str, Arity] = field(default_factory=dict)
    short: dict[str, Arity] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    negatable: bool = False
    permute: bool = True


def spec(long: str = "", short: str = "", *, negatable: bool = False, permute: bool = True) -> Spec:
    """A :class:`Spec` from two compact strings. ``long``: ``"hard file= in-place=?"``
    (``=`` a required value, ``=?`` an optional one); ``short``: ``"f=force m:=message i::
    q"`` (``:`` a required value, ``::`` an optional attached one, ``=NAME`` the long name)."""
    longs: dict[str, Arity] = {}
    for word in long.split():
        if word.endswith("=?"):
            longs[word[:-2]] = "optional"
        elif word.endswith("="):
            longs[word[:-1]] = "required"
        else:
            longs[word] = "none"
    shorts: dict[str, Arity] = {}
    alias: dict[str, str] = {}
    for word in short.split():
        letter, _, name = word.partition("=")
        arity: Arity = "optional" if letter.endswith("::") else "required" if letter.endswith(":") else "none"
        letter = letter.rstrip(":")
        shorts[letter] = arity
        if name:
            alias[letter] = name
    return Spec(long=longs, short=shorts, alias=alias, negatable=negatable, permute=permute)


@dataclass(frozen=True)
class Option:
    """One option as the program reads it. ``name``: canonical (``--hard``, ``-x``), or as
    written when unresolved; ``candidates``: every long name it may be (one when resolved,
    several when ambiguous, none when the spec does not know it)."""

    name: str
    raw: str
    value: str | None = None
    candidates: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return len(self.candidates) == 1

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1


@dataclass(frozen=True)
class Parsed:
    options: tuple[Option, ...]
    operands: tuple[str, ...]

    def has(self, *names: str) -> bool:
        """Whether a resolved option is one of ``names`` (``"--force"``, ``"-x"``)."""
        return any(o.known and o.name in names for o in self.options)

    def may_be(self, *names: str) -> Option | None:
        """The first option that is, or may be, one of ``names``: resolved to one, ambiguous
        with one among its candidates, or unknown to the spec and a prefix of one (the real
        program may know more options than the table and resolve it there)."""
        for option in self.options:
            if option.candidates:
                if set(option.candidates) & set(names):
                    return option
            elif option.name.startswith("--") and any(
                    n.startswith(option.name) for n in names if n.startswith("--")):
                return option
            elif option.name in names:
                return option
        return None

    def value(self, *names: str) -> str | None:
        found = [o.value for o in self.options if o.known and o.name in names]
        return found[-1] if found else None

    @property
    def unknown(self) -> tuple[Option, ...]:
        return tuple(o for o in self.options if not o.known)

    def names(self) -> list[str]:
        """The options' canonical names, sorted, once each (a call's shape)."""
        return sorted({o.name for o in self.options})


def resolve(spec: Spec, name: str) -> tuple[str, ...]:
    """The long names (``--x``) ``name`` (no dashes) may mean: the exact one, or every one it
    is a prefix of (with git's ``--no-`` negations)."""
    names: dict[str, str] = {n: n for n in spec.long}
    if spec.negatable:
        for n in spec.long:
            if not n.startswith("no-"):
                names.setdefault("no-" + n, "no-" + n)
    if name in names:
        return ("--" + name,)
    return tuple(sorted("--" + n for n in names if n.startswith(name)))


def _arity(spec: Spec, long_name: str) -> Arity:
    bare = long_name[2:]
    if bare in spec.long:
        return spec.long[bare]
    return "none"  # a negation, or unknown


def parse(spec: Spec, args: Iterable[str]) -> Parsed:
    """Options and operands of ``args`` (the words after the program's name)."""
    words = list(args)
    options: list[Option] = []
    operands: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            operands.extend(words[i:])
            break
        if word.startswith("--"):
            name, eq, attached = word[2:].partition("=")
            candidates = resolve(spec, name)
            value: str | None = attached if eq else None
            if len(candidates) == 1:
                canonical = candidates[0]
                if _arity(spec, canonical) == "required" and not eq and i < len(words):
                    value = words[i]
                    i += 1
                options.append(Option(canonical, word, value, candidates))
            else:
                options.append(Option("--" + name, word, value, candidates))
            continue
        if word.startswith("-") and word != "-":
            j = 1
            while j < len(word):
                letter = word[j]
                arity = spec.short.get(letter, "none")
                long_name = spec.alias.get(letter)
                canonical = "--" + long_name if long_name else "-" + letter
                known = (canonical,) if letter in spec.short else ()
                rest = word[j + 1:]
                if arity == "required":
                    if rest:
                        value = rest
                    elif i < len(words):
                        value = words[i]
                        i += 1
                    else:
                        value = None
                    options.append(Option(canonical, word, value, known))
                    break
                if arity == "optional":
                    options.append(Option(canonical, word, rest or None, known))
                    break
                options.append(Option(canonical, word, None, known))
                j += 1
            continue
        operands.append(word)
        if not spec.permute:
            operands.extend(words[i:])
            break
    return Parsed(tuple(options), tuple(operands))


# --- wrappers ---------------------------------------------------------------------------------

WRAPPERS: dict[str, Spec] = {
    "env": spec("ignore-environment null unset= chdir= split-string= block-signal=? default-signal=? "
                "ignore-signal=? list-signal-handling debug help version",
                "i=ignore-environment 0=null u:=unset C:=chdir S:=split-string v=debug", permute=False),
    "nice": spec("adjustment= help version", "n:=adjustment", permute=False),
    "timeout": spec("preserve-status foreground kill-after= signal= verbose help version",
                    "k:=kill-after s:=signal v=verbose", permute=False),
    "nohup": spec("help version", permute=False),
    "stdbuf": spec("input= output= error= help version", "i:=input o:=output e:=error", permute=False),
    "ionice": spec("class= classdata= pid= pgid= ignore uid= help version",
                   "c:=class n:=classdata p:=pid P:=pgid t=ignore u:=uid h=help V=version", permute=False),
    "time": spec("append format= output= portability quiet verbose help version",
                 "a=append f:=format o:=output p=portability q=quiet v=verbose h=help V=version", permute=False),
    "command": spec("", "p v V", permute=False),
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Wrapped:
    """A command with its wrappers peeled: each wrapper's name and parsed options, then the
    real program's argv ([] when the wrappers run nothing: ``env`` alone, ``command -v x``)."""

    wrappers: tuple[tuple[str, Parsed], ...]
    argv: tuple[str, ...]
    assignments: tuple[str, ...] = ()


def _nice_obsolete(args: list[str]) -> list[str]:
    """``nice -5 cmd`` / ``nice --5`` (the obsolete adjustment form) as ``nice -n 5 cmd``."""
    if args and re.fullmatch(r"--?\d+", args[0]):
        return ["-n", args[0].lstrip("-"), *args[1:]]
    return args


def unwrap(argv: Iterable[str], *, depth: int = 8) -> Wrapped:
    """The wrappers in front of ``argv`` and the program they run (see the module)."""
    rest = list(argv)
    wrappers: list[tuple[str, Parsed]] = []
    assignments: list[str] = []
    while rest and os.path.basename(rest[0]) in WRAPPERS and len(wrappers) < depth:
        name = os.path.basename(rest[0])
        args = _nice_obsolete(rest[1:]) if name == "nice" else rest[1:]
        parsed = parse(WRAPPERS[name], args)
        wrappers.append((name, parsed))
        operands = list(parsed.operands)
        if name == "env":
            while operands and _ASSIGNMENT.match(operands[0]):
                assignments.append(operands.pop(0))
        elif name == "timeout":
            operands = operands[1:]  # the duration
        elif name == "command" and parsed.has("-v", "-V"):
            operands = []  # prints what the name is; runs nothing
        elif name == "ionice" and parsed.may_be("--pid", "--pgid", "--uid"):
            operands = []  # acts on running processes
        rest = operands
    return Wrapped(tuple(wrappers), tuple(rest), tuple(assignments))
