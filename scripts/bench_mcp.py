#!/usr/bin/env python3
"""The cost of the ``mcp`` actor (issue 30): one JSON object.

Against a private acode home (``acode up``, then ``acode down``; everything started is
stopped):

- ``actor_startup_ms``: the ``mcp`` actor's spawn to ready, as the coordinator logs it
  (``actor_ready``'s ``startup_ms``), beside the sandbox's for scale;
- ``rss_mb.idle``: the actor's resident memory at rest (the SDK not imported yet), beside
  the sandbox actor's; ``rss_mb.one_server``: after one stdio server was listed and called
  (the SDK loaded, one session), and ``server_tree_mb`` the server's own processes
  (launcher, bubblewrap, the SDK server in Python), which are the server's cost, not acode's;
- ``first_list_ms``: the first ``McpListTools`` (imports the SDK, detects the isolation,
  starts the server confined, initializes, lists); ``list_ms`` and ``call_ms``: p50 of a
  listing and of an ``echo`` call afterwards (``--calls`` each).

No timed assertion anywhere: these are figures to read (``tests/system/test_mcp.py`` checks
the behaviour). Needs the extra: ``pip install acode[mcp]``.

    python scripts/bench_mcp.py [--calls 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acode.connection import Connection  # noqa: E402
from protocol import codec  # noqa: E402
from protocol.calls.mcp import McpServerConfig  # noqa: E402
from protocol.messages import GetStatus, McpCallTool, McpListTools, McpServerRef  # noqa: E402


def _rss_mb(pid: int) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def _tree_mb(pid: int) -> float:
    total = 0
    for process in psutil.Process(pid).children(recursive=True):
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return round(total / 2**20, 1)


def _startup_ms(log: Path, child: str) -> float | None:
    found = None
    for line in log.read_text().splitlines():
        if '"actor_ready"' in line and f'"child":"{child}"' in line:
            found = json.loads(line).get("startup_ms")
    return found


def _p50(samples: list[float]) -> float:
    return round(statistics.median(samples), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acode-bench-mcp-") as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        workspace.mkdir()
        shutil.copy(ROOT / "tests" / "mcp_servers" / "stdio_server.py", workspace)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACODE_")}
        env["PYTHONPATH"] = str(ROOT)
        cli = [sys.executable, "-m", "cli.app", "--home", str(home)]
        subprocess.run([*cli, "up", "--detach"], env=env, check=True, capture_output=True, timeout=120)
        try:
            with Connection(home) as connection:
                report = connection.coordinator(GetStatus(), timeout=10)
                pids = {actor.instance: actor.pid for actor in report.actors}
                time.sleep(1.0)  # let start-up settle before reading memory at rest
                idle = {"mcp": _rss_mb(pids["mcp"]), "sandbox_for_scale": _rss_mb(pids["sandbox"])}
                ref = McpServerRef(name="bench", config=McpServerConfig(command=sys.executable,
                                                                        args=["stdio_server.py"]))
                listing = McpListTools(workspace=str(workspace), servers=[ref])
                started = time.perf_counter()
                first = connection.call("mcp", listing, decoder=codec.MCP_REPLY, timeout=120)
                first_ms = (time.perf_counter() - started) * 1000
                lists, calls = [], []
                for number in range(args.calls):
                    started = time.perf_counter()
                    connection.call("mcp", listing, decoder=codec.MCP_REPLY, timeout=60)
                    lists.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    connection.call("mcp", McpCallTool(key=f"b{number}", workspace=str(workspace), server=ref,
                                                       tool="echo", arguments={"text": "x"}),
                                    decoder=codec.MCP_REPLY, timeout=60)
                    calls.append((time.perf_counter() - started) * 1000)
                one_server = _rss_mb(pids["mcp"])
                tree = _tree_mb(pids["mcp"])
            log = home / "run" / "logs" / "coordinator.log"
            result = {
                "actor_startup_ms": {"mcp": _startup_ms(log, "mcp"), "sandbox_for_scale": _startup_ms(log, "sandbox")},
                "rss_mb": {"idle": idle, "one_server": one_server, "added_by_sdk_and_session": round(
                    one_server - idle["mcp"], 1), "server_tree_mb": tree},
                "first_list_ms": round(first_ms, 1),
                "isolation": first.servers[0].isolation,
                "list_ms_p50": _p50(lists),
                "call_ms_p50": _p50(calls),
                "calls": args.calls,
                "loadavg": os.getloadavg(),
            }
        finally:
            subprocess.run([*cli, "down"], env=env, capture_output=True, timeout=120)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
