"""The MCP tool definitions calls were sent with: ``$ACODE_HOME/mcp-definitions/<hash>.json``.

The sandbox writes a definition here before it sends the first call that goes with it
(:mod:`actors.sandbox.mcpcalls`); the ``mcp`` actor pins a tool to the definition of its first
call, so the definition a pin names is here when ``acode mcp approve`` shows what changed
since. Files are named by :func:`protocol.calls.mcp.definition_hash`, written once, whole, and
renamed into place; one that does not hash to its name is ignored. Light on purpose: the CLI
reads it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import msgspec

from protocol.calls.mcp import McpToolDef, definition_hash

__all__ = ["keep", "kept"]

_HEX = frozenset("0123456789abcdef")


def keep(directory: Path, definition: McpToolDef) -> None:
    """Write ``definition`` as ``<its hash>.json`` under ``directory`` unless it is there."""
    path = directory / f"{definition_hash(definition)}.json"
    if path.exists():
        return
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_bytes(msgspec.json.encode(definition))
    os.replace(temporary, path)


def kept(directory: Path, digest: str) -> McpToolDef | None:
    """The definition whose hash is ``digest``, if a call was sent with it (None otherwise)."""
    if not digest or not set(digest) <= _HEX:
        return None
    try:
        found = msgspec.json.decode((directory / f"{digest}.json").read_bytes(), type=McpToolDef)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return found if definition_hash(found) == digest else None
