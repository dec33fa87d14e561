"""The workspace tree as the planner's model sees it: a listing read, completed and cut to fit.

The sandbox's ``list_directory`` answers one workspace-relative path a line, depth first
and sorted at every level, a directory ending in ``/`` and a symlink in ``@``, and notes in
brackets (``[… truncated: …]``, ``[… is an empty directory]``). :func:`entries` reads one;
a deep listing that stopped at the sandbox's entry limit is :func:`truncated` and is
:func:`completed` by a shallow one; :func:`render` cuts the tree to the deepest level that
fits the room given, each directory whose content is not shown saying how many entries it
holds. Everything here is a pure function of the listing's text, so a replayed planner,
whose reads come back from the sandbox's journal, renders the same tree.
"""

from __future__ import annotations

__all__ = ["completed", "depth", "entries", "order", "render", "truncated"]


def entries(listing: str) -> tuple[list[str], list[str]]:
    """A list_directory output's entries and its bracketed notes (ignored, truncated)."""
    found, notes = [], []
    for line in listing.splitlines():
        if line.startswith("[") and line.endswith("]"):
            notes.append(line)
        elif line:
            found.append(line)
    return found, notes


def depth(entry: str) -> int:
    return entry.rstrip("/@").count("/") + 1


def order(entry: str) -> tuple[str, ...]:
    """list_directory's order: depth first, names sorted at every level."""
    return tuple(entry.rstrip("/@").split("/"))


def truncated(found: list[str], notes: list[str]) -> bool:
    """The listing stopped at the sandbox's entry limit (its last entries are missing)."""
    return bool(found) and any(note.startswith("[… truncated") for note in notes)


def completed(found: list[str], shallow: list[str]) -> tuple[list[str], frozenset[str]]:
    """A truncated deep listing's entries with those of a shallow one (two levels) merged
    in, in the listing's order, and the directories that may hold more than is listed
    (``partial``): the deep listing stopped inside those holding its last entry, and
    missed those after it."""
    last = found[-1].rstrip("/@").split("/")
    seen = set(found)
    partial = frozenset({"/".join(last[:i]) + "/" for i in range(1, len(last))}
                        | {entry for entry in shallow if entry.endswith("/") and entry not in seen})
    return sorted(seen | set(shallow), key=order), partial


def render(found: list[str], notes: list[str], cap: int, partial: frozenset[str] = frozenset()) -> tuple[str, int]:
    """The listing cut to the deepest level that fits ``cap`` characters, and that level
    (0: even the top level was cut). A directory whose content is not shown says how many
    entries it holds (``partial`` ones, which the listing did not finish, at least that many)."""
    deepest = max((depth(e) for e in found), default=1)
    for level in range(deepest, 0, -1):
        lines = []
        for entry in found:
            if depth(entry) > level:
                continue
            hidden = entry.endswith("/") and depth(entry) == level and (level < deepest or entry in partial)
            below = sum(1 for e in found if e.startswith(entry) and e != entry) if hidden else 0
            if hidden and entry in partial:
                lines.append(f"{entry} (at least {below} entries)" if below else f"{entry} (not listed)")
            elif below:
                lines.append(f"{entry} ({below} entries)")
            else:
                lines.append(entry)
        text = "\n".join([*lines, *notes])
        if len(text) <= cap:
            return text, level
    shown: list[str] = []
    size = sum(len(n) + 1 for n in notes) + 60
    top = [e for e in found if depth(e) == 1]
    for entry in top:
        if size + len(entry) + 1 > cap:
            break
        shown.append(entry)
        size += len(entry) + 1
    return "\n".join([*shown, f"[… {len(top) - len(shown)} more top-level entries not shown]", *notes]), 0
