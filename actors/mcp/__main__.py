"""``python -m actors.mcp --spec <json>``: the mcp process (see actors.mcp.actor)."""

from __future__ import annotations

from actors import lean  # noqa: F401  (first of acode's: keeps this process lean)
from actors._base import main
from actors.mcp.actor import McpActor

if __name__ == "__main__":
    main(McpActor)
