"""How a child actor process is started: ``python -m <module> --spec <json>``.

Each child gets its own process group (so a stop can SIGKILL the whole group), stdin
from /dev/null, and stdout/stderr appended to its log file. The child itself asks the
kernel to kill it if its parent dies (see actors._base).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec

from protocol.transport.spec import ActorSpec

__all__ = ["MODULES", "command", "spawn"]

MODULES: dict[str, str] = {
    "broker": "broker",
    "persistence": "actors.persistence",
    "sandbox": "actors.sandbox",
    "mcp": "actors.mcp",
    "planner": "actors.stages",
    "executor": "actors.stages",
    "verifier": "actors.stages",
    "reviewer": "actors.stages",
}


def command(spec: ActorSpec, module: str | None = None) -> list[str]:
    module = module or MODULES[spec.actor]
    return [sys.executable, "-m", module, "--spec", msgspec.json.encode(spec).decode()]


def spawn(spec: ActorSpec, *, log_path: Path, module: str | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start one child; the caller owns the returned process and must reap it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command(spec, module),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            process_group=0,
            env={**os.environ, **(env or {})},
            close_fds=True,
        )
