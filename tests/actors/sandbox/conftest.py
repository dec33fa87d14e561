"""Real directory trees for the sandbox tests: a workspace with canaries just outside it.

``outside/`` and the sibling ``ws-evil/`` (a prefix of the workspace's own name) hold
files whose content (:data:`CANARY`, random per test run) must never appear in any
result; the ``ws`` fixture opens the workspace once per confinement method this kernel
offers, so every test runs both. :func:`exchange` swaps two names atomically, for the
race tests.
"""

from __future__ import annotations

import ctypes
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.sandbox.confinement.confine import Workspace, openat2_available

CANARY = f"CANARY-{secrets.token_hex(8)}-must-never-leak"
METHODS = ["openat2", "walk"] if openat2_available() else ["walk"]


@dataclass(frozen=True)
class Tree:
    base: Path
    root: Path  # the workspace
    outside: Path
    evil: Path  # sibling with the workspace's name as a prefix

    def canaries_intact(self) -> bool:
        files = sorted(p.name for p in self.outside.iterdir()) + sorted(p.name for p in self.evil.iterdir())
        return files == ["canary.txt", "f", "canary.txt"] and all(
            (d / "canary.txt").read_text() == CANARY for d in (self.outside, self.evil)) and (
            (self.outside / "f").read_text() == CANARY)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    root, outside, evil = tmp_path / "ws", tmp_path / "outside", tmp_path / "ws-evil"
    for d in (root, outside, evil):
        d.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    (outside / "f").write_text(CANARY)
    (evil / "canary.txt").write_text(CANARY)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("print('inside')\n")
    return Tree(tmp_path, root, outside, evil)


@pytest.fixture(params=METHODS)
def ws(request: pytest.FixtureRequest, tree: Tree) -> Iterator[Workspace]:
    with Workspace(str(tree.root), method=request.param) as workspace:
        yield workspace


def link(path: Path, target: str | Path) -> Path:
    os.symlink(target, path)
    return path


def exchange() -> Callable[[Path, Path], None]:
    """``renameat2(RENAME_EXCHANGE)``: swap two names atomically (no moment without either)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("this libc has no renameat2; the race needs an atomic exchange")
    at_fdcwd, rename_exchange = -100, 2

    def swap(a: Path, b: Path) -> None:
        if libc.renameat2(at_fdcwd, bytes(a), at_fdcwd, bytes(b), rename_exchange) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    return swap
