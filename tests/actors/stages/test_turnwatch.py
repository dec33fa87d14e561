"""The anomaly ladder in the executor's loop, against a real broker, persistence and sandbox
with a scripted model: each step-level kind is an ``anomaly_detected`` event, then a note in
the model's next prompt, then a fresh window (the try ends, ACODE-EXEC-013), then a pause
(the step recorded failed with ACODE-EXEC-011, the stage ended with it); a replay finds the
same and asks the model nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from actors.stages.execution import executor
from protocol.messages import GetSteps
from protocol.policy.anomalies import AnomalyThresholds
from protocol.sessions.events import AnomalyDetected, StepRetried
from tests.actors.stages import test_file_step as file_step
from tests.actors.stages.conftest import Run, Stack
from tests.actors.stages.test_executor import call, done, plan, step
from tests.modelserver import ModelServer, Text

FAILING_TEST = ("import unittest\n\n\nclass T(unittest.TestCase):\n    def test_x(self):\n"
                "        self.assertEqual(1, 2)\n")
_OUT_OF_REACH: dict[str, Any] = {"repeated_invalid": 1_000, "repeated_error": 1_000, "edits_undone": 1_000,
                                 "no_progress": 1_000, "burn_turns": 1_000, "spike_floor": 100_000_000,
                                 "error_streak": 1_000}
# one kind at a time: the others out of reach
ONLY = {kind: AnomalyThresholds(**{k: v for k, v in _OUT_OF_REACH.items() if k != kind})
        for kind in ("repeated_invalid", "repeated_error", "edits_undone", "no_progress", "error_streak",
                     "spike_floor", "burn_turns")}


def anomalies(run: Run) -> list[tuple[str, str, str, list[int]]]:
    return [(e.kind, e.response, e.step, e.turns) for e in run.events() if isinstance(e, AnomalyDetected)]


def notes(run: Run) -> list[int]:
    """The requests (0-based) whose last message carries a note from acode."""
    return [n for n, request in enumerate(run.spy.requests)
            if request.messages[-1].role == "user" and "Note from acode" in request.messages[-1].content]


def unittest_run(limited: bool) -> dict[str, Any]:
    """The same failing test, in two spellings (the same call three times in a row is EXEC-008's)."""
    limit = {"timeout_s": 60} if limited else {}
    return call("run_terminal", command="python -m unittest test_x", **limit)


def test_the_same_tool_error_is_noted_then_ends_the_try_then_pauses_the_session(stack: Stack) -> None:
    responses = [unittest_run(n % 2 == 0) for n in range(9)]
    run = stack.stage("executor", responses, plan(step("S1", "run_command"), step("S2", depends_on=["S1"])),
                      files={"test_x.py": FAILING_TEST}, anomalies=ONLY["repeated_error"])

    result = executor.run(run.ctx)

    assert not result.ok and result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("repeated_error", "note", "S1", [1, 2, 3]),
                              ("repeated_error", "fresh_window", "S1", [4, 5, 6]),
                              ("repeated_error", "pause", "S1", [7, 8, 9])]
    assert notes(run) == [3]  # the 4th request: the turn after the first detection
    note = run.spy.requests[3].messages[-1].content
    nonce = run.ctx.fence.nonce
    assert note.startswith(f"Note from acode: it noticed this in your last turns:\n<<untrusted anomaly evidence "
                           f"{nonce}>>\nrun_terminal failed 3 times with the same error (exit 1, with 2 different "
                           "arguments; step T1/S1 turns 1, 2, 3): '")
    assert note.endswith(f"<<end {nonce}>>\nThe same thing fails the same way each time: fix what the error "
                         "names, or take another way. If the step cannot be done, call step_failed with the reason.")
    [retried] = [e for e in run.events() if isinstance(e, StepRetried)]
    assert retried.code == "ACODE-EXEC-013" and retried.reason.startswith(
        "the model went off the rails (repeated_error, score 70): run_terminal failed 3 times")
    assert "Try 1 failed: the model went off the rails (repeated_error" in run.spy.requests[6].messages[1].content
    [stopped] = result.execution.steps  # type: ignore[union-attr]
    assert (stopped.task, stopped.step, stopped.code) == ("T1", "S1", "ACODE-EXEC-011")
    assert result.error.message.startswith("step T1/S1: the model went off the rails (repeated_error, score 80): ")
    assert result.error.message.endswith(f"`acode resume {run.ctx.session_id}` runs the step afresh")

    asked = len(run.spy.requests)  # a replay (the stage dispatched again) pauses at the same place, asking nothing
    again = executor.run(run.ctx)
    assert again.error is not None and (again.error.code, again.error.message) == (
        "ACODE-EXEC-011", result.error.message)
    assert len(run.spy.requests) == asked and len(anomalies(run)) == 3


def test_on_the_last_try_there_is_no_fresh_window_to_give_so_the_second_detection_pauses(stack: Stack) -> None:
    run = stack.stage("executor", [unittest_run(n % 2 == 0) for n in range(6)], plan(step("S1", "run_command")),
                      files={"test_x.py": FAILING_TEST}, step_retry_limit=1, anomalies=ONLY["repeated_error"])

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("repeated_error", "note", "S1", [1, 2, 3]), ("repeated_error", "pause", "S1", [4, 5, 6])]
    assert not [e for e in run.events() if isinstance(e, StepRetried)]


_WRITES = [call("write_file", path="a.txt", content=text) for text in ["two\n", "one\n", "two\n", "one\n"]]
# as Qwen2.5-Coder-1.5B did it: modify_file edits that swap a line back and forth; only the
# sandbox knows what a search/replace left (its result's ``sha256``), hashed as the step
# hashed the file it read
_FLIPS = [call("modify_file", path="a.txt", edits=[{"search": old, "replace": new}])
          for old, new in [("oné", "two"), ("two", "oné"), ("oné", "two"), ("two", "oné")]]


@pytest.mark.parametrize(("calls", "before", "after"), [(_WRITES, "one\n", "two\n"),
                                                        (_FLIPS, "x = 1\noné\n", "x = 1\ntwo\n")],
                         ids=["write_file", "modify_file"])
def test_an_edit_undone_is_noted_then_ends_the_try_then_pauses_the_session(
        stack: Stack, calls: list[Any], before: str, after: str) -> None:
    """A -> B -> A on a file (A as the step read it), then B again, then A in the next try,
    written whole or by search/replace."""
    run = stack.stage("executor", calls, plan(step("S1"), resources={"write": ["a.txt"]}), files={"a.txt": before},
                      anomalies=ONLY["edits_undone"])

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("edit_undone", "note", "S1", [1, 2]), ("edit_undone", "fresh_window", "S1", [1, 2, 3]),
                              ("edit_undone", "pause", "S1", [2, 3, 4])]
    assert notes(run) == [2]
    [first] = [e for e in run.events() if isinstance(e, AnomalyDetected)][:1]
    one, two = (hashlib.sha256(text.encode()).hexdigest()[:8] for text in (before, after))
    assert first.evidence == (f"a.txt went back to its content before ({one}) at turn 2, undoing the writes between "
                              f"({one} -> {two} -> {one}; step T1/S1 turns 1, 2)")
    assert "Your writes undo each other" in run.spy.requests[2].messages[-1].content
    assert (run.workspace / "a.txt").read_text() == before  # what the model wrote stays: acode undoes nothing


def test_turns_without_progress_are_noted_then_end_the_try_then_pause_the_session(stack: Stack) -> None:
    reads = [call("read_file", path="a.txt" if n % 2 == 0 else "b.txt") for n in range(13)]
    run = stack.stage("executor", reads, plan(step("S1", "read_file")), files={"a.txt": "a\n", "b.txt": "b\n"},
                      anomalies=msgspec.structs.replace(ONLY["no_progress"], no_progress=3))

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("no_progress", "note", "S1", [3, 4, 5]),
                              ("no_progress", "fresh_window", "S1", [6, 7, 8]),
                              ("no_progress", "pause", "S1", [11, 12, 13])]
    assert notes(run) == [5]
    [first] = [e for e in run.events() if isinstance(e, AnomalyDetected)][:1]
    assert first.evidence == ("3 turns without a changed file or anything not seen before (step T1/S1 turns 3, 4, "
                              "5): read_file x3")


def test_the_same_unusable_answer_is_noted_then_ends_the_try_then_pauses_the_session(stack: Stack) -> None:
    """Unknown tools whose names differ only in a number: not EXEC-008's exact repeat."""
    run = stack.stage("executor", [call(f"nope{n}") for n in range(1, 10)], plan(step("S1", "read_file")),
                      anomalies=ONLY["repeated_invalid"])

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("repeated_invalid", "note", "S1", [1, 2, 3]),
                              ("repeated_invalid", "fresh_window", "S1", [4, 5, 6]),
                              ("repeated_invalid", "pause", "S1", [7, 8, 9])]
    assert notes(run) == [3]
    assert run.spy.requests[3].messages[-1].content.count("Note from acode") == 1


def test_an_error_streak_runs_across_steps_and_a_replay_that_skips_the_first_goes_on_counting(stack: Stack) -> None:
    tasks = [{"label": "T1", "title": "first", "steps": [step("S1", "run_command")]},
             {"label": "T2", "title": "second", "steps": [step("S1", "run_command")]}]
    responses = [unittest_run(False), unittest_run(True), unittest_run(False),  # T1/S1: out of turns, all failing
                 unittest_run(True)]  # T2/S1: the 4th failed turn in a row; then no answer is left
    run = stack.stage("executor", responses, plan(tasks=tasks), files={"test_x.py": FAILING_TEST},
                      max_turns_per_step=3, step_retry_limit=1,
                      anomalies=msgspec.structs.replace(ONLY["error_streak"], error_streak=4))

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-LLM-002"  # the model ran out after the note
    [streak] = [e for e in run.events() if isinstance(e, AnomalyDetected)]
    assert (streak.kind, streak.response, streak.task, streak.step) == ("error_streak", "note", "T2", "S1")
    assert streak.evidence == ("nothing worked in 4 turns in a row (step T1/S1 turns 1, 2, 3; step T2/S1 turn 1): "
                               "run_terminal exit 1")
    [t1] = [r for r in run.ctx.persistence(GetSteps(session_id=run.ctx.session_id, visit=1)).steps if r.task == "T1"]
    assert t1.code == "ACODE-EXEC-003" and len(t1.streak) == 3  # the run of failed turns goes with the record
    noted = run.spy.requests[-1].messages

    again = executor.run(run.ctx)  # the stage dispatched again: T1/S1 is skipped, T2/S1 replayed

    assert again.error is not None and again.error.code == "ACODE-LLM-002"
    assert run.spy.requests[-1].messages == noted, "the same note: the streak went on from T1/S1's record"
    assert len([e for e in run.events() if isinstance(e, AnomalyDetected)]) == 1


def test_a_healthy_step_with_a_failing_test_then_a_fix_finds_nothing(stack: Stack) -> None:
    fixed = FAILING_TEST.replace("(1, 2)", "(2, 2)")
    responses = [call("read_file", path="test_x.py"), unittest_run(False),
                 call("write_file", path="test_x.py", content=fixed), unittest_run(False), done("fixed")]
    run = stack.stage("executor", responses, plan(step("S1", "modify_file"), resources={"write": ["test_x.py"]}),
                      files={"test_x.py": FAILING_TEST})

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert anomalies(run) == [] and notes(run) == []


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(models=[file_step.MODEL]) as running:
        yield running


def test_the_file_style_notes_the_same_failing_check_in_its_fresh_ask_then_pauses(
        stack: Stack, server: ModelServer) -> None:
    """Three spellings of the same wrong function fail the task's check the same way, over and over."""
    wrong = [file_step.HEAD + f"    return {body}\n" for body in ("a - b", "a-b", "(a - b)")]
    server.queue(*[Text(f"```python\n{wrong[n % 3]}```") for n in range(9)])
    run = file_step._stage(stack, server, step_retry_limit=2, anomalies=ONLY["repeated_error"])

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("repeated_error", "note", "S1", [1, 2, 3]),
                              ("repeated_error", "fresh_window", "S1", [4, 5, 6]),
                              ("repeated_error", "pause", "S1", [7, 8, 9])]
    asked = str(server.chats[3].messages[-1]["content"])
    note = asked[asked.index("Note from acode"):]
    assert note.startswith("Note from acode: it noticed this in your last turns:\n<<untrusted anomaly evidence")
    assert "run_terminal failed 3 times with the same error (exit 1, with the same arguments" in note
    assert "step_failed" not in note, "the file style has no step_failed"
    assert note.endswith("Answer with the complete new solution.py in one ```python code block."), "asked last"
    assert [n for n, chat in enumerate(server.chats) if "Note from acode" in str(chat.messages)] == [3]


def test_an_output_spike_is_noted_then_ends_the_try_then_pauses_the_session(stack: Stack) -> None:
    files = {f"f{n}.txt": f"{n}\n" for n in range(12)}
    short = [call("read_file", path=f"f{n}.txt") for n in range(3)]
    long = [{"content": "Let me think about this. " + "and so on " * 60, **call("read_file", path=f"f{n}.txt")}
            for n in range(3, 12)]
    run = stack.stage("executor", short + long, plan(step("S1", "read_file")), files=files,
                      anomalies=msgspec.structs.replace(ONLY["spike_floor"], spike_floor=50))

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert anomalies(run) == [("output_spike", "note", "S1", [4]), ("output_spike", "fresh_window", "S1", [5]),
                              ("output_spike", "pause", "S1", [6])]
    assert notes(run) == [4]


def test_tokens_burnt_without_new_information_are_noted_then_end_the_try_then_pause(stack: Stack) -> None:
    big = "the same line of text\n" * 200
    calls = [call("read_file", path="big.txt") if n % 2 == 0 else call("list_directory", path=".") for n in range(40)]
    run = stack.stage("executor", calls, plan(step("S1", "read_file")), files={"big.txt": big},
                      anomalies=msgspec.structs.replace(ONLY["burn_turns"], burn_turns=3), max_turns_per_step=30)

    result = executor.run(run.ctx)

    assert result.error is not None and result.error.code == "ACODE-EXEC-011"
    assert [(kind, response) for kind, response, _, _ in anomalies(run)] == [
        ("token_burn", "note"), ("token_burn", "fresh_window"), ("token_burn", "pause")]
    assert "tokens per turn grew" in result.error.message
