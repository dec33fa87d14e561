"""Hard-linked files of a workspace whose other names lie outside it (``acode doctor``).

``read_file`` follows a hard link: a hard link *is* the file, with no "target" to check,
and package managers make them on purpose (pnpm's ``node_modules`` link into its
content-addressed store, uv and cargo caches may too), so refusing them would break
those projects. Writes to a file with more than one name are refused
(ACODE-SBX-014), and no command can make such a link to a file it cannot see: under
bubblewrap the file is not there, under Landlock linking a file into the workspace from
a place without read rights is refused (``EXDEV``). A hard link that already exists was
made by someone else, before or outside the session.

:func:`outside` lists them, so a user can look before a session starts: every regular
file with ``st_nlink`` above the number of its names found inside the workspace.
Symlinks are not followed; the walk stops after ``limit`` entries and says so.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

__all__ = ["Found", "outside"]


@dataclass(frozen=True)
class Found:
    paths: list[str]  # workspace-relative, one name per file, sorted
    walked: int
    complete: bool  # False when the walk stopped at its limit


def outside(root: str, *, limit: int = 500_000) -> Found:
    """Files in ``root`` with a hard link outside it."""
    names: dict[tuple[int, int], list[str]] = {}
    links: dict[tuple[int, int], int] = {}
    walked = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            walked += 1
            if walked > limit:
                return _found(root, names, links, walked - 1, complete=False)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                key = (info.st_dev, info.st_ino)
                names.setdefault(key, []).append(entry.path)
                links[key] = info.st_nlink
    return _found(root, names, links, walked, complete=True)


def _found(root: str, names: dict[tuple[int, int], list[str]], links: dict[tuple[int, int], int], walked: int,
           *, complete: bool) -> Found:
    paths = sorted(os.path.relpath(min(found), root) for key, found in names.items() if len(found) < links[key])
    return Found(paths=paths, walked=walked, complete=complete)
