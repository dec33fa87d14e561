"""acode's own files are private to the user who runs it; the workspace keeps the user's modes."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from tests.system.conftest import Acode

pytestmark = pytest.mark.system

SCRIPT = """version: 1
responses:
  planner:
    - json:
        goal: hello.py prints hello
        status: ready
        tasks:
          - label: T1
            title: Write pkg/hello.py
            complexity: 1
            resources: {write: [pkg/hello.py], commands: ["python pkg/hello.py"]}
            acceptance:
              - label: A1
                description: prints hello
                check: {command: "python pkg/hello.py", expect_exit: 0, expect_output: hello}
            steps:
              - {label: S1, title: Write pkg/hello.py, action: write_file, expected_output: pkg/hello.py}
  executor:
    - tool_calls: [{name: create_directory, arguments: {path: pkg}}]
    - tool_calls: [{name: write_file, arguments: {path: pkg/hello.py, content: "print('hello')\\n"}}]
    - tool_calls: [{name: run_terminal, arguments: {command: "touch pkg/made-by-a-command"}}]
    - tool_calls: [{name: step_complete, arguments: {summary: wrote pkg/hello.py}}]
  verifier:
    - json: {passed: true, summary: ok, criteria: []}
  reviewer:
    - json: {decision: approve, summary: looks right, issues: []}
"""


def _modes(home: Path) -> list[tuple[str, str, int]]:
    """Every path beneath ``home`` (itself included) that is not private or not ours."""
    wrong = []
    for path in [home, *home.rglob("*")]:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or stat.S_ISSOCK(info.st_mode):
            continue
        want = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if stat.S_IMODE(info.st_mode) & ~want or info.st_uid != os.getuid():
            wrong.append((str(path), f"{stat.S_IMODE(info.st_mode):04o}", info.st_uid))
    return wrong


@pytest.mark.parametrize("umask", [0o022, 0o002], ids=["umask022", "umask002"])
def test_a_new_home_is_private_after_a_full_session_and_the_workspace_keeps_the_users_modes(
        tmp_path: Path, home: Path, umask: int) -> None:
    acode_home = home / "fresh" / "acode"  # does not exist yet: acode up creates it
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)  # the baseline writes objects there
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    acode = Acode(acode_home, umask=umask)
    try:
        assert acode.up().returncode == 0
        result = acode("run", "write hello", "--workspace", str(workspace), "--provider", "scripted",
                       "--script", str(script))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "completed" in result.stdout
    finally:
        acode.close()
    assert (acode_home / "acode.db").exists() and list((acode_home / "run" / "logs").glob("*.log"))
    assert _modes(acode_home) == []
    # What acode made in the workspace is the user's, with the modes the user's umask gives.
    assert stat.S_IMODE((workspace / "pkg").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((workspace / "pkg" / "hello.py").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((workspace / "pkg" / "made-by-a-command").stat().st_mode) == 0o666 & ~umask
    objects = [p for p in (workspace / ".git" / "objects").rglob("*") if p.is_file() and len(p.parent.name) == 2]
    assert objects, "the baseline wrote no objects"
    assert {stat.S_IMODE(p.stat().st_mode) for p in objects} == {0o444 & ~umask}


def test_an_older_looser_home_is_tightened_at_up_with_one_line_per_path(home: Path) -> None:
    acode_home = home / "old"
    (acode_home / "run" / "logs").mkdir(parents=True)
    database = acode_home / "acode.db"
    sqlite3.connect(database).close()
    old_log = acode_home / "run" / "logs" / "planner.log"
    old_log.write_text("an older acode's log\n")
    for path, mode in [(acode_home, 0o755), (acode_home / "run", 0o755), (acode_home / "run" / "logs", 0o775),
                       (database, 0o644), (old_log, 0o664)]:
        os.chmod(path, mode)
    acode = Acode(acode_home, umask=0o022)
    try:
        result = acode.up()
        assert result.returncode == 0, result.stderr
        lines = [line for line in result.stderr.splitlines() if "made private" in line]
        assert sorted(lines) == sorted([
            f"acode up: made private: {acode_home} was 0755, now 0700",
            f"acode up: made private: {acode_home / 'run'} was 0755, now 0700",
            f"acode up: made private: {acode_home / 'run' / 'logs'} was 0775, now 0700",
            f"acode up: made private: {database} was 0644, now 0600",
            f"acode up: made private: {old_log} was 0664, now 0600",
        ])
        doctor = acode("doctor", "--workspace", str(home))
        assert f"{acode_home} 0700 owner" in doctor.stdout and f"{database} 0600 owner" in doctor.stdout
        assert "(private to you)" in doctor.stdout
    finally:
        acode.close()
    assert _modes(acode_home) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory owned by another uid needs root (chown)")
@pytest.mark.parametrize("foreign", ["home", "database"])
def test_a_home_or_database_owned_by_another_user_is_refused(home: Path, foreign: str) -> None:
    acode_home = home / "theirs"
    acode_home.mkdir(mode=0o700)
    database = acode_home / "acode.db"
    sqlite3.connect(database).close()
    os.chmod(database, 0o600)
    os.chown(acode_home if foreign == "home" else database, 65534, 65534)
    acode = Acode(acode_home)
    try:
        result = acode("up", "--detach")
        assert result.returncode == 1
        owned = acode_home if foreign == "home" else database
        assert f"acode {'home' if foreign == 'home' else 'database'} {owned} belongs to uid 65534, not to you" \
            in result.stderr
        assert "(ACODE-CFG-004)" in result.stderr
        assert not (acode_home / "run").exists(), "nothing may be created in a home that is not ours"
        doctor = acode("doctor", "--workspace", str(home))
        assert "FAIL  home" in doctor.stdout and "belongs to another user" in doctor.stdout
    finally:
        acode.close()
