"""Path confinement on real trees, with both resolution methods (openat2 and the fd walk)."""

from __future__ import annotations

import os
import threading

import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.tools import files
from protocol.calls.tools import ReadFile, WriteFile
from protocol.errors import PathEscapeError, SandboxError
from tests.actors.sandbox.conftest import CANARY, Tree, exchange, link


def _escapes(tree: Tree) -> None:
    """Every kind of symlink that leads out of the workspace."""
    root = tree.root
    link(root / "abs_link", tree.outside / "canary.txt")
    link(root / "rel_link", "../outside/canary.txt")
    link(root / "chain1", "chain2")
    link(root / "chain2", "src/../../outside/canary.txt")
    link(root / "dir_link", "../outside")
    link(root / "src" / "deep_link", "../../outside")
    link(root / "proc_link", "/proc/self/root" + str(tree.outside / "canary.txt"))
    link(root / "evil_link", "../ws-evil")


ESCAPES = [
    "../outside/canary.txt",
    "src/../../outside/canary.txt",
    "/etc/passwd",
    "{base}/outside/canary.txt",
    "{base}/ws-evil/canary.txt",
    "{base}/ws/../outside/canary.txt",
    "abs_link",
    "rel_link",
    "chain1",
    "dir_link/canary.txt",
    "src/deep_link/canary.txt",
    "proc_link",
    "evil_link/canary.txt",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_a_path_leading_outside_is_refused_for_reads_and_writes(ws: Workspace, tree: Tree, path: str) -> None:
    _escapes(tree)
    path = path.format(base=tree.base)
    with pytest.raises(PathEscapeError) as read:
        files.read_file(ws, ReadFile(path=path), 64_000)
    with pytest.raises(PathEscapeError) as write:
        files.write_file(ws, WriteFile(path=path, content="overwritten"))
    for info in (read, write):
        assert info.value.code == "ACODE-SBX-002"
        assert CANARY not in str(info.value)
    assert tree.canaries_intact()


def test_the_refusal_names_the_path_the_workspace_and_what_to_do(ws: Workspace, tree: Tree) -> None:
    with pytest.raises(PathEscapeError) as info:
        ws.open("../etc/passwd")
    assert str(info.value) == (f"path '../etc/passwd' resolves outside the workspace {tree.root}; "
                               "use a path inside the workspace (ACODE-SBX-002)")


def test_a_sibling_with_the_workspace_name_as_prefix_is_outside(ws: Workspace, tree: Tree) -> None:
    with pytest.raises(PathEscapeError):
        ws.relative(f"{tree.root}-evil/canary.txt")


def test_a_nul_byte_is_refused(ws: Workspace) -> None:
    with pytest.raises(PathEscapeError) as info:
        ws.open("src/a.py\0.txt")
    assert str(info.value) == ("path 'src/a.py\\x00.txt' contains a NUL byte; remove it (ACODE-SBX-002)")


def test_a_path_over_4096_bytes_is_refused(ws: Workspace) -> None:
    with pytest.raises(PathEscapeError) as info:
        ws.open("é" * 2049)  # 4098 bytes in UTF-8, 2049 characters
    assert info.value.code == "ACODE-SBX-002"
    assert "is 4098 bytes long, over the 4096-byte limit" in info.value.message


def test_symlinks_and_absolute_paths_that_stay_inside_work(ws: Workspace, tree: Tree) -> None:
    link(tree.root / "good_link", "src/a.py")
    link(tree.root / "src_link", "src")
    link(tree.root / "src" / "up_link", "../src/a.py")
    for path in ("good_link", "src_link/a.py", "src/up_link", f"{tree.root}/src/a.py", "src/../src/a.py"):
        assert files.read_file(ws, ReadFile(path=path), 64_000).output == "     1\tprint('inside')\n"


def test_writing_through_an_inside_symlink_writes_its_target(ws: Workspace, tree: Tree) -> None:
    link(tree.root / "alias.py", "src/a.py")
    files.write_file(ws, WriteFile(path="alias.py", content="new\n"))
    assert (tree.root / "src" / "a.py").read_text() == "new\n"
    assert os.path.islink(tree.root / "alias.py")


def test_missing_parents_are_created_inside_but_never_through_a_link_outside(ws: Workspace, tree: Tree) -> None:
    link(tree.root / "out", "../outside")
    files.write_file(ws, WriteFile(path="new/deeper/x.txt", content="x"))
    assert (tree.root / "new" / "deeper" / "x.txt").read_text() == "x"
    with pytest.raises(PathEscapeError):
        files.write_file(ws, WriteFile(path="out/made/x.txt", content="x"))
    assert tree.canaries_intact()


def test_a_workspace_named_through_a_symlink_takes_absolute_paths_under_either_name(tree: Tree) -> None:
    alias = link(tree.base / "alias", tree.root)
    with Workspace(str(alias)) as ws:
        for path in (f"{alias}/src/a.py", f"{tree.root}/src/a.py"):
            assert files.read_file(ws, ReadFile(path=path), 64_000).output == "     1\tprint('inside')\n"
        for path in (f"{tree.evil}/canary.txt", f"{tree.base}/alias-x/a.py", f"{tree.root}-evil/canary.txt"):
            with pytest.raises(PathEscapeError):
                ws.relative(path)


def test_a_missing_workspace_is_refused_naming_it(tree: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        Workspace(str(tree.base / "nope"))
    assert str(info.value) == (f"workspace {tree.base / 'nope'} does not exist; point the session at an "
                               "existing directory (ACODE-SBX-004)")
    with pytest.raises(SandboxError) as info:
        Workspace(str(tree.outside / "canary.txt"))
    assert info.value.code == "ACODE-SBX-004"
    assert "is not a directory" in info.value.message


def test_a_symlink_swapped_in_during_reads_and_writes_never_leaks(ws: Workspace, tree: Tree) -> None:
    swap_names = exchange()
    swap, other = tree.root / "swap", tree.root / "other"
    swap.mkdir()
    (swap / "f").write_text("inside")
    link(other, "../outside")  # "swap" flips between the real directory and this link
    stop = threading.Event()
    flips = 0

    def swapper() -> None:
        nonlocal flips
        while not stop.is_set():
            swap_names(swap, other)
            flips += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    seen: set[str] = set()
    try:
        for i in range(2000):
            for path in ("swap/f", "other/f"):
                try:
                    seen.add(files.read_file(ws, ReadFile(path=path), 1024).output)
                except SandboxError as exc:
                    seen.add(exc.code)
            try:
                files.write_file(ws, WriteFile(path=f"swap/w{i % 3}", content="w"))
            except SandboxError as exc:
                seen.add(exc.code)
    finally:
        stop.set()
        thread.join()
    assert flips > 100
    assert not any(CANARY in text for text in seen)
    assert "     1\tinside" in seen
    assert seen <= {"     1\tinside", "ACODE-SBX-002", "ACODE-SBX-004"}  # refusals are safe; a race may give either
    assert tree.canaries_intact()
