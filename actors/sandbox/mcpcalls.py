"""MCP tool calls in the sandbox: which tool a call names, its class, and the call itself.

A call of ``mcp__SERVER__TOOL`` reaches the sandbox as any other :class:`RunTool`, and
passes the same gate, journal and checkpoints (:mod:`actors.sandbox.gate`,
:mod:`actors.sandbox.journal`, :mod:`actors.sandbox.checkpointing`); only the work is done
elsewhere, by the ``mcp`` actor, the one process that speaks MCP.

**What the call is** (:meth:`McpCalls.resolve`), from trusted sources only: the server's
configuration as the session STORED it (``SessionSettings.mcp_servers``, read from
persistence once per session) and the tool's definition as the ``mcp`` actor lists it,
the one whose hash the executor offered and the approval was made against
(``RunTool.mcp_hash``; none: the current one). Its class is
:func:`protocol.calls.mcp.risk_of_tool` of the two, whether it may run again after a crash
:func:`protocol.calls.mcp.rerun_safe`. Nothing the stage or the model says enters either, so a
buggy stage cannot lower a call's class. Listings are cached per session, tool and
definition hash; a miss lists the server again (one round trip to ``mcp``). A definition
the actor does not list (changed since, or never there) is destructive; a server the
session does not have, or no ``mcp`` service, refuses the call (ACODE-MCP-013, or the
service's own error).

**The call** (:meth:`McpCalls.call`) is one :class:`McpCallTool` to the ``mcp`` service,
with the definition hash, within the server's ``timeout_s``. It is sent once: the broker
client's resends are off for it (no timer resend, no resend when the worker is lost), so
an actor that dies mid-call is never asked again by the sandbox; the sandbox answers
ACODE-MCP-011, outcome unknown, as the journal does for a command interrupted by a crash.
The output is capped at the request's ``output_limit_bytes``.

**Definitions kept** (:mod:`actors.mcpkept`): before a call is sent, the definition it
goes with is written to ``$ACODE_HOME/mcp-definitions/<hash>.json`` (once per hash, written
whole and renamed): a tool is pinned when its first call runs, so the definition a pin names
is there when ``acode mcp approve`` shows what changed since.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from actors.mcpkept import keep
from actors.sandbox.tools.output import Outcome, truncate
from protocol.calls.mcp import (
    McpServerRef,
    McpToolDef,
    definition_hash,
    parse_tool_name,
    rerun_safe,
    risk_of_tool,
    tool_name,
)
from protocol.calls.tools import Risk
from protocol.errors import AcodeError, ErrorInfo, NotFoundError, SandboxError
from protocol.messages import GetSession, McpCalled, McpCallTool, McpListTools, McpTools, Message, RunTool

__all__ = ["CALL_MARGIN_S", "LIST_TIMEOUT_S", "McpCalls", "McpTarget", "ServersOf", "stored_servers"]

LIST_TIMEOUT_S = 30.0
CALL_MARGIN_S = 10.0  # beyond the server's timeout_s: the actor answers its own timeout first
_CACHE = 4_096
_TARGET_CHARS = 200

#: a session's stored MCP servers (None: persistence does not know the session)
ServersOf = Callable[[str], list[McpServerRef] | None]
ListTools = Callable[[McpListTools], McpTools]
CallTool = Callable[[McpCallTool, float], McpCalled]


def stored_servers(send: Callable[[Message], Any]) -> ServersOf:
    """A :data:`ServersOf` reading the session's snapshot from persistence with ``send``."""
    def servers_of(session_id: str) -> list[McpServerRef] | None:
        try:
            reply = send(GetSession(session_id=session_id))
        except NotFoundError:
            return None
        return list(reply.session.settings.mcp_servers)
    return servers_of


class McpTarget(NamedTuple):
    """What an ``mcp__`` call names: the server (its stored configuration), the server's own
    tool name, the definition (None: the actor lists none with the call's hash), its class."""

    server: McpServerRef
    tool: str
    definition: McpToolDef | None
    hash: str
    risk: Risk
    rerun_safe: bool

    def describe(self, arguments: dict[str, object]) -> str:
        """The call in one line: its arguments as JSON, cut (what events and checkpoints name)."""
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str) if arguments else ""
        return text if len(text) <= _TARGET_CHARS else text[:_TARGET_CHARS] + "…"


class McpCalls:
    """The sandbox's MCP side: resolves and forwards ``mcp__`` calls (see the module)."""

    def __init__(self, servers_of: ServersOf, list_tools: ListTools, call_tool: CallTool, *,
                 definitions: Path | None = None):
        self._definitions = definitions  # where the definitions calls go with are kept (None: not kept)
        self._servers_of = servers_of
        self._list = list_tools
        self._call = call_tool
        self._lock = threading.Lock()
        self._servers: dict[str, list[McpServerRef]] = {}
        self._known: dict[tuple[str, str, str], McpTarget] = {}  # (session, name, hash) -> target
        self._current: dict[tuple[str, str], str] = {}  # (session, name) -> the hash listed last

    def resolve(self, request: RunTool) -> McpTarget:
        """The call's target, or SandboxError ACODE-MCP-013 (another AcodeError when the
        ``mcp`` service or persistence cannot be asked)."""
        parsed = parse_tool_name(request.tool)
        if parsed is None:
            raise SandboxError(f"tool {request.tool[:80]!r} is no MCP tool name (mcp__SERVER__TOOL); call one of "
                               "the tools you were offered", code="ACODE-MCP-013")
        server_name, tool = parsed
        servers = self._session_servers(request.session_id)
        server = next((s for s in servers if s.name == server_name), None)
        if server is None:
            have = ", ".join(s.name for s in servers) or "none"
            raise SandboxError(f"{request.tool}: this session has no MCP server {server_name!r} (its servers: "
                               f"{have}); call one of the tools you were offered", code="ACODE-MCP-013")
        with self._lock:
            wanted = request.mcp_hash or self._current.get((request.session_id, request.tool), "")
            found = self._known.get((request.session_id, request.tool, wanted)) if wanted else None
        if found is not None:
            return found
        listed = self._listing(request, server)
        wanted = request.mcp_hash or listed.get(request.tool, "")
        with self._lock:
            found = self._known.get((request.session_id, request.tool, wanted))
        if found is not None:
            return found
        if not listed.get(request.tool) and not request.mcp_hash:
            raise SandboxError(f"{request.tool}: server {server_name!r} lists no tool {tool!r}; call one of the "
                               "tools you were offered", code="ACODE-MCP-013")
        # a definition the actor no longer lists (it changed since it was offered): destructive,
        # and the actor refuses the call (its pin no longer matches)
        return McpTarget(server=server, tool=tool, definition=None, hash=wanted, risk="destructive",
                         rerun_safe=False)

    def risk(self, request: RunTool) -> Risk:
        """The call's class for the gate: destructive when it cannot be resolved (fail closed)."""
        try:
            return self.resolve(request).risk
        except AcodeError:
            return "destructive"

    def call(self, target: McpTarget, request: RunTool) -> Outcome:
        """Forward the call once (see the module); its output capped, failures as the outcome's error."""
        if self._definitions is not None and target.definition is not None:
            try:
                keep(self._definitions, target.definition)
            except OSError:
                pass  # only `acode mcp approve`'s diff needs it: it then shows the new definition whole
        body = McpCallTool(key=request.key, session_id=request.session_id, workspace=request.workspace,
                           server=target.server, tool=target.tool, arguments=request.arguments, hash=target.hash,
                           output_limit_bytes=request.output_limit_bytes)
        try:
            called = self._call(body, target.server.config.timeout_s + CALL_MARGIN_S)
        except AcodeError as exc:
            if exc.code in ("ACODE-NET-001", "ACODE-NET-002"):  # it may have run: say so, never send it again
                lost = "the mcp actor was lost during the call" if exc.code == "ACODE-NET-002" \
                    else "the mcp actor did not answer in time"
                return Outcome(error=ErrorInfo(code="ACODE-MCP-011", message=(
                    f"{request.tool} was interrupted ({lost}, {exc.code}); it may or may not have taken effect and "
                    "is not run again; check its effect before calling it again")))
            return Outcome(error=exc.info())
        if not called.ok:
            error = called.error or ErrorInfo(code="ACODE-MCP-013", message=f"{request.tool} failed")
            return Outcome(output=truncate(called.output, request.output_limit_bytes), error=error)
        return Outcome(output=truncate(called.output, request.output_limit_bytes))

    def _session_servers(self, session_id: str) -> list[McpServerRef]:
        with self._lock:
            cached = self._servers.get(session_id)
        if cached is not None:
            return cached
        servers = self._servers_of(session_id)
        if servers is None:
            return []  # a session persistence does not know has no servers (it may be created later: not cached)
        with self._lock:
            if len(self._servers) >= _CACHE:
                self._servers.clear()
            self._servers[session_id] = servers  # stored with the session: they never change
        return servers

    def _listing(self, request: RunTool, server: McpServerRef) -> dict[str, str]:
        """List ``server``'s tools now; cache each as a target; name -> its current hash."""
        tools = self._list(McpListTools(session_id=request.session_id, workspace=request.workspace,
                                        servers=[server]))
        current: dict[str, str] = {}
        with self._lock:
            if len(self._known) >= _CACHE:
                self._known.clear()
                self._current.clear()
            for info in tools.tools:
                definition = info.definition
                name = tool_name(server.name, definition.name)
                if definition.server != server.name or name is None or info.state == "filtered":
                    continue  # the user's enabled/disabled lists keep a filtered tool out: not callable
                digest = definition_hash(definition)  # recomputed: the hash names this very definition
                self._known[(request.session_id, name, digest)] = McpTarget(
                    server=server, tool=definition.name, definition=definition, hash=digest,
                    risk=risk_of_tool(definition, server.config), rerun_safe=rerun_safe(definition, server.config))
                self._current[(request.session_id, name)] = digest
                current[name] = digest
        return current
