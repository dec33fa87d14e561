"""``acode doctor``'s MCP lines: one per server of the user's ``mcp.servers``.

Each line says the server's state, its tool count, the isolation it runs under and its
pins (how many tools are pinned, how many changed since). The CLI never imports the MCP
SDK: it asks the running ``mcp`` actor (:class:`~protocol.messages.McpListTools`, which
starts a server not yet running, in the doctor's workspace), or says why it cannot (acode
is not up; the SDK is not installed: ``pip install acode[mcp]``). No server configured: no
line, so doctor is unchanged for a user without MCP.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from acode.config.mcp import user_servers
from acode.connection import Connection
from actors.paths import RunPaths
from protocol import codec
from protocol.errors import AcodeError
from protocol.messages import McpListTools, McpServerState, McpToolInfo, McpTools, StatusReport

__all__ = ["mcp_checks"]

Line = tuple[str, bool, str, str, bool]  # name, ok, detail, fix, warning
LIST_TIMEOUT_S = 95.0


def _pins(tools: list[McpToolInfo]) -> str:
    pinned = sum(1 for tool in tools if tool.pinned)
    changed = sum(1 for tool in tools if tool.state == "changed")
    filtered = sum(1 for tool in tools if tool.state == "filtered")
    parts = [f"{pinned} pinned"] + ([f"{changed} changed since approved"] if changed else []) + (
        [f"{filtered} filtered"] if filtered else [])
    return ", ".join(parts)


def _line(state: McpServerState, tools: list[McpToolInfo]) -> Line:
    name = f"mcp {state.name}"
    detail = (f"{state.state}, {state.tools} tools ({_pins(tools)}), {state.transport}, isolation "
              f"{state.isolation or 'unknown'}" + (f", restarted {state.restarts}x" if state.restarts else ""))
    if state.state != "ready":
        why = state.error.message if state.error else "no reason given"
        return name, False, f"{detail}: {why}", f"see `acode logs mcp-{state.name}` and its mcp.servers entry", False
    changed = [tool.definition.name for tool in tools if tool.state == "changed"]
    if changed:
        return name, True, detail, f"review and approve: acode mcp approve {state.name} {changed[0]}", True
    if state.isolation.startswith("process"):
        return name, True, detail, "install bubblewrap, or use Linux 5.13+ with Landlock, to confine it", True
    return name, True, detail, "", False


def mcp_checks(paths: RunPaths, workspace: Path, report: StatusReport | None) -> list[Line]:
    """The MCP lines of ``acode doctor`` for ``workspace`` (a server's working directory)."""
    try:
        servers = user_servers(paths.home)
    except AcodeError as exc:
        return [("mcp", False, str(exc), "correct the mcp.servers entry named above", False)]
    if not servers:
        return []
    names = ", ".join(ref.name for ref in servers)
    if importlib.util.find_spec("mcp") is None:
        return [("mcp", False, f"{len(servers)} servers configured ({names}) but MCP support is not installed "
                               "(ACODE-MCP-008)", "pip install 'acode[mcp]', then acode down; acode up", False)]
    lines: list[Line] = [(f"mcp {ref.name}", True, "disabled (enabled: false)", "", False)
                         for ref in servers if not ref.config.enabled]
    enabled = [ref for ref in servers if ref.config.enabled]
    if not enabled:
        return lines
    if report is None or not any(actor.actor == "mcp" for actor in report.actors):
        why = "acode is not up" if report is None else "the mcp actor is not running (installed after acode up?)"
        return [*lines, *((f"mcp {ref.name}", True, f"configured ({ref.config.transport}); state unknown: {why}",
                           "acode up --detach, then acode doctor", True) for ref in enabled)]
    try:
        with Connection(paths.home) as connection:
            listed: McpTools = connection.call("mcp", McpListTools(workspace=str(workspace), servers=enabled),
                                               decoder=codec.MCP_REPLY, timeout=LIST_TIMEOUT_S)
    except AcodeError as exc:
        return [*lines, ("mcp", False, f"the mcp actor did not list the servers: {exc}", "see `acode logs mcp`",
                         False)]
    for state in listed.servers:
        lines.append(_line(state, [tool for tool in listed.tools if tool.definition.server == state.name]))
    return lines
