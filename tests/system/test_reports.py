"""Reports tell the truth (issue 24): ``files changed`` is the workspace against the
session's baseline, so what a command did is listed; a workspace whose change cannot be
computed pauses the session (ACODE-ORCH-012) instead of completing it.

One acode for the module: each test has its own workspace and session.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system import workloads as w
from tests.system.conftest import Acode, running

pytestmark = pytest.mark.system

# What a model's script does when run: every change a file tool would not show.
WIPE_PY = """import os
os.remove("doomed.txt")
open("data.txt", "w").close()
with open("made.txt", "w") as f:
    f.write("made by a command\\n")
os.chmod("run.sh", 0o755)
"""


@pytest.fixture(scope="module")
def shared() -> Iterator[Acode]:
    with running("acode-reports-") as acode:
        yield acode


def _git(workspace: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=workspace, check=True,
                   capture_output=True)


def _workspace(root: Path, *, git: bool) -> Path:
    root.mkdir(parents=True)
    (root / "doomed.txt").write_text("to be deleted\n")
    (root / "data.txt").write_text("precious data\n")
    (root / "run.sh").write_text("echo hi\n")
    (root / "run.sh").chmod(0o644)
    if git:
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "the user's work")
    return root


def _plan(check: str = "true") -> dict[str, Any]:
    return w.plan(goal="tidy up", checks=[{"label": "A1", "description": "it runs",
                                           "check": {"command": check, "expect_exit": 0}}],
                  steps=[{"label": "S1", "title": "write and run wipe.py", "action": "run_command"}])


def _session_id(out: str) -> str:
    return out.split("session ", 1)[1].split(":", 1)[0]


def _show(acode: Acode, session_id: str) -> dict[str, Any]:
    shown = acode("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["git", "manifest"])
def test_what_a_command_deleted_truncated_made_and_chmodded_is_in_files_changed(
        shared: Acode, tmp_path: Path, kind: str) -> None:
    workspace = _workspace(tmp_path / "w", git=kind == "git")
    responses = {
        "planner": [_plan()],
        "executor": [w.call("write_file", path="wipe.py", content=WIPE_PY),
                     w.call("run_terminal", command="python wipe.py"), w.done("wiped")],
        "reviewer": [{"json": {"decision": "approve", "summary": "fine", "issues": []}}],
    }
    script = w.script(tmp_path / "s.yaml", responses)

    result = shared("run", "tidy up", "--workspace", str(workspace), "--provider", "scripted",
                    "--script", str(script))

    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert not (workspace / "doomed.txt").exists() and (workspace / "data.txt").read_text() == ""
    expected = [("modified", "data.txt"), ("deleted", "doomed.txt"), ("added", "made.txt"), ("modified", "run.sh"),
                ("added", "wipe.py")]
    listed = ", ".join(f"{path} ({status})" for status, path in expected)
    lines = result.stdout.splitlines()
    assert lines[lines.index("completed (exit 0)") + 1] == f"files changed: {listed}"
    shown = _show(shared, _session_id(result.stdout))
    stored = shown["session"]["changes"]
    assert [(f["status"], f["path"]) for f in stored["files"]] == expected and stored["total"] == 5
    [finished] = [e for e in shown["events"] if e["type"] == "session_finished"]
    assert finished["changes"] == stored  # the session's stored end says the same
    assert f"files changed: {listed}" in shared("show", _session_id(result.stdout)).stdout


def test_a_workspace_whose_git_directory_goes_away_mid_session_pauses_with_orch_012_never_completes(
        shared: Acode, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "w", git=True)
    responses = {
        "planner": [_plan()],
        "executor": [w.call("write_file", path="notes.txt", content="a note\n"), w.done("noted")],
        "reviewer": [{"json": {"decision": "approve", "summary": "fine", "issues": []}}],
    }
    script = w.script(tmp_path / "s.yaml", responses)
    held = shared("run", "note it", "--workspace", str(workspace), "--provider", "scripted", "--script", str(script),
                  "--approve-plan")
    assert held.returncode == 22, held.stdout + held.stderr  # plan review: the baseline is recorded by now
    session_id = _session_id(held.stdout)
    (workspace / ".git").rename(tmp_path / "moved-git")  # the user's (or anyone's) hand, mid-session

    paused = shared("approve", session_id)

    out = paused.stdout + paused.stderr
    assert paused.returncode == 22, out  # a pause's exit code (escalation): never 0
    assert "paused (escalation): verifier failed: the workspace's changes since the session's baseline cannot be " \
           f"computed: the workspace {workspace} is no longer a git work tree" in out
    assert "(ACODE-ORCH-012)" in out and "completed (exit 0)" not in out
    assert "files changed: not compared with the baseline; written by the file tools: notes.txt; 1 command ran, " \
           "whose effects are not listed" in out  # the check `true`: a command too
    shown = _show(shared, session_id)
    session = shown["session"]
    assert session["status"] == "paused" and session["exit_code"] == 22
    assert (session["pause"]["code"], session["pause"]["stage"]) == ("ACODE-ORCH-012", "verifier")
    assert [e for e in shown["events"] if e["type"] == "session_finished"] == []
    status = shared("status", "--workspace", str(workspace)).stdout
    short = session_id[:8]
    assert f"{short} paused (escalation, ACODE-ORCH-012): verifier failed: the workspace's changes" in status
    assert f"fix: put back what is missing (a moved or replaced .git, the baseline in acode's home), then `acode " \
           f"resume {short}` compares again, or `acode cancel {short}` ends the session" in status
    assert f"continue: acode resume {session_id}, or `acode cancel {session_id}`" in status

    (tmp_path / "moved-git").rename(workspace / ".git")  # fixed: the resume compares again, and goes on
    resumed = shared("resume", session_id)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "files changed: notes.txt (added)\n" in resumed.stdout
