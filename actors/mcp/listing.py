"""A server's tools and results in acode's terms (no SDK import: the SDK's objects are read
by their attributes, so this module is tested with plain stand-ins).

- :func:`definition` turns one listed tool into a :class:`~protocol.calls.mcp.McpToolDef`
  (the annotations mapped from MCP's ``readOnlyHint``… to acode's names);
- :func:`info` makes the :class:`~protocol.messages.McpToolInfo` the executor offers:
  the model's name, the risk class and rerun safety of :mod:`protocol.calls.mcp`, the hash, the
  pin and the state (``offered``, ``changed``: pinned to another definition, ``filtered``:
  the user's enabled/disabled lists); None for a tool whose name cannot be offered;
- :func:`text` turns a result's content blocks into the text the model reads, capped.
"""

from __future__ import annotations

from typing import Any, Literal

from protocol.calls.mcp import (
    SERVER_NAME,
    McpAnnotations,
    McpServerConfig,
    McpToolDef,
    definition_hash,
    rerun_safe,
    risk_of_tool,
    tool_name,
)
from protocol.messages import McpToolInfo

__all__ = ["config_problem", "definition", "info", "text"]


def config_problem(name: str, config: McpServerConfig) -> str | None:
    """What makes a server reference unusable (its name, its transport), or None. The user
    config is checked with the same rules when read (acode/config/mcp.py); this guards the
    actor against a request that was not."""
    if not SERVER_NAME.fullmatch(name):
        return (f"MCP server name {name!r} is not [a-z0-9][a-z0-9-]* of at most 31 characters; rename "
                f"mcp.servers.{name}")
    if bool(config.command) == bool(config.url):
        return f"MCP server {name} needs exactly one of command (stdio) and url (streamable HTTP)"
    return None


def _annotations(notes: Any) -> McpAnnotations | None:
    if notes is None:
        return None
    return McpAnnotations(title=getattr(notes, "title", None), read_only_hint=getattr(notes, "read_only_hint", None),
                          destructive_hint=getattr(notes, "destructive_hint", None),
                          idempotent_hint=getattr(notes, "idempotent_hint", None),
                          open_world_hint=getattr(notes, "open_world_hint", None))


def definition(server: str, tool: Any) -> McpToolDef:
    """The definition of ``tool`` (an SDK ``Tool``) as ``server`` lists it."""
    return McpToolDef(server=server, name=str(tool.name), description=str(tool.description or ""),
                      input_schema=dict(tool.input_schema or {}), annotations=_annotations(tool.annotations))


def info(server: str, config: McpServerConfig, tool: McpToolDef, pinned: str) -> McpToolInfo | None:
    """What the executor is told about ``tool``; None when its name cannot be a function name."""
    name = tool_name(server, tool.name)
    if name is None:
        return None
    digest = definition_hash(tool)
    state: Literal["offered", "changed", "filtered"] = "offered"
    if not config.offers(tool.name):
        state = "filtered"
    elif pinned and pinned != digest:
        state = "changed"
    return McpToolInfo(name=name, definition=tool, risk=risk_of_tool(tool, config), rerun_safe=rerun_safe(tool, config),
                       hash=digest, pinned=pinned, state=state)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    return f"{count / 1024:.0f} kB" if count < 2**20 else f"{count / 2**20:.1f} MB"


def _block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        data = str(getattr(block, "data", ""))
        return f"[{kind}: {getattr(block, 'mime_type', '') or 'unknown type'}, {_size(len(data) * 3 // 4)}]"
    if kind == "resource":
        resource = block.resource
        body = getattr(resource, "text", None)
        if body is not None:
            return f"[resource {resource.uri}]\n{body}"
        return f"[resource {resource.uri}: {_size(len(str(getattr(resource, 'blob', ''))) * 3 // 4)} of binary data]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    return f"[{kind or type(block).__name__} content]"


def text(content: list[Any], structured: Any, limit: int) -> str:
    """The result's blocks as text (text blocks joined, others described; the structured
    content as JSON when there is no block), at most ``limit`` bytes with a note when cut."""
    parts = [_block(block) for block in content]
    if not parts and structured is not None:
        import json

        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    joined = "\n".join(parts)
    encoded = joined.encode("utf-8", "replace")
    if len(encoded) <= limit:
        return joined
    note = f"\n[output cut at {limit} of {len(encoded)} bytes]"
    kept = encoded[:max(0, limit - len(note.encode()))].decode("utf-8", "ignore")
    return kept + note
