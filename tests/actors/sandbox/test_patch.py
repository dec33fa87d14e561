"""modify_file's unified-diff form on real files: what applies, and every refusal."""

from __future__ import annotations

import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.tools import files
from protocol.calls.tools import ModifyFile
from protocol.errors import SandboxError
from tests.actors.sandbox.conftest import CANARY, Tree

TEN = "".join(f"line {i}\n" for i in range(1, 11))


def _apply(ws: Workspace, path: str, diff: str) -> str:
    return files.modify_file(ws, ModifyFile(path=path, diff=diff)).output


def _refused(ws: Workspace, path: str, diff: str, code: str = "ACODE-SBX-009") -> str:
    with pytest.raises(SandboxError) as info:
        files.modify_file(ws, ModifyFile(path=path, diff=diff))
    assert info.value.code == code
    return info.value.message


@pytest.fixture
def ten(tree: Tree) -> Tree:
    (tree.root / "t.txt").write_text(TEN)
    return tree


# -- what applies -------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    "",
    "--- a/t.txt\n+++ b/t.txt\n",
    "--- t.txt\t2024-01-01 10:00:00.000000000 +0000\n+++ t.txt\t2024-01-02 10:00:00.000000000 +0000\n",
    "diff --git a/t.txt b/t.txt\nindex 83db48f..bf269f4 100644\n--- a/t.txt\n+++ b/t.txt\n",
    "Fix the third line.\n--- {root}/t.txt\n+++ {root}/./t.txt\n",
    '--- "a/t.txt"\n+++ "b/t.txt"\n',
])
def test_a_hunk_applies_with_or_without_headers_naming_the_file(ws: Workspace, ten: Tree, headers: str) -> None:
    diff = headers.format(root=ten.root) + "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n"
    assert _apply(ws, "t.txt", diff) == "applied 1 hunk to t.txt"
    assert (ten.root / "t.txt").read_text() == TEN.replace("line 3\n", "LINE 3\n")


def test_hunks_apply_where_their_context_is_when_the_line_numbers_are_off(ws: Workspace, ten: Tree) -> None:
    diff = ("@@ -5,2 +5,2 @@\n line 1\n-line 2\n+LINE 2\n"      # stated 5, really at 1
            "@@ -11,2 +11,3 @@\n line 7\n+line 7.5\n line 8\n")  # the offset carries over: found at 7
    assert _apply(ws, "t.txt", diff) == "applied 2 hunks to t.txt"
    expected = TEN.replace("line 2\n", "LINE 2\n").replace("line 7\n", "line 7\nline 7.5\n")
    assert (ten.root / "t.txt").read_text() == expected


def test_miscounted_and_bare_hunk_headers_and_blank_context_lines_still_apply(ws: Workspace, tree: Tree) -> None:
    (tree.root / "p.py").write_text("def f():\n\n    return 1\n\n\ndef g():\n    return 2\n")
    diff = ("@@ -1,2 +1,2 @@\n def f():\n\n-    return 1\n+    return 10\n"  # counts say 2 lines; there are 3
            "@@ @@\n def g():\n-    return 2\n+    return 20\n")
    assert _apply(ws, "p.py", diff) == "applied 2 hunks to p.py"
    assert (tree.root / "p.py").read_text() == "def f():\n\n    return 10\n\n\ndef g():\n    return 20\n"


def test_a_crlf_file_keeps_crlf_whatever_the_diff_uses(ws: Workspace, tree: Tree) -> None:
    (tree.root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    _apply(ws, "w.txt", "@@ -1,2 +1,3 @@\r\n one\r\n-two\r\n+2\r\n+2.5\r\n")
    _apply(ws, "w.txt", "@@ -3,2 +3,2 @@\n 2.5\n-three\n+3\n")
    assert (tree.root / "w.txt").read_bytes() == b"one\r\n2\r\n2.5\r\n3\r\n"


def test_the_final_newline_is_kept_or_changed_only_as_the_markers_say(ws: Workspace, tree: Tree) -> None:
    (tree.root / "n.txt").write_text("a\nb")  # no final newline
    _apply(ws, "n.txt", "@@ -1,2 +1,3 @@\n a\n b\n+c\n")  # silent about it: still none
    assert (tree.root / "n.txt").read_text() == "a\nb\nc"
    _apply(ws, "n.txt", "@@ -3 +3 @@\n-c\n\\ No newline at end of file\n+C\n")  # old side only: now one
    assert (tree.root / "n.txt").read_text() == "a\nb\nC\n"
    _apply(ws, "n.txt", "@@ -3 +3 @@\n-C\n+D\n\\ No newline at end of file\n")  # new side: removed again
    assert (tree.root / "n.txt").read_text() == "a\nb\nD"


def test_a_bom_is_kept(ws: Workspace, tree: Tree) -> None:
    (tree.root / "b.txt").write_bytes("\ufeffone\ntwo\n".encode())
    _apply(ws, "b.txt", "@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
    assert (tree.root / "b.txt").read_bytes() == "\ufeffone\n2\n".encode()


def test_dev_null_creates_a_new_file_with_its_parents(ws: Workspace, tree: Tree) -> None:
    diff = ("diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\nindex 0000000..e69de29\n"
            "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n")
    assert _apply(ws, "pkg/new.py", diff) == "created pkg/new.py from a diff (2 lines)"
    assert (tree.root / "pkg" / "new.py").read_text() == "a = 1\nb = 2\n"
    message = _refused(ws, "pkg/new.py", diff)
    assert message == ("the diff creates pkg/new.py ('--- /dev/null') but it already exists; make the diff against "
                       "its current text")


# -- refusals -----------------------------------------------------------------------------------


def test_a_hunk_that_does_not_apply_writes_nothing_and_quotes_the_closest_region(ws: Workspace, ten: Tree) -> None:
    diff = "@@ -1 +1 @@\n-line 1\n+LINE 1\n@@ -6,2 +6,2 @@\n line 6\n-line 77\n+line 7\n"
    message = _refused(ws, "t.txt", diff)
    assert message == ("hunk 2 of 2 ('@@ -6,2 +6,2 @@') does not apply to t.txt: its context and removed lines were "
                       "not found after hunk 1; no hunk was applied; read the file again and make the diff from its "
                       "current text; the closest region is lines 6-7:\n     6\tline 6\n     7\tline 7")
    assert (ten.root / "t.txt").read_text() == TEN


@pytest.mark.parametrize(("header", "why"), [
    ("rename from t.txt", "a rename, copy, mode change or deletion"),
    ("rename to u.txt", "a rename, copy, mode change or deletion"),
    ("copy from t.txt", "a rename, copy, mode change or deletion"),
    ("copy to u.txt", "a rename, copy, mode change or deletion"),
    ("old mode 100644", "a rename, copy, mode change or deletion"),
    ("new mode 100755", "a rename, copy, mode change or deletion"),
    ("new file mode 120000", "a rename, copy, mode change or deletion"),
    ("deleted file mode 100644", "a rename, copy, mode change or deletion"),
    ("similarity index 90%", "a rename, copy, mode change or deletion"),
    ("GIT binary patch", "a binary patch"),
    ("Binary files a/t.txt and b/t.txt differ", "a binary patch"),
])
def test_git_headers_that_do_more_than_change_text_are_refused_by_name(
        ws: Workspace, ten: Tree, header: str, why: str) -> None:
    diff = f"diff --git a/t.txt b/t.txt\n{header}\n--- a/t.txt\n+++ b/t.txt\n@@ -1 +1 @@\n-line 1\n+x\n"
    assert _refused(ws, "t.txt", diff) == (f"diff header {header!r} is refused: it asks for {why}, and modify_file "
                                           "only changes the text of 't.txt'")
    assert (ten.root / "t.txt").read_text() == TEN


@pytest.mark.parametrize("header", ["--- a/other.txt", "+++ b/src/a.py", "diff --git a/other.txt b/other.txt"])
def test_a_header_naming_another_file_is_refused(ws: Workspace, ten: Tree, header: str) -> None:
    message = _refused(ws, "t.txt", f"{header}\n@@ -1 +1 @@\n-line 1\n+x\n")
    assert message == (f"diff header {header!r} names another file than 't.txt'; modify_file applies a diff to its "
                       "own path only: send one call per file")
    assert (ten.root / "t.txt").read_text() == TEN


@pytest.mark.parametrize("header", ["--- a/../outside/canary.txt", "+++ /etc/passwd", "--- {base}/ws-evil/canary.txt",
                                    "diff --git a/../outside/f b/../outside/f"])
def test_a_header_naming_a_path_outside_is_refused_as_an_escape(ws: Workspace, ten: Tree, header: str) -> None:
    header = header.format(base=ten.base)
    message = _refused(ws, "t.txt", f"{header}\n@@ -1 +1 @@\n-line 1\n+x\n", code="ACODE-SBX-002")
    assert message.startswith(f"diff header {header!r} names a path outside the workspace;")
    assert CANARY not in message
    assert ten.canaries_intact()


@pytest.mark.parametrize(("diff", "message"), [
    ("--- a/t.txt\n+++ /dev/null\n@@ -1,10 +0,0 @@\n-line 1\n",
     "diff header '+++ /dev/null' deletes the file; modify_file does not delete files"),
    ("--- a/t.txt\n+++ b/t.txt\n@@ -1 +1 @@\n-line 1\n+x\n--- a/t.txt\n+++ b/t.txt\n@@ -2 +2 @@\n-line 2\n+y\n",
     "line 6 of the diff ('--- a/t.txt') starts a second file section; modify_file takes a diff of one file, 't.txt'"),
    ("--- a/t.txt\n+++ b/t.txt\nsome prose\n@@ -1 +1 @@\n-line 1\n+x\n",
     "line 3 of the diff ('some prose') is neither a hunk line nor a header; send a unified diff: '@@ -l,n +l,n @@' "
     "hunks of ' ', '-' and '+' lines"),
    ("--- a/t.txt\n+++ b/t.txt\n",
     "the diff for 't.txt' has no hunk ('@@ -l,n +l,n @@' followed by its lines); send the change as a unified "
     "diff, or use edits"),
    ("new file mode 100644\n--- a/t.txt\n+++ b/t.txt\n@@ -1 +1 @@\n-line 1\n+x\n",
     "the diff says 'new file mode' but does not start from '--- /dev/null'; 't.txt' is either new (--- /dev/null) "
     "or changed, not both"),
])
def test_malformed_or_destructive_diffs_are_refused_and_nothing_is_written(
        ws: Workspace, ten: Tree, diff: str, message: str) -> None:
    assert _refused(ws, "t.txt", diff) == message
    assert (ten.root / "t.txt").read_text() == TEN


def test_a_new_file_diff_with_context_lines_is_refused_and_creates_nothing(ws: Workspace, tree: Tree) -> None:
    message = _refused(ws, "dir/n.txt", "--- /dev/null\n+++ b/dir/n.txt\n@@ -1 +1,2 @@\n a\n+b\n")
    assert message == ("the diff creates 'dir/n.txt' (--- /dev/null) but a hunk has context or removed lines; a new "
                       "file's hunks only add lines")
    assert not (tree.root / "dir").exists()


def test_a_diff_for_a_missing_file_without_dev_null_is_not_found(ws: Workspace, tree: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        files.modify_file(ws, ModifyFile(path="nope.txt", diff="@@ -1 +1 @@\n-a\n+b\n"))
    assert info.value.code == "ACODE-SBX-003"
