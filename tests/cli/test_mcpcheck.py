"""``acode doctor``'s MCP lines when it cannot ask the mcp actor (cli/mcpcheck.py); the lines
from a running actor are checked in tests/system/test_mcp.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from actors.coordinator.actor import mcp_installed
from actors.paths import RunPaths
from cli.mcpcheck import mcp_checks

SERVERS = ("mcp:\n  servers:\n    git: {command: uvx, args: [mcp-server-git]}\n"
           "    old: {url: 'http://h/mcp', enabled: false}\n")


def test_no_server_configured_adds_no_line(tmp_path: Path) -> None:
    assert mcp_checks(RunPaths(tmp_path), tmp_path, None) == []


def test_servers_configured_while_acode_is_down_say_so(tmp_path: Path) -> None:
    (tmp_path / "config.yml").write_text(SERVERS)
    lines = mcp_checks(RunPaths(tmp_path), tmp_path, None)
    assert lines == [("mcp old", True, "disabled (enabled: false)", "", False),
                     ("mcp git", True, "configured (stdio); state unknown: acode is not up",
                      "acode up --detach, then acode doctor", True)]


def test_servers_configured_without_the_sdk_say_how_to_install_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.yml").write_text(SERVERS)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as find_spec sees a missing package
    assert not mcp_installed()  # so the coordinator would start no mcp actor either
    ((name, ok, detail, fix, _),) = mcp_checks(RunPaths(tmp_path), tmp_path, None)
    assert (name, ok) == ("mcp", False) and "MCP support is not installed (ACODE-MCP-008)" in detail
    assert fix.startswith("pip install 'acode[mcp]'")


def test_an_invalid_entry_fails_the_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "config.yml").write_text("mcp:\n  servers:\n    git: {command: x, url: 'http://h/mcp'}\n")
    ((name, ok, detail, _, _),) = mcp_checks(RunPaths(tmp_path), tmp_path, None)
    assert (name, ok) == ("mcp", False) and "mcp.servers.git" in detail and "ACODE-MCP-006" in detail
