"""``acode show``'s views (issue 29 part 3) on real event logs: stage visits (``--stage``),
cycles (``--cycle``), the per-step timing of the default view, and the model's text as
``--verbose`` and ``--answers`` print it.

The logs in ``sessions/`` are two scripted sessions' events as ``acode show --json`` gave
them (paths shortened): ``verify_cycle`` plans, writes a.txt, runs slow.py (a second), writes
b.txt wrong, fails verification, runs the steps again in verify cycle 1 and completes;
``paused_in_a_cycle`` is the same in a workspace where slow.py had run already, so
verification fails again (verify cycle 2) and the script runs out in the executor's third
visit, which pauses the session mid-step.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from cli.modeltext import MAX_LINES, answer_lines
from cli.progress import session_detail
from cli.views import check_stage, cycles, cycles_numbered, step_timings, visits
from cli.viewtext import cycle_text, stage_text
from protocol.errors import CliError
from protocol.messages import RecordedAnswer
from protocol.plans.results import ModelAnswer, ModelToolCall
from protocol.sessions.events import Event, StageFinished, TurnAnswered
from protocol.sessions.session import SessionSettings, SessionSnapshot

SESSIONS = Path(__file__).resolve().parent / "sessions"


def _events(name: str) -> list[Event]:
    lines = (SESSIONS / f"{name}.jsonl").read_text().splitlines()
    return [msgspec.convert(json.loads(line), Event) for line in lines]  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cycled() -> list[Event]:
    return _events("verify_cycle")


@pytest.fixture(scope="module")
def paused() -> list[Event]:
    return _events("paused_in_a_cycle")


def test_each_stage_visit_has_its_attempts_time_tokens_and_where_the_session_went(cycled: list[Event]) -> None:
    found = [(v.stage, v.visit, v.source, v.next, v.attempts) for v in visits(cycled)]
    assert found == [("planner", 1, "start", "executor", 1), ("executor", 1, "planner", "verifier", 1),
                     ("verifier", 1, "executor", "executor (verify cycle 1)", 1),
                     ("executor", 2, "verifier", "verifier", 1), ("verifier", 2, "executor", "reviewer", 1),
                     ("reviewer", 1, "verifier", "completed", 1)]
    first, second = [v for v in visits(cycled) if v.stage == "executor"]
    finished = [e for e in cycled if isinstance(e, StageFinished) and e.stage == "executor"]
    assert first.duration_s == round(finished[0].duration_ms / 1000, 3)
    assert (first.tokens_in, first.tokens_out) == (finished[0].tokens_in, finished[0].tokens_out)
    assert first.wall_s is not None and first.wall_s >= first.duration_s - 0.05
    assert second.cycle_kind == "verify" and second.cycle == 1
    assert [c.tool for c in first.tool_calls if c.tool in ("write_file", "run_terminal")] == [
        "write_file", "run_terminal", "write_file"]
    verifier = next(v for v in visits(cycled) if v.stage == "verifier")
    assert [(c.label, c.passed, c.exit_code) for c in verifier.checks] == [("A1", False, 1)]
    assert "b.txt is wrong" in verifier.checks[0].evidence and verifier.rework.startswith("rework (criteria)")
    assert visits(cycled)[0].plan == "plan v1: 1 task(s), 3 step(s) (ready)"


def test_step_timing_runs_from_its_start_to_its_finish_with_its_turns_calls_and_tokens(cycled: list[Event]) -> None:
    steps = step_timings(cycled)
    assert [(s.visit, s.label, s.status, s.turns, s.tool_calls) for s in steps] == [
        (1, "T1/S1", "completed", 2, 2), (1, "T1/S2", "completed", 2, 2), (1, "T1/S3", "completed", 2, 2),
        (2, "T1/S1", "completed", 1, 1), (2, "T1/S2", "completed", 1, 1), (2, "T1/S3", "completed", 2, 2)]
    slow = steps[1]  # slow.py sleeps a second: the executor stamps its step's start and end as they happen
    assert slow.duration_s is not None and 1.0 <= slow.duration_s < 5.0
    assert all(s.duration_s is not None and s.duration_s < 1.0 for s in steps if s is not slow)
    turns = [e for e in cycled if isinstance(e, TurnAnswered) and e.visit == 1 and e.step == "S2"]
    assert slow.tokens_in == sum(t.prompt_tokens for t in turns) > 0
    assert slow.estimated  # the scripted model's tokens are acode's estimate


def test_the_default_view_shows_every_steps_time(cycled: list[Event]) -> None:
    snapshot = SessionSnapshot(id=cycled[0].session_id, task="do the task", workspace="/w", status="completed",
                               created_at=cycled[0].at, updated_at=cycled[-1].at, settings=SessionSettings())
    text = session_detail(snapshot, cycled)
    table = text.split("steps (", 1)[1].splitlines()
    assert table[1].split() == ["VISIT", "STEP", "STATUS", "TIME", "TRIES", "TURNS", "CALLS", "TOKENS"]
    row = table[3].split()
    assert row[:3] == ["1", "T1/S2", "completed"] and row[3] == f"{step_timings(cycled)[1].duration_s:.3f}s"
    assert row[5:7] == ["2", "2"] and row[7].startswith("~")


def test_a_step_the_pause_cut_short_is_interrupted_and_the_visit_says_it_paused(paused: list[Event]) -> None:
    last = visits(paused)[-1]
    assert (last.stage, last.visit, last.next) == ("executor", 3, "paused (escalation)")
    assert [(s.label, s.status, s.duration_s) for s in last.steps] == [("T1/S1", "interrupted", None)]
    assert [(p.kind, p.code, p.resumed_at) for p in last.pauses] == [("escalation", "ACODE-LLM-002", None)]
    text = stage_text("executor", [v for v in visits(paused) if v.stage == "executor"], paused[0].at, "S")
    head = text.split("executor visit 3: ", 1)[1].split("\n")[0]
    assert last.left_at is not None and head.startswith("entered +")
    assert head.endswith(f"session paused (escalation) +{last.left_at - paused[0].at:.3f}s")
    assert "paused +" in text and "(ACODE-LLM-002); not resumed" in text


def test_cycles_cut_the_session_at_each_cycle_transition(paused: list[Event]) -> None:
    parts = cycles(paused)
    assert [(p.cycle, p.kind, [(v.stage, v.visit) for v in p.visits]) for p in parts] == [
        (0, None, [("planner", 1), ("executor", 1), ("verifier", 1)]),
        (1, "verify", [("executor", 2), ("verifier", 2)]),
        (2, "verify", [("executor", 3)])]
    assert [(t.source, t.target) for t in parts[1].transitions] == [("verifier", "executor"), ("executor", "verifier")]
    assert parts[1].ended_at == parts[2].started_at and parts[2].ended_at is None
    text = cycle_text(cycles_numbered(paused, 1, session_id="S"), paused[0].at, "S", "verifier")
    assert "verify cycle 1: from +" in text and "verifier visit 2" in text and "executor visit 2" not in text


def test_a_cycle_never_reached_and_a_stage_that_is_none_are_refused_naming_what_there_is(
        cycled: list[Event]) -> None:
    with pytest.raises(CliError) as raised:
        cycles_numbered(cycled, 2, session_id="S")
    assert raised.value.code == "ACODE-CLI-012"
    assert str(raised.value) == ("session S never reached cycle 2: its cycles are verify 1; give --cycle 0 or 1 "
                                 "(0: the first pass) (ACODE-CLI-012)")
    with pytest.raises(CliError) as raised:
        check_stage("executer")
    assert str(raised.value) == ("--stage 'executer' is not a stage; give one of planner, executor, verifier, "
                                 "reviewer (ACODE-CLI-012)")
    assert check_stage("reviewer") == "reviewer"


def test_a_models_answer_is_shown_cut_with_the_command_that_shows_all_of_it() -> None:
    text = "\n".join(f"line {n}" for n in range(MAX_LINES + 5))
    answer = ModelAnswer(content=text, tool_calls=[ModelToolCall(id="c1", name="write_file",
                                                                 arguments={"path": "a.txt", "content": "x"})])
    lines = answer_lines(RecordedAnswer(stage="executor", seq=3, answer=answer), "01a2b3c4-0000")
    assert lines[0] == " " * 12 + "> line 0" and len(lines) == MAX_LINES + 1
    assert lines[-1].endswith("> [... 6 more line(s): `acode show 01a2b3c4 --answers --stage executor` has every "
                              "answer in full]")
    brief = msgspec.structs.replace(answer, content="ok")
    short = answer_lines(RecordedAnswer(stage="executor", seq=0, answer=brief), "S")
    assert [line.strip() for line in short] == ["> ok", '> [call] write_file {"content": "x", "path": "a.txt"}']
