"""Checkpoints and undo through the sandbox actor: broker, persistence and sandbox over real sockets.

A session's calls change a real git repository (file tools, commands that delete,
truncate, drop a branch, a tag and the stash, try to move ``.git`` away); the sandbox takes a checkpoint
before and after each, journals ``checkpoint_taken`` with the call, and a
``RestoreWorkspace`` brings every byte back, leaving alone what the user changed meanwhile.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from actors.paths import checkpoint_store
from actors.sandbox.workspace.checkpoints import Checkpoints
from broker.client import Client
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import SandboxError
from protocol.messages import Commit, Error, EventList, GetEvents, Restored, RestoreWorkspace, RunTool, ToolDone
from protocol.plans.results import ToolResult
from protocol.policy.checkpoints import CallSite, CheckpointSettings
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.events import CheckpointTaken, ToolCalled, WorkspaceRestored
from protocol.sessions.session import SessionSettings, SessionSnapshot
from tests.harness import Harness, wait_until

POLICY = SandboxPolicy(extra_commands=["sh", "git"], allow_inline_code=True)


@pytest.fixture
def sandbox(harness: Harness) -> Harness:
    """Commands at process level without namespaces: the weakest isolation, where a command
    can move ``.git`` away (bubblewrap and the launcher's mount namespace pin it) and undo
    must still bring everything back."""
    harness.start("broker")
    harness.start("persistence")
    harness.start("sandbox", isolation="process", tree="subreaper")
    return harness


def _git(workspace: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(workspace.parent), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=workspace, env=env, check=True, capture_output=True,
                          text=True).stdout


def _repo(home: Path) -> Path:
    """A repository with history, a second branch, a tag, a stash, untracked and ignored files."""
    ws = home / "ws"
    ws.mkdir()
    _git(ws, "init", "-q", "-b", "main")
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "app.py").write_text("print('v1')\n")
    (ws / "lib.py").write_text("x = 1\n" * 100)
    _git(ws, "add", ".")
    _git(ws, "commit", "-q", "-m", "one")
    _git(ws, "tag", "v1")
    _git(ws, "branch", "feature")
    (ws / "app.py").write_text("print('stashed')\n")
    _git(ws, "stash", "-q")
    (ws / "app.py").write_text("print('uncommitted work')\n")
    (ws / "notes.txt").write_text("untracked notes\n")
    (ws / "debug.log").write_text("ignored log\n")
    return ws


def _pump(client: Client) -> None:
    """Let ``client`` send what it queued (its socket works when asked)."""
    for _ in range(5):
        client.socket.poll(10)
        client.on_readable()
        client.tick()


def _tree(root: Path) -> dict[str, bytes]:
    """Every file and symlink under ``root`` with its bytes (a link: its target)."""
    found: dict[str, bytes] = {}
    for base, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            found[rel] = os.readlink(path).encode() if os.path.islink(path) else Path(path).read_bytes()
    return found


class Session:
    def __init__(self, harness: Harness, workspace: Path, *, status: str = "paused"):
        self.client: Client = harness.client()
        self.workspace = workspace
        self.id = new_id()
        snapshot = SessionSnapshot(id=self.id, task="t", workspace=str(workspace), status=status,  # type: ignore[arg-type]
                                   settings=SessionSettings(autonomy=3, sandbox=POLICY))  # every call runs unasked
        self.client.call("persistence", Commit(session_id=self.id, snapshot=snapshot), timeout=10,
                         decoder=codec.PERSISTENCE_REPLY)

    def call(self, tool: str, *, step: str = "", **arguments: Any) -> ToolResult:
        body = RunTool(key=new_id(), session_id=self.id, workspace=str(self.workspace), tool=tool,
                       arguments=arguments, policy=POLICY, site=CallSite(stage="executor", task="T1", step=step))
        reply = self.client.call("sandbox", body, timeout=30, decoder=codec.SANDBOX_REPLY)
        assert isinstance(reply, ToolDone), reply
        return reply.result

    def sh(self, script: str) -> ToolResult:
        result = self.call("run_terminal", command=f"sh -c {script!r}")
        assert result.ok, (result.error, result.output)
        return result

    def restore(self, **fields: Any) -> Restored:
        body = RestoreWorkspace(session_id=self.id, workspace=str(self.workspace), policy=POLICY, **fields)
        reply = self.client.call("sandbox", body, timeout=30, decoder=codec.SANDBOX_REPLY)
        if isinstance(reply, Error):
            raise AssertionError(reply.error)
        assert isinstance(reply, Restored)
        return reply

    def restore_error(self, **fields: Any) -> SandboxError:
        body = RestoreWorkspace(session_id=self.id, workspace=str(self.workspace), policy=POLICY, **fields)
        with pytest.raises(SandboxError) as raised:  # the sandbox's Error reply, raised by the client
            self.client.call("sandbox", body, timeout=30, decoder=codec.SANDBOX_REPLY)
        return raised.value

    def events(self) -> list[Any]:
        page = self.client.call("persistence", GetEvents(session_id=self.id), timeout=10,
                                decoder=codec.PERSISTENCE_REPLY)
        assert isinstance(page, EventList)
        return list(page.events)


def test_undo_brings_back_every_file_ref_the_stash_and_head_after_commands_and_file_tools(
        sandbox: Harness, home: Path) -> None:
    ws = _repo(home)
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok  # the session's first call: its start checkpoint
    before = _tree(ws)  # with the baseline's own ref in .git (kept by an undo: the diff needs it)
    head, refs, stash = _git(ws, "rev-parse", "HEAD"), _git(ws, "show-ref"), _git(ws, "stash", "list")
    assert session.call("write_file", step="S1", path="app.py", content="print('model')\n").ok
    session.sh("rm notes.txt; : > lib.py; rm debug.log")
    for command in ("git branch -D feature", "git stash drop -q", "git checkout -q -b wip", "git tag -d v1"):
        result = session.call("run_terminal", command=command)  # git itself may write its refs
        assert result.ok, (result.error, result.output)
    moved = session.call("run_terminal", command="sh -c 'mv .git moved-git'")
    assert moved.error is not None and moved.error.code == "ACODE-SBX-021"  # the tripwire put it back
    assert session.call("modify_file", step="S2", path="app.py", search="model", replace="model2").ok
    assert (ws / "lib.py").read_text() == "" and "feature" not in _git(ws, "branch")

    plan = session.restore()  # planned only: nothing changes
    assert {"notes.txt", "lib.py", "debug.log", ".git/refs/heads/feature"} <= set(plan.write) and not plan.applied
    assert (ws / "lib.py").read_text() == ""
    done = session.restore(apply=True)
    assert done.applied and done.left == [] and done.checkpoint
    assert _tree(ws) == before  # every byte: tracked, untracked, ignored, and .git itself
    assert (_git(ws, "rev-parse", "HEAD"), _git(ws, "show-ref"), _git(ws, "stash", "list")) == (head, refs, stash)
    assert _git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/main"

    events = session.events()
    start, *taken = [e for e in events if isinstance(e, CheckpointTaken)]
    assert (start.target, start.key, start.checkpoint) == ("session start", "", done.target)  # what undo went to
    assert [(e.tool, e.step) for e in taken] == [("write_file", "S1"), *[("run_terminal", "")] * 6,
                                                ("modify_file", "S2")]
    called = [e for e in events if isinstance(e, (CheckpointTaken, ToolCalled)) and e.key in ("", taken[0].key)]
    assert [type(e) for e in called] == [CheckpointTaken, CheckpointTaken, ToolCalled]  # both before the call
    [restored] = [e for e in events if isinstance(e, WorkspaceRestored)]
    assert (restored.to, restored.checkpoint, restored.by) == (done.target, done.checkpoint, "undo")

    # the undo is undoable: back to the checkpoint taken just before it
    again = session.restore(to=done.checkpoint, apply=True)
    assert again.applied and "feature" not in _git(ws, "branch") and _git(ws, "stash", "list") == ""
    assert (ws / "app.py").read_text() == "print('model2')\n"


def test_undo_in_a_linked_worktree_brings_back_the_refs_and_stash_its_git_directory_holds(
        sandbox: Harness, home: Path) -> None:
    main = _repo(home)
    ws = home / "wt"
    _git(main, "worktree", "add", "-q", "-b", "side", str(ws))
    _git(main, "config", "user.name", "m")  # the session's commit needs an author (HOME is a scratch dir)
    _git(main, "config", "user.email", "m@m")
    (ws / "side.txt").write_text("uncommitted in the worktree\n")
    _git(ws, "stash", "-q", "-u")
    (ws / "work.txt").write_text("the worktree's untracked file\n")
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    before, git_before = _tree(ws), _tree(main / ".git")
    facts = [_git(ws, "rev-parse", "HEAD"), _git(ws, "show-ref"), _git(ws, "stash", "list")]
    for command in ("git branch -D feature", "git stash drop -q", "git tag -d v1", "git add work.txt",
                    "git commit -q -m by-the-session", "git checkout -q --detach"):
        result = session.call("run_terminal", command=command)  # a worktree's git writes its common git dir
        assert result.ok, (command, result.error, result.output)
    assert "feature" not in _git(main, "branch") and len(_git(main, "stash", "list").splitlines()) == 1  # of 2

    plan = session.restore()
    common = os.path.realpath(main / ".git")
    assert os.path.join(common, "refs", "heads", "feature") in plan.write  # shown where it really is
    done = session.restore(apply=True)
    assert done.applied and done.left == []
    assert _tree(ws) == before and _tree(main / ".git") == git_before
    assert [_git(ws, "rev-parse", "HEAD"), _git(ws, "show-ref"), _git(ws, "stash", "list")] == facts
    assert _git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/side"


def test_last_and_to_land_between_the_right_calls(sandbox: Harness, home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    for n in range(1, 4):
        assert session.call("write_file", step=f"S{n}", path="f.txt", content=f"{n}\n").ok
    second = [e for e in session.events() if isinstance(e, CheckpointTaken) and e.key][1]  # before the write of "2"
    assert session.restore(last=True, apply=True).applied
    assert (ws / "f.txt").read_text() == "2\n"  # back one call
    assert session.restore(to=second.checkpoint[:10], apply=True).applied
    assert (ws / "f.txt").read_text() == "1\n"
    assert session.restore(apply=True).applied
    assert not (ws / "f.txt").exists()  # before the session began


def test_an_edit_by_the_user_during_a_pause_survives_undo_unless_forced(sandbox: Harness, home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    (ws / "mine.txt").write_text("mine v1\n")
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    assert session.call("write_file", path="model.txt", content="model\n").ok
    assert session.call("write_file", path="mine.txt", content="the model's\n").ok
    (ws / "mine.txt").write_text("the user's own edit\n")  # the session is paused; the user edits
    (ws / "new-by-user.txt").write_text("new\n")

    done = session.restore(apply=True)
    assert done.left == ["mine.txt", "new-by-user.txt"]
    assert not (ws / "model.txt").exists()
    assert (ws / "mine.txt").read_text() == "the user's own edit\n"
    assert (ws / "new-by-user.txt").read_text() == "new\n"
    forced = session.restore(apply=True, force=True)
    assert forced.left == [] and (ws / "mine.txt").read_text() == "mine v1\n"
    assert not (ws / "new-by-user.txt").exists()


def test_a_session_without_checkpoints_or_an_unknown_one_is_refused_with_a_code(sandbox: Harness,
                                                                                 home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    session.call("list_directory", path=".")  # reads take no checkpoint
    assert session.restore_error().code == "ACODE-SBX-024"
    assert session.call("write_file", path="a.txt", content="a\n").ok
    error = session.restore_error(to="ffffffff")
    assert error.code == "ACODE-SBX-024" and "ffffffff" in error.message


def test_checkpoints_off_takes_none(sandbox: Harness, home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    session = Session(sandbox, ws)
    off = RunTool(key=new_id(), session_id=session.id, workspace=str(ws), tool="write_file",
                  arguments={"path": "a.txt", "content": "a"},
                  policy=SandboxPolicy(checkpoints=CheckpointSettings(enabled=False)))
    reply = session.client.call("sandbox", off, timeout=30, decoder=codec.SANDBOX_REPLY)
    assert isinstance(reply, ToolDone) and reply.result.ok
    assert not [e for e in session.events() if isinstance(e, CheckpointTaken)]


def test_a_restore_a_kill_interrupted_completes_when_the_sandbox_starts(sandbox: Harness, home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    for n in range(20):
        (ws / f"f{n}.txt").write_text(f"{n}\n")
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    session.sh("rm f*.txt; echo changed > g.txt")
    sandbox.kill("sandbox")
    store = Checkpoints(checkpoint_store(str(home / "checkpoints"), str(ws)), str(ws))
    start = next(r for r in store.records() if r.meta.kind == "start")
    steps: list[str] = []

    def die_after_three(action: str, path: str) -> None:
        steps.append(path)
        if len(steps) == 3:
            raise KeyboardInterrupt  # stands for the kill: the journal stays
    with pytest.raises(KeyboardInterrupt):
        store.restore(start.id, journal_dir=os.path.join(store.root, "restore"), on_step=die_after_three)
    assert 0 < len(list(ws.glob("f*.txt"))) < 20  # half restored
    sandbox.start("sandbox", isolation="process", tree="subreaper")
    assert sorted(p.name for p in ws.iterdir()) == sorted(f"f{n}.txt" for n in range(20))
    assert "restore_completed_at_start" in sandbox.log("sandbox")


def _many(sandbox: Harness, home: Path, count: int) -> tuple[Session, Path, dict[str, bytes]]:
    """A session whose one command deleted ``count`` files: what a restore must bring back."""
    ws = home / "ws"
    (ws / "d").mkdir(parents=True)
    for n in range(count):
        (ws / "d" / f"f{n:05}.txt").write_text(f"file {n}\n" * 3)
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    before = _tree(ws)
    session.sh("rm -r d")
    return session, ws, before


def test_a_sandbox_killed_mid_restore_completes_it_when_it_starts_again(sandbox: Harness, home: Path) -> None:
    session, ws, before = _many(sandbox, home, 1_000)
    journal = Path(checkpoint_store(str(home / "checkpoints"), str(ws))) / "restore" / "restore.json"
    body = RestoreWorkspace(session_id=session.id, workspace=str(ws), policy=POLICY, apply=True)
    session.client.send("sandbox", body, timeout=30, decoder=codec.SANDBOX_REPLY)
    while not journal.exists():  # the restore has begun: nothing is written before its journal
        pass
    sandbox.kill("sandbox")  # kill -9
    assert journal.exists()  # not finished: the journal stays until the tree equals the target
    half = len(list((ws / "d").glob("*"))) if (ws / "d").exists() else 0
    assert half < 1_000
    # ready once the restore is complete (1,000 files, on a busy machine)
    sandbox.start("sandbox", isolation="process", tree="subreaper", ready_timeout=60)
    assert _tree(ws) == before and not journal.exists()


def test_a_restore_goes_on_when_its_caller_dies_and_persistence_is_killed_meanwhile(
        sandbox: Harness, home: Path) -> None:
    session, ws, before = _many(sandbox, home, 1_000)
    journal = Path(checkpoint_store(str(home / "checkpoints"), str(ws))) / "restore" / "restore.json"
    caller = sandbox.client("cli")
    caller.send("sandbox", RestoreWorkspace(session_id=session.id, workspace=str(ws), policy=POLICY, apply=True),
                timeout=30, decoder=codec.SANDBOX_REPLY)
    _pump(caller)
    caller.close()  # the CLI killed once it asked: the sandbox does the work
    while not journal.exists():
        pass
    sandbox.kill("persistence")  # mid-restore: its event waits for persistence; the files do not
    def restored() -> bool:
        try:
            return _tree(ws) == before
        except FileNotFoundError:  # a temp file the restore renamed meanwhile
            return False
    wait_until(restored, 20, what="the restore, with its caller gone")
    sandbox.start("persistence")
    wait_until(lambda: any(isinstance(e, WorkspaceRestored) for e in session.events()), 40,
               what="workspace_restored, once persistence is back")


def test_calls_that_run_at_once_are_all_the_sessions_own(sandbox: Harness, home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    session = Session(sandbox, ws)
    assert session.call("baseline_workspace").ok
    calls = [RunTool(key=new_id(), session_id=session.id, workspace=str(ws), tool="run_terminal",
                     arguments={"command": f"sh -c {script!r}"}, policy=POLICY)
             for script in ("sleep 0.5; echo a > a.txt", "echo b > b.txt")]  # as the verifier runs checks
    done = session.client.call_all("sandbox", calls, timeout=30, decoder=codec.SANDBOX_REPLY)
    assert all(isinstance(reply, ToolDone) and reply.result.ok for reply in done)
    (ws / "mine.txt").write_text("the user's\n")
    restored = session.restore(apply=True)
    assert (restored.delete, restored.left) == (["a.txt", "b.txt"], ["mine.txt"])


def test_a_running_session_is_not_restored(sandbox: Harness, home: Path) -> None:
    ws = home / "ws"
    ws.mkdir()
    session = Session(sandbox, ws, status="running")
    assert session.call("baseline_workspace").ok
    assert session.call("write_file", path="a.txt", content="a\n").ok
    assert session.restore_error(apply=True).code == "ACODE-SBX-026"
    assert (ws / "a.txt").read_text() == "a\n"
