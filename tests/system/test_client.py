"""The Python client against a real acode (issue 29): every method on real sessions, the
README's example run as written, and a stream that crosses a kill -9 of persistence and of
the coordinator with no gap and no duplicate.

The model is the stand-in server on loopback (:mod:`tests.modelserver`); the client runs in
the test process, as a user's program would, against the actor set of the test's home.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

import acode
from acode import Client, GenericEvent, kind
from protocol.errors import CliError
from tests.harness import wait_until
from tests.modelserver import ByStage, ModelServer
from tests.system.conftest import REPO, Acode
from tests.system.test_human import Gate
from tests.system.test_models import APPROVE, VERDICT, _workspace, done, plan, write

pytestmark = pytest.mark.system

TASK = "make greet.txt say hello"


def _fresh(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return _workspace(tmp_path / name)


def _submit(client: Client, server: ModelServer, workspace: Path, **settings: Any) -> acode.Session:
    return client.submit(TASK, workspace, provider="ollama", model="test-model", base_url=server.url, **settings)


def _approving(session: acode.Session) -> tuple[Any, list[str]]:
    """Wait, approving every call the session asks for (at autonomy 0 its checks ask too)."""
    approved: list[str] = []
    while True:
        state = session.wait(timeout=60)
        if state.pause is None or state.pause.kind != "awaiting_approval" or state.approval is None:
            return state, approved
        approved.append(state.approval.tool)
        session.approve()


def _numbered(events: list[Any]) -> list[int]:
    return [e.seq for e in events]


def test_every_method_on_one_session_approve_deny_undo_and_rewind(shared: Acode, tmp_path: Path) -> None:
    """Submit with the caller deciding approvals, stream to the pause, approve by a prefix,
    wait, list, show, status, checkpoints, undo (planned, then applied), rewind to the
    start, deny the call asked again, approve the next."""
    with ModelServer() as server, Client(shared.home) as client:
        server.responder = ByStage(planner=[plan()], executor=[write(), done(), write(), write(), done()],
                                   verifier=[VERDICT, VERDICT], reviewer=[APPROVE, APPROVE])
        workspace = _workspace(tmp_path)
        session = _submit(client, server, workspace, autonomy=0, approvals="wait")

        events = list(session.events())
        assert kind(events[-1]) == "session_paused" and not any(isinstance(e, GenericEvent) for e in events)
        asked = session.snapshot()
        assert asked.pause is not None and asked.pause.kind == "awaiting_approval"
        assert asked.approval is not None and asked.approval.tool == "write_file"
        client.approve(session.id[:8])  # a unique prefix names it, as on the command line
        finished, approved = _approving(session)
        assert (finished.status, finished.exit_code) == ("completed", 0) and approved == ["run_terminal"]
        while kind(events[-1]) != "session_finished":  # each follow ends at a pause or the end
            events += session.events(after_seq=events[-1].seq)
        assert _numbered(events) == list(range(1, len(events) + 1)), "no gap, no duplicate"
        assert _numbered(list(session.events(follow=False))) == _numbered(events)

        assert session.id in [s.id for s in client.sessions()]
        assert [s.id for s in client.sessions(["completed"], limit=1)] == [session.id]
        view = client.show(session.id)
        assert view.plan is not None and [t.status for t in view.plan.tasks] == ["completed"]
        assert _numbered(view.events) == _numbered(events) and view.budget.spent.tool_calls >= 1
        assert {"coordinator", "persistence", "sandbox", "executor"} <= {a.instance for a in client.status().actors}

        rows = client.checkpoints(session.id)
        assert rows[0]["kind"] == "start" and any(r["call"] for r in rows[1:])
        planned = client.undo(session.id, apply=False)
        assert not planned.applied and planned.delete == ["greet.txt"] and (workspace / "greet.txt").exists()
        undone = client.undo(session.id)
        assert undone.applied and not (workspace / "greet.txt").exists()

        client.rewind(session.id, rows[0]["id"], steer="write greet.txt once")
        again = session.wait(timeout=60)
        assert again.pause is not None and again.pause.kind == "awaiting_approval", "approvals='wait' holds on"
        client.deny(session.id, "not yet")
        third = session.wait(timeout=60)
        assert third.pause is not None and third.pause.kind == "awaiting_approval"
        session.approve()
        assert _approving(session)[0].status == "completed"
    assert (workspace / "greet.txt").read_text() == "hello\n"
    executor = [r for r in server.chats if r.stage == "executor"]
    assert "not yet" in str(executor[3].messages), "the model is told why its call was denied"


def test_plan_review_replan_steer_answer_pause_resume_and_cancel(shared: Acode, tmp_path: Path) -> None:
    questions = {"goal": "greet", "status": "needs_clarification", "questions": [
        {"label": "Q1", "question": "Which word should greet.txt hold?", "options": ["hello", "hi"]}]}
    with ModelServer() as server, Client(shared.home) as client:
        from tests.modelserver import Json

        # plan review: replan with feedback, then approve; steering while it waits
        server.responder = ByStage(planner=[Json(questions), plan(), plan(goal="greet.txt says hello, shorter")],
                                   executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
        session = _submit(client, server, _workspace(tmp_path), approve_plan=True)
        paused = session.wait(timeout=60)
        assert paused.pause is not None and paused.pause.kind == "needs_input"
        with pytest.raises(CliError) as refused:
            session.answer({"Q1": "3"})
        assert refused.value.code == "ACODE-CLI-005" and "options 1 to 2" in refused.value.message
        session.answer({"Q1": "1"})
        review = session.wait(timeout=60)
        assert review.pause is not None and review.pause.kind == "plan_review"
        shown = json.loads(shared("status", "--json").stdout)  # the CLI, on the client: where each session stands
        [mine] = [s for s in shown["sessions"] if s["session"]["id"] == session.id]
        assert mine["where"] == "paused (plan_review) in planner" and 0 <= mine["health"] <= 100
        assert shown["actors"] and mine["budget"]["spent"]["tool_calls"] >= 0
        with pytest.raises(CliError) as nothing:
            session.deny()
        assert nothing.value.code == "ACODE-CLI-004"
        session.steer("keep the file to one line")
        session.replan("say it shorter")
        second = session.wait(timeout=60)
        assert second.pause is not None and second.pause.kind == "plan_review" and second.plan_version == 3
        session.approve()
        assert session.wait(timeout=60).status == "completed"
        planner = [r for r in server.chats if r.stage == "planner"]
        assert "hello" in str(planner[1].messages) and "say it shorter" in str(planner[2].messages)
        assert all("keep the file to one line" in str(r.messages) for r in server.chats[3:])

        # pause while the planner answers; resume a second later
        gate = Gate(ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE]),
                    "planner")
        server.responder = gate
        try:
            held = _submit(client, server, _fresh(tmp_path, "2"))
            assert server.wait_for(lambda: gate.seen == 1, 60)
            assert held.pause().status == "running", "it stops at its next safe point"
        finally:
            gate.open()
        stopped = held.wait(timeout=60)
        assert stopped.pause is not None and stopped.pause.kind == "user"
        wait_until(lambda: time.time() - stopped.pause_requested_at >= 1.05, 5, what="a second after the pause")
        held.resume(max_turns=5)
        assert held.wait(timeout=60).status == "completed"

        # cancel while the planner answers
        gate = Gate(ByStage(planner=[plan()]), "planner")
        server.responder = gate
        try:
            doomed = _submit(client, server, _fresh(tmp_path, "3"))
            assert server.wait_for(lambda: gate.seen == 1, 60)
            assert doomed.cancel().status == "cancelled"
        finally:
            gate.open()
        assert (doomed.wait(timeout=30).status, doomed.wait().exit_code) == ("cancelled", 23)


def test_a_headless_session_never_waits_for_a_human(shared: Acode, tmp_path: Path) -> None:
    """Submitted from code without approvals='wait': the non-interactive policy decides. Its
    default, fail, stops the session at the first call that would ask (ACODE-EXEC-005, exit
    33); ``wait`` returns then, it does not wait for an approval nobody will give."""
    with ModelServer() as server, Client(shared.home) as client:
        server.responder = ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT],
                                   reviewer=[APPROVE])
        session = _submit(client, server, _workspace(tmp_path), autonomy=0)
        final = session.wait(timeout=60)
    assert final.settings.approval_mode == "fail"
    assert final.status == "paused" and final.pause is not None and final.pause.code == "ACODE-EXEC-005"
    assert final.exit_code == 33


def test_the_asyncio_twin_streams_and_approves_while_it_streams(shared: Acode, tmp_path: Path) -> None:
    import asyncio

    async def main(server: ModelServer) -> tuple[list[Any], Any]:
        async with acode.AsyncClient(shared.home) as client:
            session = await client.submit(TASK, _workspace(tmp_path), provider="ollama", model="test-model",
                                          base_url=server.url, autonomy=0, approvals="wait")
            seen: list[Any] = []
            while True:
                seen += [event async for event in session.events(after_seq=seen[-1].seq if seen else 0)]
                state = await session.snapshot()
                if state.status != "paused":
                    return seen, state
                await session.approve()

    with ModelServer() as server:
        server.responder = ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT],
                                   reviewer=[APPROVE])
        events, final = asyncio.run(main(server))
    assert (final.status, final.exit_code) == ("completed", 0)
    assert _numbered(events) == list(range(1, len(events) + 1)) and kind(events[-1]) == "session_finished"
    assert [kind(e) for e in events].count("approval_decided") == 2  # the write, then the check


def _readme_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Using acode from Python", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "README 'Using acode from Python' has a python block"
    return found.group(1)


def test_the_readme_example_runs_as_written(shared: Acode, tmp_path: Path) -> None:
    env = {**shared.env, "ACODE_HOME": str(shared.home), "TMPDIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", _readme_example()], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "    approve modify_file greet.py" in lines
    assert "    paused (budget_exhausted): resume with twice the budget" in lines
    assert lines[-1] == "completed, exit code 0"
    numbers = [int(line.split()[0]) for line in lines if line[:3].strip().isdigit()]
    assert numbers == list(range(1, len(numbers) + 1)), "every event once, in order, across the pauses"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_stream_crosses_kill_9_of_persistence_and_of_the_coordinator(acode: Acode, tmp_path: Path) -> None:
    """The client streams while persistence is killed (the coordinator restarts it) and
    then the coordinator itself (everything goes until `acode up`): its events are the
    store's, each once, in order, and ``wait`` gives the final state."""
    assert acode.up().returncode == 0
    with ModelServer() as server:
        # the verifier's held answer goes to the killed set: the restarted one asks again
        replies = ByStage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT, VERDICT],
                          reviewer=[APPROVE])
        first, second = Gate(replies, "executor"), Gate(replies, "verifier")
        server.responder = lambda request: (first if request.stage == "executor" else second)(request)
        streamed: list[Any] = []
        failure: list[BaseException] = []
        with Client(acode.home, reconnect_s=90) as client:
            session = _submit(client, server, _workspace(tmp_path))

            def stream() -> None:
                try:
                    with Client(acode.home, reconnect_s=90) as own:  # one client per thread
                        streamed.extend(own.events(session.id))
                except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                    failure.append(exc)

            reader = threading.Thread(target=stream)
            reader.start()
            try:
                assert server.wait_for(lambda: first.seen == 1, 60)
                before = acode.actor("persistence")
                acode.kill("persistence")
                acode.wait_restarted("persistence", before["epoch"])
                first.open()
                assert server.wait_for(lambda: second.seen == 1, 60)
                status = acode.status()
                pids = [a["pid"] for a in status["actors"] if a.get("pid")]
                os.kill(status["pid"], signal.SIGKILL)
                wait_until(lambda: not any(_alive(pid) for pid in [status["pid"], *pids]), 30,
                           what="the coordinator and its children gone")
                second.open()
                assert acode.up().returncode == 0
                final = client.wait(session.id, timeout=90)
            finally:
                first.open()
                second.open()
                reader.join(120)
            assert not failure, failure
            stored = list(client.events(session.id, follow=False))
    assert (final.status, final.exit_code) == ("completed", 0)
    assert _numbered(streamed) == list(range(1, len(streamed) + 1)), "no gap, no duplicate"
    assert _numbered(streamed) == _numbered(stored) and [kind(e) for e in streamed] == [kind(e) for e in stored]
