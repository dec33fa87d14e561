"""A human watching: one session per workspace (--force recorded), attach from several
terminals, Ctrl-C pointing at attach, and `acode status` saying where each session stands.
The first two share one acode for the module (``shared``); the status check starts its own."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acode.client import Client
from cli.follow import attach_and_print
from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import Acode, json_lines, wait_exit

pytestmark = pytest.mark.system

QUESTIONS = {"json": {"goal": "greet", "status": "needs_clarification",
                      "questions": [{"label": "Q1", "question": "Which greeting?", "options": ["hello", "bonjour"]}]}}


def _submit(acode: Acode, workspace: Path, script: Path, *extra: str) -> tuple[int, str, str]:
    result = acode("run", "do the task", "--workspace", str(workspace), "--provider", "scripted",
                   "--script", str(script), *extra)
    return result.returncode, result.stdout, result.stderr


def _events(acode: Acode, session_id: str) -> list[dict]:  # type: ignore[type-arg]
    shown = acode("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["events"]  # type: ignore[no-any-return]


def test_an_unfinished_session_holds_its_workspace_force_overrides_it_and_the_hold_ends_with_it(
        shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    asks = w.script(tmp_path / "asks.yaml", {"planner": [QUESTIONS]})
    code, out, err = _submit(shared, workspace, asks)
    assert code == 22, out + err  # paused for the planner's question: it holds the workspace
    holder = out.split("session ", 1)[1].split(":", 1)[0]

    link = tmp_path / "same-dir"
    link.symlink_to(workspace)
    for path in (workspace, link):  # the same directory by another name is the same workspace
        code, out, err = _submit(shared, path, asks, "--detach")
        assert code == 1, out + err
        assert f"workspace {workspace} is held by session {holder} (paused (needs_input))" in err
        assert f"acode resume {holder}" in err and f"acode cancel {holder}" in err and "--force" in err
        assert "(ACODE-CLI-006)" in err

    elsewhere = w.workspace(tmp_path / "other")  # another workspace is not held
    code, out, err = _submit(shared, elsewhere, asks)
    assert code == 22, out + err

    code, out, err = _submit(shared, workspace, asks, "--force")
    assert code == 22, out + err
    assert f"(--force: session {holder} still holds it)" in out
    forced = out.split("session ", 1)[1].split(":", 1)[0]
    created = _events(shared, forced)[0]
    assert created["type"] == "session_created" and created["overrode_hold"] == holder

    for session in (holder, forced):
        assert shared("cancel", session).returncode == 0
    code, out, err = _submit(shared, workspace, asks, "--detach")  # the holds ended with their sessions
    assert code == 0, out + err


def test_two_attached_terminals_see_the_same_events_live_to_the_end(shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", w.workload({"planner": 2.0}))
    code, out, err = _submit(shared, workspace, script, "--detach")
    assert code == 0, err
    session_id = out.strip()
    first = shared.start("attach", session_id, "--json", "--replay", "1000")
    second = shared.start("attach", session_id[:13], "--json", "--replay", "1000")
    verbose = shared.start("attach", session_id, "--verbose", "--replay", "0")  # and the model's text
    results = [wait_exit(first), wait_exit(second)]
    streams = []
    for returncode, stdout, stderr in results:
        assert returncode == 0, stdout + stderr
        lines = json_lines(stdout)
        assert lines[-1]["session"]["status"] == "completed"
        streams.append(lines[:-1])
    assert streams[0] == streams[1] == _events(shared, session_id)
    assert [e["seq"] for e in streams[0]] == list(range(1, len(streams[0]) + 1))
    returncode, stdout, stderr = wait_exit(verbose)
    assert returncode == 0, stdout + stderr
    lines = stdout.splitlines()  # the planner's answer takes 2 s: the rest comes after the attach
    after_s3 = lines.index("[EXECUTOR]  T1/S3 turn 1: 1 tool call") + 1
    assert lines[after_s3] == '            > [call] write_file {"content": "beta\\n", "path": "b.txt"}'
    assert '            > {"decision":"approve","summary":"all there","issues":[]}' in lines

    text = shared("attach", session_id, "--replay", "2")  # a finished session: shown, then left
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("[… ") and f"`acode show {session_id}` has them all" in lines[0]
    assert lines[2] == "completed (exit 0)"
    # log.txt: made by the command slow.py, listed all the same (the workspace against its baseline)
    assert lines[3] == (f"session {session_id} is completed; files changed: a.txt (added), b.txt (added), "
                        "log.txt (added)")


def test_attach_leaves_a_session_that_paused_between_its_reads_of_the_session_and_the_events(
        shared: Acode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replays a race seen under load: ``acode approve --detach`` then ``acode attach``; attach
    read the session while it ran, then its events, by then ending with the pause, and
    followed from after that pause: it waited for an event that never came (a CI timeout)."""
    workspace = w.workspace(tmp_path / "w")
    code, out, err = _submit(shared, workspace, w.script(tmp_path / "asks.yaml", {"planner": [QUESTIONS]}))
    assert code == 22, out + err
    session_id = out.split("session ", 1)[1].split(":", 1)[0]
    with Client(shared.home) as client:
        paused = client.session(session_id)
        assert paused.status == "paused"
        reads = [msgspec.structs.replace(paused, status="running", pause=None)]  # as read before it paused
        real = client.session
        client.session = lambda session: reads.pop() if reads else real(session)  # type: ignore[method-assign]
        done: list[Any] = []
        attaching = threading.Thread(target=lambda: done.append(attach_and_print(client, session_id, replay=0)),
                                     daemon=True)
        attaching.start()
        attaching.join(timeout=20)
        assert done, "attach followed a session that had stopped, waiting for an event that never comes"
    assert done[0].status == "paused" and not reads
    assert f"session {session_id} is paused; `acode resume {session_id}` continues it" in capsys.readouterr().out
    assert shared("cancel", session_id).returncode == 0


def test_ctrl_c_on_run_detaches_and_names_attach_and_status_says_where_sessions_stand(
        acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload()
    responses["executor"][2] = {**responses["executor"][2], "delay_s": 30.0}  # S2's first answer is slow
    script = w.script(tmp_path / "s.yaml", responses)
    run = acode.start("run", "do the task", "--workspace", str(workspace), "--provider", "scripted",
                      "--script", str(script))

    def where() -> str | None:
        shown = acode("status")
        return shown.stdout if "executor T1/S2, step 2 of 3" in shown.stdout else None

    status = wait_until(where, timeout=60, interval=0.3, what="status showing the executor at T1/S2")
    session_id = next(line.split()[0] for line in status.splitlines() if "executor T1/S2" in line)
    assert "running" in status.split(session_id, 1)[1].splitlines()[0]

    os.kill(run.pid, signal.SIGINT)
    code, _, err = wait_exit(run)
    assert code == 130
    assert f"detached: session {session_id} goes on; `acode attach {session_id}` follows it again" in err
    assert acode("cancel", session_id).returncode == 0
    assert session_id not in acode("status").stdout  # a cancelled session is no longer listed
