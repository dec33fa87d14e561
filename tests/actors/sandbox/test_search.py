"""list_directory and search_code on real trees: order, links, caps, binaries."""

from __future__ import annotations

import pytest

from actors.sandbox import search
from actors.sandbox.confine import Workspace
from protocol.errors import SandboxError
from protocol.tools import ListDirectory, SearchCode
from tests.actors.sandbox.conftest import CANARY, Tree, link

LIMIT = 64_000


@pytest.fixture
def project(tree: Tree) -> Tree:
    root = tree.root
    (root / "src" / "pkg").mkdir()
    (root / "src" / "pkg" / "b.py").write_text("def find_me():\n    return 'find_me'\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("find_me")
    (root / "README.md").write_text("find_me in docs\n")
    (root / "data.bin").write_bytes(b"find_me\x00\x01")
    link(root / "out_link", "../outside")
    link(root / "file_link.py", "src/pkg/b.py")
    return tree


def test_list_directory_is_sorted_marks_directories_and_links_and_skips_git(ws: Workspace, project: Tree) -> None:
    out = search.list_directory(ws, ListDirectory(path=".", depth=3), LIMIT).output
    assert out.splitlines() == ["README.md", "data.bin", "file_link.py@", "out_link@", "src/", "src/a.py",
                                "src/pkg/", "src/pkg/b.py"]


def test_list_directory_respects_depth_and_lists_a_subdirectory(ws: Workspace, project: Tree) -> None:
    assert search.list_directory(ws, ListDirectory(path="src"), LIMIT).output == "src/a.py\nsrc/pkg/"
    assert search.list_directory(ws, ListDirectory(path="src/pkg"), LIMIT).path == "src/pkg"


def test_list_directory_never_descends_into_a_symlinked_directory(ws: Workspace, project: Tree) -> None:
    out = search.list_directory(ws, ListDirectory(path=".", depth=10), LIMIT).output
    assert "canary" not in out and "out_link/" not in out


def test_list_directory_stops_at_1000_entries_with_a_marker(ws: Workspace, tree: Tree) -> None:
    many = tree.root / "many"
    many.mkdir()
    for i in range(1005):
        (many / f"f{i:04d}").touch()
    lines = search.list_directory(ws, ListDirectory(path="many"), LIMIT).output.splitlines()
    assert len(lines) == 1001
    assert lines[999] == "many/f0999"
    assert lines[1000] == ("[… truncated: more than 1000 entries; list a subdirectory or use a smaller depth]")


def test_list_directory_of_an_escape_or_a_file_is_refused(ws: Workspace, project: Tree) -> None:
    for path, code in (("out_link", "ACODE-SBX-002"), ("../outside", "ACODE-SBX-002"), ("README.md", "ACODE-SBX-004")):
        with pytest.raises(SandboxError) as info:
            search.list_directory(ws, ListDirectory(path=path), LIMIT)
        assert info.value.code == code


def test_search_code_finds_literal_lines_skipping_git_binaries_and_symlinks(ws: Workspace, project: Tree) -> None:
    out = search.search_code(ws, SearchCode(query="find_me"), LIMIT).output
    assert out.splitlines() == ["README.md:1: find_me in docs", "src/pkg/b.py:1: def find_me():",
                                "src/pkg/b.py:2:     return 'find_me'"]


def test_search_code_is_literal_by_default_and_regex_on_request(ws: Workspace, project: Tree) -> None:
    assert search.search_code(ws, SearchCode(query="find_me()"), LIMIT).output == "src/pkg/b.py:1: def find_me():"
    out = search.search_code(ws, SearchCode(query=r"^def \w+", regex=True, path="src"), LIMIT).output
    assert out == "src/pkg/b.py:1: def find_me():"
    one_file = search.search_code(ws, SearchCode(query="find_me", path="README.md"), LIMIT).output
    assert one_file == "README.md:1: find_me in docs"


def test_search_code_with_no_match_or_a_bad_regex_says_so(ws: Workspace, project: Tree) -> None:
    assert search.search_code(ws, SearchCode(query="absent"), LIMIT).output == "no matches for 'absent' in ."
    with pytest.raises(SandboxError) as info:
        search.search_code(ws, SearchCode(query="(", regex=True), LIMIT)
    assert info.value.code == "ACODE-SBX-007"
    assert info.value.message.startswith("query '(' is not a valid regular expression (missing ), unterminated")


def test_search_code_stops_at_200_matches_with_a_marker(ws: Workspace, tree: Tree) -> None:
    (tree.root / "many.txt").write_text("hit\n" * 300)
    lines = search.search_code(ws, SearchCode(query="hit"), LIMIT).output.splitlines()
    assert len(lines) == 201
    assert lines[199] == "many.txt:200: hit"
    assert lines[200] == "[… truncated: more than 200 matches; narrow the query or the path]"


def test_search_code_never_reads_outside_the_workspace(ws: Workspace, project: Tree) -> None:
    assert CANARY not in search.search_code(ws, SearchCode(query="CANARY"), LIMIT).output
    with pytest.raises(SandboxError) as info:
        search.search_code(ws, SearchCode(query="CANARY", path="out_link"), LIMIT)
    assert info.value.code == "ACODE-SBX-002"
