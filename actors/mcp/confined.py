"""How a stdio MCP server is started: through the sandbox's launcher, confined like a command.

A stdio server is a program the user named (``command``/``args``); it runs with the
session's workspace as its working directory and as little else as it needs:

- through :mod:`actors.sandbox.confinement.launcher`, at the isolation the sandbox would
  use on this machine (:func:`actors.sandbox.confinement.isolation.choose`, forced the same
  way: ``ACODE_SANDBOX_ISOLATION``): bubblewrap, Landlock or process level;
- what it may read is what a command may (:mod:`actors.sandbox.confinement.visible`: the
  system directories and the toolchain its executable resolves into), plus the workspace,
  **read-only** unless the server is configured with ``writes: true``; acode's own home and
  the credential stores are never there;
- no network (a new network namespace under bubblewrap, no TCP under Landlock ABI 4+)
  unless ``network: true``;
- a fresh, empty ``HOME`` and ``TMPDIR`` (a scratch dir made for this server and removed
  when it stops), and an environment of exactly the configured ``env``, the variables
  ``pass_env`` names (from the actor's own environment), ``PATH``, ``HOME`` and ``TMPDIR``:
  nothing else of acode's own environment, secrets included;
- its own session and process group, killed with the ``mcp`` actor (the launcher's
  ``PR_SET_PDEATHSIG``, bubblewrap's ``--die-with-parent``).

The process level confines neither reads nor the network: the isolation each server got is
reported (``McpServerState.isolation``, ``acode doctor``) so a user sees it.

The SDK's ``stdio_client`` runs ``python -I -S -B launcher.py SPEC``; the launcher's status
lines go to the server's stderr, which is the server's log
(``$ACODE_HOME/run/logs/mcp-NAME.log``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from actors.sandbox.confinement import visible
from actors.sandbox.confinement.isolation import FORCE_ENV, LAUNCHER, Isolation, Level, choose
from protocol.calls.mcp import McpServerConfig
from protocol.errors import McpError

__all__ = ["SCRATCH_PREFIX", "Launch", "detect", "describe", "launch", "sweep_scratch"]

SCRATCH_PREFIX = "acode-mcp-"
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
_LANDLOCK_READ = ("/proc", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


@dataclass(frozen=True)
class Launch:
    """What ``StdioServerParameters`` gets, and the scratch dir to remove after."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    scratch: Path
    isolation: str


def detect() -> Isolation:
    """The isolation stdio servers run with: the strongest this machine offers, or the level
    ``ACODE_SANDBOX_ISOLATION`` forces (as for the sandbox's commands; ACODE-SBX-015 when
    the machine cannot give it)."""
    forced = os.environ.get(FORCE_ENV["isolation"], "").strip() or "auto"
    level: Level | str = forced if forced in ("process", "landlock", "bubblewrap") else "auto"
    return choose(level, origin=f"by {FORCE_ENV['isolation']}={forced}")  # type: ignore[arg-type]


def describe(isolation: Isolation, config: McpServerConfig) -> str:
    """One line: the level, then what it means for this server."""
    if isolation.level == "process":
        return ("process: reads and network NOT confined (install bubblewrap or use Linux 5.13+ with Landlock); "
                "fresh HOME, configured env only")
    workspace = "workspace read-write" if config.writes else "workspace read-only"
    if isolation.level == "bubblewrap":
        network = "network" if config.network else "no network"
    else:
        network = "network" if config.network or isolation.landlock_abi < 4 else "no TCP"
    return f"{isolation.level}: {workspace}, {network}, fresh HOME, configured env only"


def _executable(command: str, workspace: str, path: str) -> str:
    if os.path.isabs(command):
        return command
    if "/" in command:
        return os.path.normpath(os.path.join(workspace, command))
    found = shutil.which(command, path=path)
    if found is None:
        raise McpError(f"MCP server command {command!r} was not found on PATH ({path}); install it or name it by "
                       "absolute path in mcp.servers", code="ACODE-MCP-001")
    return found


def launch(name: str, config: McpServerConfig, workspace: str, isolation: Isolation, *,
           hidden: tuple[str, ...] = ()) -> Launch:
    """The confined command line of server ``name`` for ``workspace``; ``hidden`` are the
    paths no server may see (acode's home and sockets)."""
    if not os.path.isabs(workspace) or not os.path.isdir(workspace):
        raise McpError(f"workspace {workspace!r} of MCP server {name} is not an existing absolute directory",
                       code="ACODE-MCP-001")
    user_path = os.environ.get("PATH", MINIMAL_PATH)
    executable = _executable(config.command, workspace, user_path)
    path = ":".join(dict.fromkeys([os.path.dirname(executable), *MINIMAL_PATH.split(":")]))
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    (scratch / "home").mkdir()
    (scratch / "tmp").mkdir()
    passed = {name: os.environ[name] for name in config.pass_env if name in os.environ}
    env = {**passed, **config.env, "PATH": path, "HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp")}
    view = visible.view({os.path.basename(executable)}, path, hidden=hidden)
    workspace_rw = [workspace] if config.writes else []
    spec: dict[str, object] = {
        "sandbox_pid": os.getpid(), "mode": isolation.mode, "executable": executable,
        "argv": [executable, *config.args], "env": env, "rlimits": {"core": 0, "nofile": 4096}, "cgroup": None,
        "landlock_abi": isolation.landlock_abi if isolation.level == "landlock" else 0,
        "readable": [*view.read, *_LANDLOCK_READ, *([] if config.writes else [workspace])],
        "writable": [str(scratch), *workspace_rw], "network": config.network, "status_fd": "stderr",
    }
    if isolation.mode == "bwrap":
        assert isolation.bwrap is not None
        spec["bwrap"] = visible.bwrap_argv(isolation.bwrap, workspace, scratch, view, network=config.network,
                                           hidden=hidden, root_writable=config.writes)
    return Launch(command=sys.executable, args=["-I", "-S", "-B", LAUNCHER, json.dumps(spec)], env=env,
                  cwd=workspace, scratch=scratch, isolation=describe(isolation, config))


def sweep_scratch(root: Path | None = None) -> int:
    """Remove the scratch dirs of servers whose ``mcp`` actor is gone (killed: nothing
    removed them); how many there were."""
    root = root or Path(tempfile.gettempdir())
    removed = 0
    for path in root.glob(f"{SCRATCH_PREFIX}*"):
        try:
            pid = int(path.name[len(SCRATCH_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed
