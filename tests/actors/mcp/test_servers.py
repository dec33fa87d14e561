"""The mcp actor's hub and servers in this process, against real SDK servers: what the
system tests (tests/system/test_mcp.py) leave out because each needs a server of its own —
an HTTP server gone and back, a call past its timeout, a capped result, and a stdio server
under Landlock (the system tests run at the machine's strongest level, bubblewrap)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from actors.mcp import confined
from actors.mcp.hub import Hub
from actors.mcp.pins import Pins
from actors.mcp.server import BACKOFF_MAX_S, backoff
from actors.sandbox.confinement.isolation import Isolation, detect
from protocol.calls.mcp import McpServerConfig
from protocol.messages import McpCalled, McpCallTool, McpListTools, McpServerRef, McpServerState
from tests.harness import listening, wait_until

SERVERS = Path(__file__).resolve().parents[2] / "mcp_servers"


def _run(tmp_path: Path, isolation: Callable[[], Isolation], work: Callable[[Hub], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        hub = Hub(Pins(tmp_path / "pins.json"), isolation=isolation, hidden=(), log_dir=tmp_path / "logs",
                  log=structlog.get_logger())
        try:
            await work(hub)
        finally:
            await hub.close()

    asyncio.run(main())


def _state(tools: Any, name: str) -> McpServerState:
    return next(s for s in tools.servers if s.name == name)




@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(SERVERS / "stdio_server.py", root)
    return root


class HttpServer:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SERVERS / "http_server.py"), str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: listening(self.port), 30, what="the HTTP MCP server listening")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def http() -> Iterator[HttpServer]:
    server = HttpServer()
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_an_http_server_gone_is_failed_with_the_reason_and_connected_again_once_back(
        tmp_path: Path, http: HttpServer) -> None:
    ref = McpServerRef(name="web", config=McpServerConfig(url=f"http://127.0.0.1:{http.port}/mcp", timeout_s=5))
    listing = McpListTools(workspace=str(tmp_path), servers=[ref])
    call = McpCallTool(key="k", workspace=str(tmp_path), server=ref, tool="add", arguments={"a": 1, "b": 2})

    async def work(hub: Hub) -> None:
        assert _state(await hub.list(listing), "web").state == "ready"
        http.kill()
        gone = _state(await hub.list(listing), "web")
        assert gone.state in ("failed", "restarting") and gone.tools == 0 and gone.error is not None
        assert "check that the server is running and serves MCP at http://127.0.0.1:" in gone.error.message
        refused = await hub.call(call)
        assert refused.error is not None and refused.error.code == "ACODE-MCP-001"
        assert refused.error.message.endswith("the call to add was not sent")
        http.start()
        deadline = time.monotonic() + 30
        while _state(back := await hub.list(listing), "web").state != "ready" and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        state = _state(back, "web")
        assert (state.state, state.tools, state.error) == ("ready", 2, None) and state.restarts >= 1
        assert await hub.call(call) == McpCalled(ok=True, output="3")

    _run(tmp_path, detect, work)


def test_a_call_past_its_timeout_fails_once_a_long_result_is_capped_and_bad_arguments_are_the_models(
        tmp_path: Path, workspace: Path) -> None:
    ref = McpServerRef(name="tst", config=McpServerConfig(command=sys.executable, args=["stdio_server.py"],
                                                          timeout_s=1))

    async def work(hub: Hub) -> None:
        slow = await hub.call(McpCallTool(key="s", workspace=str(workspace), server=ref, tool="slow",
                                          arguments={"seconds": 3, "token": "t1"}))
        assert slow.error is not None and slow.error.code == "ACODE-MCP-003", slow
        assert "did not answer within 1s" in slow.error.message
        long = await hub.call(McpCallTool(key="e", workspace=str(workspace), server=ref, tool="echo",
                                          arguments={"text": "x" * 5_000}, output_limit_bytes=1_024))
        assert long.ok and len(long.output.encode()) <= 1_024 and long.output.endswith("of 5006 bytes]")
        wrong = await hub.call(McpCallTool(key="w", workspace=str(workspace), server=ref, tool="echo",
                                           arguments={"txet": "x"}))
        assert (wrong.ok, wrong.error) == (False, None) and "text" in wrong.output, wrong  # the model may correct it
        await asyncio.sleep(2.5)  # the slow call would have finished by now, had it run again
        assert (tmp_path / "logs" / "mcp-tst.log").read_text().count("CALLED slow t1") == 1

    _run(tmp_path, detect, work)


def test_under_landlock_a_stdio_server_reads_writes_and_connects_only_as_configured(
        tmp_path: Path, workspace: Path) -> None:
    landlock = detect(bubblewrap=False)
    if landlock.level != "landlock" or landlock.landlock_abi < 4:
        pytest.skip(f"this machine's kernel has no Landlock with TCP rules (found {landlock.level}, "
                    f"ABI {landlock.landlock_abi})")
    canary = tmp_path / "canary.txt"
    canary.write_text("secret")
    confined_ref = McpServerRef(name="tst", config=McpServerConfig(command=sys.executable, args=["stdio_server.py"]))
    open_ref = McpServerRef(name="opn", config=McpServerConfig(command=sys.executable, args=["stdio_server.py"],
                                                               writes=True, network=True))

    async def work(hub: Hub) -> None:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            arguments = {"canary": str(canary), "port": listener.getsockname()[1]}
            seen = {}
            for ref in (confined_ref, open_ref):
                called = await hub.call(McpCallTool(key=ref.name, workspace=str(workspace), server=ref, tool="probe",
                                                    arguments=arguments))
                assert called.ok, called
                seen[ref.name] = json.loads(called.output)
        assert [seen["tst"][what][:6] for what in ("read", "connect", "write")] == ["error:"] * 3, seen["tst"]
        assert (seen["opn"]["connect"], seen["opn"]["write"]) == ("connected", "written"), seen["opn"]
        assert seen["opn"]["read"].startswith("error:")  # writes and network, still no reading outside
        listed = await hub.list(McpListTools(workspace=str(workspace), servers=[confined_ref]))
        assert listed.servers[0].isolation == "landlock: workspace read-only, no TCP, fresh HOME, configured env only"

    _run(tmp_path, lambda: landlock, work)
    assert not list(Path(tempfile.gettempdir()).glob(f"{confined.SCRATCH_PREFIX}{os.getpid()}-*"))  # removed


def test_a_server_that_cannot_start_is_failed_with_the_end_of_its_log_and_retried_with_backoff(
        tmp_path: Path, workspace: Path) -> None:
    crash = "import sys; print('missing API token', file=sys.stderr); sys.exit(3)"
    ref = McpServerRef(name="bad", config=McpServerConfig(command=sys.executable, args=["-c", crash]))
    listing = McpListTools(workspace=str(workspace), servers=[ref])

    async def work(hub: Hub) -> None:
        first = _state(await hub.list(listing), "bad")
        assert first.state == "failed" and first.error is not None and first.error.code == "ACODE-MCP-001"
        assert "could not be started" in first.error.message and "missing API token" in first.error.message
        server = next(iter(hub.servers.values()))
        deadline = time.monotonic() + 20  # background restarts after 0.2, 0.4, 0.8 s (jittered)
        while server.restarts < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert server.restarts >= 2 and server.state in ("failed", "starting")

    _run(tmp_path, detect, work)


def test_backoff_doubles_from_a_fifth_of_a_second_to_half_a_minute_with_jitter() -> None:
    delays = [backoff(failures, rng=lambda low, high: 1.0) for failures in range(1, 12)]
    assert delays[:4] == [0.2, 0.4, 0.8, 1.6] and delays[-1] == BACKOFF_MAX_S == 30.0
    assert all(0.15 <= backoff(1) <= 0.25 for _ in range(50))


def test_at_process_level_a_server_still_gets_a_fresh_home_and_only_its_env(tmp_path: Path, workspace: Path) -> None:
    process = detect(bubblewrap=False, landlock=False)
    ref = McpServerRef(name="prc", config=McpServerConfig(command=sys.executable, args=["stdio_server.py"],
                                                          env={"GIVEN": "1"}))

    async def work(hub: Hub) -> None:
        called = await hub.call(McpCallTool(key="p", workspace=str(workspace), server=ref, tool="probe",
                                            arguments={"canary": str(workspace / "stdio_server.py"), "port": 9}))
        seen = json.loads(called.output)
        assert seen["home_entries"] == [] and seen["home"] != os.path.expanduser("~")
        assert "GIVEN" in seen["env"] and set(seen["env"]) <= {"GIVEN", "HOME", "PATH", "TMPDIR", "PWD", "LC_CTYPE"}
        state = _state(await hub.list(McpListTools(workspace=str(workspace), servers=[ref])), "prc")
        assert state.isolation.startswith("process: reads and network NOT confined")

    _run(tmp_path, lambda: process, work)


def test_an_instance_no_request_names_for_long_is_stopped(tmp_path: Path, workspace: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actors.mcp.hub.IDLE_STOP_S", 0.5)
    one, two = (McpServerRef(name=name, config=McpServerConfig(command=sys.executable, args=["stdio_server.py"]))
                for name in ("one", "two"))

    async def work(hub: Hub) -> None:
        assert _state(await hub.list(McpListTools(workspace=str(workspace), servers=[one])), "one").state == "ready"
        (first,) = hub.servers.values()
        await asyncio.sleep(0.6)
        await hub.list(McpListTools(workspace=str(workspace), servers=[two]))
        assert [server.name for server in hub.servers.values()] == ["two"]
        deadline = time.monotonic() + 10
        while first.state != "stopped" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert first.state == "stopped"

    _run(tmp_path, detect, work)
