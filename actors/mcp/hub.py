"""Every server instance of the ``mcp`` actor, and the service's two requests that reach them.

Instances are keyed as the protocol says: a stdio server by (name, configuration,
workspace), an HTTP server by (name, configuration). Each is made and started at the first
:class:`~protocol.messages.McpListTools` (or call) naming it, and kept until the actor
stops or no request named it for :data:`IDLE_STOP_S` (sessions in many workspaces would
otherwise leave a server running for each).

:meth:`Hub.list` starts or waits for every server named (concurrently), lists each one's
tools again and answers :class:`~protocol.messages.McpTools`: the tools with their pins and
states, and one :class:`~protocol.messages.McpServerState` per server.

:meth:`Hub.call` checks the tool before sending anything: listed by its server, offered by
the user's filters, its definition the pinned one and the one the call was approved
against (``McpCallTool.hash``), else ACODE-MCP-005 or ACODE-MCP-004. A tool with no pin is
pinned now, before the call is sent: the call passed the sandbox's approval gate, which is
the tool's first approval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from actors.mcp.listing import config_problem, info
from actors.mcp.pins import Pins
from actors.mcp.server import START_TIMEOUT_S, Server
from actors.sandbox.confinement.isolation import Isolation
from protocol.calls.mcp import definition_hash, tool_name
from protocol.errors import ErrorInfo, McpError
from protocol.messages import McpCalled, McpCallTool, McpListTools, McpServerRef, McpServerState, McpToolInfo, McpTools

__all__ = ["Hub"]

Key = tuple[str, bytes, str]
IDLE_STOP_S = 3_600.0  # an instance no request named for an hour is stopped (a session's workspace long done)
WAIT_FOR_BACKOFF_S = 2.0  # a listing waits this long for a restart's backoff to end


def _key(ref: McpServerRef, workspace: str) -> Key:
    config = msgspec.json.encode(ref.config, order="sorted")
    return ref.name, config, workspace if ref.config.transport == "stdio" else ""


class Hub:
    """The servers; used only on the actor's asyncio loop."""

    def __init__(self, pins: Pins, *, isolation: Callable[[], Isolation], hidden: tuple[str, ...], log_dir: Path,
                 log: Any):
        self.pins = pins
        self.servers: dict[Key, Server] = {}
        self._isolation = isolation
        self._hidden = hidden
        self._log_dir = log_dir
        self._log = log
        self.summary = "none started"  # for `acode status`, read from another thread (one str, replaced whole)
        self._used: dict[Key, float] = {}  # when a request last named each instance
        self._stopping: set[asyncio.Task[None]] = set()

    def server(self, ref: McpServerRef, workspace: str) -> Server:
        """The instance for ``ref`` in ``workspace`` (made when first named); the instances
        no request named for :data:`IDLE_STOP_S` are stopped now, in the background."""
        now = time.monotonic()
        key = _key(ref, workspace)
        found = self.servers.get(key)
        if found is None:
            found = self.servers[key] = Server(ref.name, ref.config, workspace, isolation=self._isolation,
                                               hidden=self._hidden, log_dir=self._log_dir, log=self._log)
        self._used[key] = now
        for idle in [k for k, used in self._used.items() if now - used > IDLE_STOP_S]:
            del self._used[idle]
            server = self.servers.pop(idle)
            self._log.info("mcp_server_idle_stopped", server=server.name, workspace=server.workspace)
            self._stopping.add(task := asyncio.get_running_loop().create_task(server.stop()))
            task.add_done_callback(self._stopping.discard)
        return found

    async def list(self, request: McpListTools) -> McpTools:
        tools: list[McpToolInfo] = []
        states: list[McpServerState] = []
        refs: list[McpServerRef] = []
        for ref in request.servers:
            problem = config_problem(ref.name, ref.config)
            if problem is not None:
                states.append(McpServerState(name=ref.name, transport=ref.config.transport, state="failed",
                                             error=ErrorInfo(code="ACODE-MCP-006", message=problem)))
            elif ref.config.enabled:
                refs.append(ref)
        servers = [self.server(ref, request.workspace) for ref in refs]
        await asyncio.gather(*(self._listed(server) for server in servers))
        for server in servers:
            pins = self.pins.of(server.name)
            found = [info(server.name, server.config, tool, pins.get(tool.name, ""))
                     for tool in server.tools.values()] if server.ready else []
            listed = [tool for tool in found if tool is not None]
            tools += listed
            states.append(McpServerState(name=server.name, transport=server.config.transport, state=server.state,
                                         tools=len(listed), isolation=server.isolation, restarts=server.restarts,
                                         error=server.error))
        self._summarize()
        return McpTools(tools=tools, servers=states)

    def _summarize(self) -> None:
        counts: dict[str, int] = {}
        for server in self.servers.values():
            counts[server.state] = counts.get(server.state, 0) + 1
        self.summary = ", ".join(f"{count} {state}" for state, count in sorted(counts.items())) or "none started"

    async def _listed(self, server: Server) -> None:
        if server.ready:
            await server.refresh()  # a dead server found here is started again by ensure()
        await server.ensure(WAIT_FOR_BACKOFF_S)

    async def call(self, request: McpCallTool, sending: Callable[[], object] = lambda: None) -> McpCalled:
        """Check the tool, pin it if it has no pin, then send the call once (``sending`` runs,
        off the loop, right before: the actor records the call as begun)."""
        problem = config_problem(request.server.name, request.server.config)
        if problem is not None:
            return McpCalled(ok=False, error=ErrorInfo(code="ACODE-MCP-006", message=problem))
        server = self.server(request.server, request.workspace)
        if server.ready:
            await server.refresh()  # the definition as the server lists it now, not at the turn's start
        if not await server.ensure(START_TIMEOUT_S):
            why = server.error.message if server.error else f"MCP server {server.name} is {server.state}"
            return McpCalled(ok=False, error=ErrorInfo(code="ACODE-MCP-001", message=(
                f"{why}; the call to {request.tool} was not sent")))
        tool = server.tools.get(request.tool)
        if tool is None or not server.config.offers(request.tool) or tool_name(server.name, request.tool) is None:
            why = ("does not list it" if tool is None else "has it filtered out by enabled_tools/disabled_tools"
                   if not server.config.offers(request.tool) else "lists it under a name acode cannot offer")
            return McpCalled(ok=False, error=ErrorInfo(code="ACODE-MCP-005", message=(
                f"MCP server {server.name} {why}: no tool {request.tool!r} to call; use a tool it offers")))
        digest = definition_hash(tool)
        pinned = self.pins.get(server.name, request.tool)
        approved = request.hash or pinned
        if (pinned and pinned != digest) or (approved and approved != digest):
            return McpCalled(ok=False, error=ErrorInfo(code="ACODE-MCP-004", message=(
                f"MCP tool {request.tool} of server {server.name} changed its definition since it was approved "
                f"(approved {approved[:12]}, now {digest[:12]}); the call was refused: review the change and run "
                f"`acode mcp approve {server.name} {request.tool}`")))
        if not pinned:
            self.pins.set(server.name, request.tool, digest)
        try:
            ok, output, error = await server.call(request.tool, request.arguments, request.output_limit_bytes,
                                                  sending)
        except McpError as exc:
            return McpCalled(ok=False, error=exc.info())
        return McpCalled(ok=ok, output=output, error=error)

    async def close(self) -> None:
        """Stop every server (at the actor's stop)."""
        await asyncio.gather(*self._stopping, return_exceptions=True)
        await asyncio.gather(*(server.stop() for server in self.servers.values()), return_exceptions=True)
