"""The sandbox as a process: broker, a journal actor and the sandbox over real sockets."""

from __future__ import annotations

import fcntl
import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest
import zmq

from actors.sandbox.tools.terminal import SCRATCH_PREFIX
from broker.client import Client
from protocol import codec
from protocol.basics.ids import new_id
from protocol.messages import Envelope, Error, RunTool, ToolDone
from protocol.plans.results import ToolResult
from protocol.policy.sandbox import SandboxPolicy
from protocol.transport import frames
from tests.harness import Harness, wait_until

JOURNAL = "tests.actors.sandbox.journal_actor"


@pytest.fixture
def sandbox(harness: Harness) -> Harness:
    harness.start("broker")
    harness.start("persistence", module=JOURNAL)
    harness.start("sandbox")
    return harness


@pytest.fixture
def workspace(home: Path) -> Path:
    path = home / "ws"
    path.mkdir()
    return path


# the tests drive commands through sh; the policy's own refusals are tested in test_policy.py
WITH_SH = SandboxPolicy(extra_commands=["sh"], allow_inline_code=True)


def _tool(workspace: Path, tool: str, key: str | None = None, **arguments: Any) -> RunTool:
    return RunTool(key=key or new_id(), session_id="s1", workspace=str(workspace), tool=tool, arguments=arguments,
                   policy=WITH_SH)


def _call(client: Client, body: RunTool, timeout: float = 15.0) -> ToolResult:
    reply = client.call("sandbox", body, timeout=timeout, decoder=codec.SANDBOX_REPLY)
    assert isinstance(reply, ToolDone)
    return reply.result


def _pump(client: Client) -> None:
    client.socket.poll(20)
    client.on_readable()
    client.tick()


def test_a_run_tool_round_trip_writes_the_file(sandbox: Harness, workspace: Path) -> None:
    result = _call(sandbox.client(), _tool(workspace, "write_file", path="pkg/hello.py", content="print('hi')\n"))
    assert (result.ok, result.output, result.path, result.replayed) == (True, "wrote 12 bytes to pkg/hello.py",
                                                                        "pkg/hello.py", False)
    assert (workspace / "pkg" / "hello.py").read_text() == "print('hi')\n"


def test_each_answered_call_writes_its_line_with_every_field(sandbox: Harness, workspace: Path) -> None:
    # the line is written just after the reply is sent: waited for, not expected at once
    client = sandbox.client()
    wrote, missing = _tool(workspace, "write_file", path="a.txt", content="a\n"), _tool(workspace, "read_file",
                                                                                        path="nope.txt")
    assert _call(client, wrote).ok and not _call(client, missing).ok

    def answered() -> dict[str, dict[str, Any]] | None:
        lines = [json.loads(line) for line in sandbox.log("sandbox").splitlines() if line.startswith("{")]
        found = {e["key"]: e for e in lines if e.get("event") == "tool_call_answered"}
        return found if {wrote.key, missing.key} <= set(found) else None

    lines = wait_until(answered, what="tool_call_answered lines")
    for body, ok, error in ((wrote, True, None), (missing, False, "ACODE-SBX-003")):
        line = lines[body.key]
        assert (line["session_id"], line["tool"], line["ok"], line["outcome"], line["replayed"], line["error"],
                line["level"]) == ("s1", body.tool, ok, "done", False, error, "info")
        assert line["duration_ms"] >= 0 and line["trace_id"]


def test_the_same_key_twice_runs_the_command_once(sandbox: Harness, workspace: Path) -> None:
    client = sandbox.client()
    # a script, not sh -c: a program with no table is destructive, and this client carries no approval
    (workspace / "once.py").write_text("open('count.txt', 'a').write('ran\\n')\nprint('done')\n")
    request = _tool(workspace, "run_terminal", command="python once.py")
    first, second = _call(client, request), _call(client, request)
    assert (first.ok, first.exit_code, first.output, first.replayed) == (True, 0, "done\n", False)
    assert second.replayed
    assert msgspec.structs.replace(second, replayed=False) == first
    assert (workspace / "count.txt").read_text() == "ran\n"


def test_calls_run_four_at_a_time(sandbox: Harness, workspace: Path) -> None:
    # Each command marks that it started, then blocks on a shared lock the test holds.
    blocked = ("python -c \"import fcntl, sys; open(sys.argv[1], 'w').close(); "
               "fcntl.flock(open('gate'), fcntl.LOCK_SH)\" started-{}")
    client = sandbox.client()
    results: list[Any] = []
    with open(workspace / "gate", "w") as gate:
        fcntl.flock(gate, fcntl.LOCK_EX)
        for i in range(4):
            client.send("sandbox", _tool(workspace, "run_terminal", command=blocked.format(i)), timeout=20,
                        decoder=codec.SANDBOX_REPLY, on_reply=lambda reply, error: results.append(reply or error))
        wait_until(lambda: _pump(client) or len(list(workspace.glob("started-*"))) == 4, what="4 commands at once")
    wait_until(lambda: _pump(client) or len(results) == 4, what="4 replies")
    assert all(isinstance(r, ToolDone) and r.result.ok for r in results)


def _children(pid: int, name: str) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.name() == name:
                found.append(child)
        except psutil.NoSuchProcess:
            pass  # a launcher that just exec'd or exited
    return found


def _scratch_of(pid: int) -> list[Path]:
    """The command scratch directories of the sandbox with ``pid``."""
    return list(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{pid}-*"))


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_sandbox_killed_mid_command_leaves_no_process_and_reports_outcome_unknown(
        sandbox: Harness, workspace: Path) -> None:
    client = sandbox.client()
    (workspace / "slow.py").write_text("import os\nopen('count.txt', 'a').write('ran\\n')\n"
                                       "os.execvp('sleep', ['sleep', '30'])\n")
    request = _tool(workspace, "run_terminal", command="python slow.py")
    request_id = client.send("sandbox", request, timeout=30, decoder=codec.SANDBOX_REPLY, retry_on_lost=False)
    sandbox_pid = sandbox.procs["sandbox"].pid

    [command] = wait_until(lambda: _children(sandbox_pid, "sleep"), what="the command running under the sandbox")
    sandbox.kill("sandbox")
    client.cancel(request_id)
    wait_until(lambda: _gone(command), what="the command killed with the sandbox")

    assert _scratch_of(sandbox_pid)  # the killed sandbox could not remove its command's scratch
    sandbox.start("sandbox")
    assert not _scratch_of(sandbox_pid)  # its successor did, at start
    result = _call(client, request)
    assert (result.ok, result.outcome) == (False, "unknown")
    assert result.error is not None and result.error.code == "ACODE-SBX-008"
    assert "check the workspace before retrying" in result.error.message
    assert (workspace / "count.txt").read_text() == "ran\n"  # not run a second time


def test_a_stopped_sandbox_kills_its_running_command_and_exits_cleanly(sandbox: Harness, workspace: Path) -> None:
    client = sandbox.client()
    client.send("sandbox", _tool(workspace, "run_terminal", command="sleep 30"), timeout=30,
                decoder=codec.SANDBOX_REPLY)
    sandbox_pid = sandbox.procs["sandbox"].pid
    [command] = wait_until(lambda: _children(sandbox_pid, "sleep"), what="the command running")
    assert sandbox.stop("sandbox") == 0
    wait_until(lambda: _gone(command), what="the command killed at stop")


def test_a_malformed_run_tool_gets_an_error_and_the_sandbox_still_serves(sandbox: Harness, workspace: Path) -> None:
    sock = sandbox.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(sandbox.endpoints.broker)
        request_id = new_id()
        body = msgspec.msgpack.encode({"type": "run_tool", "key": "k", "tool": 3})
        sock.send_multipart([frames.MAGIC, frames.REQUEST, b"sandbox", codec.encode(Envelope(id=request_id)), body])
        assert sock.poll(10_000)
        split = frames.parse(sock.recv_multipart())
        reply = codec.SANDBOX_REPLY.decode(split.body)
        assert codec.decode_envelope(split.header).correlation_id == request_id
        assert isinstance(reply, Error)
        assert reply.error.code == "ACODE-PROTO-002"
        assert reply.error.message.startswith("sandbox request body rejected:")
    finally:
        sock.close()
    assert _call(sandbox.client(), _tool(workspace, "list_directory")).output == "[. is an empty directory]"


def test_a_sandbox_killed_mid_command_leaves_no_orphan_even_a_double_forked_daemon(
        sandbox: Harness, workspace: Path) -> None:
    marker = "1234.567"  # the grandchild's sleep: found by its command line (pids differ in a namespace)
    code = (f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\ntime.sleep(60)")
    request = RunTool(key=new_id(), session_id="s1", workspace=str(workspace), tool="run_terminal",
                      arguments={"command": f"python -c \"{code}\""},
                      policy=SandboxPolicy(allow_inline_code=True))
    client = sandbox.client()
    client.send("sandbox", request, timeout=30, decoder=codec.SANDBOX_REPLY, retry_on_lost=False)

    def daemons() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker]
                and p.status() != psutil.STATUS_ZOMBIE]

    wait_until(daemons, what="the double-forked daemon running")
    sandbox_pid = sandbox.procs["sandbox"].pid
    sandbox.kill("sandbox")
    wait_until(lambda: not daemons(), what="the daemon killed with the sandbox")
    sandbox.start("sandbox")
    assert not _scratch_of(sandbox_pid)  # swept by the next sandbox at its start
