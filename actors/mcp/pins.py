"""The approved MCP tool definitions: ``$ACODE_HOME/mcp-pins.json``, server → tool → hash.

A pin is the :func:`protocol.calls.mcp.definition_hash` of the definition a human approved: set
when a call to the tool first runs (it reached the actor through the sandbox's approval
gate: that is its first approval) or by ``acode mcp approve`` (:class:`McpPin`). A server
whose tool now lists another definition gets that tool refused (ACODE-MCP-004) until the
new one is pinned.

The file is small JSON, rewritten whole at every change, atomically (a temporary file in
the same directory, fsync, rename, fsync of the directory): a kill at any point leaves the
old pins or the new ones, never half of either. Only the ``mcp`` actor writes it; pool
threads share one :class:`Pins` behind a lock.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from protocol.errors import McpError

__all__ = ["Pins"]

_VERSION = 1


class Pins:
    """The pins of one acode home, loaded on first use."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._pins: dict[str, dict[str, str]] | None = None

    def get(self, server: str, tool: str) -> str:
        """The pinned hash of ``server``'s ``tool``; "" when it has none."""
        with self._lock:
            return self._load().get(server, {}).get(tool, "")

    def of(self, server: str) -> dict[str, str]:
        """Every pin of ``server`` (tool → hash)."""
        with self._lock:
            return dict(self._load().get(server, {}))

    def set(self, server: str, tool: str, digest: str) -> None:
        """Pin ``server``'s ``tool`` to ``digest``, durably, before returning."""
        with self._lock:
            pins = self._load()
            if pins.get(server, {}).get(tool) == digest:
                return
            changed = {name: dict(tools) for name, tools in pins.items()}
            changed.setdefault(server, {})[tool] = digest
            self._write(changed)
            self._pins = changed

    def _load(self) -> dict[str, dict[str, str]]:
        if self._pins is not None:
            return self._pins
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            self._pins = {}
            return self._pins
        except (OSError, ValueError) as exc:
            raise McpError(f"the MCP pins file {self.path} cannot be read ({exc}); fix or remove it (removing it "
                           "un-approves every MCP tool)", code="ACODE-MCP-009") from exc
        pins = data.get("pins") if isinstance(data, dict) else None
        if not isinstance(pins, dict) or not all(
                isinstance(tools, dict) and all(isinstance(h, str) for h in tools.values()) for tools in pins.values()):
            raise McpError(f"the MCP pins file {self.path} is not {{\"pins\": {{SERVER: {{TOOL: HASH}}}}}}; fix or "
                           "remove it (removing it un-approves every MCP tool)", code="ACODE-MCP-009")
        self._pins = pins
        return pins

    def _write(self, pins: dict[str, dict[str, str]]) -> None:
        body = json.dumps({"version": _VERSION, "pins": pins}, indent=1, sort_keys=True).encode()
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
            directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise McpError(f"the MCP pins file {self.path} cannot be written ({exc}); check the acode home's "
                           "free space and permissions", code="ACODE-MCP-009") from exc
