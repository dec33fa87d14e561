"""protocol.calls.mcp: the risk table row by row, rerun safety, names and definition hashes."""

from __future__ import annotations

import pytest

from protocol.calls.mcp import (
    McpAnnotations,
    McpServerConfig,
    McpToolDef,
    definition_hash,
    parse_tool_name,
    rerun_safe,
    risk_of_tool,
    tool_name,
)
from protocol.calls.tools import Risk

UNTRUSTED = McpServerConfig(command="srv")
TRUSTED = McpServerConfig(command="srv", trusted=True)


def _tool(notes: McpAnnotations | None = None, name: str = "t") -> McpToolDef:
    return McpToolDef(server="s", name=name, annotations=notes)


READ = McpAnnotations(read_only_hint=True)
IDEMPOTENT = McpAnnotations(idempotent_hint=True)
NOT_DESTRUCTIVE = McpAnnotations(destructive_hint=False)
NONE_OF_THESE = McpAnnotations(title="a title", destructive_hint=True)


@pytest.mark.parametrize(("row", "tool", "server", "risk"), [
    # 1: the user's risk: wins over everything, lowering as well as raising
    ("1 lowers", _tool(None), McpServerConfig(command="srv", risk={"t": "read"}), "read"),
    ("1 raises", _tool(READ), McpServerConfig(command="srv", trusted=True, risk={"t": "execute"}), "execute"),
    ("1 open world", _tool(McpAnnotations(open_world_hint=True)),
     McpServerConfig(command="srv", trusted=True, risk={"t": "write"}), "write"),
    # 2: no annotations
    ("2 untrusted", _tool(None), UNTRUSTED, "destructive"),
    ("2 trusted", _tool(None), TRUSTED, "destructive"),
    # 3: an untrusted server's annotations count for nothing
    ("3 read-only", _tool(READ), UNTRUSTED, "destructive"),
    ("3 idempotent", _tool(IDEMPOTENT), UNTRUSTED, "destructive"),
    ("3 open world", _tool(McpAnnotations(read_only_hint=True, open_world_hint=True)), UNTRUSTED, "destructive"),
    # 4..7: a trusted server's annotations
    ("4", _tool(READ), TRUSTED, "read"),
    ("4 beats destructive", _tool(McpAnnotations(read_only_hint=True, destructive_hint=True)), TRUSTED, "read"),
    ("5", _tool(IDEMPOTENT), TRUSTED, "write"),
    ("6", _tool(NOT_DESTRUCTIVE), TRUSTED, "write"),
    ("7", _tool(NONE_OF_THESE), TRUSTED, "destructive"),
    ("7 empty", _tool(McpAnnotations()), TRUSTED, "destructive"),
    # 8: open world raises to network, never lowers
    ("8 read", _tool(McpAnnotations(read_only_hint=True, open_world_hint=True)), TRUSTED, "network"),
    ("8 write", _tool(McpAnnotations(idempotent_hint=True, open_world_hint=True)), TRUSTED, "network"),
    ("8 destructive", _tool(McpAnnotations(open_world_hint=True)), TRUSTED, "destructive"),
    ("8 closed world", _tool(McpAnnotations(read_only_hint=True, open_world_hint=False)), TRUSTED, "read"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_the_risk_table_row_by_row(row: str, tool: McpToolDef, server: McpServerConfig, risk: Risk) -> None:
    assert risk_of_tool(tool, server) == risk


@pytest.mark.parametrize(("tool", "server", "safe"), [
    (_tool(READ), TRUSTED, True),
    (_tool(IDEMPOTENT), TRUSTED, True),
    (_tool(NOT_DESTRUCTIVE), TRUSTED, False),
    (_tool(READ), UNTRUSTED, False),
    (_tool(None), TRUSTED, False),
    (_tool(None), McpServerConfig(command="srv", risk={"t": "read"}), True),
    (_tool(READ), McpServerConfig(command="srv", trusted=True, risk={"t": "write"}), True),
])
def test_a_call_is_rerun_safe_only_when_trusted_read_only_or_idempotent_or_the_user_says_read(
        tool: McpToolDef, server: McpServerConfig, safe: bool) -> None:
    assert rerun_safe(tool, server) is safe


def test_tool_names_round_trip_and_refuse_what_a_function_name_cannot_be() -> None:
    assert tool_name("git", "log") == "mcp__git__log"
    assert parse_tool_name("mcp__git__log") == ("git", "log")
    assert parse_tool_name("mcp__git__a__b") == ("git", "a__b")
    assert tool_name("my_server", "x") is None  # '_' in a server name would make the separator ambiguous
    assert tool_name("git", "has space") is None
    assert tool_name("git", "x" * 60) is None  # past 64 characters in all
    assert parse_tool_name("read_file") is None and parse_tool_name("mcp__git") is None


def test_a_definition_hash_changes_with_each_part_of_the_definition() -> None:
    base = McpToolDef(server="s", name="t", description="d", input_schema={"type": "object"}, annotations=READ)
    same = McpToolDef(server="s", name="t", description="d", input_schema={"type": "object"}, annotations=READ)
    assert definition_hash(base) == definition_hash(same)
    changed = [
        McpToolDef(server="s", name="t", description="d2", input_schema={"type": "object"}, annotations=READ),
        McpToolDef(server="s", name="t", description="d", input_schema={"type": "string"}, annotations=READ),
        McpToolDef(server="s", name="t", description="d", input_schema={"type": "object"}, annotations=None),
    ]
    assert len({definition_hash(base), *map(definition_hash, changed)}) == 4
