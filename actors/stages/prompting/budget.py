"""Every prompt fits: each stage's token budget, and trimming a prompt's parts to it.

A stage's budget is its share of the model's context (seed 000 FR-046..053; computed in
:mod:`protocol.sessions.budgets`, re-exported here):
``token_budget[stage]`` percent (default planner 25, executor 45, verifier 15, reviewer
15: the executor sends the most, its tool definitions and a window of turns; see
docs/pipeline.md, "Token budgets") of the model's ``num_ctx`` less a reserve for the answer (an
eighth of it). Tokens
are estimated at :data:`CHARS_PER_TOKEN` characters each, the estimate acode uses
everywhere; the system prompt and the tool definitions count against the budget.

:func:`fit` trims a prompt's parts to the budget: parts that must be shown whole (the
system prompt, the task, the criteria to judge) are fixed; the others (the diff, check
outputs, file contents, history) are cut, least relevant first and, at equal relevance,
largest first, each down to its minimum at most, with a note in its place saying what
was left out. When the prompt does not fit even with every part at its minimum, the stage
cannot do its work: :class:`OrchestrationError` ACODE-ORCH-005 names the stage, its
budget and the size needed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import OrchestrationError
from protocol.plans.stages import Stage
from protocol.sessions.budgets import (
    DEFAULT_CONTEXT_TOKENS,
    answer_reserve,
    context_window,
    prompt_budgets,
    stage_budget,
)
from protocol.sessions.session import DEFAULT_TOKEN_BUDGET, SessionSettings

__all__ = ["CHARS_PER_TOKEN", "DEFAULT_CONTEXT_TOKENS", "Part", "answer_reserve", "context_window", "cut_diff",
           "estimate", "fit", "prompt_budgets", "stage_budget", "too_large"]

CHARS_PER_TOKEN = 4


def estimate(text: str) -> int:
    """Tokens of ``text``, estimated (rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def too_large(settings: SessionSettings, stage: Stage, needed_tokens: int, what: str,
              cap: tuple[int, str] | None = None) -> OrchestrationError:
    """ACODE-ORCH-005: the smallest prompt ``stage`` can send needs ``needed_tokens``.
    ``cap``: a lower budget set by another setting (tokens, its name)."""
    window = context_window(settings)
    budget = stage_budget(settings, stage)
    percent = settings.token_budget.get(stage, DEFAULT_TOKEN_BUDGET[stage])
    share = (f"{percent}% of the model's {window:,}-token context less {answer_reserve(window):,} for the "
             f"answer")
    raise_what = f"model.num_ctx or orchestration.token_budget.{stage}"
    if cap is not None and cap[0] < budget:
        budget, share, raise_what = cap[0], f"{cap[1]}; its share would be {budget:,}", cap[1]
    return OrchestrationError(
        f"the {stage}'s prompt needs at least {needed_tokens:,} tokens ({what}) but its budget is {budget:,} "
        f"tokens ({share}); raise {raise_what}, or make the task smaller", code="ACODE-ORCH-005")


@dataclass
class Part:
    """One part of a prompt. ``rank``: lower is less relevant, trimmed first. ``keep``:
    characters that must stay (0: the part may be left out but for its note). ``fixed``:
    shown whole, never trimmed."""

    name: str
    text: str
    rank: int = 0
    keep: int = 0
    fixed: bool = False
    cut: int = 0  # characters saved by trimming (0: shown whole)
    # how to cut it: (text, limit, why) -> shorter text; default: head and tail, a note between
    cutter: Callable[[str, int, str], str] | None = None
    # put around the text once it is cut (a fence, a heading): what it adds counts as fixed
    frame: Callable[[str], str] | None = None

    @property
    def framing(self) -> int:
        return len(self.frame("")) if self.frame is not None else 0

    @property
    def minimum(self) -> int:
        return len(self.text) if self.fixed else min(len(self.text), self.keep + _NOTE_CHARS)


_NOTE_CHARS = 200  # room for a note


def _cut(text: str, limit: int, name: str, why: str) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail with a note between."""
    room = max(limit - _NOTE_CHARS, 0)
    head = room * 2 // 3
    tail = room - head
    cut = len(text) - head - tail
    note = (f"\n[… {cut:,} of {len(text):,} characters of {name} (~{cut // CHARS_PER_TOKEN:,} tokens) left out "
            f"here {why} …]\n")
    return text[:head] + note + (text[-tail:] if tail else "")


_FILE_DIFF = re.compile(r"^diff --git a/.*? b/(.*)$", re.MULTILINE)


def cut_diff(text: str, limit: int, why: str) -> str:
    """A diff cut to about ``limit`` characters file by file: the largest files' changes are
    left out first, each named in one note (the diff's own file list, before the first
    file, stays). A diff of one file, or whose smallest file alone does not fit, is cut
    by head and tail."""
    starts = [m.start() for m in _FILE_DIFF.finditer(text)]
    if len(starts) < 2:
        return _cut(text, limit, "the diff", why)
    header = text[:starts[0]]
    files = [(_FILE_DIFF.match(text, start).group(1), text[start:end])  # type: ignore[union-attr]
             for start, end in zip(starts, [*starts[1:], len(text)], strict=True)]
    left = limit - len(header) - _NOTE_CHARS - 60 * len(files)
    kept: set[int] = set()
    for index in sorted(range(len(files)), key=lambda i: len(files[i][1])):  # smallest first
        if len(files[index][1]) > left:
            break
        kept.add(index)
        left -= len(files[index][1])
    if not kept:
        return _cut(text, limit, "the diff", why)
    dropped = [f"{name} ({len(body):,} characters)" for i, (name, body) in enumerate(files) if i not in kept]
    note = f"[… the changes to {', '.join(dropped)} are left out here {why}; the file list above is complete …]\n"
    return header + "".join(body for i, (_, body) in enumerate(files) if i in kept) + note


def fit(settings: SessionSettings, stage: Stage, parts: list[Part], *, extra_tokens: int = 0) -> list[Part]:
    """``parts`` trimmed so that together (plus ``extra_tokens``, e.g. the tool
    definitions) they fit the stage's budget; the same list, each part's ``text`` and
    ``cut`` updated. Raises ACODE-ORCH-005 when even the minimum does not fit."""
    budget = stage_budget(settings, stage)
    limit = (budget - extra_tokens) * CHARS_PER_TOKEN - sum(p.framing for p in parts)
    over = sum(len(p.text) for p in parts) - limit
    if over <= 0:
        return _framed(parts)
    needed = sum(p.minimum for p in parts)
    if needed > limit:
        fixed = ", ".join(p.name for p in parts if p.fixed) or "nothing fixed"
        needed += sum(p.framing for p in parts)
        raise too_large(settings, stage, -(-needed // CHARS_PER_TOKEN) + extra_tokens,
                        f"{fixed} and the least of the rest")
    for part in sorted((p for p in parts if not p.fixed), key=lambda p: (p.rank, -len(p.text))):
        if over <= 0:
            break
        target = max(part.minimum, len(part.text) - over)
        if target >= len(part.text):
            continue
        before = len(part.text)
        why = f"to fit the {stage}'s prompt budget of {budget:,} tokens"
        if part.cutter is not None:
            part.text = part.cutter(part.text, target, why)
        else:
            part.text = _cut(part.text, target, part.name, why)
        part.cut += before - len(part.text)
        over -= before - len(part.text)
    return _framed(parts)


def _framed(parts: list[Part]) -> list[Part]:
    for part in parts:
        if part.frame is not None:
            part.text, part.frame = part.frame(part.text), None
    return parts
