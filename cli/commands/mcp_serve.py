"""``acode mcp serve``: acode as an MCP server on stdio, so another agent can delegate a
whole plan → execute → verify → review job to the running acode (:mod:`cli.mcp_server`
holds the tools).

The ``mcp`` SDK is an optional extra (``pip install acode[mcp]``): it is imported here when
the command runs, never when the CLI starts, and without it the command says how to install
it (ACODE-MCP-020). ``approve``/``deny`` are offered only when the user's own config
(``$ACODE_HOME/config.yml``, never a workspace's) sets ``mcp.serve.allow_approvals: true``.
"""

from __future__ import annotations

from acode.config.loader import load_file
from cli.commands.home import home, run_paths
from protocol.errors import McpError

__all__ = ["allow_approvals", "serve"]


def serve() -> None:
    """Serve acode's sessions to another agent over MCP on stdin/stdout: tools submit_task,
    session_status, session_events, steer, pause, cancel (approve and deny only when the user
    config sets mcp.serve.allow_approvals). Needs `acode up` running; `pip install acode[mcp]`."""
    try:
        import mcp.server.mcpserver  # noqa: F401  (the SDK's v2 server API)
    except ImportError as exc:
        raise McpError(f"acode mcp serve needs the MCP SDK (mcp 2.3 or later), which is not installed ({exc}); "
                       "install it with `pip install 'acode[mcp]'`", code="ACODE-MCP-020") from None
    from cli.mcp_server import AcodeTools, build_server

    server = build_server(AcodeTools(home(), allow_approvals=allow_approvals()))
    server.run("stdio")


def allow_approvals() -> bool:
    """``mcp.serve.allow_approvals`` of the user's config file (default false)."""
    config = load_file(run_paths().user_config)
    return bool(config.mcp.serve and config.mcp.serve.allow_approvals)
