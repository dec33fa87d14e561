"""MCP calls in the sandbox: their class from trusted sources only, the gate, the journal.

The ``mcp`` service is a small in-process stand-in (:class:`Service`: the listing a real
actor gives and a counter of calls); the journal is the in-memory persistence of the
journal's own tests; everything else is the sandbox's real code.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.sandbox.gate import ApprovalGate
from actors.sandbox.journal import Journal
from actors.sandbox.mcpcalls import McpCalls
from actors.sandbox.tools.terminal import Terminal
from protocol.calls.mcp import McpAnnotations, McpServerConfig, McpServerRef, McpToolDef, definition_hash
from protocol.errors import ErrorInfo, NotFoundError, RequestTimeout, TransportError
from protocol.messages import (
    BeginToolCall,
    McpCalled,
    McpCallTool,
    McpListTools,
    McpToolInfo,
    McpTools,
    Message,
    RunTool,
)
from tests.actors.sandbox.journal_actor import MemoryJournal

READ_ONLY = McpAnnotations(read_only_hint=True)
IDEMPOTENT = McpAnnotations(idempotent_hint=True)


class Service:
    """What the ``mcp`` actor answers: ``tools`` per server, each call counted."""

    def __init__(self, *tools: McpToolDef):
        self.tools = list(tools)
        self.calls: list[McpCallTool] = []
        self.fail: Exception | None = None  # what the next call raises (the actor died, the broker said so)
        self.answer: McpCalled | None = None  # what the next call answers instead of running
        self.down = False

    def list(self, body: McpListTools) -> McpTools:
        if self.down:
            raise RequestTimeout("no reply from mcp within 30s", code="ACODE-NET-001")
        names = {ref.name for ref in body.servers}
        return McpTools(tools=[McpToolInfo(name=f"mcp__{t.server}__{t.name}", definition=t, risk="read",
                                           rerun_safe=True, hash=definition_hash(t))  # the actor's claims: unused
                               for t in self.tools if t.server in names])

    def call(self, body: McpCallTool, timeout: float) -> McpCalled:
        self.calls.append(body)
        if self.fail is not None:
            raise self.fail
        if self.answer is not None:
            return self.answer
        return McpCalled(ok=True, output=f"{body.tool} ran with {body.arguments}")


def _servers(trusted: bool) -> list[McpServerRef]:
    return [McpServerRef(name="docs", config=McpServerConfig(command="docs-server", trusted=trusted))]


def _calls(service: Service, *, trusted: bool) -> McpCalls:
    return McpCalls(lambda session: _servers(trusted), service.list, service.call)


def _request(workspace: Path, tool: str = "mcp__docs__lookup", key: str = "k1", **arguments: object) -> RunTool:
    return RunTool(key=key, session_id="s1", workspace=str(workspace), tool=tool, arguments=dict(arguments))


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    terminal = Terminal()
    yield terminal
    terminal.kill_all()


@pytest.mark.parametrize(("annotations", "trusted", "risk"), [
    (None, True, "destructive"),
    (READ_ONLY, False, "destructive"),  # an untrusted server's claims lower nothing
    (READ_ONLY, True, "read"),
    (IDEMPOTENT, True, "write"),
])
def test_the_class_comes_from_the_listed_definition_and_the_stored_config(
        tmp_path: Path, annotations: McpAnnotations | None, trusted: bool, risk: str) -> None:
    service = Service(McpToolDef(server="docs", name="lookup", annotations=annotations))
    target = _calls(service, trusted=trusted).resolve(_request(tmp_path))
    assert (target.risk, target.tool, target.server.name) == (risk, "lookup", "docs")


def test_a_hash_the_actor_does_not_list_is_destructive_and_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    service = Service(McpToolDef(server="docs", name="lookup", annotations=READ_ONLY))
    calls = _calls(service, trusted=True)
    stale = calls.resolve(msgspec_replace(_request(tmp_path), mcp_hash="0" * 64))
    assert (stale.risk, stale.definition) == ("destructive", None)
    with pytest.raises(Exception, match=r"lists no tool 'other'.*ACODE-MCP-013"):
        calls.resolve(_request(tmp_path, "mcp__docs__other"))
    with pytest.raises(Exception, match=r"no MCP server 'web'.*ACODE-MCP-013"):
        calls.resolve(_request(tmp_path, "mcp__web__lookup"))


def _no_session(body: Message) -> Message:
    raise NotFoundError(f"{body!r} not found", code="ACODE-STORE-002")  # the defaults apply: autonomy 2


def msgspec_replace(request: RunTool, **changes: object) -> RunTool:
    import msgspec

    return msgspec.structs.replace(request, **changes)


def test_the_gate_asks_for_an_untrusted_servers_read_only_tool_and_fails_closed_without_the_service(
        tmp_path: Path) -> None:
    """The stage sends no class at all: the gate computes it (autonomy 2, the defaults)."""
    service = Service(McpToolDef(server="docs", name="lookup", annotations=READ_ONLY))
    untrusted = ApprovalGate(_no_session, mcp=_calls(service, trusted=False))
    refusal = untrusted.check(_request(tmp_path), "executor")
    assert refusal is not None and refusal.code == "ACODE-SBX-019"
    assert "mcp__docs__lookup (destructive) refused" in refusal.message
    assert ApprovalGate(_no_session, mcp=_calls(service, trusted=True)).check(_request(tmp_path), "executor") is None
    assert ApprovalGate(_no_session, mcp=_calls(service, trusted=True)).check(_request(tmp_path), "planner") is None
    service.down = True
    closed = ApprovalGate(_no_session, mcp=_calls(service, trusted=True)).check(_request(tmp_path), "planner")
    assert closed is not None and closed.code == "ACODE-SBX-019", "no listing: destructive, even for an exempt caller"


def test_a_destructive_call_is_journaled_before_it_runs_and_never_run_again_after_a_crash(
        tmp_path: Path, terminal: Terminal) -> None:
    memory = MemoryJournal()
    service = Service(McpToolDef(server="docs", name="lookup"))
    journal = Journal(memory.answer, terminal, mcp=_calls(service, trusted=True))
    result = journal.run(_request(tmp_path, q="x"))
    assert (result.ok, result.output, result.risk) == (True, "lookup ran with {'q': 'x'}", "destructive")
    assert memory.entries["k1"].begin.risk == "destructive" and memory.events[0].target == '{"q": "x"}'
    assert [c.hash for c in service.calls] == [definition_hash(service.tools[0])]
    assert journal.run(_request(tmp_path, q="x")).replayed and len(service.calls) == 1

    interrupted = _request(tmp_path, key="k2", q="y")  # the sandbox died after the intent: a human decides
    memory.answer(BeginToolCall(key="k2", session_id="s1", tool=interrupted.tool, risk="destructive"))
    again = journal.run(interrupted)
    assert (again.ok, again.outcome, again.error.code if again.error else None) == (False, "unknown", "ACODE-MCP-011")
    assert len(service.calls) == 1, "an interrupted MCP call is never run again"


def test_a_trusted_idempotent_call_runs_again_after_a_crash_and_a_read_only_one_is_not_journaled_first(
        tmp_path: Path, terminal: Terminal) -> None:
    memory = MemoryJournal()
    service = Service(McpToolDef(server="docs", name="lookup", annotations=READ_ONLY),
                      McpToolDef(server="docs", name="put", annotations=IDEMPOTENT))
    journal = Journal(memory.answer, terminal, mcp=_calls(service, trusted=True))
    assert journal.run(_request(tmp_path)).ok and memory.begins == 0, "a read: no intent first"
    memory.answer(BeginToolCall(key="k2", session_id="s1", tool="mcp__docs__put", risk="write"))
    resumed = journal.run(_request(tmp_path, "mcp__docs__put", key="k2"))
    assert (resumed.ok, resumed.outcome, len(service.calls)) == (True, "done", 2)


def test_an_mcp_actor_lost_mid_call_is_an_unknown_outcome_and_other_failures_say_theirs(
        tmp_path: Path, terminal: Terminal) -> None:
    memory = MemoryJournal()
    service = Service(McpToolDef(server="docs", name="lookup"))
    journal = Journal(memory.answer, terminal, mcp=_calls(service, trusted=True))
    service.fail = TransportError("the worker handling the request was lost", code="ACODE-NET-002")
    lost = journal.run(_request(tmp_path))
    assert (lost.outcome, lost.error.code if lost.error else None) == ("unknown", "ACODE-MCP-011")
    assert "not run again" in (lost.error.message if lost.error else "")
    service.fail = None
    service.answer = McpCalled(ok=False, error=ErrorInfo(code="ACODE-MCP-004", message="definition changed"))
    refused = journal.run(_request(tmp_path, key="k3"))
    assert (refused.outcome, refused.error.code if refused.error else None) == ("done", "ACODE-MCP-004")
