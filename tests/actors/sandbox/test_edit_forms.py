"""modify_file as small models call it (issue 25), on real files through the sandbox's own decoder.

Arguments go through :func:`protocol.calls.tools.decode_args`, as the sandbox's dispatcher
decodes them, so the forms a model sends instead of the documented ones are tested as
they arrive: ``content`` (a whole new text), a single top-level ``search``/``replace``
pair, other names of the pair, and ``line`` picking one of several matches.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.tools import files
from protocol.calls.tools import ModifyFile, decode_args
from protocol.errors import SandboxError
from tests.actors.sandbox.conftest import Tree

TWICE = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


def _modify(ws: Workspace, **arguments: Any) -> str:
    args = decode_args("modify_file", arguments, internal=True)
    assert isinstance(args, ModifyFile)
    return files.modify_file(ws, args).output


def _refused(ws: Workspace, **arguments: Any) -> SandboxError:
    try:
        _modify(ws, **arguments)
    except msgspec.ValidationError as exc:  # the dispatcher answers these with ACODE-SBX-007
        return SandboxError(str(exc), code="ACODE-SBX-007")
    except SandboxError as exc:
        return exc
    raise AssertionError(f"modify_file {arguments} was not refused")


def test_content_replaces_the_whole_existing_file_and_says_so(ws: Workspace, tree: Tree) -> None:
    # the call Qwen2.5-Coder-1.5B made, refused three times before this
    (tree.root / "solution.py").write_text("def add(a, b):\n    pass\n")
    os.chmod(tree.root / "solution.py", 0o640)
    output = _modify(ws, path="solution.py", content="def add(a, b):\n    return a + b\n")
    assert output == ("modify_file with content replaced the whole file: wrote 32 bytes to solution.py (for a whole "
                      "new text, write_file is the tool)")
    assert (tree.root / "solution.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (tree.root / "solution.py").stat().st_mode & 0o777 == 0o640  # a write keeps the mode


def test_content_keeps_the_files_bom_and_crlf_style(ws: Workspace, tree: Tree) -> None:
    (tree.root / "w.txt").write_bytes(b"\xef\xbb\xbfold\r\ntext\r\n")
    _modify(ws, path="w.txt", content="new\ntext\n")
    assert (tree.root / "w.txt").read_bytes() == b"\xef\xbb\xbfnew\r\ntext\r\n"


def test_content_needs_an_existing_file_and_keeps_every_write_protection(ws: Workspace, tree: Tree) -> None:
    assert _refused(ws, path="new.py", content="x = 1\n").code == "ACODE-SBX-003"
    assert not (tree.root / "new.py").exists()
    assert _refused(ws, path=".git/config", content="x").code == "ACODE-SBX-013"
    (tree.root / "a.txt").write_text("a\n")
    os.link(tree.root / "a.txt", tree.root / "b.txt")
    assert _refused(ws, path="a.txt", content="z\n").code == "ACODE-SBX-014"
    (tree.root / "env").write_text("KEY=1\n")
    assert _refused(ws, path="env", content="KEY=[REDACTED:github-token]\n").code == "ACODE-SBX-022"
    assert (tree.root / "a.txt").read_text() == "a\n" and (tree.root / "env").read_text() == "KEY=1\n"


def test_content_with_edits_or_diff_is_refused_naming_both(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("a\n")
    error = _refused(ws, path="m.py", content="b\n", edits=[{"search": "a", "replace": "b"}])
    assert str(error) == ("modify_file of 'm.py' got content (a whole new text) and edits; to replace the whole file "
                          "send content alone (or use write_file), to change part of it send edits or diff alone "
                          "(ACODE-SBX-007)")
    assert (tree.root / "m.py").read_text() == "a\n"


@pytest.mark.parametrize("pair", [{"search": "b = 2", "replace": "b = 3"}, {"old": "b = 2", "new": "b = 3"},
                                  {"old_str": "b = 2", "new_str": "b = 3"},
                                  {"old_string": "b = 2", "new_string": "b = 3"}])
def test_one_pair_at_the_top_level_or_under_another_name_is_one_edit(ws: Workspace, tree: Tree,
                                                                    pair: dict[str, str]) -> None:
    (tree.root / "m.py").write_text("a = 1\nb = 2\n")
    assert _modify(ws, path="m.py", **pair) == "applied 1 edit to m.py"
    assert (tree.root / "m.py").read_text() == "a = 1\nb = 3\n"
    (tree.root / "m.py").write_text("a = 1\nb = 2\n")
    assert _modify(ws, path="m.py", edits=pair) == "applied 1 edit to m.py"  # one edit, not in a list
    assert (tree.root / "m.py").read_text() == "a = 1\nb = 3\n"


def test_a_pair_that_could_mean_two_things_is_not_guessed(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("a = 1\n")
    for arguments in ({"old": "a", "old_string": "a", "new": "b"},  # two searches
                      {"search": "a", "replace": "b", "diff": "@@ -1 +1 @@\n-a = 1\n+b = 1\n"},  # and a diff
                      {"search": "a", "replace": "b", "edits": [{"search": "a", "replace": "c"}]}):
        assert _refused(ws, path="m.py", **arguments).code == "ACODE-SBX-007"
    assert (tree.root / "m.py").read_text() == "a = 1\n"


def test_an_ambiguous_search_is_answered_with_each_match_and_its_neighbours(ws: Workspace, tree: Tree) -> None:
    (tree.root / "calc.py").write_text(TWICE)
    error = _refused(ws, path="calc.py", edits=[{"search": "    return a - b", "replace": "    return a + b"}])
    assert error.code == "ACODE-SBX-009"
    assert error.message.endswith(
        "matches 2 times in calc.py; it must match exactly once, so no edit was applied; add a neighbouring line to "
        "the search so it is unique, or give the edit `line`, the line number of the match you mean, or send the "
        "whole new text with write_file (the file has 6 lines); it matches at lines 2, 6:\n"
        "     1\tdef add(a, b):\n     2\t    return a - b\n     3\t\n--\n"
        "     5\tdef sub(a, b):\n     6\t    return a - b")
    assert (tree.root / "calc.py").read_text() == TWICE


def test_line_picks_the_match_at_or_nearest_it_and_a_tie_is_refused(ws: Workspace, tree: Tree) -> None:
    (tree.root / "calc.py").write_text(TWICE)
    output = _modify(ws, path="calc.py", search="    return a - b", replace="    return a + b", line=1)
    assert output == "applied 1 edit to calc.py; edit 1: the search matches 2 times; line 1 picked the match at line 2"
    assert (tree.root / "calc.py").read_text() == TWICE.replace("a - b", "a + b", 1)
    (tree.root / "calc.py").write_text(TWICE)
    _modify(ws, path="calc.py", edits=[{"search": "    return a - b", "replace": "    return a", "line": 6}])
    assert (tree.root / "calc.py").read_text() == TWICE[:-len("    return a - b\n")] + "    return a\n"
    (tree.root / "calc.py").write_text(TWICE)
    error = _refused(ws, path="calc.py", edits=[{"search": "    return a - b", "replace": "x", "line": 4}])
    assert "add a neighbouring line" in error.message and "line 4 is as near one match as another; " in error.message
    assert (tree.root / "calc.py").read_text() == TWICE


def test_a_large_file_is_not_pointed_to_write_file(ws: Workspace, tree: Tree) -> None:
    (tree.root / "big.py").write_text("x = 1\n" * 150)
    message = _refused(ws, path="big.py", search="x = 1", replace="x = 2").message
    assert "write_file" not in message and "matches 150 times" in message and "and 145 more" in message
