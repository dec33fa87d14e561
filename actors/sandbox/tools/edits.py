"""modify_file's search/replace form: exact-once matches, newline style, and the hints.

Each edit's ``search`` must occur exactly once (overlaps count: ``aa`` is twice in
``aaa``) in the text as the edits before it left it; every edit applies or none does.

Newlines. A file whose line endings are all CRLF, or all LF, keeps that style: the
search and replace texts are converted to it first, so an LF search matches a CRLF file
(models write LF) and a CRLF replacement cannot plant CRLF lines in an LF file. In a
file that already mixes both, the texts are used exactly as given. A UTF-8 BOM is the
caller's business (:func:`actors.sandbox.tools.files.modify_file` strips it and puts it back).

Hints. A search that matches nowhere gets the *closest region* of the file quoted with
line numbers, so the model can copy the real text instead of guessing again; one that
matches several times gets the count, the first line numbers and each of those matches
with the line before and after it (numbered, so the model can add a neighbouring line to
its search), and is told of ``line`` and, for a small file (at most
:data:`SMALL_FILE_LINES` lines), of write_file.

``line`` (issue 25): an edit whose search matches several times applies at the match
whose lines hold ``line``, or else lie nearest it; two matches equally near refuse the
edit as before, saying so. The caller learns which match was taken (``notes``). The closest region is
found with a bounded cost, so a 10 MB file answers in well under a second:

1. anchors: the search's longest distinct words (``\\w+``, at most :data:`_MAX_WORDS`) are
   counted in the file with ``str.count`` (C speed), and the rarest are kept, up to
   :data:`_MAX_ANCHORS` occurrences in all (a search of punctuation only anchors on whole
   lines equal to one of its lines, stripped);
2. each occurrence votes for the window, as tall as the search, that would put it on
   the search line holding that word; whitespace and indentation do not matter here, and
   a typo only loses that word's votes;
3. the :data:`_CANDIDATES` most-voted windows are compared with the search by
   :class:`difflib.SequenceMatcher` (``real_quick_ratio``/``quick_ratio`` first, at most
   :data:`_COMPARE_CHARS` characters, :data:`_COMPARE_BUDGET_S` seconds in all, most-voted
   first), and the highest ratio wins, the earliest on a tie.

A search sharing no word with the file has no closest region, and the error says so.
"""

from __future__ import annotations

import heapq
import re
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import partial
from itertools import accumulate, islice

from actors.sandbox.confinement.confine import quote
from protocol.calls.tools import Edit
from protocol.errors import SandboxError

__all__ = ["SMALL_FILE_LINES", "apply_edits", "closest_region", "in_style", "newline_style", "number_lines",
           "region_hint"]

_WORD = re.compile(r"\w+")
_NUMBERED = re.compile(r"^\s*\d+\t")  # read_file's line-number prefix, copied by mistake
_MAX_WORDS = 12
_MAX_ANCHORS = 100_000
_CANDIDATES = 32
_COMPARE_CHARS = 1500
_COMPARE_BUDGET_S = 0.25
_HINT_LINES = 10
_HINT_LINE_CHARS = 200
_SHOWN_MATCHES = 5
_CONTEXT_MATCH_LINES = 3  # lines of one match shown (a longer one is cut after these)
_CONTEXT_LINE_CHARS = 120
_MAX_COUNT = 1000
#: A file of at most this many lines is small: a refusal suggests write_file for it.
SMALL_FILE_LINES = 100


def newline_style(text: str) -> str | None:
    """``"\\r\\n"`` when every line ends with CRLF, None when CRLF and LF are mixed, else ``"\\n"``."""
    crlf = text.count("\r\n")
    if not crlf:
        return "\n"
    return "\r\n" if crlf == text.count("\n") else None


def in_style(text: str, newline: str | None) -> str:
    """``text`` with its line endings in ``newline``'s style (unchanged when None: a mixed file)."""
    if newline is None:
        return text
    text = text.replace("\r\n", "\n")
    return text if newline == "\n" else text.replace("\n", "\r\n")


def number_lines(lines: Sequence[str], first: int) -> str:
    """``lines`` as read_file shows them: right-aligned 1-based numbers from ``first``, a tab, the line."""
    return "\n".join(f"{first + i:>6}\t{line}" for i, line in enumerate(lines))


def _positions(text: str, search: str) -> list[int]:
    """Where ``search`` starts in ``text`` (overlaps included), at most :data:`_MAX_COUNT`."""
    found: list[int] = []
    at = text.find(search)
    while at != -1 and len(found) < _MAX_COUNT:
        found.append(at)
        at = text.find(search, at + 1)
    return found


def _lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _votes(text: str, lines: Sequence[str], want: Sequence[str], height: int) -> Counter[int]:
    """Window starts voted for by the rarest words of ``want`` where they occur in ``text``
    (``text`` has LF endings and is ``lines`` joined)."""
    votes: Counter[int] = Counter()
    top = len(lines) - height
    words = sorted({w for line in want for w in _WORD.findall(line)}, key=len, reverse=True)[:_MAX_WORDS]
    if not words:  # punctuation only: lines equal to a search line, stripped, are the anchors
        wanted: dict[str, list[int]] = {}
        for j, line in enumerate(want):
            wanted.setdefault(line.strip(), []).append(j)
        for i, line in enumerate(lines):
            for j in wanted.get(line.strip(), ())[:3]:
                votes[min(max(i - j, 0), top)] += 1
        return votes
    anchors: list[str] = []
    total = 0
    for count, word in sorted((text.count(word), word) for word in words):
        if count and (not anchors or total + count <= _MAX_ANCHORS):
            anchors.append(word)
            total += count
    ends = list(accumulate(map((1).__add__, map(len, lines))))  # offset just past each line's "\n"
    line_of = partial(bisect_right, ends)
    for word in anchors:  # map() keeps every per-hit step in C: 100k hits cost ~0.1 s
        hits = islice(map(re.Match.start, re.finditer(re.escape(word), text)), _MAX_ANCHORS)
        at_lines = list(map(line_of, hits))
        for j in [j for j, line in enumerate(want) if word in line][:3]:
            votes.update(map(j.__rsub__, at_lines))
    for start in [start for start in votes if start < 0 or start > top]:  # windows past either end
        votes[min(max(start, 0), top)] += votes.pop(start)
    return votes


def closest_region(text: str, search: str, lines: Sequence[str] | None = None) -> tuple[int, int] | None:
    """1-based inclusive ``(first, last)`` lines of ``text`` most like ``search``, or None
    when no line shares a word with it. Cost: a few C-speed scans of ``text``, then
    :data:`_CANDIDATES` ``SequenceMatcher`` comparisons of bounded size and total time.
    ``lines`` is ``_lines(text)`` when the caller has it already."""
    text = text.replace("\r\n", "\n")
    lines = _lines(text) if lines is None else lines
    want = _lines(search.replace("\r\n", "\n").strip("\n")) or [""]
    height = max(1, min(len(want), len(lines)))
    votes = _votes(text, lines, want, height)
    if not votes:
        return None
    ranked = heapq.nlargest(_CANDIDATES, votes.items(), key=lambda item: (item[1], -item[0]))
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(want)[:_COMPARE_CHARS])
    best, best_ratio = ranked[0][0], -1.0
    deadline = time.monotonic() + _COMPARE_BUDGET_S
    for start, _ in ranked:
        if time.monotonic() > deadline:
            break  # the best-voted windows were compared first
        matcher.set_seq1("\n".join(lines[start:start + height])[:_COMPARE_CHARS])
        if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio or (ratio == best_ratio and start < best):
            best, best_ratio = start, ratio
    return best + 1, best + height


def region_hint(text: str, search: str) -> str:
    """A sentence quoting the region of ``text`` closest to ``search``, numbered and capped."""
    text = text.replace("\r\n", "\n")
    lines = _lines(text)
    region = closest_region(text, search, lines)
    if region is None:
        return "there is no closest region: no line of the file shares a word with it"
    first, last = region
    lines = lines[first - 1:min(last, first + _HINT_LINES - 1)]
    shown = [line if len(line) <= _HINT_LINE_CHARS else line[:_HINT_LINE_CHARS] + "…" for line in lines]
    more = f"\n[… {last - first + 1 - len(shown)} more lines]" if len(shown) < last - first + 1 else ""
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"the closest region is {where}:\n{number_lines(shown, first)}{more}"


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _nearest(text: str, found: Sequence[int], length: int, line: int) -> int | None:
    """The match (a position in ``found``) whose lines hold ``line`` or lie nearest it; None
    when two are equally near (the hint does not pick one)."""
    def distance(at: int) -> int:
        first = _line_of(text, at)
        last = _line_of(text, at + max(length - 1, 0))
        return 0 if first <= line <= last else min(abs(first - line), abs(last - line))
    ranked = sorted(found, key=distance)
    if len(ranked) > 1 and distance(ranked[0]) == distance(ranked[1]):
        return None
    return ranked[0]


def _shown(line: str) -> str:
    return line if len(line) <= _CONTEXT_LINE_CHARS else line[:_CONTEXT_LINE_CHARS] + "…"


def _match_context(text: str, found: Sequence[int], length: int) -> str:
    """Each of the first :data:`_SHOWN_MATCHES` matches with the line before and after it,
    numbered as read_file numbers them, blocks separated by ``--``."""
    lines = _lines(text)
    blocks = []
    for at in found[:_SHOWN_MATCHES]:
        first = _line_of(text, at)
        last = min(_line_of(text, at + max(length - 1, 0)), first + _CONTEXT_MATCH_LINES - 1)
        start, end = max(first - 1, 1), min(last + 1, len(lines))
        blocks.append(number_lines([_shown(line) for line in lines[start - 1:end]], start))
    return "\n--\n".join(blocks)


def apply_edits(text: str, edits: Sequence[Edit], rel: str, notes: list[str] | None = None) -> str:
    """``text`` with every edit applied in order, or SandboxError (ACODE-SBX-009) naming the
    first edit that does not match exactly once, with a hint. An edit whose search matches
    several times applies at the match its ``line`` picks (:func:`_nearest`), a sentence
    saying so going to ``notes``."""
    newline = newline_style(text)
    for number, edit in enumerate(edits, 1):
        search, replace = in_style(edit.search, newline), in_style(edit.replace, newline)
        found = _positions(text, search)
        picked = found[0] if len(found) == 1 else None
        if len(found) > 1 and edit.line is not None:
            picked = _nearest(text, found, len(search), edit.line)
            if picked is not None and notes is not None:
                notes.append(f"edit {number}: the search matches {len(found)} times; line {edit.line} picked the "
                             f"match at line {_line_of(text, picked)}")
        if picked is not None:
            text = text[:picked] + replace + text[picked + len(search):]
            continue
        count = f"{len(found)}" if len(found) < _MAX_COUNT else f"at least {_MAX_COUNT}"
        head = (f"edit {number} of {len(edits)}: the search text {quote(edit.search)} matches {count} times in "
                f"{rel}; it must match exactly once, so no edit was applied; ")
        earlier = "edit 1" if number == 2 else f"edits 1-{number - 1}"
        after = f" (line numbers as {earlier} left the file)" if number > 1 else ""
        if found:
            lines = ", ".join(str(_line_of(text, at)) for at in found[:_SHOWN_MATCHES])
            rest = f" and {len(found) - _SHOWN_MATCHES} more" if len(found) > _SHOWN_MATCHES else ""
            tie = (f"line {edit.line} is as near one match as another; " if edit.line is not None else "")
            height = len(_lines(text))
            whole = f", or send the whole new text with write_file (the file has {height} lines)" \
                if height <= SMALL_FILE_LINES else ""
            hint = (f"{tie}add a neighbouring line to the search so it is unique, or give the edit `line`, the "
                    f"line number of the match you mean{whole}; it matches at lines {lines}{rest}{after}:\n"
                    f"{_match_context(text, found, len(search))}")
        else:
            hint = "read the file again and copy the exact text, whitespace included"
            if all(_NUMBERED.match(line) for line in _lines(edit.search) if line.strip()):
                hint += " (leave out the line numbers read_file puts before each line)"
            hint += f"; {region_hint(text, edit.search)}"
            if after:
                hint += f"\n{after.strip()}"
        raise SandboxError(head + hint, code="ACODE-SBX-009")
    return text
