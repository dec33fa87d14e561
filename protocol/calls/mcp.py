"""MCP tools in acode's terms: names, configuration, definitions, pins and risk classes.

acode takes tools from the MCP servers a user configures (``mcp.servers.NAME`` in the user
config) through one supervised actor, ``mcp``, the only process that imports the ``mcp``
SDK (``pip install acode[mcp]``). Everything here is plain msgspec, so the executor, the
sandbox, the coordinator and the CLI can read MCP tools without the SDK.

Names. A server's tool ``TOOL`` reaches the model as ``mcp__SERVER__TOOL``
(:func:`tool_name`, :func:`parse_tool_name`): function names allow ``[A-Za-z0-9_-]`` and
64 characters, so a server name is ``[a-z0-9-]`` (no ``_``: the separator stays
unambiguous) and a tool whose full name would not fit is not offered.

Risk (:func:`risk_of_tool`), decided once, so autonomy levels, approvals, ``--always``,
hooks, budgets and checkpoints apply to MCP calls unchanged. Annotations are the server's
claims, so they may raise a tool's class and only a server the user marked ``trusted`` may
lower it:

====  =========================================================  ===============
row   the tool                                                   risk class
====  =========================================================  ===============
1     the user's ``risk:`` for it (``mcp.servers.S.risk.TOOL``)  that class
2     no annotations                                             destructive
3     an untrusted server, any annotations                       destructive
4     trusted, ``read_only_hint``                                read
5     trusted, ``idempotent_hint`` (not read-only)               write
6     trusted, ``destructive_hint: false``                       write
7     trusted, annotations saying none of these                  destructive
8     trusted, ``open_world_hint`` with row 4-7's class below    network
====  =========================================================  ===============

Row 8 raises: an open-world tool reaches outside the machine, so it is at least
``network`` (a trusted read-only open-world search is ``network``, not ``read``). An
untrusted server's ``open_world_hint`` changes nothing: its tools are already destructive.

Journal (:func:`rerun_safe`): an MCP call is a side effect unless its server is trusted and
the tool is read-only or idempotent (or the user's ``risk:`` says ``read``); after a crash
with the outcome unknown, a human decides, as for commands.

Pins (:func:`definition_hash`): a tool's definition (name, description, input schema,
annotations) is pinned by its hash when first approved; a definition that changes later
disables the tool (not offered, calls refused with ACODE-MCP-004) until a human approves
the new one, shown as a diff.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal

import msgspec

from protocol.calls.tools import Risk

__all__ = [
    "PREFIX",
    "SERVER_NAME",
    "McpAnnotations",
    "McpServerConfig",
    "McpServerRef",
    "McpToolDef",
    "definition_hash",
    "parse_tool_name",
    "rerun_safe",
    "risk_of_tool",
    "tool_name",
]

PREFIX = "mcp__"
SERVER_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,30}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_NAME = 64
_RANK: dict[Risk, int] = {"read": 0, "write": 1, "execute": 2, "network": 3, "destructive": 4}


class _Wire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    pass


class McpServerConfig(_Wire, frozen=True, kw_only=True):
    """One ``mcp.servers.NAME`` entry: ``command``/``args``/``env`` (stdio) or ``url``
    (streamable HTTP), exactly one of the two kinds.

    ``enabled_tools`` (empty: all) and ``disabled_tools`` filter what is offered;
    ``timeout_s`` bounds each call; ``trusted`` lets the server's annotations lower a
    tool's risk class; ``risk`` is the user's class per tool name, which always wins.
    A stdio server runs in acode's sandbox: the workspace read-only unless ``writes``,
    no network unless ``network``, a fresh HOME, and only the environment given: ``env``
    (values written here are stored with each session that uses the server) and
    ``pass_env``, names of variables the ``mcp`` actor passes on from acode's own
    environment (as ``acode up`` started), so a token need not be written in a config or
    stored anywhere, as ``model.api_key_env`` does for the model's key."""

    command: str = ""
    args: list[str] = []
    env: dict[str, str] = {}
    pass_env: list[Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]] = []
    url: str = ""
    enabled_tools: list[str] = []
    disabled_tools: list[str] = []
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3_600)] = 60.0
    trusted: bool = False
    risk: dict[str, Risk] = {}
    network: bool = False
    writes: bool = False
    enabled: bool = True

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"

    def offers(self, tool: str) -> bool:
        """Whether the user's filters let ``tool`` through."""
        if tool in self.disabled_tools:
            return False
        return not self.enabled_tools or tool in self.enabled_tools


class McpServerRef(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A server as the session's settings name it, with its whole configuration: the actor
    keeps no configuration of its own (a stdio server runs once per name, configuration and
    workspace; an HTTP server once per name and configuration). Stored with the session
    (``SessionSettings.mcp_servers``), so it lives here, below the session's settings;
    :mod:`protocol.messages` re-exports it."""

    name: str
    config: McpServerConfig


class McpAnnotations(_Wire, frozen=True, kw_only=True):
    """MCP's tool annotations (hints: the server's claims, never proof)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class McpToolDef(_Wire, frozen=True, kw_only=True):
    """A tool as its server lists it (everything in it is untrusted text)."""

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}
    annotations: McpAnnotations | None = None


def tool_name(server: str, tool: str) -> str | None:
    """The name the model sees, or None when it cannot be one (too long, odd characters)."""
    name = f"{PREFIX}{server}__{tool}"
    if not SERVER_NAME.fullmatch(server) or not _TOOL_NAME.fullmatch(tool) or len(name) > _MAX_NAME:
        return None
    return name


def parse_tool_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` for an ``mcp__SERVER__TOOL`` name, else None."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX):].partition("__")
    if not sep or not SERVER_NAME.fullmatch(server) or not _TOOL_NAME.fullmatch(tool):
        return None
    return server, tool


def definition_hash(tool: McpToolDef) -> str:
    """sha256 of the definition's canonical JSON (sorted keys): what a pin holds."""
    body = msgspec.json.encode(msgspec.to_builtins(tool), order="sorted")
    return hashlib.sha256(body).hexdigest()


def _at_least(risk: Risk, floor: Risk) -> Risk:
    return risk if _RANK[risk] >= _RANK[floor] else floor


def risk_of_tool(tool: McpToolDef, server: McpServerConfig) -> Risk:
    """The tool's risk class, by the table in the module docstring."""
    if tool.name in server.risk:
        return server.risk[tool.name]
    notes = tool.annotations
    if notes is None or not server.trusted:
        return "destructive"
    risk: Risk
    if notes.read_only_hint:
        risk = "read"
    elif notes.idempotent_hint or notes.destructive_hint is False:
        risk = "write"
    else:
        risk = "destructive"
    return _at_least(risk, "network") if notes.open_world_hint else risk


def rerun_safe(tool: McpToolDef, server: McpServerConfig) -> bool:
    """Whether a call may run again when no result is journaled (no intent recorded first)."""
    if server.risk.get(tool.name) == "read":
        return True
    notes = tool.annotations
    return bool(server.trusted and notes is not None and (notes.read_only_hint or notes.idempotent_hint))
