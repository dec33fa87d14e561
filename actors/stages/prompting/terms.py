"""What to look for in the workspace: the terms of a task, weighed (planner context, seed 003 FR-008).

A task names what it is about in a few recognisable ways, and the planner searches the
workspace for each (``search_code``) and matches file names against them. Best first:

- a quoted string (double, single or back quotes): the user pointed at exact text (5);
- a file name or path (``src/app.py``, ``greet.py``; a bare name only with a known
  extension, so ``e.g.`` is not a file) (4);
- an identifier: ``snake_case``, ``CamelCase``, a dotted name, a word with digits, or a
  word right before ``(`` (``farewell(name)``) (3);
- any other word of four letters or more, or an acronym of three (``JWT``), that is not
  a stopword: English function words and the verbs every coding task uses (1).

Words inside a quoted string or a path are not counted again on their own.

:func:`created_paths` is narrower: the files a task says to create or write, by name,
which must then exist at exactly that path (the verifier checks it). Only ``create`` or
``write`` followed by the path (``Create hello.py``, ``write a.txt and b.txt``, ``create a
new file named src/x.py``) counts, and nothing at all in a task that deletes, moves,
renames or negates (``not``, ``without``, ``instead``): there a named file may rightly be
absent. A path followed by ``in``/``under``/``into`` (``create hello.py in src``) is placed
by those words, so it is not required at the path as written.
"""

from __future__ import annotations

import re

__all__ = ["created_paths", "task_terms"]

_STOPWORDS = frozenset("""
a about above after again all also an and any are as at be because been before being below between both but by
can could did do does doing done each few for from further had has have having here how i if in into is it its
itself just me more most my no nor not now of off on once only or other our out over own same she should so some
such than that the their them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours please thanks thank need needs want wants
make makes made add adds added create creates created update updates updated change changes changed fix fixes
fixed write writes written use uses used using implement implements new file files code function functions method
methods class classes test tests work works working sure like also should must able way thing things instead
one two three first second last every onto per via etc let lets get gets set sets keep keeps run runs
refactor rename remove removes delete move support supports handle handles improve ensure allow allows return
returns call calls print prints maintain break breaks show shows check checks without within whole part
time times
""".split())
_QUOTED = re.compile(r"\"([^\"\n]{2,80})\"|`([^`\n]{2,80})`|(?<!\w)'([^'\n]{2,80})'(?!\w)|“([^”\n]{2,80})”")
_PATH = re.compile(r"(?<![\w./-])(?:[\w.-]+/)*[\w-]*[A-Za-z0-9_]\.[A-Za-z][A-Za-z0-9]{0,9}(?![\w/])")
# A bare name counts as a file name with one of these extensions (``Node.js`` is not a file);
# with a directory part (``src/app.x``) any extension does.
_EXTENSIONS = frozenset("""
py pyi js mjs cjs ts tsx jsx json md rst txt toml yaml yml cfg ini conf go mod sum rs c h cc cpp hpp cxx java kt
kts rb php cs fs sh bash zsh html htm css scss sass less sql xml lock vue svelte swift m mm scala lua pl pm r ex exs
erl hs ml dart proto gradle csv ipynb tf env properties dockerfile mk cmake
""".split())
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")


def task_terms(task: str) -> list[tuple[str, int]]:
    """What to look for in the workspace, best first, each with its weight: quoted strings
    (5), file names and paths (4), identifiers (3: snake_case, CamelCase, dotted names, a
    word before ``(``), other words of four letters or more (or acronyms of three) that are
    not stopwords (1)."""
    found: dict[str, int] = {}

    def add(term: str, weight: int) -> None:
        term = term.strip()
        if len(term) >= 2 and found.get(term, 0) < weight:
            found[term] = weight

    rest = task  # what quotes and file names leave for single words
    for match in _QUOTED.finditer(task):
        add(next(g for g in match.groups() if g is not None), 5)
        rest = rest.replace(match.group(), " ")
    for match in _PATH.finditer(task):
        path = match.group()
        if "/" in path or path.rsplit(".", 1)[1].lower() in _EXTENSIONS:
            add(path, 4)
            rest = rest.replace(path, " ")
    for match in _WORD.finditer(rest):
        word = match.group()
        if word in found or ("." in word and min(len(part) for part in word.split(".")) < 2):
            continue  # e.g, i.e
        if "_" in word.strip("_") or _CAMEL.search(word) or "." in word or any(c.isdigit() for c in word):
            add(word, 3)
        elif rest[match.end():match.end() + 1] == "(":
            add(word, 3)  # farewell(name): a function
        elif (len(word) >= 4 or (len(word) == 3 and word.isupper())) and word.lower() not in _STOPWORDS:
            add(word.lower() if word[:1].isupper() and word[1:].islower() else word, 1)
    order = {term: index for index, term in enumerate(found)}
    return sorted(found.items(), key=lambda item: (-item[1], order[item[0]]))


_FILE = r"[`'\"]?((?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z][A-Za-z0-9]{0,9})[`'\"]?(?![\w/])"
_CREATED = re.compile(
    r"\b(?:create|write)\s+(?:(?:a|an|the|new|empty|file|files|script|module|called|named)\s+)*"
    + _FILE + r"((?:\s*,\s*(?:and\s+)?|\s+and\s+)" + _FILE + r")*", re.IGNORECASE)
_ANOTHER = re.compile(r"(?:\s*,\s*(?:and\s+)?|\s+and\s+)" + _FILE, re.IGNORECASE)
_PLACED = re.compile(r"\s+(?:in|inside|under|into|within|at)\b", re.IGNORECASE)
_UNSAFE = re.compile(r"\b(?:delete|deletes|deleting|remove|removes|removing|rename|renames|renaming|move|moves|moving"
                     r"|merge|split|replace|drop|not|never|without|instead|undo|revert)\b|n't\b", re.IGNORECASE)


def created_paths(task: str) -> list[str]:
    """The files ``task`` says to create or write by name, to exist at exactly that path
    afterwards (see the module's docstring); empty when the task says nothing that certain."""
    if _UNSAFE.search(task):
        return []
    found: list[str] = []
    for match in _CREATED.finditer(task):
        spans = [(match.start(1), match.end(1), match.group(1))]
        rest = match.end(1)
        while True:
            rest += len(task[rest:]) - len(task[rest:].lstrip("`'\""))  # a closing quote
            more = _ANOTHER.match(task, rest)
            if more is None or more.end(1) > match.end():
                break
            spans.append((more.start(1), more.end(1), more.group(1)))
            rest = more.end(1)
        for _, end, path in spans:
            tail = task[end:].lstrip("`'\"")
            if _PLACED.match(tail) or path.startswith(("/", "~")) or ".." in path.split("/"):
                continue
            if path.rsplit(".", 1)[1].lower() in _EXTENSIONS or "/" in path:
                found.append(path)
    return list(dict.fromkeys(found))
