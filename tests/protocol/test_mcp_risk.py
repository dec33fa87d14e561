"""MCP tools in the autonomy rules: the class of an ``mcp__`` call comes from the table of
protocol/calls/mcp.py applied to the listed definition and the STORED server config, what the
model sends changes nothing; ``--always`` rules name the tool; the docs' table is the code's."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

import protocol.calls.mcp
from protocol.calls.autonomy import ApprovalDecision, call_hash, decision_of, gate, risk_of_call, rule_of, target_of
from protocol.calls.mcp import McpAnnotations, McpServerConfig, McpServerRef, McpToolDef, risk_of_tool
from protocol.calls.tools import Risk
from protocol.sessions.session import SessionSettings

ROOT = Path(__file__).resolve().parents[2]
NAME = "mcp__github__create_issue"


def _risks(config: McpServerConfig, annotations: McpAnnotations | None) -> dict[str, Risk]:
    tool = McpToolDef(server="github", name="create_issue", annotations=annotations)
    return {NAME: risk_of_tool(tool, config)}


@pytest.mark.parametrize(("config", "annotations", "risk"), [
    (McpServerConfig(command="gh"), None, "destructive"),
    (McpServerConfig(command="gh"), McpAnnotations(read_only_hint=True), "destructive"),
    (McpServerConfig(command="gh", trusted=True), McpAnnotations(read_only_hint=True), "read"),
    (McpServerConfig(command="gh", trusted=True), McpAnnotations(read_only_hint=True, open_world_hint=True), "network"),
    (McpServerConfig(command="gh", trusted=True, risk={"create_issue": "write"}), None, "write"),
])
def test_an_mcp_calls_class_is_the_stored_configs_and_the_definitions(
        config: McpServerConfig, annotations: McpAnnotations | None, risk: str) -> None:
    risks = _risks(config, annotations)
    assert risk_of_call(NAME, {}, risks) == risk
    # the arguments are the model's: no key of theirs lowers the class
    assert risk_of_call(NAME, {"risk": "read", "read_only_hint": True, "command": "ls"}, risks) == risk


def test_an_mcp_tool_nobody_listed_is_destructive_and_asks_at_autonomy_2() -> None:
    assert risk_of_call("mcp__github__delete_repo", {}) == "destructive"
    assert risk_of_call("mcp__github__delete_repo", {}, {NAME: "read"}) == "destructive"
    assert gate(2, SessionSettings().approvals, risk_of_call("mcp__github__delete_repo", {}))[0] == "prompt"


def test_an_always_rule_names_the_mcp_tool_and_covers_only_it_in_its_class() -> None:
    rule = rule_of(NAME, {"title": "a"}, "destructive")
    assert rule == "mcp__github__create_issue (destructive)"
    approved = ApprovalDecision(id="d1", key="k1", call_hash=call_hash(NAME, {"title": "a"}), tool=NAME,
                                risk="destructive", rule=rule, decision="approve", always=True)
    later = {"title": "b"}
    assert decision_of([approved], "k2", call_hash(NAME, later), rule_of(NAME, later, "destructive")) is approved
    other = "mcp__github__delete_repo"
    assert decision_of([approved], "k3", call_hash(other, {}), rule_of(other, {}, "destructive")) is None
    assert decision_of([approved], "k4", call_hash(NAME, later), rule_of(NAME, later, "write")) is None


def test_an_mcp_calls_target_is_its_arguments() -> None:
    assert target_of(NAME, {"title": "a", "body": "b"}) == '{"body": "b", "title": "a"}'
    assert target_of(NAME, {}) == ""


def test_a_sessions_servers_are_stored_with_it_and_default_to_none() -> None:
    assert SessionSettings().mcp_servers == []
    settings = SessionSettings(mcp_servers=[McpServerRef(name="github", config=McpServerConfig(command="gh"))])
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(settings), type=SessionSettings)
    assert again.mcp_servers == settings.mcp_servers
    assert "mcp_servers" not in msgspec.to_builtins(SessionSettings()), "no change for sessions without servers"


def _table_rows(text: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in text.splitlines():
        match = re.match(r"^\s*(\d)\s{2,}(.+?)\s{2,}(\S.*?)\s*$", line)
        if match:
            rows.append((match.group(1), " ".join(match.group(2).split()), match.group(3)))
    return rows


def test_the_docs_risk_table_is_the_codes() -> None:
    """docs/mcp.md "Risk classes" repeats protocol/calls/mcp.py's table row by row (the one source of truth)."""
    code = _table_rows(protocol.calls.mcp.__doc__ or "")
    docs = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = docs.split("## Risk classes", 1)[1].split("\n## ", 1)[0]
    rows = [tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
            for line in section.splitlines() if re.match(r"^\| \d \|", line)]
    assert len(code) == 8
    assert [(r[0], " ".join(r[1].split()), r[2]) for r in rows] == [(n, w.replace("``", "`"), c) for n, w, c in code]


def test_an_approval_of_an_mcp_call_binds_the_definition_it_was_offered_with() -> None:
    args = {"title": "a"}
    digest = call_hash(NAME, args, "def-a")
    approved = ApprovalDecision(id="d1", key="k1", call_hash=digest, tool=NAME, risk="destructive",
                                rule=rule_of(NAME, args, "destructive"), decision="approve")
    rule = rule_of(NAME, args, "destructive")
    assert decision_of([approved], "k1", call_hash(NAME, args, "def-a"), rule) is approved
    assert decision_of([approved], "k1", call_hash(NAME, args, "def-b"), rule) is None, "another definition asks again"
    assert call_hash("write_file", {"path": "a"}) == call_hash("write_file", {"path": "a"}, ""), "others unchanged"
