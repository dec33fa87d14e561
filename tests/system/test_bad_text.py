"""Bad text in a model's tool calls, end to end: real CLI processes, every actor a process.

A lone UTF-16 surrogate (a ``\\udcff`` escape in the model's JSON, or in the server's own)
once ended the executor with an internal UnicodeEncodeError (ACODE-ORCH-001), and every
replay of the recorded answer failed the same way. Now it is a tool error the model sees
(ACODE-EXEC-007, naming the argument and the offset), the step goes on with the model's
next turn, and a session that replays that answer (kill -9 of the executor, ``acode
approve`` retrying the attempt) gets past it the same way. The scripted model writes the
calls as text (its YAML cannot hold a surrogate); the stand-in server sends them natively
and as text, in both wire formats. The tests share one acode for the module (``shared``),
each with its own sessions; the kill -9 drills start their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness import wait_until
from tests.modelserver import ModelServer, Stall, TextToolCalls, ToolCalls
from tests.system import workloads as w
from tests.system.conftest import Acode, wait_exit
from tests.system.test_models import APPROVE, VERDICT, _configure, _run, _workspace, done, plan, write

pytestmark = pytest.mark.system

REFUSED = "error: invalid arguments for write_file: `$.path` holds a lone UTF-16 surrogate (\\udcff) at character " \
          "offset 1, which is not text; send it again as valid UTF-8 text"
# calls written as text, one per tool kind, each with the escape json.loads turns into a lone surrogate
BAD_CALLS = json.dumps([
    {"name": "write_file", "arguments": {"path": "a.txt", "content": "alpha\n"}},
    {"name": "run_terminal", "arguments": {"command": "touch made.txt"}},
    {"name": "modify_file", "arguments": {"path": "slow.py", "edits": [{"search": "time", "replace": "x"}]}},
    {"name": "search_code", "arguments": {"query": "time"}},
]).replace('"a.txt"', '"a\\udcff.txt"').replace("touch made", "touch \\udcffmade").replace(
    '"replace": "x"', '"replace": "x\\udcff"').replace('"query": "time"', '"query": "ti\\udcffme"')


def _scripted(bad: dict[str, Any], *more: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """One step that writes a.txt: a bad turn, ``more`` turns, then the good write and done."""
    responses = w.workload()
    responses["planner"] = [w.plan(checks=[{"label": "A1", "description": "a.txt says alpha",
                                            "check": {"command": "cat a.txt", "expect_exit": 0,
                                                      "expect_output": "alpha"}}],
                                   steps=[{"label": "S1", "title": "write a.txt", "action": "write_file"}])]
    responses["executor"] = [bad, *more, w.call("write_file", path="a.txt", content="alpha\n"), w.done("wrote a.txt")]
    responses["verifier"] = []
    return responses


def _events(acode: Acode, session_id: str) -> list[dict[str, Any]]:
    shown = acode("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    events: list[dict[str, Any]] = json.loads(shown.stdout)["events"]
    return events


def _turns(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["turn"], e.get("correction", "")) for e in events if e["type"] == "turn_answered"]


def _ran(events: list[dict[str, Any]]) -> list[str]:
    """The executor's calls that ran (its context reads and previews left out)."""
    return [f"{e['tool']} {e['target']}" for e in events if e["type"] == "tool_called"
            and ":T1/S1:t" in e["key"] and ":preview" not in e["key"]]


def _session_id(stdout: str) -> str:
    return stdout.split("session ", 1)[1].split(":", 1)[0]


def _recorded_turn_1(run: subprocess.Popen[str]) -> None:
    """Read ``run --json``'s events until turn 1's: its answer is recorded in the same
    transaction (an answer nothing depended on yet may still be only in the executor's memory
    before that, and a kill would lose it: the replay would ask the model again)."""
    assert run.stdout is not None
    for line in run.stdout:
        if '"turn_answered"' in line and json.loads(line).get("turn") == 1:
            return
    raise AssertionError("the run ended before turn 1 was reported")


def _clean(workspace: Path, *extra: str) -> None:
    """Nothing the refused calls named was made or changed."""
    assert sorted(p.name for p in workspace.iterdir() if p.name != "__pycache__") == sorted(
        ["a.txt", "check.py", "slow.py", *extra])
    assert (workspace / "a.txt").read_text() == "alpha\n" and (workspace / "slow.py").read_text() == w.SLOW_PY


def test_a_scripted_session_sees_the_refusals_as_tool_results_and_completes(shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", _scripted({"content": f"Writing it now.\n{BAD_CALLS}"}))

    result = shared("run", "write a.txt", "--workspace", str(workspace), "--provider", "scripted", "--script",
                   str(script))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "ACODE-ORCH-001" not in result.stdout + result.stderr
    assert "[EXECUTOR]  T1/S1 turn 1: no tool call ran; sent: error: invalid arguments for write_file: `$.path` " \
           "holds a lone UTF-16 surrogate" in result.stdout
    events = _events(shared, _session_id(result.stdout))
    [(turn, correction), *rest] = _turns(events)
    assert turn == 1 and correction.startswith(REFUSED) and correction.endswith("(ACODE-EXEC-007)")
    assert rest == [(2, ""), (3, "")]
    assert _ran(events) == ["write_file a.txt"]
    _clean(workspace)


def test_a_kill_9_of_the_executor_after_the_bad_turn_replays_it_and_completes(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    slow = {**w.call("list_directory", path="."), "delay_s": 5.0}  # turn 2: long enough to kill the executor
    script = w.script(tmp_path / "s.yaml", _scripted({"content": BAD_CALLS}, slow))
    run = acode.start("run", "write a.txt", "--workspace", str(workspace), "--provider", "scripted", "--script",
                      str(script), "--json")
    _recorded_turn_1(run)
    before = acode.kill("executor")

    code, out, err = wait_exit(run)

    assert code == 0, out + err
    after = acode.wait_restarted("executor", before["epoch"])
    assert after["pid"] != before["pid"]
    session_id = json.loads(out.strip().splitlines()[-1])["session"]["id"]
    events = _events(acode, session_id)
    turns = _turns(events)
    assert [t for t, _ in turns] == [1, 2, 3, 4], "the replay reports turn 1 under the same id, once"
    assert turns[0][1].startswith(REFUSED) and all(c == "" for _, c in turns[1:])
    assert _ran(events) == ["list_directory .", "write_file a.txt"]
    _clean(workspace)


def test_approving_a_later_call_replays_the_bad_turn_and_the_session_completes(shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    (workspace / "old.txt").write_text("old\n")
    rm = w.call("run_terminal", command="rm old.txt")  # destructive: it waits for approval at level 2
    script = w.script(tmp_path / "s.yaml", _scripted({"content": BAD_CALLS}, rm))
    submitted = shared("run", "write a.txt", "--workspace", str(workspace), "--provider", "scripted", "--script",
                      str(script), "--detach")
    assert submitted.returncode == 0, submitted.stderr
    session_id = submitted.stdout.strip()

    def paused() -> dict[str, Any] | None:
        shown = json.loads(shared("show", session_id, "--json").stdout)["session"]
        return shown if shown["status"] == "paused" else None

    snap = wait_until(paused, 90, interval=0.2, what="the session waiting for approval")
    assert snap["pause"]["kind"] == "awaiting_approval", snap["pause"]

    approved = shared("approve", session_id, timeout=180)  # retries the attempt: turn 1 is replayed from the record

    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "completed (exit 0)" in approved.stdout
    events = _events(shared, session_id)
    turns = _turns(events)
    assert [t for t, _ in turns] == [1, 2, 3, 4] and turns[0][1].startswith(REFUSED)
    assert _ran(events) == ["run_terminal rm old.txt", "write_file a.txt"]
    _clean(workspace)


def test_a_session_paused_after_the_bad_turn_is_resumed_and_completes(shared: Acode, tmp_path: Path) -> None:
    """The pause is the script's end, not the bad text (which once paused it with ACODE-ORCH-001)."""
    workspace = w.workspace(tmp_path / "w")
    full = _scripted({"content": BAD_CALLS})
    short = {**full, "executor": full["executor"][:1]}
    first = shared("run", "write a.txt", "--workspace", str(workspace), "--provider", "scripted", "--script",
                  str(w.script(tmp_path / "short.yaml", short)))
    assert first.returncode == 22, first.stdout + first.stderr
    assert "(ACODE-LLM-002)" in first.stdout and "ACODE-ORCH-001" not in first.stdout
    assert "turn 1: no tool call ran; sent: error: invalid arguments for write_file" in first.stdout

    resumed = shared("resume", _session_id(first.stdout), "--script", str(w.script(tmp_path / "full.yaml", full)))

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "completed (exit 0)" in resumed.stdout
    _clean(workspace)


def test_a_task_a_script_or_a_workspace_that_is_not_utf8_is_refused_with_its_code_before_anything_runs(
        shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", _scripted({"content": BAD_CALLS}))
    latin1 = shared("run", b"write caf\xe9.txt", "--workspace", str(workspace), "--provider", "scripted",  # type: ignore[arg-type]
                   "--script", str(script))
    assert latin1.returncode != 0 and "Traceback" not in latin1.stderr
    assert "the task is not UTF-8 text: it holds an undecodable byte (\\xe9) at character 9; pass the task as " \
           "UTF-8 text (ACODE-PLAN-001)" in latin1.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_bytes(script.read_bytes().replace(b"wrote a.txt", b"wrote \xff"))
    refused = shared("run", "write a.txt", "--workspace", str(workspace), "--provider", "scripted", "--script",
                    str(broken))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"scripted model file {broken} is not UTF-8 text: an undecodable byte (\\xff)" in refused.stderr
    assert "(ACODE-LLM-004)" in refused.stderr
    odd = tmp_path / os.fsdecode(b"w\xff")
    odd.mkdir()
    elsewhere = shared("run", "write a.txt", "--workspace", str(odd), "--provider", "scripted", "--script",
                      str(script))
    assert elsewhere.returncode != 0 and "Traceback" not in elsewhere.stderr
    assert "is not a UTF-8 path (the byte \\xff at character" in elsewhere.stderr
    assert "rename the directory to a UTF-8 name (ACODE-CLI-003)" in elsewhere.stderr
    assert "session " not in latin1.stdout + refused.stdout + elsewhere.stdout, "no session was started"


# -- the stand-in server: native calls and calls written as text, both wire formats -----------

def _bad(style: str) -> ToolCalls | TextToolCalls:
    arguments = {"path": "g\udcffreet.txt", "content": "hello\n"}
    if style == "native":
        return ToolCalls([("write_file", arguments)], text="Let me write it \udcff now.")
    return TextToolCalls([("write_file", arguments)])


@pytest.mark.parametrize("style", ["native", "text"])
@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_the_stand_in_servers_bad_call_is_answered_as_a_tool_error_and_the_session_completes(
        shared: Acode, tmp_path: Path, kind: str, style: str) -> None:
    with ModelServer() as server:
        _configure(shared, server, kind)
        server.by_stage(planner=[plan()], executor=[_bad(style), write(), done()], verifier=[VERDICT],
                        reviewer=[APPROVE])
        code, out = _run(shared, _workspace(tmp_path))
        executor = [r for r in server.chats if r.stage == "executor"]

    assert code == 0, out
    assert len(executor) == 3 and "ACODE-ORCH-001" not in out and "ACODE-LLM-010" not in out
    second = executor[1].messages
    expected = "error: invalid arguments for write_file: `$.path` holds a lone UTF-16 surrogate (\\udcff) at " \
               "character offset 1, which is not text"
    if style == "native":
        [answered] = [m for m in second if m["role"] == "assistant"]
        assert answered["content"] == "Let me write it \ufffd now."  # the answer's text, scrubbed
        [told] = [m for m in second if m["role"] == "tool"]
        assert told["content"].startswith(expected) and told["content"].endswith("(ACODE-EXEC-007)")
        arguments = answered["tool_calls"][0]["function"]["arguments"]
        assert arguments in ({}, "{}"), "the refused call goes back without its arguments"
    else:
        assert second[-1]["role"] == "user" and second[-1]["content"].startswith(
            "Result of your write_file call text_0:\n" + expected)
    assert sorted(p.name for p in (tmp_path / "w").iterdir() if p.name != "__pycache__") == ["check.py", "greet.txt"]


def test_a_kill_9_after_the_stand_in_servers_bad_call_replays_it_from_the_record(
        acode: Acode, tmp_path: Path) -> None:
    with ModelServer() as server:
        _configure(acode, server, "ollama")
        acode.up()
        server.by_stage(planner=[plan()], executor=[_bad("native"), Stall("", chunks=0, seconds=60), write(), done()],
                        verifier=[VERDICT], reviewer=[APPROVE])
        proc = acode.start("run", "make greet.txt say hello", "--workspace", str(_workspace(tmp_path)), "--json")
        _recorded_turn_1(proc)  # written with the held turn event while turn 2 stalls
        os.kill(acode.actor("executor")["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
        executor = [r for r in server.chats if r.stage == "executor"]

    assert proc.returncode == 0, out + err
    assert len([r for r in executor if len(r.messages) == 2]) == 1, "turn 1 was answered from the record"
    assert len(executor) == 4  # turn 1, the stalled turn 2, turn 2 again after the restart, turn 3
    for request in executor[1:]:
        [told] = [m for m in request.messages if m["role"] == "tool"][:1]
        assert "`$.path` holds a lone UTF-16 surrogate" in told["content"]
    assert (tmp_path / "w" / "greet.txt").read_text() == "hello\n"
