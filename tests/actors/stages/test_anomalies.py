"""Anomaly detection over a step's turns (issue 28 §2): quiet on healthy runs, each kind
found with its evidence exactly at its threshold, the response ladder, the health score."""

from __future__ import annotations

import hashlib
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.stages.execution.anomalies import (
    KINDS,
    Anomaly,
    AnomalyThresholds,
    CallSeen,
    Observation,
    call_seen,
    detect,
    excerpt,
    fingerprint,
    health,
    invalid_seen,
    latest,
    new_information,
    note_text,
    respond,
    verify_repeat,
)
from protocol.errors import ErrorInfo
from protocol.plans.results import ModelToolCall, ToolResult

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
FAILED = ("============================= test session starts ==============================\n"
          "collected 2 items\n\ntests/test_calc.py .F\n\n    def test_add():\n>       assert add(2, 3) == 5\n"
          "E       assert -1 == 5\n\ntests/test_calc.py:7: AssertionError\n"
          "=========================== 1 failed, 1 passed in 0.12s ===========================\n")
PASSED = "collected 2 items\n\ntests/test_calc.py ..\n\n======= 2 passed in 0.09s =======\n"
NOT_APPLIED = "edit did not apply: the search text was not found in calc.py; read the file and copy the lines exactly"


def _call(name: str, output: str = "", *, ok: bool = True, code: str = "", exit_code: int | None = None,
          denied: bool = False, **arguments: object) -> CallSeen:
    """A call as the executor would see it, made by :func:`call_seen` from a real result."""
    call = ModelToolCall(id="c1", name=name, arguments=dict(arguments))
    if denied:
        return call_seen(call, None)
    error = ErrorInfo(code=code, message=output) if code else None
    return call_seen(call, ToolResult(key="k", tool=name, ok=ok, output="" if error else output, error=error,
                                      exit_code=exit_code, path=str(arguments.get("path", ""))))


def read(path: str, content: str = CALC) -> CallSeen:
    numbered = "".join(f"{n:>6}\t{line}\n" for n, line in enumerate(content.splitlines(), start=1))
    return _call("read_file", numbered, path=path)


def write(path: str, content: str) -> CallSeen:
    return _call("write_file", f"wrote {len(content)} characters to {path}", path=path, content=content)


def pytest_run(output: str, *, passed: bool) -> CallSeen:
    return _call("run_terminal", output, ok=passed, exit_code=0 if passed else 1, command="python -m pytest -q")


def complete() -> CallSeen:
    return _call("step_complete", summary="done")


def turn(number: int, *calls: CallSeen, step: str = "T1/S1", attempt: int = 1, tokens_in: int = 0,
         tokens_out: int = 60, invalid: tuple[str, str] | None = None) -> Observation:
    return Observation(step=step, attempt=attempt, turn=number, tokens_in=tokens_in or 1_000 + 150 * number,
                       tokens_out=tokens_out, calls=calls, invalid=invalid_seen(*invalid) if invalid else None)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fired(observations: list[Observation], thresholds: AnomalyThresholds = AnomalyThresholds()) -> list[str]:
    return [a.kind for a in detect(observations, thresholds)]


# -- healthy runs: nothing at all ------------------------------------------------------------------

def _tool_loop_fix() -> list[Observation]:
    """Read the code and its test, write, the tests fail, fix, they pass, finish."""
    return [turn(1, read("calc.py")),
            turn(2, read("tests/test_calc.py", "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")),
            turn(3, write("calc.py", CALC + "\n"), tokens_out=420),
            turn(4, pytest_run(FAILED, passed=False), tokens_out=35),
            turn(5, write("calc.py", FIXED), tokens_out=380),
            turn(6, pytest_run(PASSED, passed=True), tokens_out=30),
            turn(7, complete(), tokens_out=90)]


def _several_steps() -> list[Observation]:
    """Three steps: a package made, a corrected invalid answer, a denied command, a search."""
    return [turn(1, _call("create_directory", "created pkg", path="pkg"), step="T1/S1"),
            turn(2, write("pkg/__init__.py", ""), step="T1/S1"),
            turn(3, complete(), step="T1/S1"),
            turn(1, step="T1/S2", invalid=('{"name": "write_file", "arguments": {"path": "pkg/core.py"',
                                           "error: that tool call is not valid JSON: Expecting ',' delimiter")),
            turn(2, write("pkg/core.py", "VALUE = 1\n"), step="T1/S2"),
            turn(3, _call("run_terminal", command="curl example.org", denied=True), step="T1/S2"),
            turn(4, complete(), step="T1/S2"),
            turn(1, _call("list_directory", "pkg/\n  __init__.py\n  core.py\n", path="."), step="T2/S1"),
            turn(2, _call("search_code", "pkg/core.py:1:VALUE = 1", query="VALUE"), step="T2/S1"),
            turn(3, read("pkg/core.py", "VALUE = 1\n"), read("pkg/__init__.py", ""), step="T2/S1"),
            turn(4, write("pkg/core.py", "VALUE = 2\n"), step="T2/S1", tokens_out=300),
            turn(5, complete(), step="T2/S1", tokens_out=120)]


def _file_style() -> list[Observation]:
    """Each turn a whole file (long answers), written, then the task's check run by acode."""
    return [turn(1, write("calc.py", CALC.replace("-", "*")), pytest_run(FAILED, passed=False), tokens_out=900),
            turn(2, write("calc.py", CALC.replace("-", "/")),
                 pytest_run(FAILED.replace("-1", "0.666"), passed=False), tokens_out=950),
            turn(3, write("calc.py", FIXED), pytest_run(PASSED, passed=True), tokens_out=880)]


def _second_try() -> list[Observation]:
    """A try that ran out of turns, then a fresh window that reads the same files again."""
    first = [turn(n, read(f"src/m{n}.py", f"x = {n}\n")) for n in range(1, 5)]
    second = [turn(5, read("src/m1.py", "x = 1\n"), attempt=2), turn(6, read("src/m2.py", "x = 2\n"), attempt=2),
              turn(7, write("src/m1.py", "x = 10\n"), attempt=2), turn(8, complete(), attempt=2)]
    return first + second


def _long_exploration() -> list[Observation]:
    """A model that reads nine different files before it writes: all of it new."""
    reads = [turn(n, read(f"lib/part{n}.py", f"def f{n}():\n    return {n}\n"), tokens_out=45) for n in range(1, 10)]
    return [*reads, turn(10, write("lib/part1.py", "def f1():\n    return 0\n"), tokens_out=200),
            turn(11, complete(), tokens_out=80)]


def _wrong_fix_first() -> list[Observation]:
    """The tests fail, a first fix changes nothing they see (the same failure twice), the
    model reads the test, the second fix passes."""
    test = "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    return [turn(1, pytest_run(FAILED, passed=False)), turn(2, read("calc.py")),
            turn(3, write("calc.py", CALC.replace("a - b", "a - b  # add")), tokens_out=300),
            turn(4, pytest_run(FAILED.replace("0.12s", "0.10s"), passed=False)),
            turn(5, read("tests/test_calc.py", test)), turn(6, write("calc.py", FIXED), tokens_out=280),
            turn(7, pytest_run(PASSED, passed=True)), turn(8, complete(), tokens_out=70)]


@pytest.mark.parametrize("session", [_tool_loop_fix, _several_steps, _file_style, _second_try, _long_exploration,
                                     _wrong_fix_first])
def test_a_healthy_session_shows_no_anomaly_at_any_turn(session) -> None:
    observations = session()
    assert detect(observations) == []
    assert all(latest(observations[:n]) == [] for n in range(1, len(observations) + 1))


def test_every_turn_of_the_healthy_fix_brings_new_information_but_the_final_step_complete() -> None:
    assert new_information(_tool_loop_fix()) == [True] * 6 + [False]


def test_verifications_that_pass_after_a_change_are_no_anomaly() -> None:
    assert verify_repeat([(1, ["c1", "c2"], False), (2, ["c2"], True), (3, [], True)]) == []


# -- repeated_invalid ------------------------------------------------------------------------------

BROKEN = '{"name": "write_file", "arguments": {"path": "calc.py", "content": "x = %d"'


def _invalid(n: int, answer: str, correction: str = "") -> Observation:
    return turn(n, invalid=(answer, correction or f"error: not valid JSON: Expecting ',' delimiter: line 1 column {n}"))


def test_the_same_invalid_answer_with_other_numbers_and_spaces_fires_at_the_third_not_the_second() -> None:
    answers = [_invalid(1, BROKEN % 1), turn(2, read("calc.py")), _invalid(3, "  " + BROKEN % 22),
               _invalid(4, (BROKEN % 3).replace(", ", ",   "))]
    assert fired(answers[:3]) == []
    [anomaly] = detect(answers)
    assert anomaly.kind == "repeated_invalid" and anomaly.turns == (1, 3, 4) and anomaly.step == "T1/S1"
    assert anomaly.evidence == ("the same unusable answer 3 times (step T1/S1 turns 1, 3, 4); the correction: "
                                "'error: not valid JSON: Expecting ',' delimiter: line 1 column 4'")
    assert anomaly.score == 60


def test_different_answers_that_get_the_same_correction_are_a_repeat_too() -> None:
    answers = [_invalid(n, f"I will now edit the {word} function.", "error: your answer had no tool call")
               for n, word in enumerate(["add", "sub", "mul"], start=1)]
    [anomaly] = detect(answers)
    assert anomaly.evidence.startswith("unusable answers that got the same correction 3 times")


def test_invalid_answers_are_counted_per_step() -> None:
    answers = [_invalid(1, BROKEN % 1), _invalid(2, BROKEN % 2),
               Observation(step="T1/S2", turn=1, invalid=invalid_seen(BROKEN % 3, "error: not valid JSON"))]
    assert fired(answers) == []


# -- repeated_error --------------------------------------------------------------------------------

def _not_applied(n: int, search: str, step: str = "T1/S1") -> Observation:
    edit = _call("modify_file", NOT_APPLIED, ok=False, code="ACODE-SBX-009", path="calc.py",
                 edits=[{"search": search, "replace": "return a + b"}])
    return turn(n, edit, step=step)


def test_the_same_tool_error_with_other_arguments_fires_at_the_third() -> None:
    turns = [_not_applied(1, "return a-b"), _not_applied(2, "return a -b"), _not_applied(3, "return  a - b")]
    assert fired(turns[:2]) == []
    [anomaly] = detect(turns)
    assert anomaly.kind == "repeated_error" and anomaly.turns == (1, 2, 3)
    assert anomaly.evidence == (f"modify_file failed 3 times with the same error (ACODE-SBX-009, with 3 different "
                                f"arguments; step T1/S1 turns 1, 2, 3): '{NOT_APPLIED}'")


def test_a_failing_command_whose_output_differs_only_in_times_and_line_numbers_is_the_same_error() -> None:
    outputs = [FAILED, FAILED.replace("0.12s", "0.31s").replace(":7:", ":9:"), FAILED.replace("0.12s", "1.02s")]
    turns = [turn(n, pytest_run(out, passed=False)) for n, out in enumerate(outputs, start=1)]
    [anomaly] = detect(turns)
    assert anomaly.kind == "repeated_error" and "(exit 1, with the same arguments;" in anomaly.evidence
    assert anomaly.evidence.endswith(f": '{excerpt(outputs[-1], tail=True)}'")  # the latest, as it was
    assert excerpt(outputs[-1], tail=True).endswith("1 failed, 1 passed in 1.02s ===========================")


def test_a_repeated_error_fires_again_after_as_many_more_and_scores_higher() -> None:
    turns = [_not_applied(n, f"v{n}") for n in range(1, 7)]
    found = [a for a in detect(turns) if a.kind == "repeated_error"]
    assert [(a.kind, a.turns, a.score) for a in found] == [("repeated_error", (1, 2, 3), 60),
                                                           ("repeated_error", (4, 5, 6), 70)]
    assert [a.kind for a in latest(turns[:3])] == ["repeated_error"] and latest(turns[:4]) == []


def test_the_same_error_in_two_steps_is_not_a_repeat() -> None:
    assert fired([_not_applied(1, "a"), _not_applied(2, "b"), _not_applied(1, "c", step="T1/S2")]) == []


# -- edit_undone -----------------------------------------------------------------------------------

def test_a_file_written_back_to_an_earlier_content_is_an_undone_edit_with_its_hashes() -> None:
    a, b = "x = 1\n", "x = 2\n"
    turns = [turn(1, write("conf.py", a)), turn(2, write("conf.py", b)), turn(3, read("calc.py")),
             turn(4, write("conf.py", a))]
    assert fired(turns[:3]) == []
    [anomaly] = detect(turns)
    assert anomaly.kind == "edit_undone" and anomaly.turns == (1, 2, 4) and anomaly.score == 70
    assert anomaly.evidence == (f"conf.py went back to its content of turn 1 ({sha(a)[:8]}) at turn 4, undoing the "
                                f"writes between ({sha(a)[:8]} -> {sha(b)[:8]} -> {sha(a)[:8]}; step T1/S1 turns "
                                "1, 2, 4)")


def test_a_file_put_back_as_it_was_before_the_session_wrote_it_is_undone_too() -> None:
    first = CallSeen(name="modify_file", target="calc.py", sha=sha(FIXED), before=sha(CALC))
    back = CallSeen(name="modify_file", target="calc.py", sha=sha(CALC), before=sha(FIXED))
    [anomaly] = detect([turn(1, first), turn(2, back)])
    assert anomaly.evidence.startswith(f"calc.py went back to its content before ({sha(CALC)[:8]}) at turn 2")
    assert anomaly.turns == (1, 2)


def test_new_content_each_time_or_the_same_content_again_undoes_nothing() -> None:
    turns = [turn(n, write("conf.py", text)) for n, text in enumerate(["a\n", "b\n", "b\n", "c\n"], start=1)]
    assert fired(turns) == []
    assert new_information(turns) == [True, True, False, True]


# -- no_progress -----------------------------------------------------------------------------------

def test_six_turns_without_anything_new_fire_and_five_do_not() -> None:
    turns = [turn(1, read("calc.py"))] + [turn(n, read("calc.py"), tokens_in=5_000) for n in range(2, 8)]
    assert fired(turns[:6]) == []
    [anomaly] = detect(turns)
    assert anomaly.kind == "no_progress" and anomaly.turns == (2, 3, 4, 5, 6, 7)
    assert anomaly.evidence == ("6 turns without a changed file or anything not seen before (step T1/S1 turns 2, 3, "
                                "4, 5, 6, 7): read_file x6")


def test_no_progress_counts_across_steps_and_tallies_what_the_turns_did() -> None:
    stuck = [turn(1, read("calc.py"), step="T1/S1"), turn(2, read("calc.py"), step="T1/S1"),
             turn(3, _not_applied(3, "x").calls[0], step="T1/S1"), turn(4, complete(), step="T1/S1"),
             turn(1, step="T1/S2", invalid=("hm", "error: your answer had no tool call")),
             turn(2, _call("run_terminal", command="curl example.org", denied=True), step="T1/S2"),
             turn(3, read("calc.py"), step="T1/S2")]
    found = detect(stuck, AnomalyThresholds(no_progress=5))
    assert [a.kind for a in found] == ["no_progress"]
    assert found[0].evidence == ("5 turns without a changed file or anything not seen before (step T1/S1 turns 2, 3, "
                                 "4; step T1/S2 turns 1, 2): read_file x1, modify_file (failed) x1, step_complete x1, "
                                 "no call that ran x1, run_terminal x1")
    assert found[0].turns == (2, 3, 4, 1, 2)


# -- token_burn and output_spike -------------------------------------------------------------------

def _burn(costs: list[int]) -> list[Observation]:
    return [turn(1, read("big.py", "x = 1\n" * 500), tokens_in=2_000)] + [
        turn(n, read("big.py", "x = 1\n" * 500), tokens_in=cost - 60) for n, cost in enumerate(costs, start=2)]


def test_tokens_per_turn_growing_half_again_over_four_turns_without_anything_new_is_token_burn() -> None:
    assert fired(_burn([2_600, 3_300, 4_100])) == []
    [anomaly] = detect(_burn([2_600, 3_300, 4_100, 4_900]))
    assert anomaly.kind == "token_burn" and anomaly.turns == (2, 3, 4, 5) and anomaly.score == 30
    assert anomaly.evidence == ("tokens per turn grew 2600 -> 3300 -> 4100 -> 4900 over 4 turns without new "
                                "information (step T1/S1 turns 2, 3, 4, 5)")


def test_a_window_that_grows_slowly_or_a_turn_with_something_new_is_no_burn() -> None:
    assert fired(_burn([2_600, 2_700, 2_800, 2_900])) == []
    broken = _burn([2_600, 3_300, 4_100, 4_900])
    broken[3] = turn(4, read("other.py"), tokens_in=4_040)
    assert fired(broken) == []


def test_an_answer_four_times_the_median_and_over_the_floor_is_an_output_spike() -> None:
    turns = [turn(n, read(f"m{n}.py", f"x = {n}\n"), tokens_out=out) for n, out in enumerate([80, 100, 150], 1)]
    spike = turn(4, read("m4.py", "x = 4\n"), tokens_out=401)
    [anomaly] = detect([*turns, spike])
    assert anomaly.kind == "output_spike" and anomaly.turns == (4,) and anomaly.score == 20
    assert anomaly.evidence == ("turn 4 of step T1/S1 answered 401 output tokens, 4.0x the median 100 of the 3 turns "
                                "before it")


@pytest.mark.parametrize("outs, last", [([80, 100, 150], 400),  # at 4x the median, not above it
                                        ([50, 60, 70], 400),  # far above the median, not above the floor
                                        ([80, 100], 2_000)])  # two turns are too few to take a median of
def test_a_long_answer_short_of_a_threshold_is_no_spike(outs: list[int], last: int) -> None:
    turns = [turn(n, read(f"m{n}.py", f"x = {n}\n"), tokens_out=out) for n, out in enumerate([*outs, last], 1)]
    assert fired(turns) == []


def test_a_long_answer_that_writes_a_file_is_no_spike() -> None:
    turns = [turn(n, read(f"m{n}.py", f"x = {n}\n"), tokens_out=50) for n in range(1, 4)]
    assert fired([*turns, turn(4, write("m1.py", "y = 1\n" * 400), tokens_out=2_400)]) == []


# -- error_streak ----------------------------------------------------------------------------------

def test_five_turns_in_a_row_where_nothing_worked_across_steps_are_an_error_streak() -> None:
    missing = [turn(n, _call("read_file", f"no such file: f{n}.py", ok=False, code="ACODE-SBX-003", path=f"f{n}.py"))
               for n in range(1, 4)]
    later = [turn(1, step="T1/S2", invalid=("{", "error: not valid JSON")),
             turn(2, pytest_run("ModuleNotFoundError: No module named 'calc'", passed=False), step="T1/S2")]
    assert fired([*missing, later[0]]) == []
    [anomaly] = detect([*missing, *later])
    assert anomaly.kind == "error_streak" and anomaly.turns == (1, 2, 3, 1, 2) and anomaly.step == "T1/S2"
    assert anomaly.evidence == ("nothing worked in 5 turns in a row (step T1/S1 turns 1, 2, 3; step T1/S2 turns 1, 2)"
                                ": read_file ACODE-SBX-003, run_terminal exit 1")


def test_a_turn_with_one_call_that_worked_ends_a_streak() -> None:
    failing = [turn(n, _call("read_file", f"no such file: f{n}.py", ok=False, code="ACODE-SBX-003", path=f"f{n}.py"))
               for n in range(1, 7)]
    failing[3] = turn(4, failing[3].calls[0], read("calc.py"))
    assert fired(failing) == []


# -- verify_repeat ---------------------------------------------------------------------------------

def test_the_same_criteria_failing_after_the_workspace_changed_is_a_verify_repeat() -> None:
    [anomaly] = verify_repeat([(1, ["tests pass", "lint clean"], False), (2, ["lint clean", "tests pass"], True)])
    assert (anomaly.kind, anomaly.turns, anomaly.step, anomaly.score) == ("verify_repeat", (1, 2), "", 50)
    assert anomaly.evidence == ("the same criteria failed at verifications 1, 2 although the workspace changed "
                                "between them: lint clean, tests pass")


def test_the_same_failure_with_nothing_changed_is_left_to_the_coordinator() -> None:
    assert verify_repeat([(1, ["c1"], False), (2, ["c1"], False)]) == []
    [anomaly] = verify_repeat([(1, ["c1"], False), (2, ["c2"], True), (3, ["c1"], True)])
    assert anomaly.turns == (1, 3)


# -- the ladder, the note, the score ---------------------------------------------------------------

def test_the_ladder_goes_note_then_fresh_window_then_pause() -> None:
    assert respond([]) == "note"
    assert respond(["note"]) == "fresh_window"
    assert respond(["note", "fresh_window"]) == "pause"
    assert respond(["note", "fresh_window", "pause"]) == "pause"


@pytest.mark.parametrize("kind", KINDS)
def test_a_note_says_what_was_seen_and_names_no_example_path(kind) -> None:
    for tools in (True, False):
        text = note_text(Anomaly(kind=kind, evidence="the evidence", turns=(1,), score=50), tools=tools)
        assert text.startswith("Note from acode: the evidence. ") and "\n" not in text
        assert not re.search(r"/|\w\.(py|js|ts|txt|md|json|toml)\b", text), text


def test_a_note_carries_the_evidence_as_detected() -> None:
    [anomaly] = detect([_not_applied(n, f"v{n}") for n in range(1, 4)])
    text = note_text(anomaly)
    assert text == (f"Note from acode: {anomaly.evidence}. The same thing fails the same way each time: fix what the "
                    "error names, or take another way. If the step cannot be done, call step_failed with the reason.")
    assert "step_failed" not in note_text(anomaly, tools=False), "the file style has no step_failed to call"


def test_health_is_100_without_trouble_and_falls_by_the_documented_weights() -> None:
    spike = Anomaly(kind="output_spike", evidence="e", turns=(1,), score=20)
    undone = Anomaly(kind="edit_undone", evidence="e", turns=(1,), score=70)
    assert health([], 0, 0.0, 0) == 100
    assert health([], 0, 0.5, 0) == 100
    assert health([spike, undone], 1, 0.75, 1) == 100 - 4 - 14 - 5 - 15 - 15
    assert health([undone] * 10, 10, 1.0, 10) == 0


ANOMALIES = st.builds(Anomaly, kind=st.sampled_from(KINDS), evidence=st.just("e"), turns=st.just((1,)),
                      score=st.integers(0, 100))


@settings(max_examples=150, deadline=None)
@given(anomalies=st.lists(ANOMALIES, max_size=6), more=st.lists(ANOMALIES, max_size=3),
       retries=st.integers(0, 20), budget=st.floats(0.0, 2.0), escalations=st.integers(0, 5),
       extra=st.tuples(st.integers(0, 5), st.floats(0.0, 1.0), st.integers(0, 3)))
def test_more_trouble_never_raises_the_health_score(anomalies, more, retries, budget, escalations, extra) -> None:
    base = health(anomalies, retries, budget, escalations)
    worse = health([*anomalies, *more], retries + extra[0], budget + extra[1], escalations + extra[2])
    assert 0 <= worse <= base <= 100


# -- incremental and deterministic -----------------------------------------------------------------

CALLS = st.sampled_from([read("a.py"), read("b.py"), write("a.py", "1"), write("a.py", "2"), complete(),
                         _not_applied(1, "x").calls[0], _not_applied(1, "y").calls[0],
                         pytest_run(FAILED, passed=False), pytest_run(PASSED, passed=True),
                         _call("run_terminal", command="rm -rf /", denied=True)])
TURNS = st.builds(lambda step, calls, out, invalid: (step, calls, out, invalid), st.sampled_from(["T1/S1", "T1/S2"]),
                  st.lists(CALLS, max_size=2), st.sampled_from([0, 40, 60, 500, 2_000]),
                  st.sampled_from([None, ("{", "error: not valid JSON"), ("hm", "error: no tool call")]))


@settings(max_examples=100, deadline=None)
@given(st.lists(TURNS, max_size=30))
def test_what_fires_at_a_turn_depends_on_the_turns_up_to_it_alone(spec) -> None:
    observations = [Observation(step=step, turn=n, tokens_in=1_000 + 100 * n, tokens_out=out,
                                calls=() if invalid else tuple(calls),
                                invalid=invalid_seen(*invalid) if invalid else None)
                    for n, (step, calls, out, invalid) in enumerate(spec, start=1)]
    whole = detect(observations)
    assert whole == detect(list(observations))
    assert [a for n in range(1, len(observations) + 1) for a in latest(observations[:n])] == whole
    for n in range(len(observations) + 1):
        assert detect(observations[:n]) == whole[:len(detect(observations[:n]))]


def test_thresholds_read_as_config_refuse_unknown_fields_and_out_of_range_values() -> None:
    assert msgspec.convert({"no_progress": 8}, AnomalyThresholds).no_progress == 8
    with pytest.raises(msgspec.ValidationError, match="unknown field `no_progres`"):
        msgspec.convert({"no_progres": 8}, AnomalyThresholds)
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int` >= 1 - at `\$.repeated_error`"):
        msgspec.convert({"repeated_error": 0}, AnomalyThresholds)


def test_a_write_file_call_is_seen_with_its_content_hash_and_a_failed_command_with_its_tail() -> None:
    wrote = write("calc.py", FIXED)
    assert (wrote.name, wrote.target, wrote.outcome, wrote.sha) == ("write_file", "calc.py", "ok", sha(FIXED))
    failed = pytest_run("x" * 300 + " the end", passed=False)
    assert (failed.outcome, failed.code) == ("error", "exit 1")
    assert failed.said.endswith("x the end") and len(failed.said) == 200
    assert failed.result == fingerprint("x" * 300 + "  the end\n")
    assert _call("run_terminal", command="ls", denied=True).outcome == "denied"


def _modified(path: str, text: str, *, said: bool = True) -> CallSeen:
    """A modify_file whose result says (``said``) the hash of the text it left, or does not
    (a result journaled before results said one)."""
    edits = [{"search": "x", "replace": "y"}]
    call = ModelToolCall(id="c1", name="modify_file", arguments={"path": path, "edits": edits})
    return call_seen(call, ToolResult(key="k", tool="modify_file", ok=True, output=f"applied 1 edit to {path}",
                                      path=path, sha256=sha(text) if said else ""))


def test_a_modify_file_is_seen_with_the_hash_the_sandbox_said_and_its_flips_are_undone_edits() -> None:
    a, b = "x = 1\n", "x = 2\n"
    turns = [turn(1, _modified("conf.py", a)), turn(2, _modified("conf.py", b)), turn(3, _modified("conf.py", a))]
    assert [t.calls[0].sha for t in turns] == [sha(a), sha(b), sha(a)]
    [anomaly] = detect(turns)
    assert anomaly.kind == "edit_undone" and anomaly.turns == (1, 2, 3)
    assert new_information([*turns[:2], turn(3, _modified("conf.py", b))]) == [True, True, False]
    unsaid = [turn(n, _modified("conf.py", text, said=False)) for n, text in enumerate([a, b, a], start=1)]
    assert detect(unsaid) == [] and [t.calls[0].sha for t in unsaid] == ["", "", ""]
    assert _call("write_file", "wrote 2 bytes", path="w.py", content="é\n").sha == sha("é\n")  # its content, unsaid
