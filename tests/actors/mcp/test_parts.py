"""The mcp actor's parts that need no server: listing, pins, the calls begun, backoff, the
confined command line, and the user config's ``mcp.servers`` (no SDK imported here)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from acode.config.mcp import user_servers
from actors.mcp import confined, listing
from actors.mcp.begun import KEEP, Begun
from actors.mcp.pins import Pins
from actors.sandbox.confinement.isolation import LAUNCHER, Isolation
from protocol.calls.mcp import McpServerConfig, McpToolDef, definition_hash
from protocol.errors import ConfigError, McpError


def _sdk_tool(name: str = "t", read_only: bool | None = True) -> SimpleNamespace:
    notes = SimpleNamespace(title=None, read_only_hint=read_only, destructive_hint=None, idempotent_hint=None,
                            open_world_hint=None)
    return SimpleNamespace(name=name, description="does t", input_schema={"type": "object"}, annotations=notes)


def test_a_listed_tool_becomes_its_definition_with_acodes_annotation_names() -> None:
    tool = listing.definition("srv", _sdk_tool())
    assert tool.server == "srv" and tool.description == "does t" and tool.input_schema == {"type": "object"}
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    assert listing.definition("srv", SimpleNamespace(name="u", description=None, input_schema=None,
                                                     annotations=None)).annotations is None


def test_a_tools_state_is_filtered_changed_or_offered() -> None:
    tool = McpToolDef(server="srv", name="t")
    digest = definition_hash(tool)
    config = McpServerConfig(command="x", disabled_tools=["t"])
    filtered = listing.info("srv", config, tool, "")
    assert filtered is not None and filtered.state == "filtered"
    changed = listing.info("srv", McpServerConfig(command="x"), tool, "0" * 64)
    assert changed is not None and (changed.state, changed.pinned, changed.hash) == ("changed", "0" * 64, digest)
    offered = listing.info("srv", McpServerConfig(command="x"), tool, digest)
    assert offered is not None and (offered.state, offered.name, offered.risk) == ("offered", "mcp__srv__t",
                                                                                    "destructive")
    assert listing.info("srv", McpServerConfig(command="x"), McpToolDef(server="srv", name="bad name"), "") is None


def test_result_content_becomes_capped_text() -> None:
    blocks = [SimpleNamespace(type="text", text="hello"), SimpleNamespace(type="image", data="A" * 16_000,
                                                                            mime_type="image/png")]
    assert listing.text(blocks, None, 10_000) == "hello\n[image: image/png, 12 kB]"
    assert listing.text([], {"a": 1}, 1_000) == '{"a": 1}'
    cut = listing.text([SimpleNamespace(type="text", text="é" * 5_000)], None, 1_024)
    assert len(cut.encode()) <= 1_024 and cut.endswith("[output cut at 1024 of 10000 bytes]")


def test_pins_survive_a_new_instance_and_a_corrupt_file_refuses(tmp_path: Path) -> None:
    path = tmp_path / "mcp-pins.json"
    pins = Pins(path)
    assert pins.get("srv", "t") == ""
    pins.set("srv", "t", "a" * 64)
    pins.set("srv", "u", "b" * 64)
    assert Pins(path).of("srv") == {"t": "a" * 64, "u": "b" * 64}
    assert json.loads(path.read_text())["pins"]["srv"]["t"] == "a" * 64
    assert oct(path.stat().st_mode & 0o777) == "0o600" and list(tmp_path.iterdir()) == [path]  # no temporary left
    path.write_text("{not json")
    with pytest.raises(McpError) as info:
        Pins(path).get("srv", "t")
    assert info.value.code == "ACODE-MCP-009" and str(path) in info.value.message


def test_a_call_begun_in_an_earlier_life_is_known_and_the_record_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "mcp-calls"
    begun = Begun(path)
    assert not begun.seen("r1")
    assert begun.begin("r1") and not begun.begin("r1") and begun.seen("r1")
    begun.close()
    again = Begun(path, keep=8)  # the actor restarted
    assert not again.begin("r1") and again.begin("r2")
    for number in range(17):
        again.begin(f"x{number}")
    assert len(path.read_text().splitlines()) <= 16 and not again.begin("x16")
    assert Begun(path).seen("x16") and not Begun(path).seen("r1")  # the oldest went
    assert KEEP >= 1_000
    again.close()


BWRAP = Isolation(level="bubblewrap", bwrap="/usr/bin/bwrap", landlock_abi=4, pidns=True)


def test_a_stdio_server_runs_through_the_launcher_with_only_its_env_and_a_fresh_home(tmp_path: Path) -> None:
    config = McpServerConfig(command=sys.executable, args=["server.py"], env={"TOKEN": "t"})
    launch = confined.launch("srv", config, str(tmp_path), BWRAP, hidden=("/nonexistent-acode-home",))
    try:
        spec = json.loads(launch.args[-1])
        assert launch.command == sys.executable and launch.args[:4] == ["-I", "-S", "-B", LAUNCHER]
        assert spec["argv"] == [sys.executable, "server.py"] and spec["status_fd"] == "stderr"
        assert set(spec["env"]) == {"TOKEN", "PATH", "HOME", "TMPDIR"} and spec["env"]["TOKEN"] == "t"
        assert Path(spec["env"]["HOME"]).is_dir() and not any(Path(spec["env"]["HOME"]).iterdir())
        argv = spec["bwrap"]
        assert "--unshare-net" in argv
        root = argv.index(str(tmp_path))
        assert argv[root - 1] == "--ro-bind" and argv[root + 1] == str(tmp_path)  # the workspace, read-only
        assert launch.isolation == "bubblewrap: workspace read-only, no network, fresh HOME, configured env only"
        writes = confined.launch("srv", McpServerConfig(command=sys.executable, writes=True, network=True),
                                 str(tmp_path), BWRAP)
        argv = json.loads(writes.args[-1])["bwrap"]
        assert "--unshare-net" not in argv and argv[argv.index(str(tmp_path)) - 1] == "--bind"
        assert writes.isolation.startswith("bubblewrap: workspace read-write, network")
        shutil.rmtree(writes.scratch)
    finally:
        shutil.rmtree(launch.scratch)


def test_pass_env_hands_on_only_the_variables_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACODE_TEST_TOKEN", "secret-1")
    monkeypatch.setenv("ACODE_TEST_OTHER", "secret-2")
    config = McpServerConfig(command=sys.executable, pass_env=["ACODE_TEST_TOKEN", "ACODE_TEST_UNSET"])
    launch = confined.launch("srv", config, str(tmp_path), BWRAP)
    try:
        env = json.loads(launch.args[-1])["env"]
        assert env["ACODE_TEST_TOKEN"] == "secret-1" and "ACODE_TEST_OTHER" not in env
        assert "ACODE_TEST_UNSET" not in env and set(env) == {"ACODE_TEST_TOKEN", "PATH", "HOME", "TMPDIR"}
    finally:
        shutil.rmtree(launch.scratch)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"command": "x", "pass_env": ["NOT A NAME"]}, McpServerConfig)


def test_a_missing_command_says_so(tmp_path: Path) -> None:
    with pytest.raises(McpError) as info:
        confined.launch("srv", McpServerConfig(command="no-such-mcp-server-xyz"), str(tmp_path), BWRAP)
    assert info.value.code == "ACODE-MCP-001" and "'no-such-mcp-server-xyz' was not found on PATH" in info.value.message


@pytest.mark.parametrize(("entry", "says"), [
    ("my_srv: {command: x}", "'my_srv' is not a server name"),
    ("srv: {}", "needs exactly one of command: (a stdio server) or url:"),
    ("srv: {command: x, url: 'http://h/mcp'}", "it has both"),
    ("srv: {url: 'ftp://h/mcp'}", "give an http:// or https:// URL"),
    ("srv: {url: 'http://h/mcp', args: [a]}", "mcp.servers.srv.args"),
    ("srv: {command: x, env: {'A B': c}}", "not an environment variable name"),
    ("off: {command: x}", "has the key False, not a name (YAML reads off, on, yes, no"),
])
def test_an_invalid_server_entry_names_its_key(tmp_path: Path, entry: str, says: str) -> None:
    (tmp_path / "config.yml").write_text(f"mcp:\n  servers:\n    {entry}\n")
    with pytest.raises(ConfigError) as info:
        user_servers(tmp_path)
    assert info.value.code == "ACODE-MCP-006" and says in info.value.message
    assert str(tmp_path / "config.yml") in info.value.message


def test_the_users_servers_are_read_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "config.yml").write_text("mcp:\n  servers:\n"
                                         "    web: {url: 'http://127.0.0.1:8000/mcp', trusted: true}\n"
                                         "    git: {command: uvx, args: [mcp-server-git], timeout_s: 10}\n")
    found = user_servers(tmp_path)
    assert [ref.name for ref in found] == ["git", "web"]
    assert found[0].config.transport == "stdio" and found[0].config.timeout_s == 10
    assert found[1].config.transport == "http" and found[1].config.trusted
    assert user_servers(tmp_path / "nowhere") == []
    (tmp_path / "config.yml").write_text("mcp:\n  servers:\n    git: {command: x, timeout: 3}\n")
    with pytest.raises(ConfigError) as info:
        user_servers(tmp_path)
    assert "mcp.servers.git" in info.value.message and "timeout" in info.value.message


def test_the_actor_refuses_a_server_reference_the_config_would_have_refused() -> None:
    assert listing.config_problem("git", McpServerConfig(command="x")) is None
    assert "'my_git' is not" in (listing.config_problem("my_git", McpServerConfig(command="x")) or "")
    assert "exactly one of command" in (listing.config_problem("git", McpServerConfig()) or "")
    assert "exactly one of command" in (listing.config_problem("git", McpServerConfig(command="x", url="u")) or "")
