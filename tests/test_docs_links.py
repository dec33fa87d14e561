"""Every relative link in README.md and docs/ leads somewhere: the file exists, and an anchor
(``#...``) names a heading of that file as GitHub renders it.

GitHub's anchor for a heading: the heading's text with its markup dropped, lower-cased,
every character but letters, digits, ``_``, ``-`` and spaces dropped, spaces turned into
``-``; a second heading with the same anchor gets ``-1``, a third ``-2``. Links inside code
(fenced blocks and inline spans) are text, not links, and are not checked; links with a
scheme (``https:``, ``mailto:``) are not ours to check.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (without the -N of a repeated one)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor the headings of a Markdown file get on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """One line per relative link in ``path`` that leads nowhere, saying why."""
    problems = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(2)
            if _SCHEME.match(target):
                continue
            where = f"{path.name}:{number}: [{match.group(1)}]({target})"
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                problems.append(f"{where}: no file {dest}")
            elif anchor and dest.suffix != ".md":
                problems.append(f"{where}: an anchor into {dest.name}, which has no headings")
            elif anchor and anchor not in anchors(dest):
                problems.append(f"{where}: no heading in {dest.name} has the anchor #{anchor}")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_relative_link_leads_to_a_file_and_heading(path: Path) -> None:
    assert broken_links(path) == []


def test_the_readme_links_to_every_docs_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {m.group(2).partition("#")[0] for m in _LINK.finditer(readme)}
    assert sorted(str(p.relative_to(ROOT)) for p in DOCS if p.parent.name == "docs"
                  and str(p.relative_to(ROOT)) not in linked) == []


def test_slugs_follow_github() -> None:
    assert slug("Following a session: the thinking line and the figures per stage") == (
        "following-a-session-the-thinking-line-and-the-figures-per-stage")
    assert slug("With llama.cpp's `llama-server`") == "with-llamacpps-llama-server"
    assert slug("`acode doctor`") == "acode-doctor"
    assert slug("Commands: the allowlist and what is refused") == "commands-the-allowlist-and-what-is-refused"
    assert slug("step_style and [profiles](x.md)") == "step_style-and-profiles"


def test_a_missing_file_a_missing_heading_and_a_repeated_heading_are_told_apart(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Twice\n\n## Twice\n\n```\n## In code\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md#twice) [second](other.md#twice-1) [self](#page) [web](https://example.org/x#y)\n"
        "[gone](missing.md) [no heading](other.md#nowhere) [code](other.md#in-code)\n"
        "`[in a span](missing.md)`\n\n```\n[in a fence](missing.md)\n```\n")
    assert broken_links(page) == [
        f"page.md:4: [gone](missing.md): no file {(tmp_path / 'missing.md').resolve()}",
        "page.md:4: [no heading](other.md#nowhere): no heading in other.md has the anchor #nowhere",
        "page.md:4: [code](other.md#in-code): no heading in other.md has the anchor #in-code",
    ]
