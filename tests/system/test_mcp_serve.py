"""``acode mcp serve`` driven by the MCP SDK's own stdio client (issue 30, part 2): another
agent lists the tools, submits a task, follows its events to the end and reads its state;
steers, pauses and cancels a second session; approvals are offered only when the user's
config allows them; an acode that is not running is an error that says `acode up`.

The server is ``python -m cli.app mcp serve`` as a subprocess of the SDK's client, against
the module's real actor set; the model is the stand-in server on loopback.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.modelserver import ByStage, ModelServer
from tests.system.conftest import REPO, Acode
from tests.system.test_human import Gate
from tests.system.test_models import APPROVE, VERDICT, _workspace, done, plan, write

pytestmark = pytest.mark.system

TASK = "make greet.txt say hello"
TOOLS = ["cancel", "pause", "session_events", "session_status", "steer", "submit_task"]


@asynccontextmanager
async def served(home: Path, server: ModelServer | None = None) -> AsyncIterator[ClientSession]:
    """``acode --home HOME mcp serve`` started by the SDK's stdio client, initialized."""
    env = {"PYTHONPATH": str(REPO)}
    if server is not None:  # the model the sessions it submits use, as the user's environment would say
        env.update({"ACODE_MODEL__PROVIDER": "ollama", "ACODE_MODEL__MODEL": "test-model",
                    "ACODE_MODEL__BASE_URL": server.url})
    params = StdioServerParameters(command=sys.executable, args=["-m", "cli.app", "--home", str(home), "mcp", "serve"],
                                   env=env, cwd=str(REPO))
    with tempfile.TemporaryFile("w+") as errlog:  # the server's stderr, removed when closed
        async with stdio_client(params, errlog=errlog) as (read, write_), ClientSession(read, write_) as session:
            await session.initialize()
            yield session


def drive(home: Path, body: Callable[[ClientSession], Awaitable[Any]], server: ModelServer | None = None) -> Any:
    async def main() -> Any:
        with anyio.fail_after(120):
            async with served(home, server) as session:
                return await body(session)
    return anyio.run(main)


async def call(session: ClientSession, tool: str, /, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = result.content[0]
    assert text.type == "text" and json.loads(text.text) == result.structured_content  # the same, as text
    return result.structured_content


async def refused(session: ClientSession, tool: str, /, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0]
    assert text.type == "text"
    return text.text


async def follow(session: ClientSession, session_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
    """Every event after ``after_seq``, page by page, waiting for new ones, until the one that
    says the session stopped (finished or paused)."""
    events: list[dict[str, Any]] = []
    while True:
        last = events[-1]["seq"] if events else after_seq
        page = await call(session, "session_events", session=session_id, after_seq=last, limit=7, wait_s=10)
        assert page["session"] == session_id
        events += page["events"]
        assert page["last_seq"] == (events[-1]["seq"] if events else after_seq)
        if page["finished"]:
            return events


async def _open_later(gate: Gate) -> None:
    await anyio.sleep(0.5)
    gate.open()


def _allow_approvals(home: Path, allowed: bool | None) -> None:
    config = home / "config.yml"
    if allowed is None:
        config.unlink(missing_ok=True)
    else:
        config.write_text(f"mcp:\n  serve:\n    allow_approvals: {str(allowed).lower()}\n")


def test_a_task_submitted_over_mcp_is_followed_to_its_end_and_reads_completed(shared: Acode, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)

    async def body(session: ClientSession) -> tuple[Any, ...]:
        submitted = await call(session, "submit_task", task=TASK, workspace=str(workspace))
        events = await follow(session, submitted["session"])
        status = await call(session, "session_status", session=submitted["session"][:8])
        started = time.monotonic()
        idle = await call(session, "session_events", session=submitted["session"], after_seq=events[-1]["seq"],
                          wait_s=30)
        idle_s = time.monotonic() - started
        unknown = await refused(session, "session_status", session="zzzz")
        return submitted, events, status, idle, idle_s, unknown

    with ModelServer() as server:
        server.responder = ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT],
                                   reviewer=[APPROVE])
        submitted, events, status, idle, idle_s, unknown = drive(shared.home, body, server)

    assert submitted["status"] == "running" and submitted["workspace"] == str(workspace.resolve())
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "each event once, in order"
    assert events[0]["type"] == "session_created" and events[0]["task"] == TASK
    assert all(next(iter(e)) == "schema_version" for e in events), "as `acode … --json` prints them"
    assert {"tool_called", "stage_finished"} <= {e["type"] for e in events}
    assert (events[-1]["type"], events[-1]["status"], events[-1]["exit_code"]) == ("session_finished", "completed", 0)
    assert (status["session"], status["status"], status["exit_code"]) == (submitted["session"], "completed", 0)
    assert status["pause"] is None and status["approval"] is None
    assert status["spent"]["tool_calls"] >= 2 and status["spent"]["tokens_in"] > 0
    assert status["budget"]["tool_calls"] == 500
    assert (workspace / "greet.txt").read_text() == "hello\n"
    assert (idle["events"], idle["last_seq"], idle["finished"], idle["status"]) == ([], events[-1]["seq"], False,
                                                                                     "completed")
    assert idle_s < 10, "a finished session has nothing more to wait for"
    assert unknown.endswith("no session starts with 'zzzz'; list them with `acode sessions` (ACODE-CLI-002)")


def test_a_session_is_steered_paused_and_cancelled_over_mcp(shared: Acode, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)

    with ModelServer() as server:
        gate = Gate(ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE]),
                    "executor")
        server.responder = gate

        async def body(session: ClientSession) -> tuple[Any, ...]:
            submitted = await call(session, "submit_task", task=TASK, workspace=str(workspace), autonomy=2)
            session_id = submitted["session"]
            try:
                with anyio.fail_after(60):
                    while gate.seen < 1:  # the executor asks its model; the answer is held
                        await anyio.sleep(0.05)
                steered = await call(session, "steer", session=session_id, text="keep it to one line")
                pausing = await call(session, "pause", session=session_id)
                stored = await call(session, "session_events", session=session_id, limit=500)
                async with anyio.create_task_group() as group:  # the answer comes half a second into the wait
                    group.start_soon(_open_later, gate)
                    waited = await call(session, "session_events", session=session_id,
                                        after_seq=stored["last_seq"], wait_s=30)
            finally:
                gate.open()
            events = await follow(session, session_id)  # to the pause
            assert waited["events"] and waited["events"][0]["seq"] == stored["last_seq"] + 1, waited
            assert waited["events"] == events[stored["last_seq"]:stored["last_seq"] + len(waited["events"])]
            paused = await call(session, "session_status", session=session_id)
            cancelled = await call(session, "cancel", session=session_id)
            empty = await refused(session, "steer", session=session_id, text="  ")
            return steered, pausing, events, paused, cancelled, empty

        steered, pausing, events, paused, cancelled, empty = drive(shared.home, body, server)

    assert steered["status"] == "running" and pausing["status"] == "running", "it stops at its next safe point"
    assert (events[-1]["type"], events[-1]["kind"]) == ("session_paused", "user")
    assert {"steered", "pause_requested"} <= {e["type"] for e in events}
    assert paused["status"] == "paused" and paused["pause"]["kind"] == "user"
    assert paused["next"].startswith("a human continues it: acode resume ")
    assert (cancelled["status"], cancelled["exit_code"]) == ("cancelled", 23)
    assert empty == ("Error executing tool steer: the steering text is empty; say in a sentence what the session "
                     "should do differently (ACODE-CLI-009)")
    assert not (workspace / "greet.txt").exists(), "paused before its tool call, then cancelled"


def test_approve_and_deny_are_offered_only_when_the_user_config_allows_them(shared: Acode) -> None:
    async def names(session: ClientSession) -> tuple[list[tuple[str, Any]], str]:
        listing = sorted((t.name, t.annotations) for t in (await session.list_tools()).tools)
        if "approve" in dict(listing):
            return listing, ""
        return listing, await refused(session, "approve", session="0123abcd")  # not listed, not callable

    listed, unknown = {}, {}
    try:
        for allowed in (None, False, True):
            _allow_approvals(shared.home, allowed)
            listed[allowed], unknown[allowed] = drive(shared.home, names)
    finally:
        _allow_approvals(shared.home, None)
    assert unknown[None] == unknown[False] == "Unknown tool: approve"
    assert [name for name, _ in listed[None]] == TOOLS == [name for name, _ in listed[False]]
    assert [name for name, _ in listed[True]] == sorted([*TOOLS, "approve", "deny"])
    hints = dict(listed[True])
    assert all(hints[n].read_only_hint and hints[n].idempotent_hint for n in ("session_status", "session_events"))
    assert all(not hints[n].read_only_hint for n in ("submit_task", "steer", "pause", "cancel", "approve", "deny"))
    assert hints["cancel"].destructive_hint and hints["approve"].destructive_hint
    assert not hints["submit_task"].destructive_hint and not hints["steer"].destructive_hint
    assert all(h.open_world_hint is False for h in hints.values())


def test_a_tool_called_while_acode_is_not_running_says_to_run_acode_up(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> str:
        return await refused(session, "session_status", session="0123abcd")

    text = drive(tmp_path / "home", body)
    assert text.endswith(f"acode is not running for {tmp_path / 'home'}; start it with `acode up --detach` "
                         "(ACODE-NET-003)")


def test_with_approvals_allowed_the_other_agent_approves_each_call_the_session_waits_for(
        shared: Acode, tmp_path: Path) -> None:
    """At autonomy 0 the write and the check each ask; the status shows the call and who may
    decide it, and the agent's approve lets the session go on to its end."""
    workspace = _workspace(tmp_path)

    async def body(session: ClientSession) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
        submitted = await call(session, "submit_task", task=TASK, workspace=str(workspace), autonomy=0)
        session_id, asked = submitted["session"], []
        events = await follow(session, session_id)
        while events[-1]["type"] == "session_paused":
            waiting = await call(session, "session_status", session=session_id)
            assert waiting["pause"]["kind"] == "awaiting_approval", waiting
            assert waiting["next"] == (f"a human decides: `acode approve {session_id[:8]}` or `acode deny "
                                       f"{session_id[:8]}` on a terminal or this server's approve/deny tools; "
                                       "`acode show` shows what it waits for")
            asked.append(waiting["approval"]["tool"])
            await call(session, "approve", session=session_id)
            events += await follow(session, session_id, events[-1]["seq"])
        return events, asked, await call(session, "session_status", session=session_id)

    with ModelServer() as server:
        server.responder = ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT],
                                   reviewer=[APPROVE])
        _allow_approvals(shared.home, True)
        try:
            events, asked, final = drive(shared.home, body, server)
        finally:
            _allow_approvals(shared.home, None)
    assert asked == ["write_file", "run_terminal"]
    decided = [(e["decision"], e["by"]) for e in events if e["type"] == "approval_decided"]
    assert decided == [("approve", "acode mcp serve")] * 2, "the audit record says who decided"
    assert (final["status"], final["exit_code"]) == ("completed", 0)
    assert (workspace / "greet.txt").read_text() == "hello\n"
