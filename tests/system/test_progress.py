"""Live progress while a model works (issue 11): the thinking line, and the figures per stage.

A real ``acode run``/``attach`` against the stand-in model server over loopback HTTP, its
answers streamed slowly (``pace_s`` between pieces): the thinking line advances (off a
terminal every ``ACODE_PROGRESS_INTERVAL_S``, on a pseudo-terminal rewritten in place), no
progress reaches the database, several attached terminals see the same committed events,
and each stage's end line and the final summary give tokens in/out and model time. The
tests share one acode for the module (``shared``: the interval is the CLI's, read per
command); the killed planner and the one that lists every session start their own.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.harness import wait_until
from tests.modelserver import Json, ModelServer, Stall
from tests.system import workloads as w
from tests.system.conftest import CLI, REPO, Acode, json_lines, wait_exit
from tests.system.test_models import APPROVE, VERDICT, _configure, _workspace, done, plan, write

pytestmark = pytest.mark.system

THINKING = re.compile(r"\[(PLANNER|EXECUTOR|VERIFIER|REVIEWER)\]\s+thinking… ([\d,]+) tokens?, ([\d.]+) s")
END_FIGURES = re.compile(r"; tokens ([\d,]+) in / ([\d,]+) out, model ([\d.]+) s\)")


def _slow(value: Json, seconds: float = 3.0, pieces: int = 30) -> Json:
    """``value`` streamed in ``pieces`` pieces over about ``seconds``."""
    return Json(value.value, chunks=pieces, pace_s=seconds / pieces)


def _thinking(text: str, stage: str = "PLANNER") -> list[tuple[int, float]]:
    return [(int(m[2].replace(",", "")), float(m[3])) for m in THINKING.finditer(text) if m[1] == stage]


def _advancing(seen: list[tuple[int, float]], *, tokens: bool = True) -> None:
    assert len(seen) >= 2, f"expected at least two thinking lines, got {seen}"
    for (tokens_a, seconds_a), (tokens_b, seconds_b) in zip(seen, seen[1:], strict=False):
        assert seconds_b > seconds_a, seen
        assert tokens_b >= tokens_a, seen
    if tokens:
        assert seen[-1][0] > seen[0][0], f"the token count grows while the answer streams: {seen}"


def _events_in_database(acode: Acode, session_id: str) -> list[tuple[int, str]]:
    with sqlite3.connect(f"file:{acode.home / 'acode.db'}?mode=ro", uri=True) as db:
        return list(db.execute("SELECT seq, type FROM events WHERE session_id = ? ORDER BY seq", (session_id,)))


def _shown(acode: Acode, session_id: str) -> list[dict]:  # type: ignore[type-arg]
    shown = acode("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["events"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_off_a_terminal_the_thinking_line_advances_and_no_progress_reaches_the_database(
        shared: Acode, tmp_path: Path, kind: str) -> None:
    with ModelServer() as server:
        _configure(shared, server, kind, ACODE_PROGRESS_INTERVAL_S="0.5")
        server.by_stage(planner=[_slow(plan())], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
        result = shared("run", "make greet.txt say hello", "--workspace", str(_workspace(tmp_path)), timeout=180)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "\r" not in out and "\x1b" not in out, "off a terminal: plain lines, nothing rewritten in place"
    _advancing(_thinking(out))
    assert len(_thinking(out)) <= 10, "a line each 0.5 s of a ~3 s answer, not a line per token"

    planner_end = next(line for line in out.splitlines() if line.startswith("[PLANNER]") and "plan v1" in line)
    tokens_in, tokens_out, model_s = END_FIGURES.search(planner_end).groups()  # type: ignore[union-attr]
    assert int(tokens_in.replace(",", "")) > 0 and int(tokens_out.replace(",", "")) > 0
    assert 2.5 <= float(model_s) < 60, planner_end
    assert re.search(r"^planner\s+1\s+[\d,]+\s+[\d,]+\s+\d+\.\d s\s+\d+\.\d s$", out, re.MULTILINE), out
    assert re.search(r"^total\s+4\s", out, re.MULTILINE), out  # planner, executor, verifier, reviewer

    session_id = out.split("session ", 1)[1].split(":", 1)[0]
    stored = _events_in_database(shared, session_id)
    events = _shown(shared, session_id)
    assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))
    assert [kind for _, kind in stored] == [e["type"] for e in events]
    assert "model_progress" not in {kind for _, kind in stored}, "progress is ephemeral: never a row"
    finished = {e["stage"]: e for e in events if e["type"] == "stage_finished"}
    assert finished["planner"]["model_ms"] >= 2_500 and finished["planner"]["tokens_out"] > 0
    replayed = shared("attach", session_id, "--replay", "1000")
    assert replayed.returncode == 0 and "thinking" not in replayed.stdout, "attach --replay replays no progress"


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_on_a_terminal_one_line_is_rewritten_in_place_and_cleared_before_the_next(
        shared: Acode, tmp_path: Path, kind: str) -> None:
    with ModelServer() as server:
        _configure(shared, server, kind)
        server.by_stage(planner=[_slow(plan())], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
        code, raw = _run_on_a_terminal(shared, "run", "make greet.txt say hello", "--workspace",
                                       str(_workspace(tmp_path)))
    text = raw.decode("utf-8", errors="replace")
    assert code == 0, text
    rewrites = re.findall(r"\r\x1b\[K(\[PLANNER\]   thinking… [\d,]+ tokens?, [\d.]+ s)", text)
    _advancing(_thinking("\n".join(rewrites)))
    lines = text.split("\r\n")  # the terminal turns each newline into CR LF
    assert not any(THINKING.search(line) for line in lines if "\r\x1b[K" not in line), \
        "every thinking rendering starts by going back over the line"
    assert "\r\x1b[K[PLANNER]   plan v1" in text, "the thinking line is cleared before the planner's end line"
    assert not re.search(r"thinking…[^\r]*\r\n", text), "no thinking line is left for a normal line to follow"


def _run_on_a_terminal(acode: Acode, *args: str, timeout: float = 180.0) -> tuple[int, bytes]:
    """Run the CLI with a pseudo-terminal as its stdout; its exit code and every byte it wrote there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "--home", str(acode.home), *args], env=acode.env, cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    acode.running.append(proc)  # type: ignore[arg-type]  # killed by the fixture if the test fails
    os.close(slave)
    raw = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not data:
                    break
                raw += data
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
    return code, raw


def test_a_model_that_does_not_stream_shows_its_seconds_advancing(shared: Acode, tmp_path: Path) -> None:
    shared.env["ACODE_PROGRESS_INTERVAL_S"] = "0.5"
    script = w.script(tmp_path / "s.yaml", w.workload({"planner": 2.5}))  # the scripted model sends all at once
    result = shared("run", "do the task", "--workspace", str(w.workspace(tmp_path / "w")), "--provider", "scripted",
                   "--script", str(script))
    assert result.returncode == 0, result.stdout + result.stderr
    seen = _thinking(result.stdout)
    _advancing(seen, tokens=False)
    assert {tokens for tokens, _ in seen} == {0}
    planner_end = next(line for line in result.stdout.splitlines() if line.startswith("[PLANNER]") and "plan" in line)
    assert 2.4 <= float(END_FIGURES.search(planner_end).group(3)) < 60, planner_end  # type: ignore[union-attr]


def test_two_attached_terminals_see_the_same_committed_events_while_progress_streams(
        shared: Acode, tmp_path: Path) -> None:
    with ModelServer() as server:
        _configure(shared, server, "openai", ACODE_PROGRESS_INTERVAL_S="0.5")
        server.by_stage(planner=[_slow(plan())], executor=[write(), done()], verifier=[VERDICT],
                        reviewer=[_slow(APPROVE, 2.0)])
        submitted = shared("run", "make greet.txt say hello", "--workspace", str(_workspace(tmp_path)), "--detach")
        assert submitted.returncode == 0, submitted.stderr
        session_id = submitted.stdout.strip()
        first = shared.start("attach", session_id, "--json", "--replay", "1000")
        second = shared.start("attach", session_id, "--json", "--replay", "1000")
        text = shared.start("attach", session_id, "--replay", "1000")
        results = [wait_exit(first), wait_exit(second), wait_exit(text)]
    streams = []
    for returncode, stdout, stderr in results[:2]:
        assert returncode == 0, stdout + stderr
        lines = json_lines(stdout)
        assert lines[-1]["session"]["status"] == "completed"
        assert [s["stage"] for s in lines[-1]["stages"]] == ["planner", "executor", "verifier", "reviewer"]
        assert lines[-1]["stages"][0]["model_s"] >= 2.5 and lines[-1]["stages"][0]["tokens_out"] > 0
        streams.append(lines[:-1])
    assert streams[0] == streams[1] == _shown(shared, session_id), "the same committed events, in the same order"
    assert all(e["type"] != "model_progress" for e in streams[0])
    returncode, stdout, stderr = results[2]
    assert returncode == 0, stdout + stderr
    assert _thinking(stdout, "PLANNER") or _thinking(stdout, "REVIEWER"), stdout
    committed = [line for line in stdout.splitlines() if not THINKING.search(line)]
    assert committed[-1].startswith("total "), "the final summary ends the output"



def test_a_planner_killed_mid_answer_gives_way_to_its_retry_whose_progress_starts_over(
        acode: Acode, tmp_path: Path) -> None:
    with ModelServer() as server:
        _configure(acode, server, "ollama", ACODE_PROGRESS_INTERVAL_S="0.5")
        acode.up()
        server.by_stage(planner=[_slow(plan(), 30.0, 300), _slow(plan())], executor=[write(), done()],
                        verifier=[VERDICT], reviewer=[APPROVE])
        run = acode.start("run", "make greet.txt say hello", "--workspace", str(_workspace(tmp_path)))
        assert run.stdout is not None and run.stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(run.stdout.readline, "")), daemon=True)
        reader.start()  # the only reader of the run's stdout until it ends
        wait_until(lambda: len(_thinking("".join(lines))) >= 2, timeout=60, what="two thinking lines")
        acode.kill("planner")
        code = run.wait(timeout=180)
        reader.join(timeout=30)
        err = run.stderr.read()
    out = "".join(lines)
    assert code == 0, out + err
    before, after = out.split("[PLANNER]   retrying, attempt 2", 1)
    first, second = _thinking(before), _thinking(after)
    _advancing(first)
    _advancing(second)
    planner_end = next(line for line in after.splitlines() if line.startswith("[PLANNER]") and "plan v1" in line)
    model_s = float(END_FIGURES.search(planner_end).group(3))  # type: ignore[union-attr]
    assert 2.5 <= model_s < 15, f"the model time is the answering attempt's, not the killed one's: {planner_end}"
    assert second[-1][1] <= model_s + 0.5, \
        f"the new attempt's call counts its own seconds from its start: {first} then {second}"


def test_a_steps_reads_are_on_record_while_the_model_thinks_not_only_at_the_steps_end(
        acode: Acode, tmp_path: Path) -> None:
    """A stage holds its progress events and the results of its reads for its next write; a
    model call that runs a while gets them written meanwhile (actors.stages.request.callwatch), so
    followers and `acode show` see the step's start and its context read during the call."""
    slow_write = ('<tool_call>{"name": "write_file", "arguments": {"path": "greet.txt", "content": "hello\\n"}}'
                  "</tool_call>")
    workspace = _workspace(tmp_path)
    with ModelServer() as server:
        _configure(acode, server, "ollama")
        acode.up()
        server.by_stage(planner=[plan()], executor=[Stall(text=slow_write, chunks=1, seconds=4.0), done()],
                        verifier=[VERDICT], reviewer=[APPROVE])
        run = acode.start("run", "make greet.txt say hello", "--workspace", str(workspace))
        try:
            def stored_during_the_call() -> list[str]:
                listed = json.loads(acode("sessions", "--json").stdout)
                if not listed:
                    return []
                return [kind for _, kind in _events_in_database(acode, listed[0]["id"])]

            seen: list[str] = []

            def read_on_record() -> bool:
                seen[:] = stored_during_the_call()
                return "tool_called" in seen and "step_started" in seen

            wait_until(read_on_record, timeout=30,
                       what="the step's start and its context read on record during the executor's call")
            # the record as read then, with the write still to come after it (a second look, on a
            # loaded machine, could come after the 4 s call ended)
            assert not (workspace / "greet.txt").exists(), "still thinking: the write has not come yet"
            assert "step_finished" not in seen
            code = run.wait(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    assert code == 0, (run.stdout.read() if run.stdout else "") + (run.stderr.read() if run.stderr else "")
    assert (workspace / "greet.txt").read_text() == "hello\n"
