"""list_directory and search_code on real trees: order, links, caps, binaries."""

from __future__ import annotations

import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.tools import search
from protocol.calls.tools import ListDirectory, SearchCode, SearchCodeTerms
from protocol.errors import SandboxError
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
    assert info.value.message == ("query '(' is not a valid regular expression (missing ) at position 1); fix it or "
                                  "search literally with regex=false")


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


# -- .gitignore -----------------------------------------------------------------------------------


@pytest.fixture
def ignoring(tree: Tree) -> Tree:
    """A project with a root .gitignore, a nested one, negation and a dir-only pattern."""
    root = tree.root
    (root / ".gitignore").write_text("# build output\n*.log\n!keep.log\nbuild/\n/top.txt\ndist\n")
    for name in ("a.log", "keep.log", "top.txt", "dist"):
        (root / name).write_text("find_me\n")
    (root / "build").mkdir()
    (root / "build" / "out.js").write_text("find_me\n")
    (root / "src" / "build").write_text("find_me: a file named build, not the directory\n")
    (root / "src" / "top.txt").write_text("find_me: top.txt is anchored to the root's directory\n")
    (root / "src" / ".gitignore").write_text("gen/\n*.tmp\n!important.log\n")
    (root / "src" / "gen").mkdir()
    (root / "src" / "gen" / "g.py").write_text("find_me\n")
    (root / "src" / "x.tmp").write_text("find_me\n")
    (root / "src" / "important.log").write_text("find_me: re-included by the nested file\n")
    (root / "x.tmp").write_text("find_me: *.tmp is the nested file's, not the root's\n")
    return tree


def test_list_directory_leaves_out_what_gitignore_ignores_and_counts_it(ws: Workspace, ignoring: Tree) -> None:
    out = search.list_directory(ws, ListDirectory(depth=5), LIMIT).output
    assert out.splitlines() == [".gitignore", "keep.log", "src/", "src/.gitignore", "src/a.py", "src/build",
                                "src/important.log", "src/top.txt", "x.tmp",
                                "[6 entries ignored by .gitignore]"]


def test_a_nested_gitignore_applies_from_its_own_directory(ws: Workspace, ignoring: Tree) -> None:
    out = search.list_directory(ws, ListDirectory(path="src"), LIMIT).output
    assert out.splitlines() == ["src/.gitignore", "src/a.py", "src/build", "src/important.log", "src/top.txt",
                                "[2 entries ignored by .gitignore]"]


def test_a_directory_named_by_the_call_is_listed_even_when_ignored(ws: Workspace, ignoring: Tree) -> None:
    out = search.list_directory(ws, ListDirectory(path="build"), LIMIT).output
    assert out.splitlines() == ["build/out.js",
                                "[build is ignored by .gitignore (build); listed in full because it was named]"]
    out = search.list_directory(ws, ListDirectory(path="src/gen"), LIMIT).output
    assert out.splitlines() == ["src/gen/g.py",
                                "[src/gen is ignored by .gitignore (src/gen); listed in full because it was named]"]


def test_search_code_skips_ignored_files_and_says_how_many(ws: Workspace, ignoring: Tree) -> None:
    out = search.search_code(ws, SearchCode(query="find_me"), LIMIT).output
    assert out.splitlines() == [
        "keep.log:1: find_me",
        "src/build:1: find_me: a file named build, not the directory",
        "src/important.log:1: find_me: re-included by the nested file",
        "src/top.txt:1: find_me: top.txt is anchored to the root's directory",
        "x.tmp:1: find_me: *.tmp is the nested file's, not the root's",
        "[6 entries ignored by .gitignore]",
    ]


def test_no_gitignore_means_no_note(ws: Workspace, project: Tree) -> None:
    assert "ignored" not in search.list_directory(ws, ListDirectory(depth=3), LIMIT).output


def test_a_gitignore_that_is_a_symlink_out_is_not_read(ws: Workspace, tree: Tree) -> None:
    (tree.base / "elsewhere").mkdir()
    (tree.base / "elsewhere" / "ignore").write_text("*\n")  # would hide everything if it were followed
    link(tree.root / ".gitignore", "../elsewhere/ignore")
    out = search.list_directory(ws, ListDirectory(depth=2), LIMIT).output
    assert out.splitlines() == [".gitignore@", "src/", "src/a.py"]


def test_only_the_first_256_kib_of_a_gitignore_count(ws: Workspace, tree: Tree) -> None:
    from actors.sandbox.workspace.ignore import MAX_GITIGNORE_BYTES

    padding = "#" * 99 + "\n"
    lines = padding * (MAX_GITIGNORE_BYTES // len(padding) - 1) + "first.txt\n" + padding * 10 + "late.txt\n"
    (tree.root / ".gitignore").write_text(lines)
    (tree.root / "first.txt").touch()
    (tree.root / "late.txt").touch()
    out = search.list_directory(ws, ListDirectory(), LIMIT).output
    assert out.splitlines() == [".gitignore", "late.txt", "src/", "[1 entry ignored by .gitignore]"]


# -- the regex time budget ------------------------------------------------------------------------


def test_a_catastrophic_regex_stops_at_the_budget_with_the_matches_so_far(ws: Workspace, tree: Tree) -> None:
    import time

    (tree.root / "a.txt").write_text("aaaa\n")
    (tree.root / "b.txt").write_text("a" * 5000 + "b\n")
    (tree.root / "c.txt").write_text("aaa\n")
    start = time.monotonic()
    outcome = search.search_code(ws, SearchCode(query="(a+)+$", regex=True), LIMIT, budget_s=0.3)
    assert time.monotonic() - start < 5.0  # without the budget this runs for longer than the universe
    assert outcome.output.splitlines() == [
        "a.txt:1: aaaa",
        "[… search stopped at b.txt:1: the 0.3 s time budget ran out; the matches above are partial]"]
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.message) == (
        "ACODE-SBX-016", "search_code for '(a+)+$' in . ran out of its 0.3 s time budget at b.txt:1, with 1 match "
        "found so far (in the output); simplify the regex (nested quantifiers such as (a+)+ backtrack "
        "exponentially) or narrow the path")


def test_the_budget_bounds_a_literal_walk_too(ws: Workspace, tree: Tree) -> None:
    for i in range(5):
        (tree.root / f"f{i}.txt").write_text("hit\n")
    ticks = iter(range(100))  # a clock that moves one second per reading
    outcome = search.search_code(ws, SearchCode(query="hit"), LIMIT, budget_s=3, clock=lambda: float(next(ticks)))
    assert outcome.output.splitlines() == [
        "f0.txt:1: hit", "f1.txt:1: hit",
        "[… search stopped at f2.txt: the 3 s time budget ran out; the matches above are partial]"]
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-016"
    assert outcome.error.message.endswith("with 2 matches found so far (in the output); narrow the path")


def test_python_re_syntax_keeps_working_in_regex_mode(ws: Workspace, tree: Tree) -> None:
    (tree.root / "r.py").write_text("def f(x):\n    return x  # done\nclass C: pass\n")
    queries = {r"(?P<kw>def|class)\s+\w+": ["r.py:1: def f(x):", "r.py:3: class C: pass"],
               r"(?i)RETURN\b": ["r.py:2:     return x  # done"],
               r"(?<=# )done$": ["r.py:2:     return x  # done"],
               r"\d": []}
    for query, expected in queries.items():
        out = search.search_code(ws, SearchCode(query=query, regex=True, path="r.py"), LIMIT).output
        assert out.splitlines() == (expected or [f"no matches for {query!r} in r.py"])


# -- search_code_terms: several queries, one walk ----------------------------------------------------


def _parts(output: str, count: int) -> list[str]:
    parts: list[list[str]] = []
    for line in output.split("\n"):
        if line == search.query_header(len(parts) + 1, count):
            parts.append([])
        else:
            parts[-1].append(line)
    return ["\n".join(part) for part in parts]


@pytest.mark.parametrize("use_regex", [False, True])
def test_search_code_terms_answers_each_query_as_search_code_alone_would(
        ws: Workspace, ignoring: Tree, use_regex: bool) -> None:
    root = ignoring.root
    (root / "many.txt").write_text("hit find_me\n" * 300)  # "hit" passes the 200-match cap, find_me too
    (root / "src" / "pkg").mkdir()
    (root / "src" / "pkg" / "deep.py").write_text("def hit():\n    return 'nested'\n")
    queries = ["find_me", "hit", "nowhere", "nested", "top.txt" if not use_regex else r"ne\w+d"]
    outcome = search.search_code_terms(ws, SearchCodeTerms(queries=queries, regex=use_regex), LIMIT)
    alone = [search.search_code(ws, SearchCode(query=q, regex=use_regex), LIMIT) for q in queries]
    assert _parts(outcome.output, len(queries)) == [o.output for o in alone]
    assert outcome.error is None and outcome.path == "."
    # the same for a path that is one file
    outcome = search.search_code_terms(ws, SearchCodeTerms(queries=["hit", "x"], path="many.txt"), LIMIT)
    assert _parts(outcome.output, 2) == [search.search_code(ws, SearchCode(query=q, path="many.txt"), LIMIT).output
                                         for q in ("hit", "x")]


def test_search_code_terms_shares_one_budget_and_names_the_first_query_stopped(ws: Workspace, tree: Tree) -> None:
    for i in range(5):
        (tree.root / f"f{i}.txt").write_text("hit\nmiss\n")
    ticks = iter(range(100))
    outcome = search.search_code_terms(ws, SearchCodeTerms(queries=["hit", "miss"]), LIMIT, budget_s=3,
                                       clock=lambda: float(next(ticks)))
    stopped = "[… search stopped at f2.txt: the 3 s time budget ran out; the matches above are partial]"
    assert _parts(outcome.output, 2) == ["\n".join(["f0.txt:1: hit", "f1.txt:1: hit", stopped]),
                                         "\n".join(["f0.txt:2: miss", "f1.txt:2: miss", stopped])]
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-016"
    assert outcome.error.message.startswith("search_code for 'hit' in . ran out of its 3 s time budget at f2.txt")


def test_search_code_terms_refuses_a_bad_regex_among_its_queries(ws: Workspace, project: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        search.search_code_terms(ws, SearchCodeTerms(queries=["find_me", "(unclosed"], regex=True), LIMIT)
    assert info.value.code == "ACODE-SBX-007"
