"""``acode mcp``: acode and the Model Context Protocol (issue 30). ``acode mcp serve`` serves
acode's sessions to another agent (:mod:`cli.commands.mcp_serve`)."""

import typer

from cli.commands import mcp_serve

__all__ = ["mcp_app"]

mcp_app = typer.Typer(help="acode and MCP: acode as an MCP server for another agent.", no_args_is_help=True,
                      rich_markup_mode=None)
mcp_app.command("serve")(mcp_serve.serve)
