"""Checkpoints, undo and rewind as a user runs them: ``acode run`` with the scripted model,
then ``acode checkpoints``, ``acode undo`` and ``acode rewind`` through the CLI, on a real
git repository, against one ``acode up`` for the module."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.system import workloads as w
from tests.system.conftest import Acode

TASK, PLAN = w.TWO_FILES, w.TWO_FILES_PLAN


def _script(tmp_path: Path) -> Path:
    """The first run writes a.txt and b.txt; the rewind from S2 writes b.txt again, otherwise."""
    approve = {"json": {"decision": "approve", "summary": "done", "issues": []}}
    script = {"version": 1, "responses": {
        "planner": [{"json": PLAN}],
        "executor": [*w.write_step("a.txt", "a\n"), *w.write_step("b.txt", "b\n"),
                     *w.write_step("b.txt", "b, redone\n")],
        "reviewer": [approve, approve]}}
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps(script))  # JSON is YAML
    return path


def _repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    (ws / "README.md").write_text("# ws\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)
    (ws / "notes.txt").write_text("my uncommitted notes\n")
    return ws


def _completed(shared: Acode, tmp_path: Path) -> tuple[Path, str]:
    """A repository and the session that completed the task in it."""
    ws, script = _repo(tmp_path), _script(tmp_path)
    run = shared("run", TASK, "--workspace", str(ws), "--provider", "scripted", "--script", str(script),
                 "--json", timeout=180)
    assert run.returncode == 0, run.stderr
    return ws, json.loads(run.stdout.splitlines()[-1])["session"]["id"]


def test_undo_and_rewind_through_the_cli(shared: Acode, tmp_path: Path) -> None:
    ws, session = _completed(shared, tmp_path)
    assert (ws / "a.txt").read_text() == "a\n" and (ws / "b.txt").read_text() == "b\n"

    listed = shared("checkpoints", session[:8], "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["kind"], r["stage"], r["task"], r["step"], r["call"]) for r in rows[:3]] == [
        ("start", "", "", "", "session start"),
        ("before", "executor", "T1", "S1", "write_file a.txt"),
        ("before", "executor", "T1", "S2", "write_file b.txt")]
    text = shared("checkpoints", session[:8]).stdout
    assert rows[2]["id"][:12] in text and "write_file b.txt" in text

    refused = shared("undo", session)  # not a terminal: it will not ask, and will not act unasked
    assert refused.returncode == 1 and "ACODE-CLI-011" in refused.stderr
    assert (ws / "a.txt").exists()

    (ws / "notes.txt").write_text("edited while the session was done\n")  # the user's own edit
    undone = shared("undo", session, "--yes", "--json")
    assert undone.returncode == 0, undone.stderr
    restored = json.loads(undone.stdout)
    assert (restored["write"], restored["delete"], restored["left"]) == ([], ["a.txt", "b.txt"], ["notes.txt"])
    assert not (ws / "a.txt").exists() and (ws / "notes.txt").read_text() == "edited while the session was done\n"
    assert (ws / "README.md").read_text() == "# ws\n"

    again = shared("undo", session, "--to", restored["checkpoint"], "--yes")  # the undo, undone
    assert again.returncode == 0 and (ws / "b.txt").read_text() == "b\n", again.stderr

    rewound = shared("rewind", session, "--to", rows[2]["id"][:10], "--yes", "--steer", "say it again",
                     timeout=180)
    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert (ws / "a.txt").read_text() == "a\n"  # S1 kept: not run again
    assert (ws / "b.txt").read_text() == "b, redone\n"  # S2 run again, from the checkpoint before it
    shown = json.loads(shared("show", session, "--json").stdout)
    assert shown["session"]["status"] == "completed"
    types = [e["type"] for e in shown["events"]]
    assert types.count("workspace_restored") == 3 and "steered" in types
    assert sum(1 for e in shown["events"] if e["type"] == "checkpoint_taken") >= 4


def test_a_checkpoint_the_session_cannot_go_on_from_is_refused_with_a_code(shared: Acode, tmp_path: Path) -> None:
    _, session = _completed(shared, tmp_path)
    rows = [json.loads(line) for line in shared("checkpoints", session, "--json").stdout.splitlines()]
    verifier = next(r for r in rows if r["stage"] == "verifier")
    refused = shared("rewind", session, "--to", verifier["id"], "--yes")
    assert refused.returncode == 1 and "ACODE-CLI-003" in refused.stderr
    unknown = shared("undo", session, "--to", "0000000", "--yes")
    assert unknown.returncode == 1 and "ACODE-SBX-024" in unknown.stderr


def test_gc_drops_checkpoints_past_their_days_and_status_shows_the_stores(shared: Acode, tmp_path: Path) -> None:
    _, session = _completed(shared, tmp_path)
    kept = json.loads(shared("gc", "--keep-days", "7", "--json").stdout)
    mine = [row for row in kept["stores"] if row["workspace"] == str((tmp_path / "ws").resolve())]
    assert mine and mine[0]["dropped"] == 0 and mine[0]["kept"] >= 4 and mine[0]["bytes"] > 0
    assert "checkpoints:" in shared("status").stdout
    dropped = json.loads(shared("gc", "--keep-days", "0.000001", "--json").stdout)
    assert [row["kept"] for row in dropped["stores"] if row["workspace"] == mine[0]["workspace"]] == [0]
    listed = shared("checkpoints", session)
    assert listed.returncode == 1 and "ACODE-CLI-002" in listed.stderr
