"""The file tools on real files: reads, atomic writes, exact-once edits, directories."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from actors.sandbox import files
from actors.sandbox.confine import Workspace
from protocol.errors import SandboxError
from protocol.tools import CreateDirectory, Edit, ModifyFile, ReadFile, WriteFile
from tests.actors.sandbox.conftest import Tree


def _code(call: object) -> str:
    with pytest.raises(SandboxError) as info:
        call()  # type: ignore[operator]
    return info.value.code


# -- read_file ------------------------------------------------------------------------------


def test_read_file_returns_the_raw_lines_between_offset_and_limit(ws: Workspace, tree: Tree) -> None:
    (tree.root / "n.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    assert files.read_file(ws, ReadFile(path="n.txt", offset=2, limit=3), 64_000).output == "line 2\nline 3\nline 4\n"
    assert files.read_file(ws, ReadFile(path="n.txt", offset=8), 64_000).output == "line 8\nline 9\n"
    out = files.read_file(ws, ReadFile(path="n.txt", offset=50), 64_000).output
    assert out == "[offset 50 is past the end: the file has 10 lines]"


def test_read_file_over_the_limit_is_cut_with_a_marker_counting_the_rest(ws: Workspace, tree: Tree) -> None:
    (tree.root / "big.txt").write_text("x" * 3000 + "\n" + "y" * 3000 + "\n")
    out = files.read_file(ws, ReadFile(path="big.txt"), 1024).output
    assert out == "x" * 1024 + "\n[… truncated: 4978 more bytes]"
    limited = files.read_file(ws, ReadFile(path="big.txt", limit=1), 1024).output
    assert limited == "x" * 1024 + "\n[… truncated: 1977 more bytes]"


def test_read_file_never_splits_a_utf8_character_at_the_cut(ws: Workspace, tree: Tree) -> None:
    (tree.root / "u.txt").write_text("a" + "é" * 1000)  # 1 + 2000 bytes: byte 1024 is mid-character
    out = files.read_file(ws, ReadFile(path="u.txt"), 1024).output
    assert out == "a" + "é" * 511 + "\n[… truncated: 978 more bytes]"


def test_read_file_refuses_binary_and_replaces_other_invalid_utf8(ws: Workspace, tree: Tree) -> None:
    (tree.root / "bin.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (tree.root / "latin1.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(SandboxError) as info:
        files.read_file(ws, ReadFile(path="bin.dat"), 64_000)
    assert str(info.value) == ("path 'bin.dat' looks binary (it contains NUL bytes); the file tools handle "
                               "text only (ACODE-SBX-004)")
    assert files.read_file(ws, ReadFile(path="latin1.txt"), 64_000).output == "caf\ufffd\n"


def test_read_file_refuses_directories_fifos_and_sockets_without_blocking(ws: Workspace, tree: Tree) -> None:
    import socket

    os.mkfifo(tree.root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tree.root / "sock"))
        for path, what in (("src", "a directory"), ("pipe", "a named pipe (FIFO)"), ("sock", "a socket")):
            with pytest.raises(SandboxError) as info:
                files.read_file(ws, ReadFile(path=path), 64_000)
            assert info.value.code == "ACODE-SBX-004"
            assert info.value.message.startswith(f"path '{path}' is {what};")
    finally:
        sock.close()


def test_read_file_of_a_missing_file_says_so(ws: Workspace, tree: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        files.read_file(ws, ReadFile(path="src/nope.py"), 64_000)
    assert str(info.value) == (f"path 'src/nope.py' does not exist in the workspace {tree.root}; check the name "
                               "with list_directory (ACODE-SBX-003)")


# -- write_file -----------------------------------------------------------------------------


def test_write_file_replaces_atomically_keeps_the_mode_and_leaves_no_temp_file(ws: Workspace, tree: Tree) -> None:
    target = tree.root / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    old_inode = target.stat().st_ino
    outcome = files.write_file(ws, WriteFile(path="run.sh", content="#!/bin/sh\necho hi\n"))
    assert outcome.output == "wrote 18 bytes to run.sh"
    assert outcome.path == "run.sh"
    assert target.read_text() == "#!/bin/sh\necho hi\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.stat().st_ino != old_inode  # a new inode renamed into place, not rewritten in place
    assert sorted(p.name for p in tree.root.iterdir()) == ["run.sh", "src"]


def test_write_file_does_not_touch_other_names_of_a_hardlinked_file(ws: Workspace, tree: Tree) -> None:
    os.link(tree.outside / "canary.txt", tree.root / "hard.txt")
    files.write_file(ws, WriteFile(path="hard.txt", content="replaced"))
    assert tree.canaries_intact()


def test_a_write_retried_after_a_crash_takes_over_the_temp_file_the_crash_left(ws: Workspace, tree: Tree) -> None:
    content = "after the crash\n"
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    leftover = tree.root / f".c.txt.{digest}.acode.tmp"
    leftover.write_text("half writ")  # what a kill -9 between create and rename leaves
    files.write_file(ws, WriteFile(path="c.txt", content=content))
    assert (tree.root / "c.txt").read_text() == content
    assert not leftover.exists()


def test_a_planted_hard_link_at_the_temp_name_is_unlinked_not_written_through(ws: Workspace, tree: Tree) -> None:
    content = "x"
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    os.link(tree.outside / "canary.txt", tree.root / f".d.txt.{digest}.acode.tmp")
    files.write_file(ws, WriteFile(path="d.txt", content=content))
    assert tree.canaries_intact()


def test_write_file_reports_the_normalized_relative_path_and_refuses_directories(ws: Workspace, tree: Tree) -> None:
    assert files.write_file(ws, WriteFile(path=f"{tree.root}/src/../b.txt", content="b")).path == "b.txt"
    assert _code(lambda: files.write_file(ws, WriteFile(path="src", content="x"))) == "ACODE-SBX-004"
    assert _code(lambda: files.write_file(ws, WriteFile(path="src/a.py/x", content="x"))) == "ACODE-SBX-004"


# -- modify_file ----------------------------------------------------------------------------


def test_modify_file_applies_every_edit_in_order(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("a = 1\nb = 2\n")
    edits = [Edit(search="a = 1", replace="a = 10"), Edit(search="a = 10\nb", replace="a = 10\nc")]
    assert files.modify_file(ws, ModifyFile(path="m.py", edits=edits)).output == "applied 2 edits to m.py"
    assert (tree.root / "m.py").read_text() == "a = 10\nc = 2\n"


@pytest.mark.parametrize(("search", "found"), [("missing", 0), ("x =", 2), ("aa", 2)])
def test_modify_file_refuses_a_search_not_matching_exactly_once_and_applies_nothing(
        ws: Workspace, tree: Tree, search: str, found: int) -> None:
    original = "x = 1\nx = 2\nx = 3\naaa\n"  # edit 1 runs first: two "x =" are left for edit 2
    (tree.root / "m.py").write_text(original)
    edits = [Edit(search="x = 1", replace="y = 1"), Edit(search=search, replace="z")]
    with pytest.raises(SandboxError) as info:
        files.modify_file(ws, ModifyFile(path="m.py", edits=edits))
    assert info.value.code == "ACODE-SBX-009"
    assert info.value.message.startswith(f"edit 2 of 2: the search text {search!r} matches {found} times in m.py; "
                                         "it must match exactly once, so no edit was applied; ")
    assert (tree.root / "m.py").read_text() == original


def test_modify_file_keeps_crlf_line_endings(ws: Workspace, tree: Tree) -> None:
    (tree.root / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    files.modify_file(ws, ModifyFile(path="w.txt", edits=[Edit(search="one\ntwo", replace="1\n2\n3")]))
    assert (tree.root / "w.txt").read_bytes() == b"1\r\n2\r\n3\r\n"


def test_modify_file_of_a_missing_file_is_not_found(ws: Workspace) -> None:
    edit = [Edit(search="a", replace="b")]
    assert _code(lambda: files.modify_file(ws, ModifyFile(path="nope.py", edits=edit))) == "ACODE-SBX-003"


# -- create_directory and pre-images ----------------------------------------------------------


def test_create_directory_makes_parents_and_is_idempotent(ws: Workspace, tree: Tree) -> None:
    assert files.create_directory(ws, CreateDirectory(path="a/b/c")).output == "created directory a/b/c"
    assert files.create_directory(ws, CreateDirectory(path="a/b/c")).output == "directory a/b/c already exists"
    assert (tree.root / "a" / "b" / "c").is_dir()
    assert _code(lambda: files.create_directory(ws, CreateDirectory(path="src/a.py"))) == "ACODE-SBX-004"


def test_image_is_the_sha256_of_the_file_or_absent(ws: Workspace, tree: Tree) -> None:
    import hashlib

    assert files.image(ws, "src/a.py") == hashlib.sha256(b"print('inside')\n").hexdigest()
    assert files.image(ws, "src/new.py") == files.ABSENT
    assert files.image(ws, "nodir/new.py") == files.ABSENT
    assert files.image(ws, "src") is None
    assert files.image(ws, "../outside/canary.txt") is None
