"""Destruction asks, end to end: at the default autonomy level 2, with no flags and no
terminal, a destructive command (the executor's, or the plan's own acceptance check that
the verifier runs) pauses the session with exit 33 and changes nothing; the repository,
``.git`` included, is as it was. Real CLI processes, the stand-in model server on loopback,
a real git repository with history, a second branch, a stash, an edit and an untracked file.
The tests share one acode for the module (``shared``), each with its own repository and server.
"""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import wait_until
from tests.modelserver import Json, ModelServer, ToolCalls
from tests.system.conftest import CLI, REPO, Acode, read_until
from tests.system.test_approvals import _events, _paused
from tests.system.test_models import APPROVE, _configure, _workspace, done, plan

pytestmark = pytest.mark.system


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    result = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=30, check=True)
    return result.stdout


def _repository(tmp_path: Path) -> Path:
    root = _workspace(tmp_path)
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('v1')\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    _git(root, "branch", "side")
    (root / "src" / "main.py").write_text("print('stashed')\n")
    _git(root, "stash", "-q")
    (root / "src" / "main.py").write_text("print('edited, not committed')\n")
    (root / "notes.txt").write_text("untracked\n")
    return root


def _state(root: Path) -> tuple[str, ...]:
    return (_git(root, "status", "--porcelain=v1", "-uall"), _git(root, "branch", "--list"),
            _git(root, "stash", "list"), _git(root, "log", "--format=%H"), (root / "src" / "main.py").read_text(),
            (root / "notes.txt").read_text(), str(sorted(p.name for p in (root / ".git").iterdir())))


def _checked_plan(command: str) -> Json:
    value = plan().value
    value["tasks"][0]["resources"]["commands"] = [command]
    value["tasks"][0]["acceptance"] = [{"label": "A1", "description": "the check passes",
                                        "check": {"command": command, "expect_exit": 0}}]
    return Json(value)


def test_a_plan_check_that_moves_git_away_asks_in_the_verifier_and_nothing_moves(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)  # default: autonomy 2, non_interactive_policy fail
    root = _repository(tmp_path)
    before = _state(root)
    check = "mv .git elsewhere"
    server.by_stage(planner=[_checked_plan(check)], executor=[ToolCalls([("write_file", {
        "path": "greet.txt", "content": "hello\n"})]), done()], reviewer=[APPROVE])
    result = shared("run", "make greet.txt say hello", "--workspace", str(root), timeout=180)
    assert result.returncode == 33, result.stdout + result.stderr
    assert "paused (awaiting_approval)" in result.stdout and "(ACODE-EXEC-005)" in result.stdout
    assert "mv .git elsewhere" in result.stdout and "destructive" in result.stdout
    assert (root / ".git").is_dir() and not (root / "elsewhere").exists()
    (root / "greet.txt").unlink()  # the executor's write, approved at level 2
    assert _state(root) == before


@pytest.mark.parametrize("command", ["git stash -u", "git reset --ha", "env -u VAR rm -rf src",
                                     "git branch --delete --force side"])
def test_a_destructive_command_at_level_2_pauses_with_exit_33_and_changes_nothing(
        shared: Acode, server: ModelServer, tmp_path: Path, command: str) -> None:
    _configure(shared, server)
    root = _repository(tmp_path)
    before = _state(root)
    server.by_stage(planner=[plan()], executor=[ToolCalls([("run_terminal", {"command": command})]), done()],
                    reviewer=[APPROVE])
    result = shared("run", "make greet.txt say hello", "--workspace", str(root), timeout=180)
    assert result.returncode == 33, result.stdout + result.stderr
    assert "paused (awaiting_approval)" in result.stdout, result.stdout
    assert f"run_terminal {command!r} (destructive) needs approval" in result.stdout, result.stdout
    assert _state(root) == before


def test_approve_always_on_a_terminal_shows_the_rule_and_grants_nothing_unless_confirmed(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    root = _repository(tmp_path)
    server.by_stage(planner=[plan()], executor=[ToolCalls([("run_terminal", {"command": "git clean -fdx"})]),
                                                done()], reviewer=[APPROVE])
    submitted = shared("run", "make greet.txt say hello", "--workspace", str(root), "--detach")
    assert submitted.returncode == 0, submitted.stderr
    session_id = submitted.stdout.strip()
    _paused(shared, session_id)
    main, child = pty.openpty()
    proc = subprocess.Popen([*CLI, "--home", str(shared.home), "approve", session_id, "--always"], env=shared.env,
                            cwd=REPO, stdin=child, stdout=child, stderr=child, close_fds=True)
    shared.running.append(proc)  # type: ignore[arg-type]  # killed by the fixture if the test fails
    os.close(child)
    try:
        shown = read_until(main, "approve with this rule? [y/N]: ")
        assert "every later call with exactly this rule:\r\n  run_terminal: git clean --force -d -x (destructive)" \
            in shown
        os.write(main, b"n\n")
        shown = read_until(main, "(ACODE-CLI-004)")
        assert "nothing approved: the --always rule was not confirmed" in shown
        assert proc.wait(timeout=60) != 0
    finally:
        os.close(main)
    snap = _paused(shared, session_id)["snap"]
    assert snap.approval is not None and snap.approval.argv == ["git", "clean", "-fdx"]
    assert (root / "notes.txt").exists(), "the unconfirmed call did not run"


def test_an_always_rule_from_a_reading_call_does_not_cover_a_destructive_one(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    """At level 1 `git status --short` asks; approved --always, the same shape (`git status
    -s`) runs unasked, and `git checkout -f` still asks."""
    _configure(shared, server)
    root = _repository(tmp_path)
    before = _state(root)
    calls = ["git status --short", "git status -s", "git checkout -f"]
    server.by_stage(planner=[plan()], executor=[*[ToolCalls([("run_terminal", {"command": c})]) for c in calls],
                                                done()], reviewer=[APPROVE])
    submitted = shared("run", "make greet.txt say hello", "--workspace", str(root), "--detach", "--autonomy", "1")
    assert submitted.returncode == 0, submitted.stderr
    session_id = submitted.stdout.strip()
    snap = _paused(shared, session_id)["snap"]
    assert snap.approval.argv == ["git", "status", "--short"]
    approved = shared("approve", session_id, "--always", "--detach")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "run_terminal: git status --short (execute)" in approved.stdout

    def on_checkout() -> object:
        waiting = _paused(shared, session_id)["snap"]
        return waiting if waiting.approval.argv == ["git", "checkout", "-f"] else None

    snap = wait_until(on_checkout, 90, interval=0.2, what="git checkout -f waits for approval")
    assert snap.approval.risk == "destructive"
    assert snap.approval.rule == "run_terminal: git checkout --force (destructive)"
    assert _state(root) == before, "git checkout -f did not run"
    ran = [e["target"] for e in _events(shared, session_id) if e["type"] == "tool_called"
           and e["target"].startswith("git ")]
    assert ran == ["git status --short", "git status -s"], "the rule covered the same shape, unasked"
    shared("cancel", session_id)
