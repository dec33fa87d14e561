"""A session's MCP servers: the user's, a workspace's only under the trust rule; stored whole
with the session; refused without the MCP extra (the CLI never imports the SDK)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from acode.config import trust
from acode.config.loader import resolve
from acode.config.settings import session_settings
from protocol.calls.mcp import McpServerConfig
from protocol.errors import ConfigError

USER = """\
mcp:
  servers:
    docs:
      command: docs-server
      args: [--stdio]
      trusted: true
      risk: {lookup: read}
"""
# the user's server repeated exactly, and one the workspace adds
WORKSPACE = USER + """\
    evil:
      url: http://127.0.0.1:9/mcp
      trusted: true
"""
CHANGED = USER.replace("risk: {lookup: read}", "risk: {lookup: read, delete_all: read}")  # the user's, loosened


def _setup(tmp_path: Path, workspace_text: str) -> tuple[Path, Path]:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    (workspace / ".agent").mkdir(parents=True)
    home.mkdir()
    (home / "config.yml").write_text(USER)
    (workspace / ".agent" / "config.yml").write_text(workspace_text)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return home, workspace


def _servers(home: Path, workspace: Path) -> tuple[dict[str, McpServerConfig], list[str]]:
    notices: list[str] = []
    settings = session_settings(resolve(home=home, workspace=workspace, env={}, notices=notices), home=home)
    return {ref.name: ref.config for ref in settings.mcp_servers}, notices


@pytest.mark.parametrize("text", [WORKSPACE, CHANGED])
def test_an_untrusted_workspace_adds_no_server_and_changes_none_and_the_warning_names_the_key(
        tmp_path: Path, text: str) -> None:
    home, workspace = _setup(tmp_path, text)
    servers, notices = _servers(home, workspace)
    assert list(servers) == ["docs"] and servers["docs"].risk == {"lookup": "read"}
    assert servers["docs"].args == ["--stdio"] and servers["docs"].trusted
    wanted = "mcp.servers.evil" if text == WORKSPACE else "mcp.servers.docs"
    [notice] = notices
    assert wanted in notice and "acode trust" in notice and "(ACODE-CFG-005)" in notice


def test_a_trusted_workspace_adds_its_servers(tmp_path: Path) -> None:
    home, workspace = _setup(tmp_path, WORKSPACE)
    path = trust.config_file(workspace)
    trust.save_store(home, trust.TrustStore(files={str(path): trust.digest(path.read_bytes())}))
    servers, notices = _servers(home, workspace)
    assert sorted(servers) == ["docs", "evil"] and servers["evil"].url == "http://127.0.0.1:9/mcp"
    assert notices == []


def test_a_bad_server_name_is_refused(tmp_path: Path) -> None:
    home, workspace = _setup(tmp_path, "{}\n")
    (home / "config.yml").write_text("mcp:\n  servers:\n    My_Server:\n      command: x\n")
    with pytest.raises(ConfigError, match=r"mcp.servers.My_Server in your configuration: .*\(ACODE-MCP-006\)"):
        _servers(home, workspace)


def test_servers_without_the_extra_are_refused_saying_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, workspace = _setup(tmp_path, "{}\n")
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else found(name, *a))
    with pytest.raises(ConfigError, match=r"pip install acode\[mcp\].*\(ACODE-MCP-010\)"):
        _servers(home, workspace)
    (home / "config.yml").write_text("{}\n")
    assert _servers(home, workspace) == ({}, []), "without servers nothing is asked of the extra"
