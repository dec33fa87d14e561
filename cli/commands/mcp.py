"""``acode mcp``: acode and the Model Context Protocol (issue 30; docs/mcp.md).

- ``acode mcp serve``: acode's sessions served to another agent (:mod:`cli.commands.mcp_serve`).
- ``acode mcp list``: each configured server (the user config, and a trusted workspace's,
  as ``acode run`` resolves them for ``--workspace``) with its state, and each tool with its
  state (``offered``, ``changed``, ``filtered``), risk class and pin.
- ``acode mcp approve SERVER TOOL``: pin a tool's current definition after its change was
  seen: shows the unified diff between the approved definition and the current one
  (description, input schema, annotations), asks on a terminal (``--yes`` off one), then
  sends :class:`~protocol.messages.McpPin` to the ``mcp`` actor, which keeps the pins.

``list`` and ``approve`` ask the ``mcp`` service (``acode up`` must be running); neither
imports the SDK.
"""

import difflib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from acode.config.loader import resolve
from cli.commands import mcp_serve
from cli.commands.home import Json, home, run_paths
from cli.follow import print_json
from cli.render import echo
from protocol.errors import CliError

__all__ = ["approve", "definition_text", "list_tools", "mcp_app"]

mcp_app = typer.Typer(help="acode and MCP: your MCP servers' tools, risk classes and pins; acode as an MCP server "
                           "for another agent (docs/mcp.md).", no_args_is_help=True, rich_markup_mode=None)
mcp_app.command("serve")(mcp_serve.serve)

LIST_TIMEOUT_S = 60.0  # a listing may start the servers
Workspace = Annotated[Path | None, typer.Option(
    "--workspace", help="the workspace whose config (if trusted) adds servers, and where stdio servers run "
                        "(default: the current directory)")]


def _servers(workspace: Path | None) -> tuple[str, list[Any]]:
    from acode.config.settings import mcp_servers

    root = (workspace or Path(os.getcwd())).expanduser().resolve()
    return str(root), mcp_servers(resolve(home=run_paths().home, workspace=root))


def _listed(workspace: str, servers: list[Any]) -> Any:
    from acode.connection import Connection
    from protocol import codec
    from protocol.messages import McpListTools

    with Connection(home()) as connection:
        connection.require_running()
        return connection.call("mcp", McpListTools(workspace=workspace, servers=servers), decoder=codec.MCP_REPLY,
                               timeout=LIST_TIMEOUT_S)


def definition_text(definition: Any) -> list[str]:
    """A definition as the lines a diff compares: description, input schema, annotations."""
    if definition is None:
        return []
    annotations = msgspec.to_builtins(definition.annotations) if definition.annotations is not None else None
    lines = ["description:", *(f"  {line}" for line in (definition.description or "").splitlines())]
    lines += ["input_schema:", *(f"  {line}" for line in json.dumps(definition.input_schema, indent=2,
                                                                   sort_keys=True, default=str).splitlines())]
    lines += ["annotations:", *(f"  {line}" for line in json.dumps(annotations, indent=2, sort_keys=True)
                                .splitlines())]
    return lines


@mcp_app.command("list")
def list_tools(workspace: Workspace = None, json_out: Json = False) -> None:
    """List the MCP servers and their tools: state, risk class, pin."""
    root, servers = _servers(workspace)
    if not servers:
        echo("no MCP servers are configured (mcp.servers.NAME in the user config; see docs/mcp.md)")
        return
    listed = _listed(root, servers)
    if json_out:
        print_json(listed)
        return
    for server in listed.servers:
        error = f"  {server.error.message} ({server.error.code})" if server.error is not None else ""
        echo(f"{server.name}  {server.transport}  {server.state}  {server.tools} tool(s)"
             f"{f'  {server.isolation}' if server.isolation else ''}{error}")
        for info in (t for t in listed.tools if t.definition.server == server.name):
            pin = "not pinned" if not info.pinned else "pinned" if info.pinned == info.hash \
                else f"pinned to {info.pinned[:12]}, now {info.hash[:12]}"
            echo(f"  {info.name:<40} {info.state:<9} {info.risk:<12} {pin}")


@mcp_app.command("approve")
def approve(
    server: Annotated[str, typer.Argument(help="the server's name (mcp.servers.NAME)")],
    tool: Annotated[str, typer.Argument(help="the tool's name as the server lists it")],
    yes: Annotated[bool, typer.Option("--yes", help="do not ask (needed off a terminal)")] = False,
    workspace: Workspace = None,
) -> None:
    """Approve a tool's changed definition: show the diff, confirm, pin it."""
    from acode.connection import Connection
    from protocol import codec
    from protocol.messages import McpPin

    root, servers = _servers(workspace)
    ref = next((s for s in servers if s.name == server), None)
    if ref is None:
        names = ", ".join(s.name for s in servers) or "none"
        raise CliError(f"no MCP server {server!r} is configured (servers: {names}); see docs/mcp.md",
                       code="ACODE-MCP-014")
    listed = _listed(root, [ref])
    info = next((t for t in listed.tools if t.definition.server == server and t.definition.name == tool), None)
    if info is None:
        names = ", ".join(t.definition.name for t in listed.tools if t.definition.server == server) or "none"
        state = next((s for s in listed.servers if s.name == server), None)
        why = f" (the server is {state.state}: {state.error.message})" if state is not None and state.error else ""
        raise CliError(f"server {server!r} lists no tool {tool!r}{why}; its tools: {names}", code="ACODE-MCP-014")
    if info.pinned == info.hash:
        echo(f"{info.name}: its definition is the approved one ({info.hash[:12]}); nothing to approve")
        return
    from actors.mcpkept import kept  # the definitions calls were sent with

    before = definition_text(info.pinned_definition or kept(run_paths().mcp_definitions, info.pinned))
    after = definition_text(info.definition)
    if info.pinned and not before:
        echo(f"{info.name}: the approved definition ({info.pinned[:12]}) is not kept, only its hash; the current one:")
    diff = difflib.unified_diff(before, after, fromfile=f"approved {info.pinned[:12] or '(none)'}",
                                tofile=f"current {info.hash[:12]}", lineterm="")
    echo("\n".join(diff))
    echo(f"risk class: {info.risk}")
    if not yes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise CliError(f"approving {info.name}'s new definition needs a confirmation; run it on a terminal, or "
                           "pass --yes", code="ACODE-MCP-015")
        if not typer.confirm(f"Approve this definition of {info.name}?", default=False):
            raise typer.Exit(1)
    with Connection(home()) as connection:
        connection.call("mcp", McpPin(server=server, tool=tool, hash=info.hash), decoder=codec.MCP_REPLY)
    echo(f"approved: {info.name} is pinned to {info.hash[:12]} and offered again from the next model turn")
