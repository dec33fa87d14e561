"""baseline_workspace and diff_workspace on real git repositories and real directory trees.

A git workspace's baseline must leave everything the user sees alone (branch, HEAD, the
index file's bytes and mtime, the stash, ``git status``) and must not run anything a
hostile ``.git/config`` or ``.gitattributes`` names; a plain directory's baseline is a
content manifest in acode's home. Diffs are compared exactly.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.sandbox.dispatch import ToolCall
from actors.sandbox.journal import Journal
from actors.sandbox.tools.baseline import Baselines
from actors.sandbox.tools.terminal import Terminal
from actors.sandbox.workspace import manifest
from protocol import codec
from protocol.messages import RunTool, ToolDone
from protocol.plans.results import ToolResult
from tests.actors.sandbox.conftest import CANARY
from tests.actors.sandbox.journal_actor import MemoryJournal
from tests.harness import Harness

_GIT_ENV = {"PATH": os.environ["PATH"], "HOME": os.devnull, "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com",
            "GIT_COMMITTER_NAME": "User", "GIT_COMMITTER_EMAIL": "user@example.com", "LC_ALL": "C"}
_HEADER = re.compile(r"baseline: (git commit [0-9a-f]{12} on refs/acode/sessions/s\d/base|content manifest in \S+), "
                     r"\d+ files?(?: \(\d+ kept as hash only: over 1 MB, or past the store's cap\))?, "
                     r"recorded \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def git(root: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=root, env=_GIT_ENV, capture_output=True, text=True,
                          check=check).stdout


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def repo(ws: Path) -> Path:
    git(ws, "init", "-q", "-b", "main")
    return ws


@pytest.fixture
def baselines(tmp_path: Path) -> Baselines:
    return Baselines(tmp_path / "home" / "run" / "baselines")


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    t = Terminal()
    yield t
    t.kill_all()


class Tools:
    """Calls the two tools through the dispatcher, as the sandbox actor does."""

    def __init__(self, workspace: Path, baselines: Baselines, terminal: Terminal):
        self.workspace, self.baselines, self.terminal = workspace, baselines, terminal

    def call(self, tool: str, session: str = "s1", limit: int = 64_000, **arguments: Any) -> ToolResult:
        request = RunTool(key="k", session_id=session, workspace=str(self.workspace), tool=tool, arguments=arguments,
                          output_limit_bytes=limit)
        with ToolCall(request) as call:
            return call.run(self.terminal, self.baselines)

    def baseline(self, session: str = "s1") -> str:
        result = self.call("baseline_workspace", session)
        assert result.ok, result.error
        assert result.risk == "read"
        return result.output

    def diff(self, session: str = "s1", **arguments: Any) -> str:
        result = self.call("diff_workspace", session, **arguments)
        assert result.ok, result.error
        assert result.risk == "read"
        return result.output

    def patch(self, session: str = "s1", **arguments: Any) -> str:
        """The diff without its first line (which names the baseline's commit and time)."""
        first, rest = self.diff(session, **arguments).split("\n", 1)
        assert _HEADER.fullmatch(first), first
        return rest


@pytest.fixture
def tools(ws: Path, baselines: Baselines, terminal: Terminal) -> Tools:
    return Tools(ws, baselines, terminal)


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def _commit(repo: Path, files: dict[str, str | bytes]) -> None:
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "setup")


# -- git: nothing the user sees changes ----------------------------------------------------------


def _user_state(repo: Path) -> dict[str, Any]:
    index = repo / ".git" / "index"
    refs = [r for r in git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
            if not r.startswith("refs/acode/")]
    return {"branch": git(repo, "symbolic-ref", "HEAD"), "head": git(repo, "rev-parse", "HEAD"),
            "index": index.read_bytes(), "index_mtime": index.stat().st_mtime_ns, "refs": refs,
            "stash": git(repo, "stash", "list"), "status": git(repo, "status", "--porcelain", "--untracked=all"),
            "files": {p.relative_to(repo).as_posix(): p.read_bytes() for p in sorted(repo.rglob("*"))
                      if p.is_file() and ".git" not in p.parts}}


def test_baseline_and_diff_leave_branch_head_index_stash_status_and_files_untouched(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "one\n", "b.py": "two\n"})
    (repo / "a.py").write_text("stashed\n")
    git(repo, "stash", "-q")
    _write(repo, {"a.py": "staged\n"})
    git(repo, "add", "a.py")
    _write(repo, {"b.py": "unstaged\n", "new.txt": "untracked\n"})
    git(repo, "status")  # let git refresh the index's stat data now, not during the test
    before = _user_state(repo)

    assert tools.baseline().startswith("baseline recorded: git commit ")
    (repo / "b.py").write_text("changed after the baseline\n")
    before["files"]["b.py"] = b"changed after the baseline\n"
    before["status"] = git(repo, "status", "--porcelain", "--untracked=all")
    before["index"] = (repo / ".git" / "index").read_bytes()
    before["index_mtime"] = (repo / ".git" / "index").stat().st_mtime_ns
    assert "+changed after the baseline" in tools.diff()

    assert _user_state(repo) == before
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/acode").split() == ["refs/acode/sessions/s1/base"]
    # the baseline holds the work tree as it was: staged and unstaged changes and the untracked file
    assert git(repo, "show", "refs/acode/sessions/s1/base:a.py") == "staged\n"
    assert git(repo, "show", "refs/acode/sessions/s1/base:new.txt") == "untracked\n"
    assert git(repo, "log", "--format=%an <%ae>", "refs/acode/sessions/s1/base") == "acode <acode@localhost>\n"


# -- git: the exact diff ------------------------------------------------------------------------


def test_the_git_diff_shows_every_kind_of_change_exactly(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "one\ntwo\nthree\n", "gone.txt": "bye\n", "old_name.txt": "rename me\n" * 10,
                   "logo.bin": b"\x00\x01\x02\x03", "run.sh": "echo hi\n", ".gitignore": "*.log\nbuild/\n"})
    os.symlink("a.py", repo / "link")
    git(repo, "add", "link")
    git(repo, "commit", "-qm", "link")
    _write(repo, {"notes.txt": "draft\n", "debug.log": "ignored\n"})
    tools.baseline()

    _write(repo, {"a.py": "one\nTWO\nthree\n", "logo.bin": b"\x00\x01\x02\x04", "pkg/sub/mod.py": "x = 1\n",
                  "notes.txt": "draft\nmore\n", "debug.log": "still ignored\n", "build/out.o": "ignored too\n"})
    (repo / "gone.txt").unlink()
    (repo / "old_name.txt").rename(repo / "new_name.txt")
    (repo / "link").unlink()
    os.symlink("notes.txt", repo / "link")
    (repo / "run.sh").chmod(0o755)

    assert tools.patch() == """\
8 files changed: 1 added, 5 modified, 1 deleted, 1 renamed
M  a.py
D  gone.txt
M  link
M  logo.bin
R  old_name.txt -> new_name.txt
M  notes.txt
A  pkg/sub/mod.py
M  run.sh

diff --git a/a.py b/a.py
index 4cb29ea..ddc897f 100644
--- a/a.py
+++ b/a.py
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index b023018..0000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/link b/link
index 8ce4f79..d669de9 120000
--- a/link
+++ b/link
@@ -1 +1 @@
-a.py
\\ No newline at end of file
+notes.txt
\\ No newline at end of file
diff --git a/logo.bin b/logo.bin
index eaf36c1..f75c32a 100644
Binary files a/logo.bin and b/logo.bin differ
diff --git a/old_name.txt b/new_name.txt
similarity index 100%
rename from old_name.txt
rename to new_name.txt
diff --git a/notes.txt b/notes.txt
index f3d4377..ae19b2f 100644
--- a/notes.txt
+++ b/notes.txt
@@ -1 +1,2 @@
 draft
+more
diff --git a/pkg/sub/mod.py b/pkg/sub/mod.py
new file mode 100644
index 0000000..7d4290a
--- /dev/null
+++ b/pkg/sub/mod.py
@@ -0,0 +1 @@
+x = 1
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
"""


def test_a_symlink_out_of_the_workspace_is_recorded_as_a_link_never_followed(
        repo: Path, tools: Tools, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(CANARY)
    _commit(repo, {"a.py": "x\n"})
    tools.baseline()
    os.symlink(tmp_path / "secret.txt", repo / "leak")
    os.symlink("../secret.txt", repo / "leak2")
    out = tools.diff()
    assert CANARY not in out
    assert f"+{tmp_path / 'secret.txt'}\n\\ No newline at end of file" in out
    assert "+../secret.txt\n\\ No newline at end of file" in out


def test_ignored_files_are_left_out_and_untracked_ones_are_in(repo: Path, tools: Tools) -> None:
    _commit(repo, {".gitignore": "*.log\ncache/\n", "sub/.gitignore": "!keep.log\n"})
    _write(repo, {"app.log": "a\n", "cache/x": "b\n", "sub/keep.log": "kept\n", "fresh.txt": "new\n"})
    assert tools.baseline().endswith(", 4 files")  # .gitignore, sub/.gitignore, sub/keep.log, fresh.txt
    _write(repo, {"app.log": "changed\n", "cache/y": "c\n", "sub/keep.log": "kept!\n", "fresh.txt": "newer\n"})
    assert tools.patch().split("\n\n")[0] == "2 files changed: 2 modified\nM  fresh.txt\nM  sub/keep.log"


def test_a_repository_with_no_commit_yet_gets_a_baseline_and_stays_unborn(repo: Path, tools: Tools) -> None:
    _write(repo, {"a.py": "print(1)\n"})
    assert tools.baseline().endswith(", 1 file")
    _write(repo, {"a.py": "print(2)\n"})
    assert "-print(1)\n+print(2)\n" in tools.patch()
    assert git(repo, "rev-parse", "--verify", "--quiet", "HEAD", check=False) == ""
    assert not (repo / ".git" / "index").exists()
    assert git(repo, "status", "--porcelain") == "?? a.py\n"


def test_an_empty_repository_diffs_to_no_changes(repo: Path, tools: Tools) -> None:
    assert tools.baseline().endswith(", 0 files")
    assert tools.patch() == "no changes since the baseline\n"


def test_the_first_baseline_of_a_session_stands(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "before\n"})
    first = tools.baseline()
    commit = git(repo, "rev-parse", "refs/acode/sessions/s1/base")
    _write(repo, {"a.py": "after\n"})

    again = tools.baseline()
    assert again.startswith("baseline already recorded at ") and again.endswith("; not moved")
    assert first.split(": ", 1)[1] in again
    assert git(repo, "rev-parse", "refs/acode/sessions/s1/base") == commit
    # the record, not the ref, is the baseline: a model moving the ref moves nothing
    git(repo, "add", "a.py")
    git(repo, "commit", "-qm", "after")
    git(repo, "update-ref", "refs/acode/sessions/s1/base", "HEAD")
    assert "-before\n+after\n" in tools.patch()
    # another session has a baseline of its own
    assert tools.baseline("s2").startswith("baseline recorded: ")
    assert tools.patch("s2") == "no changes since the baseline\n"


def test_two_baselines_at_once_record_one(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "x\n"})
    outputs: list[str] = []
    threads = [threading.Thread(target=lambda: outputs.append(tools.baseline())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.split(" ")[1] for o in outputs) == ["already", "already", "already", "recorded:"]


def test_a_subdirectory_of_a_repository_gets_a_manifest_and_the_repository_no_ref(
        repo: Path, baselines: Baselines, terminal: Terminal) -> None:
    _commit(repo, {"sub/a.py": "x\n"})
    sub = Tools(repo / "sub", baselines, terminal)
    assert sub.baseline().startswith("baseline recorded: content manifest in ")
    assert git(repo, "for-each-ref", "refs/acode") == ""


def test_a_diff_after_the_repository_is_gone_says_why(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "x\n"})
    tools.baseline()
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    result = tools.call("diff_workspace")
    assert result.error is not None and result.error.code == "ACODE-SBX-018"
    assert result.error.message.startswith(f"the workspace {repo} is no longer a git work tree; its baseline (")


# -- git: a hostile repository ------------------------------------------------------------------


def test_a_hostile_repository_config_never_runs_code(repo: Path, tools: Tools, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {canary}\ncat\n")
    evil.chmod(0o755)
    _commit(repo, {"a.py": "one\ntwo\n", "data.txt": "text\n"})
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("reference-transaction", "post-index-change", "pre-commit", "post-commit", "post-checkout"):
        (hooks / hook).symlink_to(evil)
        (repo / ".git" / "hooks" / hook).symlink_to(evil)
    hostile = f"""
[core]
    fsmonitor = {evil}
    hooksPath = {hooks}
    pager = {evil}
    sshCommand = {evil}
    worktree = {tmp_path}
    bare = true
    attributesFile = {tmp_path / 'attributes'}
[filter "x"]
    clean = {evil}
    smudge = {evil}
    process = {evil}
    required = true
[diff]
    external = {evil}
    noprefix = true
[diff "x"]
    textconv = {evil}
    command = {evil}
[gpg]
    program = {evil}
[commit]
    gpgSign = true
[pager]
    diff = {evil}
"""
    with open(repo / ".git" / "config", "a") as f:
        f.write(hostile)
    (repo / ".gitattributes").write_text("* filter=x diff=x\n*.txt -diff\n")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=x diff=x\n")

    assert tools.baseline().startswith("baseline recorded: git commit ")
    _write(repo, {"a.py": "one\nTWO\n", "data.txt": "changed text\n"})
    patch = tools.patch()
    assert not canary.exists()
    # attributes cannot hide a change as "binary", and noprefix cannot drop a/ and b/
    assert "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n" in patch
    assert "--- a/data.txt\n+++ b/data.txt\n@@ -1 +1 @@\n-text\n+changed text\n" in patch
    # the config is live: git run plainly executes it (which is why acode never runs it plainly)
    git(repo, "--work-tree=.", "status", check=False)
    assert canary.exists()


# -- manifest (not a git work tree) -------------------------------------------------------------


def test_the_manifest_diff_shows_every_kind_of_change_exactly(ws: Path, tools: Tools, baselines: Baselines,
                                                              tmp_path: Path) -> None:
    _write(ws, {"a.py": "one\ntwo\nthree\n", "gone.txt": "bye\n", "old_name.txt": "rename me\n" * 10,
                "logo.bin": b"\x00\x01\x02\x03", "run.sh": "echo hi\n", ".gitignore": "*.log\n",
                "debug.log": "ignored\n", ".git/HEAD": "not a repository\n", "kind": "a file\n"})
    os.symlink("a.py", ws / "link")
    (tmp_path / "outside.txt").write_text(CANARY)
    os.symlink(tmp_path / "outside.txt", ws / "out")
    out = tools.baseline()
    store = baselines.root / "s1"
    assert out == f"baseline recorded: content manifest in {store}, 9 files"
    assert sorted(p.name for p in store.iterdir()) == ["baseline.json", "manifest.msgpack", "pack"]

    _write(ws, {"a.py": "one\nTWO\nthree\n", "logo.bin": b"\x00\x01\x02\x04", "pkg/sub/mod.py": "x = 1",
                "debug.log": "still ignored\n"})
    (ws / "gone.txt").unlink()
    (ws / "old_name.txt").rename(ws / "new_name.txt")
    (ws / "link").unlink()
    os.symlink("notes.txt", ws / "link")
    (ws / "run.sh").chmod(0o755)
    (ws / "kind").unlink()
    os.symlink("a.py", ws / "kind")

    patch = tools.patch()
    assert CANARY not in patch
    assert patch == """\
8 files changed: 1 added, 4 modified, 1 deleted, 1 renamed, 1 type changed
M  a.py
D  gone.txt
T  kind
M  link
M  logo.bin
R  old_name.txt -> new_name.txt
A  pkg/sub/mod.py
M  run.sh

diff --git a/a.py b/a.py
--- a/a.py
+++ b/a.py
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/kind b/kind
deleted file mode 100644
--- a/kind
+++ /dev/null
@@ -1 +0,0 @@
-a file
diff --git a/kind b/kind
new file mode 120000
--- /dev/null
+++ b/kind
@@ -0,0 +1 @@
+a.py
\\ No newline at end of file
diff --git a/link b/link
--- a/link
+++ b/link
@@ -1 +1 @@
-a.py
\\ No newline at end of file
+notes.txt
\\ No newline at end of file
diff --git a/logo.bin b/logo.bin
Binary files a/logo.bin and b/logo.bin differ
diff --git a/old_name.txt b/new_name.txt
similarity index 100%
rename from old_name.txt
rename to new_name.txt
diff --git a/pkg/sub/mod.py b/pkg/sub/mod.py
new file mode 100644
--- /dev/null
+++ b/pkg/sub/mod.py
@@ -0,0 +1 @@
+x = 1
\\ No newline at end of file
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
"""


def test_manifest_caps_keep_big_files_as_hash_only_and_say_so(ws: Path, tools: Tools,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    big = "x" * (manifest.MAX_STORED_FILE_BYTES + 1)
    _write(ws, {"big.txt": big, "a.txt": "a" * 600, "b.txt": "b" * 600})
    monkeypatch.setattr(manifest, "MAX_STORED_TOTAL_BYTES", 1000)  # a.txt fits, b.txt does not
    assert tools.baseline().endswith(", 3 files (2 kept as hash only: over 1 MB, or past the store's cap)")
    _write(ws, {"big.txt": big + "y", "a.txt": "A", "b.txt": "B"})
    patch = tools.patch()
    assert "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-" + "a" * 600 in patch
    assert ("diff --git a/b.txt b/b.txt\n[content not shown: the baseline kept only the hash of this 600-byte file "
            "(the baseline store was full)]\n") in patch
    assert (f"diff --git a/big.txt b/big.txt\n[content not shown: the baseline kept only the hash of this "
            f"{len(big)}-byte file (files over 1 MB are not stored)]\n") in patch


def test_the_manifest_packs_each_content_once_and_a_damaged_pack_is_said_not_shown(
        ws: Path, tools: Tools, baselines: Baselines) -> None:
    _write(ws, {"a.txt": "same\n", "b.txt": "same\n", "c.txt": "other\n"})
    tools.baseline()
    store = baselines.root / "s1"
    assert (store / "pack").read_bytes() in (b"same\nother\n", b"other\nsame\n")  # "same" once
    assert (store / "pack").stat().st_mode & 0o777 == 0o600
    _write(ws, {"a.txt": "A\n", "b.txt": "B\n", "c.txt": "C\n"})
    patch = tools.patch()
    assert "@@ -1 +1 @@\n-same\n+A\n" in patch and "-same\n+B\n" in patch and "-other\n+C\n" in patch

    (store / "pack").write_bytes(b"SAME\nother\n" if (store / "pack").read_bytes().startswith(b"same") else
                                 b"other\nSAME\n")  # same size, other bytes: the hash tells
    patch = tools.patch()
    assert patch.count("[content not shown: the baseline's copy of this file is missing from acode's store]") == 2
    assert "-other\n+C\n" in patch


def test_a_manifest_store_made_before_the_pack_still_diffs(ws: Path, tools: Tools, baselines: Baselines) -> None:
    """A store of one file per content (``objects/<sha256>``, items without an offset)."""
    _write(ws, {"a.txt": "one\n"})
    tools.baseline()
    store = baselines.root / "s1"
    digest = hashlib.sha256(b"one\n").hexdigest()
    (store / "objects").mkdir()
    (store / "objects" / digest).write_bytes(b"one\n")
    (store / "pack").unlink()
    legacy = {b"a.txt": ["100644", 4, digest, True]}  # the four fields of the old item
    (store / "manifest.msgpack").write_bytes(msgspec.msgpack.encode(legacy))
    _write(ws, {"a.txt": "two\n"})
    assert "@@ -1 +1 @@\n-one\n+two\n" in tools.patch()


# -- both kinds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["git", "manifest"])
def test_a_long_diff_is_cut_at_max_bytes_with_a_marker_and_a_whole_header(ws: Path, tools: Tools, kind: str) -> None:
    if kind == "git":
        git(ws, "init", "-q")
    _write(ws, {f"f{i}.txt": "old line\n" * 200 for i in range(3)})
    tools.baseline()
    _write(ws, {f"f{i}.txt": "new line\n" * 200 for i in range(3)})
    full = tools.diff(max_bytes=1_000_000)
    cut = tools.diff(max_bytes=2048)
    header = "3 files changed: 3 modified\nM  f0.txt\nM  f1.txt\nM  f2.txt\n\n"
    assert header in cut and header in full
    body, marker = cut.rsplit("\n", 1)
    assert full.startswith(body)
    assert len(body.encode()) == 2048
    more = len(full.encode()) - 2048
    assert marker == f"[… diff truncated: {more} more bytes not shown; the file list above is complete]"
    # the default is the request's output limit
    default = tools.call("diff_workspace", limit=4096).output
    assert len(default.rsplit("\n", 1)[0].encode()) == 4096


@pytest.mark.parametrize("kind", ["git", "manifest"])
def test_a_diff_without_a_baseline_is_an_error_with_its_code(ws: Path, tools: Tools, kind: str) -> None:
    if kind == "git":
        git(ws, "init", "-q")
    result = tools.call("diff_workspace", "s9")
    assert (result.ok, result.risk) == (False, "read")
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "ACODE-SBX-017", "session s9 has no baseline to diff against; call baseline_workspace when the session "
                         "begins (before anything changes the workspace)")


def test_a_repeated_key_answers_the_journaled_diff(ws: Path, baselines: Baselines, terminal: Terminal) -> None:
    memory = MemoryJournal()
    journal = Journal(memory.answer, terminal, baselines=baselines)

    def run(tool: str, key: str) -> ToolResult:
        return journal.run(RunTool(key=key, session_id="s1", workspace=str(ws), tool=tool))

    _write(ws, {"a.txt": "1\n"})
    assert not run("baseline_workspace", "b1").replayed
    _write(ws, {"a.txt": "2\n"})
    first = run("diff_workspace", "d1")
    _write(ws, {"a.txt": "3\n"})
    again = run("diff_workspace", "d1")
    assert again.replayed and again.output == first.output and "+2\n" in first.output
    assert "+3\n" in run("diff_workspace", "d2").output
    assert [e.tool for e in memory.events] == ["baseline_workspace", "diff_workspace", "diff_workspace"]


def test_the_model_is_not_told_of_the_internal_tools(ws: Path, tools: Tools) -> None:
    result = tools.call("drop_tables")
    assert result.error is not None and result.error.code == "ACODE-SBX-001"
    assert "baseline" not in result.error.message and "diff_workspace" not in result.error.message
    bad = tools.call("diff_workspace", max_bytes=10)
    assert bad.error is not None and bad.error.code == "ACODE-SBX-007"


# -- through the sandbox actor ------------------------------------------------------------------


def test_the_sandbox_actor_serves_both_tools_over_zeromq(harness: Harness, home: Path) -> None:
    harness.start("broker")
    harness.start("persistence", module="tests.actors.sandbox.journal_actor")
    harness.start("sandbox")
    workspace = home / "ws"
    _write(workspace, {"a.py": "print(1)\n"})
    client = harness.client()

    def call(tool: str, key: str) -> ToolResult:
        reply = client.call("sandbox", RunTool(key=key, session_id="s1", workspace=str(workspace), tool=tool),
                            timeout=15, decoder=codec.SANDBOX_REPLY)
        assert isinstance(reply, ToolDone)
        return reply.result

    store = home / "run" / "baselines" / "s1"
    assert call("baseline_workspace", "b1").output == f"baseline recorded: content manifest in {store}, 1 file"
    assert (store / "baseline.json").is_file()
    _write(workspace, {"a.py": "print(2)\n"})
    diff = call("diff_workspace", "d1")
    assert (diff.ok, diff.risk, diff.replayed) == (True, "read", False)
    assert diff.output.endswith("1 file changed: 1 modified\nM  a.py\n\ndiff --git a/a.py b/a.py\n--- a/a.py\n"
                                "+++ b/a.py\n@@ -1 +1 @@\n-print(1)\n+print(2)\n")
    again = call("diff_workspace", "d1")
    assert again.replayed and again.output == diff.output
    assert call("baseline_workspace", "b2").output.startswith("baseline already recorded at ")


@pytest.mark.parametrize("kind", ["git", "manifest"])
def test_file_names_that_are_not_utf8_are_recorded_and_shown_replaced(ws: Path, tools: Tools, kind: str) -> None:
    if kind == "git":
        git(ws, "init", "-q")
    name = os.fsdecode(b"caf\xe9.txt")
    (ws / name).write_text("before\n")
    tools.baseline()
    (ws / name).write_text("after\n")
    assert "M  caf\ufffd.txt\n" in tools.patch()
    assert "-before\n+after\n" in tools.patch()


def test_a_sha256_repository_gets_a_sha256_baseline(tmp_path: Path, baselines: Baselines, terminal: Terminal) -> None:
    repo = tmp_path / "r256"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    _commit(repo, {"a.py": "one\n"})
    tools = Tools(repo, baselines, terminal)
    tools.baseline()
    assert len(git(repo, "rev-parse", "refs/acode/sessions/s1/base").strip()) == 64
    _write(repo, {"a.py": "two\n"})
    assert "-one\n+two\n" in tools.patch()


def test_a_submodule_is_kept_as_its_commit_and_its_files_stay_out(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "x\n"})
    commit = git(repo, "rev-parse", "HEAD").strip()
    (repo / "sub").mkdir()
    (repo / "sub" / "inner.txt").write_text("not ours\n")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},sub")
    assert tools.baseline().endswith(", 1 file")
    assert git(repo, "ls-tree", "refs/acode/sessions/s1/base", "sub") == f"160000 commit {commit}\tsub\n"
    (repo / "sub" / "inner.txt").write_text("changed\n")
    assert tools.patch() == "no changes since the baseline\n"


def test_a_diff_of_another_workspace_is_refused(ws: Path, tools: Tools, baselines: Baselines, terminal: Terminal,
                                                tmp_path: Path) -> None:
    tools.baseline()
    other = tmp_path / "other"
    other.mkdir()
    result = Tools(other, baselines, terminal).call("diff_workspace")
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "ACODE-SBX-017", f"session s1's baseline is of the workspace {ws}, not {other}; diff the workspace the "
                         "session runs in")


def test_empty_files_are_not_taken_for_renames(ws: Path, tools: Tools) -> None:
    _write(ws, {"a/__init__.py": ""})
    tools.baseline()
    (ws / "a" / "__init__.py").unlink()
    _write(ws, {"b/__init__.py": ""})
    assert tools.patch() == ("2 files changed: 1 added, 1 deleted\nD  a/__init__.py\nA  b/__init__.py\n\n"
                             "diff --git a/a/__init__.py b/a/__init__.py\ndeleted file mode 100644\n"
                             "diff --git a/b/__init__.py b/b/__init__.py\nnew file mode 100644\n")


def test_a_ref_left_by_an_interrupted_baseline_is_adopted(repo: Path, tools: Tools) -> None:
    _commit(repo, {"a.py": "committed\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "refs/acode/sessions/s1/base", head)  # made, then the sandbox died before its record
    _write(repo, {"a.py": "on disk\n"})
    assert tools.baseline().startswith(f"baseline recorded: git commit {head[:12]} on refs/acode/sessions/s1/base")
    assert "-committed\n+on disk\n" in tools.patch()


def test_a_session_id_that_cannot_name_a_ref_is_refused(ws: Path, tools: Tools) -> None:
    result = tools.call("baseline_workspace", "../../heads/main")
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "ACODE-SBX-007", "session id '../../heads/main' cannot name a baseline (letters, digits, '-' and '_' only)")


# -- ignore rules edited during the session cannot hide a change ----------------------------------


def _names(patch: str) -> list[str]:
    """The ``X  path`` lines of a diff's header."""
    return [line for line in patch.split("\n\n")[0].splitlines() if re.fullmatch(r"[AMDRT]  .*", line)]


def test_git_ignore_rules_added_in_the_session_hide_no_new_or_changed_file(repo: Path, tools: Tools) -> None:
    _commit(repo, {".gitignore": "build/\n", "app.py": "print(1)\n", "notes.txt": "one\n"})
    _write(repo, {"build/out.bin": "old build\n"})  # ignored at the baseline: it stays out of every diff
    tools.baseline()
    # what a model could do with run_terminal: new files, then rules that ignore them
    _write(repo, {"backdoor.py": "import os  # new\n", "exfil.txt": "stolen\n", "hidden/deep.py": "x = 1\n",
                  "app.py": "print(2)\n", "build/out.bin": "new build\n", "also.txt": "later\n"})
    _write(repo, {".git/info/exclude": "backdoor.py\n", ".gitignore": "build/\nhidden/\nalso.txt\n",
                  "excludes": "exfil.txt\napp.py\n"})
    git(repo, "config", "core.excludesFile", str(repo / "excludes"))
    git(repo, "rm", "-q", "--cached", "app.py")  # untracked now, and ignored by the excludes file
    assert git(repo, "status", "--porcelain") == " M .gitignore\nD  app.py\n?? excludes\n"  # git hides the rest
    patch = tools.patch()
    assert patch.startswith("ignore rules changed since the baseline: .git/config, .git/info/exclude, "
                            "core.excludesFile; the files they would hide are listed all the same\n"), patch
    assert _names(patch) == ["M  .gitignore", "A  also.txt", "M  app.py", "A  backdoor.py", "A  excludes",
                             "A  exfil.txt", "A  hidden/deep.py"]
    assert "+import os  # new" in patch and "-print(1)\n+print(2)" in patch and "+stolen" in patch
    assert "build/out.bin" not in patch


def test_git_a_file_unignored_in_the_session_shows_and_an_untouched_diff_has_no_note(
        repo: Path, tools: Tools) -> None:
    _commit(repo, {".gitignore": "*.log\n", "a.py": "a\n"})
    _write(repo, {"old.log": "was ignored\n"})
    tools.baseline()
    assert tools.patch() == "no changes since the baseline\n"
    _write(repo, {".gitignore": "", "new.log": "made now\n"})
    assert _names(tools.patch()) == ["M  .gitignore", "A  new.log", "A  old.log"]  # git status shows both too


def test_manifest_ignore_rules_added_in_the_session_hide_no_new_or_changed_file(ws: Path, tools: Tools) -> None:
    _write(ws, {".gitignore": "cache/\n", "main.py": "print(1)\n", "cache/blob": "old\n"})
    tools.baseline()
    _write(ws, {"backdoor.py": "evil = True\n", "main.py": "print(2)\n", "cache/blob": "new\n",
                "sub/.gitignore": "*\n", "sub/inner.py": "y = 2\n"})
    _write(ws, {".gitignore": "cache/\nbackdoor.py\nmain.py\n"})
    patch = tools.patch()
    assert _names(patch) == ["M  .gitignore", "A  backdoor.py", "M  main.py", "A  sub/.gitignore", "A  sub/inner.py"]
    assert "+evil = True" in patch and "-print(1)\n+print(2)" in patch and "cache/blob" not in patch


def test_manifest_a_first_gitignore_added_in_the_session_hides_nothing_not_even_itself(ws: Path,
                                                                                      tools: Tools) -> None:
    # no rules at the baseline: the diff walks once, unless today's rules leave something out
    _write(ws, {"main.py": "print(1)\n", "lib/util.py": "u = 1\n"})
    tools.baseline()
    assert _names(tools.patch()) == []
    _write(ws, {"new.py": "n = 1\n", "main.py": "print(2)\n", "lib/.gitignore": "*\n", "lib/more.py": "m = 1\n"})
    _write(ws, {".gitignore": "*\n"})
    patch = tools.patch()
    assert _names(patch) == ["A  .gitignore", "A  lib/.gitignore", "A  lib/more.py", "M  main.py", "A  new.py"]
    assert "+n = 1" in patch and "-print(1)\n+print(2)" in patch and "+m = 1" in patch


@pytest.mark.parametrize("kind", ["git", "manifest"])
def test_the_diff_lists_its_changed_files_as_data_too_never_a_directory(ws: Path, tools: Tools, kind: str) -> None:
    if kind == "git":
        git(ws, "init", "-q", "-b", "main")
    _write(ws, {"gone.txt": "x\n", "data.txt": "keep me\n", "run.sh": "echo\n", "move/me.txt": "moved\n"})
    (ws / "run.sh").chmod(0o644)
    tools.baseline()
    (ws / "gone.txt").unlink()
    (ws / "data.txt").write_text("")  # truncated
    (ws / "run.sh").chmod(0o755)  # its mode alone
    (ws / "move" / "me.txt").rename(ws / "me.txt")
    (ws / "move").rmdir()
    (ws / "newdir" / "deep").mkdir(parents=True)  # a directory alone is no change
    (ws / "newdir" / "deep" / "f.txt").write_text("new\n")
    (ws / "caf\xe9-\udcff.txt").write_bytes(b"not UTF-8 in its name\n")

    result = tools.call("diff_workspace")

    assert result.ok and result.changes is not None
    listed = [(c.status, c.path, c.old) for c in result.changes.files]
    assert listed == [("added", "café-\ufffd.txt", ""), ("modified", "data.txt", ""), ("deleted", "gone.txt", ""),
                      ("renamed", "me.txt", "move/me.txt"), ("added", "newdir/deep/f.txt", ""),
                      ("modified", "run.sh", "")]
    assert result.changes.total == 6
    assert codec.encode(result)  # every path encodes (U+FFFD for the byte that is not UTF-8)
