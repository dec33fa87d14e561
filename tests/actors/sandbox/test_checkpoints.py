"""The checkpoint store against real git repositories: take, wreck with real commands, restore, resume, gc."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.sandbox.workspace.checkpoints import Checkpoints, Meta
from actors.sandbox.workspace.objects import PACK_FROM, Objects
from actors.sandbox.workspace.restore import JOURNAL, resume
from actors.sandbox.workspace.scan import Scope
from protocol.errors import NotFoundError

_GIT_ENV = {"PATH": os.environ["PATH"], "HOME": os.devnull, "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com",
            "GIT_COMMITTER_NAME": "User", "GIT_COMMITTER_EMAIL": "user@example.com", "LC_ALL": "C"}
_SCOPE = Scope(max_file_bytes=1000)  # a tiny cap, so a test's "big" file is 2 KB
_META = Meta(session="s1", stage="execute", task="t1", step="S2", call="run_terminal")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, env=_GIT_ENV, capture_output=True, text=True,
                          check=True).stdout


def state(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every file, symlink and directory under root (``.git`` included): path -> (kind and mode, content)."""
    found: dict[str, tuple[str, bytes]] = {}
    for base, dirs, files in os.walk(root):
        found.update((os.path.relpath(os.path.join(base, d), root), ("dir", b"")) for d in dirs
                     if not os.path.islink(os.path.join(base, d)))
        for name in files + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            path = os.path.join(base, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path).encode())
            else:
                found[rel] = (oct(info.st_mode & 0o100), Path(path).read_bytes())
    return found


def repo_facts(root: Path) -> dict[str, str]:
    return {"head": git(root, "rev-parse", "HEAD"), "symbolic": git(root, "symbolic-ref", "-q", "HEAD"),
            "branches": git(root, "branch", "--list"), "tags": git(root, "tag", "--list"),
            "stash": git(root, "stash", "list"), "cached": git(root, "diff", "--cached"),
            "status": git(root, "status", "--porcelain", "--ignored")}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with a commit, a branch, a tag, a stash, a staged change, an untracked
    file, an ignored file under the cap, an ignored file over it, a symlink, an executable
    (made once: git's commands are most of a test's time; each test gets a copy)."""
    root = tmp_path_factory.mktemp("template") / "w"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text("*.log\nbig.bin\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('v1')\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("src/app.py", root / "link.py")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    git(root, "branch", "feature")
    git(root, "tag", "v1")
    (root / "src" / "app.py").write_text("print('stashed')\n")
    git(root, "stash", "-q")
    (root / "src" / "app.py").write_text("print('staged')\n")
    git(root, "add", "src/app.py")
    (root / "notes.txt").write_text("untracked\n")
    (root / "debug.log").write_text("ignored, under the cap\n")
    (root / "big.bin").write_bytes(b"\1" * 2000)
    (root / "empty" / "dir").mkdir(parents=True)  # and .git/objects/info, .git/refs/tags: empty ones come back too
    return root


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "w"
    shutil.copytree(template, root, symlinks=True)
    return root


def store(tmp_path: Path, root: Path, scope: Scope = _SCOPE) -> Checkpoints:
    return Checkpoints(str(tmp_path / "home" / "checkpoints" / "w"), str(root), scope=scope)


def test_restore_after_wrecking_brings_back_every_file_ref_stash_and_the_index(tmp_path: Path, repo: Path) -> None:
    facts = repo_facts(repo)  # first: `git status` refreshes the stat data in the index of a copied repository
    before = state(repo)
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    assert taken.skipped == ["big.bin"]
    assert "notes.txt" in taken.changed and "debug.log" in taken.changed and ".git/index" in taken.changed

    git(repo, "checkout", "-q", "feature")
    git(repo, "branch", "-D", "main")
    git(repo, "tag", "-d", "v1")
    git(repo, "stash", "drop", "-q")
    subprocess.run("git reflog expire --expire=now --all && git gc -q --prune=now", shell=True, cwd=repo,
                   env=_GIT_ENV, check=True)
    (repo / "run.sh").write_text("")  # truncated, and no longer executable
    (repo / "run.sh").chmod(0o644)
    shutil.rmtree(repo / "src")
    (repo / "link.py").unlink()
    (repo / "link.py").write_text("a file now\n")
    (repo / "new.txt").write_text("made after the checkpoint\n")
    (repo / "big.bin").write_bytes(b"\2" * 3000)  # never covered: left as it is
    shutil.move(str(repo / ".git"), str(tmp_path / "moved-git"))

    done = checkpoints.restore(taken.id, journal_dir=str(tmp_path / "home" / "journal"))

    after = state(repo)
    assert after.pop("big.bin") == ("0o0", b"\2" * 3000)
    assert {path: entry for path, entry in before.items() if path != "big.bin"} == after
    assert repo_facts(repo) == facts
    assert "new.txt" in done.delete and "run.sh" in done.write
    assert not (tmp_path / "home" / "journal" / JOURNAL).exists()


def test_second_take_writes_only_changed_blobs_and_the_trees_on_their_paths(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    checkpoints.take(_META)
    for path in ("src/app.py", "notes.txt"):
        os.utime(repo / path, ns=(1, 1))  # out of the racy window: this test counts the stat cache's hits
    checkpoints.take(_META)

    (repo / "src" / "app.py").write_text("print('changed')\n")
    (repo / "notes.txt").write_text("changed too\n")
    before = checkpoints.objects.written
    taken = checkpoints.take(_META)

    assert taken.changed == ["notes.txt", "src/app.py"]
    # two blobs, the trees src/ and the root (the only trees on their paths), one commit
    assert checkpoints.objects.written - before == 5
    kinds = [git(repo, "--git-dir", checkpoints.root, "cat-file", "-t", oid).strip()
             for oid in _newest_objects(checkpoints.objects, 5)]
    assert sorted(kinds) == ["blob", "blob", "commit", "tree", "tree"]


def _newest_objects(objects: Objects, count: int) -> list[str]:
    loose = [oid for oid in objects.every() if os.path.exists(objects.path(oid))]
    return sorted(loose, key=lambda oid: os.stat(objects.path(oid)).st_mtime_ns)[-count:]


def test_unchanged_file_with_a_recent_mtime_is_hashed_again_and_a_racy_edit_is_seen(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    checkpoints.take(_META)
    (repo / "notes.txt").write_text("same size\n")
    info = os.stat(repo / "notes.txt")
    (repo / "notes.txt").write_text("SAME SIZE\n")  # same size, same mtime: only the racy rule sees it
    os.utime(repo / "notes.txt", ns=(info.st_atime_ns, info.st_mtime_ns))
    first = checkpoints.take(_META)
    (repo / "notes.txt").write_text("same size\n")
    os.utime(repo / "notes.txt", ns=(info.st_atime_ns, info.st_mtime_ns))
    second = checkpoints.take(_META)
    assert "notes.txt" in first.changed and second.changed == ["notes.txt"]


def test_git_reads_the_store(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    store_git = ["--git-dir", checkpoints.root]
    shown = git(repo, *store_git, "cat-file", "-p", taken.id)
    assert shown.startswith(f"tree {checkpoints.tree(taken.id)}\n") and '"session": "s1"' in shown
    listed = git(repo, *store_git, "ls-tree", "-r", taken.id)
    assert "120000 blob" in listed and "\tlink.py\n" in listed
    assert "100755 blob" in listed and "\trun.sh\n" in listed
    assert "\t.git%/HEAD\n" in listed and "\t.git%/index\n" in listed and "big.bin" not in listed
    assert git(repo, *store_git, "show", f"{taken.id}:src/app.py") == "print('staged')\n"
    assert git(repo, *store_git, "log", "--format=%H").split() == [taken.id]
    git(repo, *store_git, "fsck", "--strict", "--no-dangling")


def test_skip_dirs_and_exclude_are_not_entered_and_survive_a_restore(tmp_path: Path, repo: Path) -> None:
    (repo / "node_modules" / "pkg").mkdir(parents=True)
    (repo / "node_modules" / "pkg" / "index.js").write_text("module\n")
    (repo / ".git" / "build").mkdir()  # inside .git nothing is skipped
    (repo / ".git" / "build" / "x").write_text("git's own\n")
    (repo / "home").mkdir()
    (repo / "home" / "secret.db").write_text("acode's home\n")
    checkpoints = store(tmp_path, repo, Scope(max_file_bytes=1000, exclude=("home",)))
    taken = checkpoints.take(_META)
    listed = git(repo, "--git-dir", checkpoints.root, "ls-tree", "-r", "--name-only", taken.id).split()
    assert ".git%/build/x" in listed and not [p for p in listed if p.startswith(("node_modules", "home"))]

    (repo / "node_modules" / "pkg" / "index.js").write_text("rebuilt\n")
    (repo / "home" / "secret.db").write_text("changed\n")
    checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"))
    assert (repo / "node_modules" / "pkg" / "index.js").read_text() == "rebuilt\n"
    assert (repo / "home" / "secret.db").read_text() == "changed\n"


def test_leave_keeps_someone_elses_edit_and_changed_since_finds_it(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    (repo / "notes.txt").write_text("the user's edit\n")
    (repo / "src" / "app.py").write_text("the session's edit\n")
    (repo / "user.txt").write_text("the user's new file\n")
    assert checkpoints.changed_since(taken.id) == ["notes.txt", "src/app.py", "user.txt"]

    planned = checkpoints.plan_restore(taken.id, leave={"notes.txt", "user.txt"})
    assert (planned.write, planned.delete, planned.left) == (["src/app.py"], [], ["notes.txt", "user.txt"])
    checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"), leave={"notes.txt", "user.txt"})
    assert (repo / "notes.txt").read_text() == "the user's edit\n"
    assert (repo / "user.txt").read_text() == "the user's new file\n"
    assert (repo / "src" / "app.py").read_text() == "print('staged')\n"


def test_plan_restore_changes_nothing(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    shutil.rmtree(repo / "src")
    (repo / "new.txt").write_text("new\n")
    before = state(repo)
    planned = checkpoints.plan_restore(taken.id)
    assert (planned.write, planned.delete) == (["src/app.py"], ["new.txt"])
    assert state(repo) == before and not (repo / "src").exists()


class _Killed(Exception):
    """Stands for a kill -9 between two changes of a restore."""


def _kill_after(count: int) -> Callable[[str, str], None]:
    done: list[str] = []

    def step(action: str, path: str) -> None:
        done.append(path)
        if len(done) == count:
            raise _Killed(path)
    return step


@pytest.mark.parametrize("after", [1, 4, 15])
def test_resume_completes_an_interrupted_restore_and_is_idempotent(tmp_path: Path, repo: Path, after: int) -> None:
    checkpoints = store(tmp_path, repo)
    facts = repo_facts(repo)  # first: `git status` refreshes the stat data in the index of a copied repository
    before = state(repo)
    taken = checkpoints.take(_META)
    shutil.move(str(repo / ".git"), str(tmp_path / "moved-git"))
    shutil.rmtree(repo / "src")
    (repo / "extra.txt").write_text("to delete\n")
    journal = str(tmp_path / "journal")

    with pytest.raises(_Killed):
        checkpoints.restore(taken.id, journal_dir=journal, on_step=_kill_after(after))
    assert os.path.exists(os.path.join(journal, JOURNAL)) and state(repo) != before

    assert resume(journal) is not None
    assert state(repo) == before
    assert resume(journal) is None and state(repo) == before
    assert checkpoints.plan_restore(taken.id).empty
    assert repo_facts(repo) == facts  # git's own view last: `git status` refreshes the index


def test_hostile_repository_config_never_runs(tmp_path: Path, repo: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "hook.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    with open(repo / ".git" / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = {script}\n\thooksPath = {tmp_path}\n"
                     f"[filter \"evil\"]\n\tclean = {script}\n\tsmudge = {script}\n\trequired = true\n")
    (repo / ".gitattributes").write_text("* filter=evil\n")
    for hook in ("post-checkout", "pre-commit", "post-index-change"):
        (repo / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    (repo / "src" / "app.py").write_text("changed\n")
    checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"))
    checkpoints.changed_since(taken.id)
    assert (repo / "src" / "app.py").read_text() == "print('staged')\n"
    assert not marker.exists()


def test_gc_drops_old_checkpoints_and_unreachable_objects_and_keeps_the_rest(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    old = checkpoints.take(_META)
    (repo / "notes.txt").write_text("only in the old checkpoint? no: in the new one\n")
    (repo / "gone.txt").write_text("only in the old checkpoint\n")
    mid = checkpoints.take(_META)
    (repo / "gone.txt").unlink()
    new = checkpoints.take(_META)
    only_mid = git(repo, "--git-dir", checkpoints.root, "rev-parse", f"{mid.id}:gone.txt").strip()
    size = checkpoints.size_bytes()

    between = (checkpoints.find(mid.id).at + checkpoints.find(new.id).at) / 2
    collected = checkpoints.gc(keep_days=1, now=between + 86_400)  # a day after a moment between mid and new

    assert [record.id for record in checkpoints.records()] == [new.id]
    assert (collected.dropped, collected.kept) == (2, 1) and collected.deleted >= 3  # two commits, a blob
    assert not checkpoints.objects.has(only_mid) and not checkpoints.objects.has(old.id)
    assert checkpoints.size_bytes() < size
    git(repo, "--git-dir", checkpoints.root, "fsck", "--strict", "--no-dangling")
    with pytest.raises(NotFoundError) as caught:
        checkpoints.find(old.id)
    assert caught.value.code == "ACODE-STORE-002"


def test_a_take_after_gc_dropped_everything_stores_every_object_again(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    assert checkpoints.gc(keep_days=1, now=checkpoints.find(taken.id).at + 2 * 86_400).kept == 0
    assert list(checkpoints.objects.every()) == []
    again = checkpoints.take(_META)  # nothing changed: the stat cache must not vouch for deleted blobs
    git(repo, "--git-dir", checkpoints.root, "fsck", "--strict", "--no-dangling")
    assert git(repo, "--git-dir", checkpoints.root, "show", f"{again.id}:src/app.py") == "print('staged')\n"


def test_records_list_checkpoints_in_order_with_their_parent_and_meta(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    first = checkpoints.take(_META)
    (repo / "notes.txt").write_text("x\n")
    second = checkpoints.take(Meta(session="s1", call="write_file"))
    records = checkpoints.records()
    assert [(r.id, r.parent) for r in records] == [(first.id, None), (second.id, first.id)]
    assert records[0].meta == _META and records[1].files == 1 and records[1].changed == ["notes.txt"]
    assert checkpoints.find(second.id[:8]) == records[1]


def test_a_take_of_many_files_writes_one_pack_git_reads_and_gc_rewrites_it(tmp_path: Path, repo: Path) -> None:
    (repo / "many").mkdir()
    for n in range(PACK_FROM + 20):
        (repo / "many" / f"{n}.txt").write_text(f"file {n}\n")
    checkpoints = store(tmp_path, repo)
    first = checkpoints.take(_META)
    packs = sorted((Path(checkpoints.root) / "objects" / "pack").glob("*.idx"))
    assert len(packs) == 1
    git(repo, "--git-dir", checkpoints.root, "verify-pack", str(packs[0]))
    git(repo, "--git-dir", checkpoints.root, "fsck", "--strict", "--no-dangling")
    shutil.rmtree(repo / "many")
    second = checkpoints.take(_META)
    assert len(second.changed) == PACK_FROM + 20

    collected = checkpoints.gc(keep_days=1, now=checkpoints.find(second.id).at + 86_400 - 0.0001)
    assert collected.kept == 1 and collected.deleted >= PACK_FROM + 20  # the blobs of many/, their tree, a commit
    (repack,) = sorted((Path(checkpoints.root) / "objects" / "pack").glob("*.idx"))
    assert repack != packs[0]
    git(repo, "--git-dir", checkpoints.root, "fsck", "--strict", "--no-dangling")
    assert git(repo, "--git-dir", checkpoints.root, "show", f"{second.id}:src/app.py") == "print('staged')\n"
    checkpoints.restore(second.id, journal_dir=str(tmp_path / "j"))
    assert not checkpoints.objects.has(first.id)


def test_changed_lists_what_a_directory_held_when_a_file_replaces_it_and_back(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    checkpoints.take(_META)
    shutil.rmtree(repo / "src")
    (repo / "src").write_text("a file now\n")
    assert checkpoints.take(_META).changed == ["src", "src/app.py"]
    (repo / "src").unlink()
    (repo / "src").mkdir()
    (repo / "src" / "new.py").write_text("new\n")
    assert checkpoints.take(_META).changed == ["src", "src/new.py"]


def test_a_store_inside_the_workspace_never_checkpoints_itself(tmp_path: Path, repo: Path) -> None:
    checkpoints = Checkpoints(str(repo / ".acode" / "checkpoints"), str(repo), scope=_SCOPE)
    first = checkpoints.take(_META)
    second = checkpoints.take(_META)
    listed = git(repo, "--git-dir", checkpoints.root, "ls-tree", "-r", "--name-only", second.id).split()
    assert second.changed == [] and not [path for path in listed if path.startswith(".acode/")]
    assert checkpoints.tree(first.id) == checkpoints.tree(second.id)


def test_a_path_blocked_by_a_left_one_is_kept_and_the_restore_completes(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    (repo / "notes.txt").unlink()
    (repo / "notes.txt").mkdir()
    (repo / "notes.txt" / "mine.md").write_text("the user's file\n")
    (repo / "src" / "app.py").write_text("the session's edit\n")
    done = checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"), leave={"notes.txt/mine.md"})
    assert (done.kept, done.left) == (["notes.txt"], ["notes.txt/mine.md"])
    assert (repo / "notes.txt" / "mine.md").read_text() == "the user's file\n"
    assert (repo / "src" / "app.py").read_text() == "print('staged')\n"
    assert not (tmp_path / "j" / JOURNAL).exists()


def test_loose_objects_are_repacked_as_deltas_git_reads_and_every_checkpoint_restores(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.sandbox.workspace import checkpoints as module
    monkeypatch.setattr(module, "REPACK_FROM", 16)  # the real rule, with a threshold a test reaches in a few takes
    checkpoints = store(tmp_path, repo)
    taken, contents = [], []
    for n in range(8):
        text = "".join(f"line {k}\n" for k in range(90)) + f"edit {n}\n"  # under the 1000-byte cap
        (repo / "src" / "app.py").write_text(text)
        taken.append(checkpoints.take(_META).id)
        contents.append(text)
    packs = list((Path(checkpoints.root) / "objects" / "pack").glob("*.idx"))
    assert packs and checkpoints.objects.pending == []
    shown = "\n".join(git(repo, "--git-dir", checkpoints.root, "verify-pack", "-v", str(idx)) for idx in packs)
    assert "chain length = 1:" in shown  # deltas, which git itself resolves
    git(repo, "--git-dir", checkpoints.root, "fsck", "--strict", "--no-dangling")
    for oid, text in zip(taken, contents, strict=True):
        assert git(repo, "--git-dir", checkpoints.root, "show", f"{oid}:src/app.py") == text
    checkpoints.restore(taken[2], journal_dir=str(tmp_path / "j"))
    assert (repo / "src" / "app.py").read_text() == contents[2]


def test_a_symlink_put_where_a_directory_was_is_replaced_never_followed(tmp_path: Path, repo: Path) -> None:
    checkpoints = store(tmp_path, repo)
    taken = checkpoints.take(_META)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(repo / "src")
    os.symlink(outside, repo / "src")  # a restore writing src/app.py through it would land outside
    checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"))
    assert list(outside.iterdir()) == []
    assert not (repo / "src").is_symlink() and (repo / "src" / "app.py").read_text() == "print('staged')\n"


@pytest.fixture
def worktree(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A linked worktree of ``repo`` on branch ``side``: its ``.git`` is a file; HEAD, its
    index, the branches and the stash live in ``repo/.git`` (and ``.git/worktrees/wt``)."""
    tree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(tree), "main")
    (tree / "side.txt").write_text("the worktree's own file\n")
    git(tree, "add", "side.txt")
    git(tree, "commit", "-qm", "on side")
    (tree / "work.txt").write_text("uncommitted\n")
    git(tree, "stash", "-q", "-u")
    (tree / "side.txt").write_text("staged in the worktree\n")
    git(tree, "add", "side.txt")
    return repo, tree


def test_a_linked_worktrees_git_directory_is_covered_and_restored(tmp_path: Path,
                                                                   worktree: tuple[Path, Path]) -> None:
    main, tree = worktree
    common = os.path.realpath(main / ".git")
    facts, main_facts = repo_facts(tree), repo_facts(main)
    before, git_before = state(tree), state(main / ".git")
    checkpoints = store(tmp_path, tree, Scope(max_file_bytes=1000, roots=(common,)))
    taken = checkpoints.take(_META)
    assert taken.roots == [common] and checkpoints.records()[-1].roots == [common]

    git(tree, "commit", "-qm", "committed by the session")
    git(tree, "branch", "-D", "feature")
    git(tree, "tag", "-d", "v1")
    git(tree, "stash", "drop", "-q")
    git(tree, "checkout", "-q", "--detach")
    (tree / "side.txt").unlink()
    (tree / ".git").unlink()  # the gitlink itself

    planned = checkpoints.plan_restore(taken.id)
    assert ".git" in planned.write and any(path.startswith(".acode-gitdirs/") for path in planned.write)
    checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"))
    assert state(tree) == before and state(main / ".git") == git_before
    assert not (tree / ".acode-gitdirs").exists() and checkpoints.plan_restore(taken.id).empty
    assert repo_facts(tree) == facts and repo_facts(main) == main_facts  # last: `git status` refreshes the index


def test_a_git_directory_the_checkpoint_did_not_cover_is_left_alone(tmp_path: Path,
                                                                      worktree: tuple[Path, Path]) -> None:
    main, tree = worktree
    checkpoints = store(tmp_path, tree)  # roots not given: the worktree's git directory is not covered
    taken = checkpoints.take(_META)
    git_before = state(main / ".git")
    (tree / "extra.txt").write_text("new\n")
    checkpoints.restore(taken.id, journal_dir=str(tmp_path / "j"))
    assert not (tree / "extra.txt").exists() and state(main / ".git") == git_before
