"""The user's MCP servers: ``mcp.servers.NAME`` in ``$ACODE_HOME/config.yml``, as the
:class:`~protocol.messages.McpServerRef` list the ``mcp`` actor is asked about.

The schema (:class:`acode.config.schema.Mcp`) already refuses unknown keys and values out of
bounds; :func:`servers` adds what a Struct cannot say, each with ACODE-MCP-006 naming the
key and the file:

- the name is a server name (``[a-z0-9][a-z0-9-]*``, at most 31 characters: it becomes part
  of every tool's ``mcp__NAME__TOOL`` name, so no ``_``);
- exactly one transport: ``command`` (stdio) or ``url`` (streamable HTTP), and ``args``/
  ``env``/``writes`` go with a command only; a url is ``http://`` or ``https://``;
- ``env`` names are environment variable names.

A workspace's ``.agent/config.yml`` may not add servers by itself; how a trusted one may is
the session's settings' business (the trust rule), not this module's: it reads the user's
file alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import msgspec.yaml

from acode.config.loader import load_file
from acode.config.schema import AcodeConfig
from protocol.calls.mcp import SERVER_NAME, McpServerConfig
from protocol.errors import ConfigError
from protocol.messages import McpServerRef

__all__ = ["servers", "user_servers"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _check(name: str, config: McpServerConfig, where: str) -> None:
    key = f"mcp.servers.{name}"
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"{key} in {where}: {name!r} is not a server name; use lower-case letters, digits and '-' "
                          "(no '_'), at most 31 characters, e.g. mcp.servers.my-server", code="ACODE-MCP-006")
    if bool(config.command) == bool(config.url):
        raise ConfigError(f"{key} in {where} needs exactly one of command: (a stdio server) or url: (a streamable "
                          f"HTTP server); it has {'both' if config.command else 'neither'}", code="ACODE-MCP-006")
    if config.url:
        if not config.url.startswith(("http://", "https://")):
            raise ConfigError(f"{key}.url in {where} is {config.url!r}; give an http:// or https:// URL of the "
                              "server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp", code="ACODE-MCP-006")
        for field in ("args", "env", "pass_env", "writes"):
            if getattr(config, field):
                raise ConfigError(f"{key}.{field} in {where} is for a stdio server (command:), not one at a url; "
                                  "remove it", code="ACODE-MCP-006")
    bad = [variable for variable in config.env if not _ENV_NAME.fullmatch(variable)]
    if bad:
        raise ConfigError(f"{key}.env in {where} has {bad[0]!r}, not an environment variable name",
                          code="ACODE-MCP-006")


def servers(config: AcodeConfig, where: str) -> list[McpServerRef]:
    """``config``'s servers, checked (``where`` names the file in messages), in name order;
    a server with ``enabled: false`` is listed too (the actor skips it; doctor shows it)."""
    found = config.mcp.servers or {}
    for name, server in found.items():
        _check(name, server, where)
    return [McpServerRef(name=name, config=found[name]) for name in sorted(found)]


def user_servers(home: Path) -> list[McpServerRef]:
    """The servers of the user's ``$ACODE_HOME/config.yml`` (none when it has no ``mcp:``)."""
    path = home / "config.yml"
    try:
        config = load_file(path)
    except ConfigError as exc:
        _name_the_entry(path, exc)
        raise
    return servers(config, str(path))


def _name_the_entry(path: Path, error: ConfigError) -> None:
    """Raise ACODE-MCP-006 naming ``mcp.servers.NAME`` when that entry is what ``error``
    (the whole file's, whose path says ``$.mcp.servers[...]``) is about."""
    try:
        raw = msgspec.yaml.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return
    entries = raw.get("mcp", {}).get("servers") if isinstance(raw, dict) and isinstance(raw.get("mcp"), dict) else None
    if not isinstance(entries, dict):
        return
    for name, entry in entries.items():
        if not isinstance(name, str):
            raise ConfigError(f"mcp.servers in {path} has the key {name!r}, not a name (YAML reads off, on, yes, no "
                              "and numbers as other things); quote it, e.g. 'off':", code="ACODE-MCP-006") from error
        try:
            msgspec.convert(entry, McpServerConfig)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"mcp.servers.{name} in {path} is invalid: {exc}; its keys are "
                              f"{', '.join(McpServerConfig.__struct_fields__)} (docs/mcp.md)",
                              code="ACODE-MCP-006") from error
