"""Commands cannot change git's configuration and hooks, ``.agent`` or acode's config.

Real git repositories (history, a second branch, a submodule, a linked worktree) and real
commands under each isolation level this machine offers: bubblewrap refuses the writes
in the kernel (read-only binds, ``.git`` a mount point, read-only as a whole for
programs other than git); Landlock and the process level let them happen, and the
sandbox's compare-and-restore puts every byte back and fails the call with ACODE-SBX-021.
After every hostile command the test runs the user's own ``git status`` and ``git
commit`` outside any sandbox and checks that nothing planted ran: the payloads touch a
marker file outside the workspace.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.sandbox.confinement import policy as command_policy
from actors.sandbox.confinement import sealed
from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.confinement.isolation import Isolation, detect
from actors.sandbox.confinement.policy import Command
from actors.sandbox.tools.output import Outcome
from actors.sandbox.tools.terminal import Terminal
from protocol.calls.tools import RunTerminal
from protocol.policy.sandbox import SandboxPolicy

POLICY = SandboxPolicy()  # the default allowlist: git, cp, mv, rm, python scripts; no shell, no inline code
_FOUND: dict[str, Isolation | None] = {}


def _level(name: str) -> Isolation | None:
    if name not in _FOUND:
        full = detect()
        _FOUND["bubblewrap"] = full if full.level == "bubblewrap" else None
        no_bwrap = detect(bubblewrap=False)
        _FOUND["landlock+pidns"] = no_bwrap if no_bwrap.level == "landlock" and no_bwrap.pidns else None
        bare = detect(bubblewrap=False, pidns=False)
        _FOUND["landlock+subreaper"] = bare if bare.level == "landlock" else None
        _FOUND["process+pidns"] = Isolation(level="process", pidns=True, pids=full.pids) if full.pidns else None
        _FOUND["process+subreaper"] = Isolation(level="process", pidns=False, pids=full.pids)
    return _FOUND[name]


@pytest.fixture(params=["bubblewrap", "landlock+pidns", "landlock+subreaper", "process+pidns", "process+subreaper"])
def isolation(request: pytest.FixtureRequest) -> Isolation:
    found = _level(request.param)
    if found is None:
        pytest.skip(f"this machine does not offer {request.param} (bwrap missing, Landlock off or no namespaces)")
    return found


def kernel(isolation: Isolation) -> bool:
    """Whether the kernel refuses the writes: bubblewrap's binds, or the launcher's in its mount namespace."""
    return isolation.mode in ("bwrap", "pidns")


@pytest.fixture
def terminal(isolation: Isolation) -> Iterator[Terminal]:
    terminal = Terminal(isolation)
    yield terminal
    terminal.close()


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "u",
           "GIT_AUTHOR_EMAIL": "u@example.com", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@example.com"}
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, check=check)


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "m")  # the sandbox's commands commit with it
    git(root, "config", "user.email", "m@example.com")
    (root / "a.txt").write_text("one\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-qm", "one")
    git(root, "branch", "other")
    return root


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PLANTED-RAN"


@pytest.fixture
def repo(tmp_path: Path, marker: Path) -> Path:
    """A repository with history and a second branch, and the payloads a model would plant."""
    root = _repo(tmp_path / "ws")
    payload = f"touch {marker}; true"
    (root / "evil.cfg").write_text(f"[core]\n\tfsmonitor = {payload}\n[alias]\n\tst = !{payload}\n")
    (root / "hook.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    return root


def run(terminal: Terminal, root: Path, command: str) -> Outcome:
    with Workspace(str(root)) as ws:
        return terminal.run(ws, RunTerminal(command=command), timeout_s=30, max_bytes=16_000, policy=POLICY)


def script(root: Path, body: str, name: str = "plant.py") -> str:
    (root / name).write_text("import os, shutil\n" + body)
    return f"python {name}"


def nothing_planted_runs(root: Path, marker: Path) -> None:
    """The user's own git, outside any sandbox: status (fsmonitor, an alias) and a commit (hooks)."""
    git(root, "status")
    git(root, "commit", "-q", "--allow-empty", "-m", "the user's commit")
    assert not marker.exists(), "a planted payload ran in the user's git"


def blocked_or_restored(isolation: Isolation, outcome: Outcome, *changed: str) -> None:
    """bubblewrap or a mount namespace: the kernel refused the write (no change, so no
    ACODE-SBX-021); elsewhere the change happened and was undone: the call fails with
    ACODE-SBX-021 naming it."""
    if kernel(isolation):
        assert outcome.error is None and outcome.exit_code != 0, outcome
        return
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-021", outcome
    for path in changed:
        assert repr(path) in outcome.error.message, outcome.error.message
    assert "they were restored" in outcome.error.message and "the session pauses" in outcome.error.message


def test_the_marker_detects_a_planted_config_and_hook(repo: Path, marker: Path) -> None:
    """Without the sandbox the payloads run: the checks below can fail."""
    shutil.copy(repo / "evil.cfg", repo / ".git" / "config")
    git(repo, "status")
    assert marker.exists()
    marker.unlink()
    git(repo, "config", "--unset", "core.fsmonitor")
    shutil.copy(repo / "hook.sh", repo / ".git" / "hooks" / "pre-commit")
    os.chmod(repo / ".git" / "hooks" / "pre-commit", 0o755)
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    assert marker.exists()


def test_cp_over_git_config_is_refused_or_restored(terminal: Terminal, isolation: Isolation, repo: Path,
                                                    marker: Path) -> None:
    before = (repo / ".git" / "config").read_bytes()
    outcome = run(terminal, repo, "cp evil.cfg .git/config")
    blocked_or_restored(isolation, outcome, ".git/config")
    assert (repo / ".git" / "config").read_bytes() == before
    nothing_planted_runs(repo, marker)


@pytest.mark.parametrize(("body", "changed"), [
    ("os.makedirs('.git/hooks', exist_ok=True)\nshutil.copy('hook.sh', '.git/hooks/pre-commit')\n"
     "os.chmod('.git/hooks/pre-commit', 0o755)\n", ".git/hooks/pre-commit"),
    ("open('.git/config', 'a').write(open('evil.cfg').read())\n", ".git/config"),
    ("os.makedirs('.git/info', exist_ok=True)\nopen('.git/info/attributes', 'w').write('* filter=x\\n')\n",
     ".git/info/attributes"),
    ("os.rename('.git/hooks', 'old-hooks')\nos.mkdir('evil-hooks')\nshutil.copy('hook.sh', 'evil-hooks/pre-commit')\n"
     "os.chmod('evil-hooks/pre-commit', 0o755)\nos.symlink('../evil-hooks', '.git/hooks')\n", ".git/hooks"),
    ("os.makedirs('.agent', exist_ok=True)\nopen('.agent/config.yml', 'w').write('autonomy: 3\\n')\n",
     ".agent/config.yml"),
    ("shutil.copytree('.git', 'planted')\nopen('planted/config', 'a').write(open('evil.cfg').read())\n"
     "open('.git/commondir', 'w').write('../planted\\n')\n", ".git/commondir"),
], ids=["hook", "fsmonitor", "info-attributes", "hooks-symlink", "agent-config", "commondir"])
def test_a_script_planting_into_protected_paths_is_refused_or_restored(
        terminal: Terminal, isolation: Isolation, repo: Path, marker: Path, body: str, changed: str) -> None:
    hooks = sorted(p.name for p in (repo / ".git" / "hooks").iterdir())
    config = (repo / ".git" / "config").read_bytes()
    outcome = run(terminal, repo, script(repo, body))
    blocked_or_restored(isolation, outcome, changed)
    assert (repo / ".git" / "hooks").is_dir() and not (repo / ".git" / "hooks").is_symlink()
    assert sorted(p.name for p in (repo / ".git" / "hooks").iterdir()) == hooks
    assert (repo / ".git" / "config").read_bytes() == config
    assert not (repo / ".git" / "info" / "attributes").exists()
    assert not (repo / ".git" / "commondir").exists()
    assert not (repo / ".agent").exists()
    nothing_planted_runs(repo, marker)


def test_a_missing_hooks_directory_cannot_be_created(terminal: Terminal, isolation: Isolation, repo: Path,
                                                      marker: Path) -> None:
    shutil.rmtree(repo / ".git" / "hooks")
    outcome = run(terminal, repo, script(repo, "os.mkdir('.git/hooks')\nshutil.copy('hook.sh', '.git/hooks/"
                                               "pre-commit')\nos.chmod('.git/hooks/pre-commit', 0o755)\n"))
    blocked_or_restored(isolation, outcome, ".git/hooks/pre-commit")
    assert not (repo / ".git" / "hooks").exists(), "no mount point or planted directory is left behind"
    nothing_planted_runs(repo, marker)


def test_moving_git_away_is_refused_or_undone(terminal: Terminal, isolation: Isolation, repo: Path,
                                              marker: Path) -> None:
    outcome = run(terminal, repo, "mv .git x")
    blocked_or_restored(isolation, outcome, ".git")
    assert (repo / ".git" / "HEAD").is_file() and not (repo / "x").exists()
    assert git(repo, "branch", "--list").stdout.split() == ["*", "main", "other"]
    nothing_planted_runs(repo, marker)


def test_deleting_git_is_refused_or_reported_as_not_restorable(terminal: Terminal, isolation: Isolation,
                                                              repo: Path) -> None:
    outcome = run(terminal, repo, "rm -rf .git")
    if kernel(isolation):
        assert outcome.exit_code != 0 and (repo / ".git" / "HEAD").is_file(), outcome
        assert outcome.error is None, outcome
        return
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-021", outcome
    assert "changed protected paths: '.git' moved, removed or replaced. Commands" in outcome.error.message
    assert "restored what it could, but NOT '.git' (deleted): put that back by hand" in outcome.error.message


def test_moving_git_away_and_planting_another_is_undone(terminal: Terminal, isolation: Isolation, repo: Path,
                                                        marker: Path) -> None:
    outcome = run(terminal, repo, script(repo, "os.rename('.git', 'x')\nos.makedirs('.git/hooks')\n"
                                               "shutil.copy('evil.cfg', '.git/config')\nshutil.copytree('x/objects', "
                                               "'.git/objects')\nshutil.copytree('x/refs', '.git/refs')\n"
                                               "shutil.copy('x/HEAD', '.git/HEAD')\n"))
    blocked_or_restored(isolation, outcome, ".git")
    assert not (repo / "x").exists()
    nothing_planted_runs(repo, marker)


def test_a_script_deleting_a_branch_is_refused_where_the_kernel_seals(terminal: Terminal, isolation: Isolation,
                                                                repo: Path) -> None:
    """Under bubblewrap or in a mount namespace .git is read-only to every program but git;
    without namespaces refs are not protected (the classifier and approvals do that)."""
    outcome = run(terminal, repo, script(repo, "os.unlink('.git/refs/heads/other')\n"))
    branches = git(repo, "branch", "--list").stdout.split()
    if kernel(isolation):
        assert outcome.exit_code != 0 and "other" in branches
    else:
        assert outcome.ok and "other" not in branches


def test_git_add_commit_and_branch_creation_keep_working(terminal: Terminal, repo: Path) -> None:
    (repo / "b.txt").write_text("two\n")
    for command in ("git add b.txt", "git commit -qm two",
                    "git branch feature", "git checkout -q -b topic", "git status --short"):
        outcome = run(terminal, repo, command)
        assert outcome.ok, (command, outcome)
    assert git(repo, "log", "--format=%s").stdout.split("\n")[:2] == ["two", "one"]
    assert git(repo, "branch", "--list").stdout.split() == ["feature", "main", "other", "*", "topic"]


def test_git_itself_cannot_write_its_config_or_hooks(terminal: Terminal, isolation: Isolation, repo: Path,
                                                     marker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git keeps writing .git, never the protected set: ``git config`` and a re-init with a
    template that carries a hook. The policy refuses both forms today; this layer must hold
    for a form it misses, so here every argv passes it."""
    monkeypatch.setattr(command_policy, "check", lambda text, _: Command(argv=shlex.split(text), shell=False,
                                                                         risk="execute"))
    (repo / "tpl" / "hooks").mkdir(parents=True)
    shutil.copy(repo / "hook.sh", repo / "tpl" / "hooks" / "pre-commit")
    os.chmod(repo / "tpl" / "hooks" / "pre-commit", 0o755)
    for command, changed in ((f"git config core.fsmonitor {marker}", ".git/config"),
                             ("git init -q --template=tpl", ".git/hooks/pre-commit")):
        outcome = run(terminal, repo, command)
        blocked_or_restored(isolation, outcome, changed)
    nothing_planted_runs(repo, marker)


def test_a_submodule_config_is_protected(terminal: Terminal, isolation: Isolation, tmp_path: Path,
                                         marker: Path) -> None:
    source = _repo(tmp_path / "sub-source")
    root = _repo(tmp_path / "ws")
    git(root, "submodule", "add", "-q", str(source), "m")
    git(root, "commit", "-qm", "submodule")
    config = root / ".git" / "modules" / "m" / "config"
    before = config.read_bytes()
    (root / "evil.cfg").write_text(f"[core]\n\tfsmonitor = touch {marker}; true\n")
    outcome = run(terminal, root, script(root, "open('.git/modules/m/config', 'a').write(open('evil.cfg').read())\n"))
    blocked_or_restored(isolation, outcome, ".git/modules/m/config")
    assert config.read_bytes() == before
    outcome = run(terminal, root, script(root, "open('m/.git', 'w').write('gitdir: ../planted\\n')\n", "p2.py"))
    blocked_or_restored(isolation, outcome, "m/.git")
    assert (root / "m" / ".git").read_text().startswith("gitdir: ../.git/modules/m")
    git(root, "status")
    git(root / "m", "status")
    assert not marker.exists()


def test_a_linked_worktree_cannot_change_its_common_config_or_gitlink(
        terminal: Terminal, isolation: Isolation, tmp_path: Path, marker: Path) -> None:
    main = _repo(tmp_path / "main")
    root = tmp_path / "wt"
    git(main, "worktree", "add", "-q", str(root), "other")
    common = main / ".git" / "config"
    before, gitlink = common.read_bytes(), (root / ".git").read_bytes()
    (root / "evil.cfg").write_text(f"[core]\n\tfsmonitor = touch {marker}; true\n")
    outcome = run(terminal, root, script(root, f"open({str(common)!r}, 'a').write(open('evil.cfg').read())\n"))
    if isolation.level == "landlock" or kernel(isolation):  # a program not git gets the common dir read-only
        assert outcome.error is None and outcome.exit_code != 0, outcome
    else:
        blocked_or_restored(isolation, outcome, str(common))
    assert common.read_bytes() == before
    outcome = run(terminal, root, script(root, "open('.git', 'w').write('gitdir: planted\\n')\n", "p2.py"))
    blocked_or_restored(isolation, outcome, ".git")
    assert (root / ".git").read_bytes() == gitlink
    outcome = run(terminal, main, script(main, "open('.git/worktrees/wt/commondir', 'w').write('../planted\\n')\n"))
    blocked_or_restored(isolation, outcome, ".git/worktrees/wt/commondir")  # the user's git in wt reads it
    (root / "c.txt").write_text("c\n")
    assert run(terminal, root, "git add c.txt").ok
    assert run(terminal, root, "git commit -qm c").ok
    git(root, "status")
    git(main, "status")
    assert not marker.exists()


def test_acode_home_inside_the_workspace_is_protected(terminal: Terminal, isolation: Isolation,
                                                      repo: Path) -> None:
    home = repo / "dot-acode"
    home.mkdir()
    (home / "config.yml").write_text("autonomy: 1\n")
    (home / "acode.db").write_text("the approvals\n")
    terminal.hide(str(home))
    seen = run(terminal, repo, "cat dot-acode/acode.db")
    assert ("the approvals" in seen.output) is not kernel(isolation), seen
    outcome = run(terminal, repo, script(repo, "open('dot-acode/config.yml', 'w').write('autonomy: 3\\n')\n"))
    if isolation.level == "bubblewrap":  # masked: the command writes into an empty tmpfs
        assert outcome.ok, outcome
    elif kernel(isolation):  # hidden behind an empty read-only directory in the command's mount namespace
        assert outcome.error is None and outcome.exit_code != 0, outcome
    else:
        blocked_or_restored(isolation, outcome, "dot-acode/config.yml")
    assert (home / "config.yml").read_text() == "autonomy: 1\n"


def test_no_repository_can_be_planted_in_a_workspace_without_one(terminal: Terminal, isolation: Isolation,
                                                                 tmp_path: Path, marker: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "evil.cfg").write_text(f"[core]\n\tfsmonitor = touch {marker}; true\n")
    outcome = run(terminal, root, "git init -q")
    blocked_or_restored(isolation, outcome, ".git/config")
    assert not (root / ".git").exists()
    outcome = run(terminal, root, script(root, "os.makedirs('.git/objects')\nos.makedirs('.git/refs')\n"
                                               "open('.git/HEAD', 'w').write('ref: refs/heads/main\\n')\n"
                                               "shutil.copy('evil.cfg', '.git/config')\n"))
    blocked_or_restored(isolation, outcome, ".git/config")
    assert not (root / ".git").exists()
    git(root, "status", check=False)
    assert not marker.exists()


def test_staging_a_nested_repository_with_a_planted_config_is_undone(terminal: Terminal, isolation: Isolation,
                                                                    repo: Path, marker: Path) -> None:
    """``git init x``, a planted ``x/.git/config``, ``git add x``: the user's git status would
    run x's fsmonitor. Every level puts the index back (git may write the index)."""
    assert run(terminal, repo, "git init -q inner").ok
    planted = run(terminal, repo, script(repo, "import subprocess\nopen('inner/x', 'w').write('x')\n"
                                               "subprocess.run(['git', '-c', 'user.name=m', '-c', 'user.email=m@m', "
                                               "'commit', '-qm', 'x', '--allow-empty'], cwd='inner', check=True)\n"
                                               "open('inner/.git/config', 'a').write(open('evil.cfg').read())\n"))
    assert planted.ok, planted  # not protected: an untracked nested repository is nothing to git status
    staged = run(terminal, repo, "git add inner")
    assert staged.error is not None and staged.error.code == "ACODE-SBX-021", staged
    assert "'inner' staged as a nested repository" in staged.error.message
    assert "they were restored" in staged.error.message
    assert "160000" not in git(repo, "ls-files", "-s").stdout
    nothing_planted_runs(repo, marker)


def test_a_nested_repository_already_in_the_index_is_protected(terminal: Terminal, isolation: Isolation,
                                                                repo: Path, marker: Path) -> None:
    inner = _repo(repo / "inner")
    git(repo, "add", "inner")
    git(repo, "commit", "-qm", "a nested repository")
    before = (inner / ".git" / "config").read_bytes()
    outcome = run(terminal, repo, script(repo, "open('inner/.git/config', 'a').write(open('evil.cfg').read())\n"))
    blocked_or_restored(isolation, outcome, "inner/.git/config")
    assert (inner / ".git" / "config").read_bytes() == before
    nothing_planted_runs(repo, marker)


def test_a_repository_made_beneath_an_existing_gitlink_is_removed(terminal: Terminal, isolation: Isolation,
                                                                  repo: Path, tmp_path: Path, marker: Path) -> None:
    source = _repo(tmp_path / "elsewhere")
    (source / ".git" / "config").write_text((source / ".git" / "config").read_text()
                                            + (repo / "evil.cfg").read_text())
    head = git(source, "rev-parse", "HEAD").stdout.strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},sub")  # a gitlink, nothing checked out
    shutil.copytree(source / ".git", repo / "planted-git")
    outcome = run(terminal, repo, script(repo, "os.makedirs('sub')\nos.rename('planted-git', 'sub/.git')\n"))
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-021", outcome
    assert "'sub/.git' added beneath a gitlink" in outcome.error.message
    assert not (repo / "sub" / ".git").exists()
    git(repo, "status")
    assert not marker.exists()


def test_hooks_in_the_work_tree_named_by_core_hookspath_are_protected(terminal: Terminal, isolation: Isolation,
                                                                       repo: Path, marker: Path) -> None:
    """husky's way: ``core.hooksPath = .husky/_``, the hooks in the work tree."""
    git(repo, "config", "core.hooksPath", ".husky/_")
    (repo / ".husky" / "_").mkdir(parents=True)
    outcome = run(terminal, repo, script(repo, "shutil.copy('hook.sh', '.husky/_/pre-commit')\n"
                                               "os.chmod('.husky/_/pre-commit', 0o755)\n"))
    blocked_or_restored(isolation, outcome, ".husky/_/pre-commit")
    assert list((repo / ".husky" / "_").iterdir()) == []
    nothing_planted_runs(repo, marker)


def test_a_config_file_in_the_work_tree_that_git_config_includes_is_protected(
        terminal: Terminal, isolation: Isolation, repo: Path, marker: Path) -> None:
    (repo / "team.gitconfig").write_text("[diff]\n\trenames = true\n")
    git(repo, "config", "include.path", "../team.gitconfig")  # relative to .git/
    outcome = run(terminal, repo, script(repo, "open('team.gitconfig', 'a').write(open('evil.cfg').read())\n"))
    blocked_or_restored(isolation, outcome, "team.gitconfig")
    assert (repo / "team.gitconfig").read_text() == "[diff]\n\trenames = true\n"
    nothing_planted_runs(repo, marker)


def test_the_protected_set_names_config_hooks_info_submodules_and_agent(tmp_path: Path) -> None:
    source = _repo(tmp_path / "sub-source")
    root = _repo(tmp_path / "ws")
    git(root, "submodule", "add", "-q", str(source), "m")
    found = sealed.find(str(root), homes=[str(root / "home")])
    shown = sorted(found.shown(p) for p in (*found.files, *found.dirs))
    assert shown == sorted([".git/config", ".git/config.worktree", ".git/commondir", ".git/hooks", ".git/info",
                            ".agent", ".git/modules/m/config", ".git/modules/m/config.worktree",
                            ".git/modules/m/commondir", ".git/modules/m/hooks", ".git/modules/m/info", "m/.git",
                            "home/config.yml"])
    assert [found.shown(p) for p in found.gitdirs] == [".git", ".git/modules/m"]
