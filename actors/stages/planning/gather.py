"""Context preparation: what the planner's model sees of the workspace (seed 003, FR-006..012, FR-076..080).

Within a token budget (4 characters a token), :func:`prepare` gathers, in priority order:

1. the task (always shown; :func:`~protocol.plans.task.check_task` bounds it);
2. the user's answers to earlier questions, the reviewer's feedback and the plan being revised;
3. the workspace tree (``list_directory``, so ``.gitignore`` applies), cut to the deepest
   level that fits its share of the budget, deeper directories summarised by their entry count
   (:mod:`actors.stages.planning.listing` reads and cuts it);
4. key project files (README, manifests, build and test configuration), each capped;
5. files whose names or contents match the task's terms (quoted strings, file names,
   identifiers, then plain words; at most :data:`MAX_TERMS`, all searched in one walk of the
   workspace by the sandbox's ``search_code_terms``, which shares one time budget between
   them), best first: the first few whole (capped), the others, or a file that does not fit
   whole, by their matching lines.

Each section takes what is left of the budget in that order; a section that does not fit
is shortened (the tree, a file) or left out. Everything left out is listed in
:attr:`Prepared.omitted`, logged as ``context_trimmed`` and named to the model in one line,
so it can ask for a file instead of assuming it does not exist.

Workspace access goes through ``tool`` only, the sandbox's tool call (keys made from
``key_prefix`` and the path or term, never the attempt): a re-dispatched planner gets
the same results back from the sandbox's journal, builds a byte-identical prompt and is
answered from the model record. Every piece of text the planner did not write itself
(task, answers, feedback, plan, tree, file contents, search hits, even file names) reaches
the model through :meth:`~actors.stages.prompting.untrusted.Fence.wrap`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pathspec

from actors.stages.planning import listing
from actors.stages.prompting.terms import task_terms
from actors.stages.prompting.untrusted import Fence
from protocol.plans.plan import TaskPlan
from protocol.plans.results import ToolResult
from protocol.sessions.session import Clarification, Feedback

__all__ = [
    "KEY_FILES",
    "Omission",
    "Prepared",
    "Section",
    "ToolFn",
    "estimate_tokens",
    "first_calls",
    "prepare",
]

ToolFn = Callable[[str, str, dict[str, Any]], ToolResult]  # (key, tool, arguments) -> result

CHARS_PER_TOKEN = 4
TREE_DEPTH = 4  # levels listed; the rendering keeps the deepest that fits
TREE_SHARE = 0.3  # of the budget, at most
KEY_FILE_LINES = 80
KEY_FILE_CHARS = 3_000
MATCH_FILE_LINES = 200
MATCH_FILE_CHARS = 4_000
MAX_TERMS = 6  # terms searched, at most (one search_code_terms call walks the workspace once)
MAX_MATCH_FILES = 10  # matching files shown, at most
MAX_WHOLE_FILES = 4  # the best ones whole (read_file), the others by their matching lines
MAX_HIT_LINES = 8  # kept per file, to summarise it by its matching lines
MIN_SECTION_CHARS = 160  # less room than this: leave the section out rather than show a stub
_OMITTED_RESERVE = 400  # kept back for the line naming what was left out
_LOGGED_OMISSIONS = 40  # a common word can match hundreds of files: the log names the first ones

#: Key project files, most telling first; a README is any top-level ``README*``.
KEY_FILES = ("README", "pyproject.toml", "setup.cfg", "setup.py", "package.json", "go.mod", "Cargo.toml",
             "Makefile", "tsconfig.json", "pytest.ini", "tox.ini", "requirements.txt", ".agent/config.yml")


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Section:
    """One piece of the prompt: ``kind`` is task, clarifications, plan, feedback, tree,
    key_file, match or omitted; ``name`` what it shows (a path for files)."""

    kind: str
    name: str
    text: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass(frozen=True)
class Omission:
    """Something left out (``reason``: ``budget``, ``limit``, ``shortened``, ``skipped`` or an
    error code); ``kind`` is a section's kind, or ``search`` for a term not searched."""

    kind: str
    name: str
    reason: str
    tokens: int = 0  # what it would have cost, when known


@dataclass(frozen=True)
class Prepared:
    text: str
    sections: tuple[Section, ...]
    omitted: tuple[Omission, ...]
    budget_tokens: int
    tool_calls: int

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


# -- reading tool output ---------------------------------------------------------------------

_NUMBERED = re.compile(r"^ *\d+\t", re.MULTILINE)
_HIT = re.compile(r"^(.+?):(\d+): (.*)$")
_QUERY = re.compile(r"^\[query ([1-9]\d*) of ([1-9]\d*)\]$")  # search_code_terms: each query's part
_STOPPED = "\n[… search stopped at "  # (after a newline) a search that ran out of the time budget


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _file_text(result: ToolResult, lines: int) -> str:
    """A read_file output without its line numbers, cut to ``lines`` lines (read with one more,
    so a longer file is marked)."""
    body = _NUMBERED.sub("", result.output)
    split = body.split("\n")
    if body.endswith("\n"):
        split.pop()
    if len(split) > lines:
        return "\n".join(split[:lines]) + f"\n[… the file goes on past line {lines}]"
    return "\n".join(split)


def _cap(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    return text[: max(chars - 40, 0)].rsplit("\n", 1)[0] + "\n[… cut to fit the context budget]"


# -- assembling within the budget ------------------------------------------------------------


@dataclass
class _Budget:
    chars: int
    sections: list[Section] = field(default_factory=list)
    omitted: list[Omission] = field(default_factory=list)

    @property
    def left(self) -> int:
        used = sum(len(s.text) + 2 for s in self.sections)
        return self.chars - used - _OMITTED_RESERVE

    def take(self, section: Section) -> bool:
        if len(section.text) + 2 <= self.left or section.kind == "task":
            self.sections.append(section)
            return True
        return False

    def leave_out(self, kind: str, name: str, reason: str, text: str = "") -> None:
        self.omitted.append(Omission(kind, name, reason, estimate_tokens(text)))


class _Gatherer:
    def __init__(self, tool: ToolFn, key_prefix: str, fence: Fence, budget: _Budget,
                 includes: Sequence[str] = (), excludes: Sequence[str] = ()):
        self.includes = pathspec.GitIgnoreSpec.from_lines(includes) if includes else None
        self.excludes = pathspec.GitIgnoreSpec.from_lines(excludes)
        self.tool = tool
        self.key_prefix = key_prefix
        self.fence = fence
        self.budget = budget
        self.calls = 0

    def call(self, suffix: str, name: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls += 1
        return self.tool(f"{self.key_prefix}:ctx:{suffix}", name, arguments)

    def fenced(self, kind: str, name: str, heading: str, kind_label: str, body: str) -> Section:
        return Section(kind, name, f"{heading}\n{self.fence.wrap(kind_label, body)}")

    # 3. tree
    def tree(self) -> list[str] | None:
        """Adds the tree section; returns the listed paths (files and directories), or None
        when the workspace cannot be listed (then nothing else in it can be read either)."""
        result = self.call(*_tree_call())
        if not result.ok:
            self.budget.leave_out("tree", ".", result.error.code if result.error else "failed")
            text = result.error.message if result.error else "the listing failed"
            self.budget.take(self.fenced("tree", ".", "The workspace could not be listed:", "tool error", text))
            return None
        entries, notes = listing.entries(result.output)
        partial: frozenset[str] = frozenset()
        if listing.truncated(entries, notes):
            # The deep listing stopped early, inside the directories holding its last entry;
            # those after it are missing. Two levels, at least, must be complete.
            shallow = self.call("top", "list_directory", {"path": ".", "depth": 2})
            entries, partial = listing.completed(entries, listing.entries(shallow.output)[0] if shallow.ok else [])
        room = self.budget.left - 120
        cap = min(int(self.budget.chars * TREE_SHARE), room)
        if cap < MIN_SECTION_CHARS:
            self.budget.leave_out("tree", ".", "budget", result.output)
            return entries
        text, level = listing.render(entries, notes, cap, partial)
        if level < max((listing.depth(e) for e in entries), default=1):
            self.budget.leave_out("tree", f"levels below {level}" if level else "part of the top level", "shortened",
                                  result.output)
        heading = "Workspace tree (paths relative to the workspace root; .gitignore'd entries left out):"
        self.budget.take(self.fenced("tree", ".", heading, "workspace tree", text))
        return entries

    # 4. key files
    def key_files(self, entries: list[str]) -> set[str]:
        listed = set(entries)
        top_files = sorted(e for e in entries if "/" not in e and not e.endswith("@"))
        wanted: list[str] = []
        for name in KEY_FILES:
            if name == "README":
                wanted += [e for e in top_files if e.upper().startswith("README")]
            elif name in listed:
                wanted.append(name)
        shown: set[str] = set()
        for path in wanted:
            if self.excludes.match_file(path):
                continue
            if self.budget.left < MIN_SECTION_CHARS:
                self.budget.leave_out("key_file", path, "budget")
                continue
            result = self.call(f"read:{_digest(path)}", "read_file", {"path": path, "limit": KEY_FILE_LINES + 1})
            if not result.ok:
                self.budget.leave_out("key_file", path, result.error.code if result.error else "failed")
                continue
            body = _cap(_file_text(result, KEY_FILE_LINES), KEY_FILE_CHARS)
            if self._take_file("key_file", path, "A project file (its path is in the marker):", body):
                shown.add(path)
        return shown

    def _take_file(self, kind: str, path: str, heading: str, body: str, summary: str = "") -> bool:
        """The file whole (``body``, if read), else its lines that match the task
        (``summary``: ``line: text``), else its start cut to what is left, else nothing."""
        section = self.fenced(kind, path, heading, f"file {path}", body)
        if body and self.budget.take(section):
            return True
        if summary and self.budget.take(self.fenced(
                kind, path, f"{heading[:-1]}, only its lines that match the task, each after its number:",
                f"file {path} (matching lines)", summary)):
            if body:
                self.budget.leave_out(kind, path, "shortened", body)
            return True
        room = self.budget.left - (len(section.text) - len(body)) - 60
        if body and room >= MIN_SECTION_CHARS:
            self.budget.take(self.fenced(kind, path, heading, f"file {path}", _cap(body, room)))
            self.budget.leave_out(kind, path, "shortened", body)
            return True
        self.budget.leave_out(kind, path, "budget", body or summary)
        return False

    # 5. matching files
    def search(self, terms: list[str]) -> list[str]:
        """Each term's search_code output (empty if the search failed), from one walk of the
        workspace: the sandbox's search_code_terms, one tool call for every term."""
        result = self.call(*_search_call(terms))
        parts: list[list[str]] = [[] for _ in terms]
        current: list[str] | None = None
        for line in result.output.split("\n"):
            header = _QUERY.match(line)
            if header is not None and int(header.group(2)) == len(terms) and int(header.group(1)) <= len(terms):
                current = parts[int(header.group(1)) - 1]
                continue
            if current is not None:
                current.append(line)
        return ["\n".join(part) for part in parts]

    def matches(self, task: str, entries: list[str], shown: set[str]) -> None:
        terms = task_terms(task)[:MAX_TERMS]
        if not terms:
            return
        files = [e for e in entries if not e.endswith(("/", "@")) and not compiled(e)]
        scores: dict[str, int] = {}
        hits: dict[str, list[str]] = {}
        named_missing: list[str] = []
        outputs = self.search([term for term, _ in terms])
        for (term, weight), output in zip(terms, outputs, strict=True):
            names = [term.lower()]
            if weight == 4:  # a path named in the task
                exact = [f for f in files if f == term or f.endswith("/" + term)]
                for path in exact:
                    scores[path] = scores.get(path, 0) + 50
                if not exact:
                    named_missing.append(term)
                stem = term.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
                names = [stem] if len(stem) >= 3 else []  # greet.py: test_greet.py is about it too
            for path in files:
                if any(name in path.rsplit("/", 1)[-1].lower() for name in names):
                    scores[path] = scores.get(path, 0) + 3 * weight
            if _STOPPED in "\n" + output:
                # The workspace is too big to search within the sandbox's time budget: this
                # term's hits are partial. (Decided by the journaled result: replayable.)
                self.budget.leave_out("search", term, "ACODE-SBX-016")
            if not output:
                continue
            per_file: dict[str, int] = {}
            for line in output.splitlines():
                hit = _HIT.match(line)
                if hit is None or line.startswith("["):
                    continue
                path = hit.group(1)
                per_file[path] = per_file.get(path, 0) + 1
                kept = hits.setdefault(path, [])
                if len(kept) < MAX_HIT_LINES and f"{hit.group(2)}: {hit.group(3)}" not in kept:
                    kept.append(f"{hit.group(2)}: {hit.group(3)}")
            for path, count in per_file.items():
                scores[path] = scores.get(path, 0) + weight * min(count, 3)
        ranked = sorted((p for p in scores if p not in shown and not compiled(p) and not self.excludes.match_file(p)
                         and (self.includes is None or self.includes.match_file(p))), key=lambda p: (-scores[p], p))
        for index, path in enumerate(ranked):
            if index >= MAX_MATCH_FILES:
                self.budget.leave_out("match", path, "limit")
                continue
            if self.budget.left < MIN_SECTION_CHARS:
                self.budget.leave_out("match", path, "budget")
                continue
            summary = "\n".join(sorted(hits.get(path, []), key=lambda h: int(h.split(":", 1)[0])))
            heading = "A file that matches the task (its path is in the marker):"
            if index >= MAX_WHOLE_FILES and summary:  # lower in the ranking: its matching lines are enough
                self._take_file("match", path, heading, "", summary)
                continue
            result = self.call(f"read:{_digest(path)}", "read_file", {"path": path, "limit": MATCH_FILE_LINES + 1})
            if result.ok:
                body = _cap(_file_text(result, MATCH_FILE_LINES), MATCH_FILE_CHARS)
                self._take_file("match", path, heading, body, summary)
            elif summary:
                self._take_file("match", path, heading, "", summary)
            else:
                self.budget.leave_out("match", path, result.error.code if result.error else "failed")
        if named_missing:
            self.budget.take(self.fenced("match", "missing", "Named in the task but not in the workspace tree:",
                                         "file names", "\n".join(named_missing)))


_COMPILED = (".pyc", ".pyo", ".class", ".o", ".so", ".dylib", ".dll", ".exe", ".wasm")


def compiled(path: str) -> bool:
    """A build product, never worth a read: ``__pycache__/greet.cpython-311.pyc`` matched the
    task's ``greet.py`` by name and cost the planner two failed reads (binary) on the shipped
    example."""
    return "__pycache__/" in path or path.endswith(_COMPILED)


def _tree_call() -> tuple[str, str, dict[str, Any]]:
    """The tree's listing: (key suffix, tool, arguments)."""
    return "tree", "list_directory", {"path": ".", "depth": TREE_DEPTH}


def _search_call(terms: list[str]) -> tuple[str, str, dict[str, Any]]:
    """The one search for every term: (key suffix, tool, arguments)."""
    return f"search:{_digest(chr(0).join(terms))}", "search_code_terms", {"queries": terms}


def first_calls(task: str, key_prefix: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The tool calls :func:`prepare` makes for ``task`` whatever their results: the
    tree's listing and, if the task has terms, their search, as ``(key, tool, arguments)``.
    Neither depends on the other, so a caller may run them at once beforehand (the
    planner does, with the baseline) and give :func:`prepare` a ``tool`` that answers
    them from what came back. (If the listing fails, :func:`prepare` never asks for the
    search: its result then goes unused.)"""
    terms = [term for term, _ in task_terms(task)[:MAX_TERMS]]
    made = [_tree_call(), *([_search_call(terms)] if terms else [])]
    return [(f"{key_prefix}:ctx:{suffix}", tool, arguments) for suffix, tool, arguments in made]


def _render_clarifications(answers: Sequence[Clarification]) -> str:
    lines = []
    for item in answers:
        lines.append(f"{item.label}: {item.question}")
        lines.append(f"Answer: {item.answer}" + _defaulted(item))
    return "\n".join(lines)


def _defaulted(item: Clarification) -> str:
    """How a default answer came: the wait ran out, or the user chose the defaults."""
    if not item.defaulted:
        return ""
    if item.timed_out:
        return " (the default: no answer came in time)"
    return " (the default: the user chose the defaults)"


def _render_feedback(feedback: Feedback) -> str:
    lines = [f"{feedback.source}: {feedback.summary}"]
    lines += [f"- {item.label}: {item.problem}. {item.detail}".rstrip() for item in feedback.items]
    return "\n".join(lines)


def _render_plan(plan: TaskPlan) -> str:
    lines = [f"Goal: {plan.goal}"]
    for task in plan.tasks:
        deps = f" (after {', '.join(task.depends_on)})" if task.depends_on else ""
        lines.append(f"{task.label} [{task.status}] {task.title}{deps}: {task.description}".rstrip(": "))
        lines += [f"  {s.label} ({s.action}) {s.title}" for s in task.steps]
        for criterion in task.acceptance:
            check = f" [check: {criterion.check.command}]" if criterion.check else ""
            lines.append(f"  {criterion.label}: {criterion.description}{check}")
    return "\n".join(lines)


def prepare(tool: ToolFn, *, task: str, fence: Fence, key_prefix: str, budget_tokens: int,
            clarifications: Sequence[Clarification] = (), feedback: Feedback | None = None,
            previous: TaskPlan | None = None, log: Any = None, includes: Sequence[str] = (),
            excludes: Sequence[str] = ()) -> Prepared:
    """The planner's user message for ``task``, within ``budget_tokens`` (see the module
    docstring). ``tool(key, name, arguments)`` runs a sandbox tool; ``key_prefix`` makes
    the keys (``f"{session_id}:p{visit}"``). Logs ``context_trimmed`` on ``log`` when
    something was left out or shortened, and ``context_over_budget`` when the task alone
    does not fit. Files matching ``excludes`` are never shown; when ``includes`` is given,
    only files matching it are shown for matching the task (gitignore-style patterns)."""
    budget = _Budget(chars=max(budget_tokens, 0) * CHARS_PER_TOKEN)
    gatherer = _Gatherer(tool, key_prefix, fence, budget, includes, excludes)
    task_section = gatherer.fenced("task", "task", "The task:", "task", task)
    budget.take(task_section)
    if clarifications and not budget.take(gatherer.fenced(
            "clarifications", "answers", "Your earlier questions and the user's answers (plan with them):",
            "answers", _render_clarifications(clarifications))):
        budget.leave_out("clarifications", "answers", "budget", _render_clarifications(clarifications))
    heading = ("The user reviewed the current plan before any of it ran, and asks for a revised plan:"
               if feedback is not None and feedback.source == "user"
               else f"Feedback from the {feedback.source if feedback else ''} on the current plan's work:")
    if feedback is not None and not budget.take(gatherer.fenced(
            "feedback", feedback.source, heading, f"feedback from the {feedback.source}", _render_feedback(feedback))):
        budget.leave_out("feedback", feedback.source, "budget", _render_feedback(feedback))
    if previous is not None:
        text = _render_plan(previous)
        heading = (f"The current plan (version {previous.version}), to revise; tasks marked [completed] are done "
                   "and stay as they are:")
        section = gatherer.fenced("plan", f"v{previous.version}", heading, "current plan", text)
        if not budget.take(section):
            room = budget.left - (len(section.text) - len(text))
            if room >= MIN_SECTION_CHARS:
                budget.take(gatherer.fenced("plan", f"v{previous.version}", heading, "current plan", _cap(text, room)))
                budget.leave_out("plan", f"v{previous.version}", "shortened", text)
            else:
                budget.leave_out("plan", f"v{previous.version}", "budget", text)
    entries = gatherer.tree()
    if entries is not None:
        shown = gatherer.key_files(entries)
        gatherer.matches(task, entries, shown)
    omitted = list(budget.omitted)
    names = [o.name for o in omitted if o.reason in ("budget", "limit") and o.kind in ("key_file", "match")]
    if names:
        note = gatherer.fenced("omitted", "omitted", "Relevant files not shown here (read them if you need them):",
                               "file names", _cap(", ".join(names), _OMITTED_RESERVE - 150))
        budget.sections.append(note)
    order = {"tree": 0, "key_file": 1, "match": 2, "omitted": 3, "plan": 4, "feedback": 5, "clarifications": 6,
             "task": 7}
    sections = sorted(budget.sections, key=lambda s: order[s.kind])  # stable: the task last, for small models
    text = "\n\n".join(s.text for s in sections)
    prepared = Prepared(text=text, sections=tuple(sections), omitted=tuple(omitted), budget_tokens=budget_tokens,
                        tool_calls=gatherer.calls)
    if log is not None:
        if omitted:
            listed = [f"{o.kind}:{o.name} ({o.reason}{f', ~{o.tokens} tokens' if o.tokens else ''})"
                      for o in omitted[:_LOGGED_OMISSIONS]]
            log.info("context_trimmed", budget_tokens=budget_tokens, used_tokens=prepared.tokens,
                     omitted=listed, omitted_count=len(omitted))
        if task_section.tokens > budget_tokens:
            log.warning("context_over_budget", budget_tokens=budget_tokens, task_tokens=task_section.tokens)
    return prepared
