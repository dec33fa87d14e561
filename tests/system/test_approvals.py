"""Autonomy levels and approvals, end to end: real CLI processes, every actor a process, the
stand-in model server on loopback.

One step of the plan makes four calls in one turn: a read, a write, an allowlisted
command and a destructive one. What ran is read from the ``tool_called`` events; what
needed a decision from the ``approval_decided`` events and the pauses; what the model was
told from the requests the server received.

A session's approvals settings and model are resolved by ``acode run``, so the tests share
one acode for the module (``shared``), each with its own server, workspace and sessions;
the kill -9 drills start their own.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acode.connection import Connection
from broker.client import Client
from protocol import codec
from protocol.messages import GetSession, RunTool
from tests.harness import wait_until
from tests.modelserver import Json, ModelServer, ToolCalls
from tests.system.conftest import CLI, REPO, Acode, read_until
from tests.system.test_models import APPROVE, VERDICT, _configure, _workspace, done, plan

pytestmark = pytest.mark.system

FOUR = ToolCalls([("read_file", {"path": "check.py"}), ("write_file", {"path": "greet.txt", "content": "hello\n"}),
                  ("run_terminal", {"command": "python check.py"}), ("run_terminal", {"command": "rm old.txt"})])


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _unchecked_plan() -> Json:
    """The plan without its command check (A1 judged by the model): the verifier's checks
    are gated too, and this test is about the executor's four calls."""
    value = plan().value
    value["tasks"][0]["acceptance"] = [{"label": "A2", "description": "nothing else changed"}]
    return Json(value)


def _checked_plan(command: str) -> Json:
    """The plan with ``command`` as its one acceptance check."""
    value = plan().value
    value["tasks"][0]["resources"]["commands"] = [command]
    value["tasks"][0]["acceptance"] = [{"label": "A1", "description": "greet.txt says hello",
                                        "check": {"command": command, "expect_exit": 0}}]
    return Json(value)


def _ws(tmp_path: Path) -> Path:
    root = _workspace(tmp_path)
    (root / "old.txt").write_text("old\n")
    return root


def _events(acode: Acode, session_id: str) -> list[dict[str, Any]]:
    shown = acode("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    events: list[dict[str, Any]] = json.loads(shown.stdout)["events"]
    return events


def _session(acode: Acode, session_id: str) -> dict[str, Any]:
    shown = acode("show", session_id, "--json")
    return json.loads(shown.stdout)["session"]  # type: ignore[no-any-return]


def _executor_calls(events: list[dict[str, Any]]) -> list[str]:
    """The executor's calls that ran, as ``tool target`` (context reads and previews left out)."""
    return [f"{e['tool']} {e['target']}" for e in events if e["type"] == "tool_called"
            and ":e1:T1/S1:t" in e["key"] and ":preview" not in e["key"]]


def _decided(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["target"], e["decision"], e.get("by", "")) for e in events if e["type"] == "approval_decided"]


@pytest.mark.parametrize(("level", "asked"), [
    (0, ["greet.txt", "python check.py", "rm old.txt"]),
    (1, ["python check.py", "rm old.txt"]),
    (2, ["rm old.txt"]),
    (3, []),
])
def test_each_autonomy_level_runs_what_it_allows_and_asks_for_the_rest(
        shared: Acode, server: ModelServer, tmp_path: Path, level: int, asked: list[str]) -> None:
    """non_interactive_policy: skip denies every call that would ask, so one run shows them all."""
    _configure(shared, server, ACODE_APPROVALS__NON_INTERACTIVE_POLICY="skip")
    workspace = _ws(tmp_path)
    (workspace / "greet.txt").write_text("hello\n")  # so the checks pass whichever calls ran
    server.by_stage(planner=[_unchecked_plan()], executor=[FOUR, done(), done()], verifier=[VERDICT],
                    reviewer=[APPROVE])
    result = shared("run", "make greet.txt say hello", "--workspace", str(workspace), "--autonomy", str(level),
                   timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    session_id = result.stdout.split("session ", 1)[1].split(":", 1)[0]
    events = _events(shared, session_id)
    every = ["read_file check.py", "write_file greet.txt", "run_terminal python check.py", "run_terminal rm old.txt"]
    assert _executor_calls(events) == [c for c in every if c.split(" ", 1)[1] not in asked]
    assert _decided(events) == [(target, "deny", "approvals policy") for target in asked]
    assert (workspace / "old.txt").exists() == ("rm old.txt" in asked)
    second = [r for r in server.chats if r.stage == "executor"][1].messages
    denials = [m["content"] for m in second if "the user denied this: skipped: non-interactive" in m["content"]]
    assert len(denials) == len(asked), "the model is told of every skipped call"
    assert _session(shared, session_id)["settings"].get("autonomy", 2) == level


def _paused(acode: Acode, session_id: str, timeout: float = 90.0) -> dict[str, Any]:
    def waiting() -> dict[str, Any] | None:
        with Connection(acode.home) as connection:
            snap = connection.persistence(GetSession(session_id=session_id)).session
        return snap if snap.status == "paused" else None

    snap = wait_until(waiting, timeout, interval=0.1, what="the session paused")
    assert snap.pause.kind == "awaiting_approval", snap.pause
    return {"snap": snap}


def _submit_detached(acode: Acode, workspace: Path, *args: str) -> str:
    result = acode("run", "make greet.txt say hello", "--workspace", str(workspace), "--detach", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_deny_reaches_the_model_and_approve_always_lets_later_calls_of_the_rule_run(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _ws(tmp_path)
    (workspace / "b.txt").write_text("b\n")
    (workspace / "c.txt").write_text("c\n")
    rm = [ToolCalls([("run_terminal", {"command": f"rm {name}"})]) for name in ("old.txt", "b.txt", "c.txt")]
    server.by_stage(planner=[plan()], executor=[*rm[:2], rm[2], ToolCalls([("write_file", {
        "path": "greet.txt", "content": "hello\n"})]), done()], verifier=[VERDICT], reviewer=[APPROVE])
    session_id = _submit_detached(shared, workspace)
    snap = _paused(shared, session_id)["snap"]
    assert snap.approval.tool == "run_terminal" and snap.approval.argv == ["rm", "old.txt"]
    assert snap.approval.cwd == str(workspace) and snap.approval.risk == "destructive"
    assert snap.exit_code == 22 and snap.pause.command == f"acode approve {session_id}"

    denied = shared("deny", session_id, "--reason", "keep old.txt", "--detach")
    assert denied.returncode == 0, denied.stderr
    assert "wants to run run_terminal (destructive): rm old.txt" in denied.stdout
    snap = _paused(shared, session_id)["snap"]  # the model went on: rm b.txt now waits
    assert snap.approval.argv == ["rm", "b.txt"]
    told = [r for r in server.chats if r.stage == "executor"][1].messages
    assert any("the user denied this: keep old.txt" in m["content"] for m in told)
    assert (workspace / "old.txt").exists()

    approved = shared("approve", session_id, "--always", timeout=180)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "every later call with exactly this rule:\n  run_terminal: rm (destructive)\n" in approved.stdout
    assert "not a terminal: approving with this rule as --always asked" in approved.stdout
    assert "completed (exit 0)" in approved.stdout
    events = _events(shared, session_id)
    assert not (workspace / "b.txt").exists() and not (workspace / "c.txt").exists(), "--always let rm c.txt run"
    assert (workspace / "old.txt").exists(), "the denied call stays denied when the attempt is replayed"
    assert [(t, d, b) for t, d, b in _decided(events)] == [("rm old.txt", "deny", "acode deny"),
                                                           ("rm b.txt", "approve", "acode approve")]
    decided = [e for e in events if e["type"] == "approval_decided"]
    assert decided[0]["reason"] == "keep old.txt" and decided[1]["always"] is True and decided[0]["at"] > 0
    ran = [e for e in events if e["type"] == "tool_called" and e["target"].startswith("rm ")]
    assert [e["target"] for e in ran] == ["rm b.txt", "rm c.txt"], "each approved call ran once"


def test_non_interactive_fail_pauses_with_exit_33_and_auto_runs_the_call(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)  # the default policy is fail
    workspace = _ws(tmp_path)
    server.by_stage(planner=[plan()], executor=[FOUR, done()], verifier=[VERDICT], reviewer=[APPROVE])
    failed = shared("run", "make greet.txt say hello", "--workspace", str(workspace), timeout=180)
    assert failed.returncode == 33, failed.stdout + failed.stderr
    assert "paused (awaiting_approval)" in failed.stdout and "(ACODE-EXEC-005)" in failed.stdout
    assert "non_interactive_policy: fail" in failed.stdout and (workspace / "old.txt").exists()

    shared.env["ACODE_APPROVALS__NON_INTERACTIVE_POLICY"] = "auto"
    (tmp_path / "second").mkdir()
    other = _ws(tmp_path / "second")
    server.by_stage(planner=[plan()], executor=[FOUR, done()], verifier=[VERDICT], reviewer=[APPROVE])
    session_id = failed.stdout.split("session ", 1)[1].split(":", 1)[0]
    shared("cancel", session_id)
    auto = shared("run", "make greet.txt say hello", "--workspace", str(other), timeout=180)
    assert auto.returncode == 0, auto.stdout + auto.stderr
    assert not (other / "old.txt").exists()
    events = _events(shared, auto.stdout.split("session ", 1)[1].split(":", 1)[0])
    assert _decided(events) == [("rm old.txt", "approve", "approvals policy")]


def test_the_sandbox_refuses_a_prompt_class_call_that_carries_no_matching_approval(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _ws(tmp_path)
    server.by_stage(planner=[plan()], executor=[FOUR, done()], verifier=[VERDICT], reviewer=[APPROVE])
    session_id = _submit_detached(shared, workspace)
    snap = _paused(shared, session_id)["snap"]
    request = snap.approval
    with Connection(shared.home) as connection:
        connection.require_running()
        client = Client(connection.ctx, connection.endpoints.broker, sender="executor")  # as a buggy stage would
        try:
            def send(approval: str, command: str = "rm old.txt") -> Any:
                body = RunTool(key=request.key, session_id=session_id, workspace=str(workspace), tool="run_terminal",
                               arguments={"command": command}, approval=approval)
                return client.call("sandbox", body, timeout=30, decoder=codec.SANDBOX_REPLY).result

            bare = send("")
            forged = send("0190-not-a-decision")
            harmless = send("", "python check.py")
        finally:
            client.close()
    assert bare.error.code == "ACODE-SBX-019" and "carries no approval" in bare.error.message
    assert forged.error.code == "ACODE-SBX-019" and "does not approve this call" in forged.error.message
    assert harmless.ok, harmless  # an execute-class call needs nothing at level 2
    assert (workspace / "old.txt").exists(), "nothing refused ran"


@pytest.mark.parametrize("victim", ["coordinator", "executor"])
def test_a_kill_9_while_awaiting_approval_loses_nothing_and_the_call_runs_once(
        acode: Acode, server: ModelServer, tmp_path: Path, victim: str) -> None:
    _configure(acode, server)
    acode.up()
    workspace = _ws(tmp_path)
    server.by_stage(planner=[plan()], executor=[FOUR, done()], verifier=[VERDICT], reviewer=[APPROVE])
    session_id = _submit_detached(acode, workspace)
    _paused(acode, session_id)
    if victim == "coordinator":
        pid = acode.status()["pid"]
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: acode.status_or_none() is None, 30, what="the coordinator gone")
        up = acode.up()
        assert up.returncode == 0, up.stderr
    else:
        epoch = acode.kill("executor")["epoch"]
        acode.wait_restarted("executor", epoch)
    snap = _paused(acode, session_id)["snap"]  # after recovery it still waits, for the same call
    assert snap.approval.argv == ["rm", "old.txt"]
    approved = acode("approve", session_id, timeout=180)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    events = _events(acode, session_id)
    assert [e["target"] for e in events if e["type"] == "tool_called" and e["target"] == "rm old.txt"] == ["rm old.txt"]
    assert not (workspace / "old.txt").exists()
    assert [r.stage for r in server.chats].count("executor") == 2, "no model answer was asked twice"


def test_a_foreground_run_on_a_terminal_asks_inline_and_the_answer_decides(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _ws(tmp_path)
    server.by_stage(planner=[plan()], executor=[FOUR, done()], verifier=[VERDICT], reviewer=[APPROVE])
    main, child = pty.openpty()
    proc = subprocess.Popen([*CLI, "--home", str(shared.home), "run", "make greet.txt say hello", "--workspace",
                             str(workspace), "--autonomy", "1"], env=shared.env, cwd=REPO, stdin=child,
                            stdout=child, stderr=child, close_fds=True)
    shared.running.append(proc)  # type: ignore[arg-type]  # killed by the fixture if the test fails
    os.close(child)
    try:
        shown = read_until(main, "[q]uit: ")
        assert "wants to run run_terminal (execute): python check.py" in shown
        assert "argv: ['python', 'check.py']" in shown and f"cwd: {workspace}" in shown
        os.write(main, b"a\n")  # always: python ... (execute) for the rest of the session
        shown = read_until(main, "approve with this rule? [y/N]: ")
        assert "run_terminal: python (execute)" in shown  # the rule, in full, before confirming
        os.write(main, b"y\n")
        shown = read_until(main, "[q]uit: ")
        assert "wants to run run_terminal (destructive): rm old.txt" in shown
        os.write(main, b"d\n")
        os.write(main, b"n\n")
        shown = read_until(main, "reason (optional): ")
        os.write(main, b"not this one\n")
        shown = read_until(main, "completed (exit 0)")
        assert "rm old.txt (destructive) denied by the inline prompt: not this one" in shown
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(main)
    assert (workspace / "old.txt").exists()


def test_a_write_that_waits_shows_the_unified_diff_against_the_file_as_it_is(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _ws(tmp_path)
    (workspace / "greet.txt").write_text("hi\nsame\n")
    write = ToolCalls([("write_file", {"path": "greet.txt", "content": "hello\nsame\n"})])
    server.by_stage(planner=[plan()], executor=[write, done()], verifier=[VERDICT], reviewer=[APPROVE])
    session_id = _submit_detached(shared, workspace, "--autonomy", "0")
    snap = _paused(shared, session_id)["snap"]
    assert (snap.approval.tool, snap.approval.risk, snap.approval.why) == ("write_file", "write",
                                                                           "write calls ask at autonomy 0")
    assert snap.approval.diff.splitlines() == ["--- a/greet.txt", "+++ b/greet.txt", "@@ -1,2 +1,2 @@", "-hi",
                                               "+hello", " same"]
    shown = shared("show", session_id).stdout
    assert "wants to run write_file (write): greet.txt" in shown and "    -hi" in shown
    assert (workspace / "greet.txt").read_text() == "hi\nsame\n"
    assert shared("cancel", session_id).returncode == 0


def test_a_config_edit_mid_session_changes_nothing_the_session_was_started_with(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _ws(tmp_path)
    (workspace / "b.txt").write_text("b\n")
    (workspace / ".agent").mkdir()
    config = workspace / ".agent" / "config.yml"
    config.write_text("autonomy: 2\n")
    rm = [ToolCalls([("run_terminal", {"command": f"rm {name}"})]) for name in ("old.txt", "b.txt")]
    server.by_stage(planner=[plan()], executor=[*rm, write_greet(), done()], verifier=[VERDICT], reviewer=[APPROVE])
    session_id = _submit_detached(shared, workspace)
    _paused(shared, session_id)
    config.write_text("autonomy: 3\napprovals:\n  file_delete: auto\n")  # seed 002 S9: read once, at session start
    assert shared("approve", session_id, "--detach").returncode == 0
    snap = _paused(shared, session_id)["snap"]
    assert snap.approval.argv == ["rm", "b.txt"] and snap.settings.autonomy == 2, "rm b.txt still asks"
    assert (workspace / "b.txt").exists() and not (workspace / "old.txt").exists()
    assert shared("cancel", session_id).returncode == 0


def write_greet() -> ToolCalls:
    return ToolCalls([("write_file", {"path": "greet.txt", "content": "hello\n"})])


def test_a_check_the_level_does_not_allow_waits_for_approval_and_runs_once_approved(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    """A plan's check is a model's command too: at level 2 a destructive one waits for the
    user in the verifier, the sandbox refuses it unapproved, and once approved it runs once."""
    _configure(shared, server)
    workspace = _ws(tmp_path)
    check = "rm old.txt"
    server.by_stage(planner=[_checked_plan(check)], executor=[ToolCalls([("write_file", {
        "path": "greet.txt", "content": "hello\n"})]), done()], reviewer=[APPROVE])
    session_id = _submit_detached(shared, workspace)
    snap = _paused(shared, session_id)["snap"]
    assert snap.stage == "verifier" and snap.approval is not None
    assert (snap.approval.tool, snap.approval.risk, snap.approval.argv) == ("run_terminal", "destructive",
                                                                           ["rm", "old.txt"])
    assert (workspace / "old.txt").exists(), "nothing ran before the decision"

    with Connection(shared.home) as connection:  # the same call, sent as the verifier sends it
        connection.require_running()
        client = Client(connection.ctx, connection.endpoints.broker, sender="verifier")
        try:
            reply = client.call("sandbox", RunTool(key=snap.approval.key, session_id=session_id,
                                                   workspace=str(workspace), tool="run_terminal",
                                                   arguments={"command": check}),
                                timeout=30, decoder=codec.SANDBOX_REPLY)
        finally:
            client.close()
    assert reply.result.error is not None and reply.result.error.code == "ACODE-SBX-019"
    assert (workspace / "old.txt").exists()

    approved = shared("approve", session_id, "--verbose", timeout=180)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert '> {"decision": "approve", "summary": "greet.txt is right", "issues": []}' in approved.stdout, \
        "--verbose: the model's text from the approval on (here the reviewer's)"
    assert not (workspace / "old.txt").exists()
    events = _events(shared, session_id)
    ran = [e for e in events if e["type"] == "tool_called" and e["target"] == check]
    assert len(ran) == 1, "the approved check ran exactly once"
    assert [e["passed"] for e in events if e["type"] == "check_ran"] == [True]
    assert _decided(events) == [(check, "approve", "acode approve")]
