"""Error codes appear once wherever the CLI shows an error (issue 15 #12); files changed and paused
sessions are reported as they are (issue 24); what the CLI prints has every control character a
model or a command sent escaped (issue 24 #8)."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from cli.progress import Progress, files_changed, session_detail
from cli.render import active_sessions, echo, request_lines
from protocol.calls.autonomy import ApprovalRequest
from protocol.errors import ErrorInfo, ModelError, with_code
from protocol.plans.results import FileChange, WorkspaceChanges
from protocol.sessions.events import Event, SessionFinished, SessionPaused, StageFinished, ToolCalled
from protocol.sessions.session import PauseInfo, SessionSnapshot

REPO = Path(__file__).resolve().parents[2]
TURN_LIMIT = ("step T1/S1 failed: no step_complete after 10 turns (ACODE-EXEC-003); split the step, or raise "
              "max_turns_per_step")


def test_a_message_that_names_its_code_is_shown_with_it_once() -> None:
    assert with_code(TURN_LIMIT, "ACODE-EXEC-003") == TURN_LIMIT
    assert with_code("the model is slow", "ACODE-LLM-008") == "the model is slow (ACODE-LLM-008)"
    assert str(ModelError(TURN_LIMIT, code="ACODE-EXEC-003")).count("ACODE-EXEC-003") == 1


def test_acode_show_and_run_print_the_code_once() -> None:
    error = ErrorInfo(code="ACODE-EXEC-003", message=TURN_LIMIT)
    session = SessionSnapshot(id="s1", task="t", workspace="/w", status="failed", error=error, exit_code=1)
    finished = SessionFinished(id="e1", session_id="s1", status="failed", exit_code=1, error=error)
    detail = session_detail(session, [finished])
    assert detail.count("ACODE-EXEC-003") == 2  # the error line and the finished event, once each
    line = Progress().line(finished)
    assert line is not None and line.count("ACODE-EXEC-003") == 1
    other = ErrorInfo(code="ACODE-LLM-014", message="start llama-server with --jinja")
    failed = Progress().line(SessionFinished(id="e2", session_id="s1", status="failed", exit_code=1, error=other))
    assert failed is not None
    assert failed.splitlines() == ["failed: start llama-server with --jinja (ACODE-LLM-014) (exit 1)",
                                   "  continue with: acode resume s1"]


def test_each_executor_turn_is_a_progress_line_with_the_correction_sent() -> None:
    from protocol.sessions.events import TurnAnswered

    silent = TurnAnswered(id="t1", session_id="s1", visit=1, task="T1", step="S1", turn=2, prompt_tokens=812,
                          completion_tokens=40, correction="No tool call found in your answer. Call one of the tools")
    line = Progress().line(silent)
    assert line == ("[EXECUTOR]  T1/S1 turn 2: no tool call ran (812+40 tokens); sent: No tool call found in your "
                    "answer. Call one of the tools")
    busy = TurnAnswered(id="t2", session_id="s1", visit=1, task="T1", step="S1", turn=1, tool_calls=2,
                        prompt_tokens=9, completion_tokens=3, estimated=True)
    assert Progress().line(busy) == "[EXECUTOR]  T1/S1 turn 1: 2 tool calls"


def test_a_stage_end_line_and_the_final_summary_give_tokens_and_model_time_per_stage() -> None:
    from cli.progress import stage_table, stage_totals
    from protocol.sessions.events import StageFinished

    def finished(stage: str, visit: int, tokens_in: int, tokens_out: int, model_ms: float) -> StageFinished:
        return StageFinished(id=f"{stage}{visit}", session_id="s1", stage=stage, visit=visit, attempt=1,  # type: ignore[arg-type]
                             ok=True, summary="done", duration_ms=model_ms + 500, tokens_in=tokens_in,
                             tokens_out=tokens_out, model_ms=model_ms)

    events: list[Event] = [finished("planner", 1, 1_234, 567, 14_200), finished("executor", 1, 3_000, 40, 2_000),
              finished("executor", 2, 1_000, 10, 0)]  # visit 2 replayed every answer: no model time
    assert Progress().line(events[0]) == "[PLANNER]   done (14.70s; tokens 1,234 in / 567 out, model 14.2 s)"
    quiet = StageFinished(id="r", session_id="s1", stage="reviewer", visit=1, attempt=1, ok=True, summary="x",
                          duration_ms=10)
    assert Progress().line(quiet) == "[REVIEWER]  x (0.01s)", "a stage that asked no model shows no figures"
    assert [(t.stage, t.runs, t.tokens_in, t.tokens_out, t.model_s) for t in stage_totals(events)] == [
        ("planner", 1, 1_234, 567, 14.2), ("executor", 2, 4_000, 50, 2.0)]
    assert stage_table(events).splitlines() == [
        "STAGE     RUNS  TOKENS IN  TOKENS OUT  MODEL   STAGE TIME",
        "planner   1     1,234      567         14.2 s  14.7 s",
        "executor  2     4,000      50          2.0 s   3.0 s",
        "total     3     5,234      617         16.2 s  17.7 s"]
    assert stage_table([]) == ""
    cached = msgspec.structs.replace(events[1], tokens_cached=2_500)
    assert Progress().line(cached) == ("[EXECUTOR]  done (2.50s; tokens 3,000 in (2,500 from the server's cache) / "
                                       "40 out, model 2.0 s)")
    assert stage_totals([cached])[0].tokens_cached == 2_500
    detail = session_detail(SessionSnapshot(id="s1", task="t", workspace="/w", status="completed"), events)
    assert "[server: 1,234 in, 567 out; model 14.2 s]" in detail, detail


def test_a_stage_that_stopped_for_the_user_is_not_shown_as_failed() -> None:
    from protocol.sessions.events import StageFinished

    def finished(code: str, message: str) -> str:
        line = Progress().line(StageFinished(id=code, session_id="s1", stage="executor", visit=1, attempt=1, ok=False,
                                             summary=message, error=ErrorInfo(code=code, message=message)))
        assert line is not None
        return line

    waiting = finished("ACODE-EXEC-009", "step T1/S2: run_terminal 'rm old.txt' (destructive) needs approval")
    assert "waiting for approval: step T1/S2" in waiting and "FAILED" not in waiting
    paused = finished("ACODE-ORCH-010", "paused by the user before tool call write_file")
    assert "stopped at a safe point" in paused and "FAILED" not in paused
    assert "FAILED: step T1/S1 failed" in finished("ACODE-EXEC-001", "step T1/S1 failed")


def _changes(*files: tuple[str, str], total: int = 0) -> WorkspaceChanges:
    return WorkspaceChanges(files=[FileChange(status=s, path=p) for s, p in files],  # type: ignore[arg-type]
                            total=total or len(files), at=1.0)


def _call(tool: str, target: str, ok: bool = True) -> ToolCalled:
    return ToolCalled(id=f"t-{tool}-{target}", session_id="s1", key=f"k-{target}", tool=tool, target=target, ok=ok)


def test_files_changed_is_the_last_comparison_with_the_baseline_with_what_happened_to_each_file() -> None:
    compared = StageFinished(id="r1", session_id="s1", stage="reviewer", visit=1, attempt=1, ok=True,
                             changes=_changes(("deleted", "old.txt"), ("modified", "data.txt"), ("added", "new.py")))
    events: list[Event] = [_call("write_file", "new.py"), _call("run_terminal", "python wipe.py"), compared]
    assert files_changed(events) == "old.txt (deleted), data.txt (modified), new.py (added)"
    finished = SessionFinished(id="f1", session_id="s1", status="completed", exit_code=0, changes=compared.changes)
    assert files_changed([*events, finished]) == "old.txt (deleted), data.txt (modified), new.py (added)"
    cached = StageFinished(id="r3", session_id="s1", stage="reviewer", visit=1, attempt=1, ok=True, changes=_changes(
        ("added", ".pytest_cache/v/cache/nodeids"), ("modified", "todo/store.py"), ("added", ".pytest_cache/README.md"),
        ("added", "todo/__pycache__/store.cpython-311.pyc"), ("deleted", "todo/__pycache__/old.cpython-311.pyc"),
        ("added", "notes/pytest_cache.txt")))
    assert files_changed([cached]) == (  # a hand run's listing led with five .pytest_cache files
        ".pytest_cache/ (2 cache files added), todo/store.py (modified), todo/__pycache__/ (2 cache files: 1 added, "
        "1 deleted), notes/pytest_cache.txt (added)")
    many = StageFinished(id="r2", session_id="s1", stage="reviewer", visit=2, attempt=1, ok=True,
                         changes=_changes(("deleted", "old.txt"), total=250))
    assert files_changed([many]) == "old.txt (deleted), and 249 more (`acode show --json` has the first 1)"
    cancelled = SessionFinished(id="f2", session_id="s1", status="cancelled", exit_code=23, changes=compared.changes)
    assert files_changed([*events, _call("run_terminal", "python wipe.py"), cancelled]) == (
        "old.txt (deleted), data.txt (modified), new.py (added) at the last comparison with the baseline; since then, "
        "not compared: 1 command ran, whose effects are not listed")  # the end repeats the comparison: no news
    nothing = StageFinished(id="v1", session_id="s1", stage="verifier", visit=1, attempt=1, ok=True,
                            changes=_changes())
    assert files_changed([_call("run_terminal", "rm -rf x"), nothing]) == "none"


def test_calls_not_yet_compared_are_said_to_be_so_and_a_directory_is_never_a_changed_file() -> None:
    assert files_changed([]) == "none"
    before = [_call("create_directory", "pkg"), _call("write_file", "pkg/a.py"), _call("write_file", "b.py", ok=False)]
    assert files_changed(before) == (
        "not compared with the baseline; written by the file tools: pkg/a.py")
    ran = [*before, _call("run_terminal", "python wipe.py")]
    assert files_changed(ran) == ("not compared with the baseline; written by the file "
                                  "tools: pkg/a.py; 1 command ran, whose effects are not listed")
    compared = StageFinished(id="v1", session_id="s1", stage="verifier", visit=1, attempt=1, ok=True,
                             changes=_changes(("added", "pkg/a.py")))
    assert files_changed([*ran, compared, _call("run_terminal", "mv .git /tmp/x"), _call("run_terminal", "ls")]) == (
        "pkg/a.py (added) at the last comparison with the baseline; since then, not compared: 2 commands ran, whose "
        "effects are not listed")


def test_status_names_each_paused_sessions_code_and_the_way_on() -> None:
    pause = PauseInfo(kind="escalation", code="ACODE-ORCH-012", message="verifier failed: the diff cannot be made",
                      fix="put back the .git", command="acode resume 01a2b3c4-x")
    session = SessionSnapshot(id="01a2b3c4-x", task="t", workspace="/w", status="paused", stage="verifier",
                              pause=pause)
    lines = active_sessions([session], {}).splitlines()
    assert lines[2:] == ["01a2b3c4 paused (escalation, ACODE-ORCH-012): verifier failed: the diff cannot be made",
                         "         fix: put back the .git",
                         "         continue: acode resume 01a2b3c4-x, or `acode cancel 01a2b3c4-x`"]
    detail = session_detail(session, [])
    assert "continue  acode resume 01a2b3c4-x (or `acode cancel 01a2b3c4-x` ends the session)" in detail
    assert "paused    escalation: verifier failed: the diff cannot be made (ACODE-ORCH-012)" in detail


# -- what reaches the terminal (issue 24 #8) ---------------------------------------------------

_OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
#: What a terminal would obey: C0 but LF and TAB, DEL, C1, bidi controls.
_OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _printed(text: str, capsys: pytest.CaptureFixture[str]) -> str:
    echo(text)
    return capsys.readouterr().out


def test_an_approval_request_keeps_each_value_on_its_line_and_escapes_every_control(
        capsys: pytest.CaptureFixture[str]) -> None:
    request = ApprovalRequest(key="k", call_hash="h", tool="write_file", risk="write", rule="write_file *",
                              why="write calls ask at autonomy 0", task="T1", step="S1",
                              target=f"a{_OSC52}.txt\n  why: harmless", cwd="/w\u202e",
                              diff=f"--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+{_OSC52}\x9b2J\x00\rX\x85\n")
    shown = _printed("\n".join(request_lines(request, diff=True)), capsys)
    assert _OBEYED.search(shown) is None
    assert shown.splitlines()[0] == ("T1/S1 wants to run write_file (write): a\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07"
                                     ".txt\\n  why: harmless")
    assert "  cwd: /w\\u202e" in shown and "    +\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07\\x9b2J\\x00\\rX\\x85" in shown
    assert [line for line in shown.splitlines() if line.startswith("  why:")] == [
        "  why: write calls ask at autonomy 0"], "a newline in the path made no line of its own"


def test_acode_show_escapes_the_task_the_pause_and_the_events(capsys: pytest.CaptureFixture[str]) -> None:
    from protocol.sessions.events import ToolCalled
    from protocol.sessions.session import PauseInfo

    pause = PauseInfo(kind="needs_input", code="ACODE-ORCH-003", message=f"Which? {_OSC52}")
    session = SessionSnapshot(id="s1", task=f"t{_OSC52}", workspace="/w", status="paused", pause=pause,
                              exit_code=22)
    events: list[Event] = [ToolCalled(id="e1", session_id="s1", key="s1:e1:T1/S1:t1:0", tool="write_file",
                         target=f"\u202eevil{_OSC52}", ok=True, summary="\x9d0;x\x9c")]
    shown = _printed(session_detail(session, events), capsys)
    assert _OBEYED.search(shown) is None
    assert "\\x1b]52;c;" in shown and "\\u202eevil" in shown
    line = Progress()
    line.stage = "executor"
    progress = line.line(events[0])
    assert progress is not None and _OBEYED.search(_printed(progress, capsys)) is None


def test_every_line_the_cli_prints_goes_through_echo_or_print_json() -> None:
    """A new ``typer.echo``/``print``/``write`` in cli/ must be one of these, reviewed: the
    rest print through ``render.echo``, which escapes what a model or a command wrote."""
    calls = re.compile(r"\b(?:typer\.echo|typer\.secho|click\.echo|print|sys\.std(?:out|err)\.write|"
                       r"stream\.write)\(")
    files = [path for root in ("cli", "acode") for path in (REPO / root).rglob("*.py")
             if "example" not in path.parts]  # cli/commands/ too, and the client the CLI is built on
    found = {(path.name, line.strip()) for path in files
             for line in path.read_text().splitlines() if calls.search(line)}
    assert found == {
        ("render.py", "typer.echo(printable(text), err=err, nl=nl)"),
        ("follow.py", 'sys.stdout.write(json_printable(msgspec.json.encode(data).decode()) + "\\n")  # C1 and bidi '
                      'escaped too'),
        ("thinking.py", "self.stream.write(_CLEAR)"),
        ("thinking.py", "self.stream.write(_CLEAR + printable(thinking_text(progress)))"),
        ("thinking.py", 'self.stream.write(printable(thinking_text(progress)) + "\\n")'),
        ("loader.py", 'print(printable(f"acode: {notice}"), file=sys.stderr)  # a workspace\'s words, escaped'),
        ("daemon.py", 'print(f"acode: the coordinator (pid {pid}) is still running after {timeout:g}s; sending "'),
    }


def test_a_cancelled_sessions_summary_includes_the_stage_that_was_running() -> None:
    from cli.progress import stage_table, stage_totals
    from protocol.sessions.events import Transitioned

    planned = StageFinished(id="p", session_id="s1", stage="planner", visit=1, attempt=1, ok=True, summary="planned",
                            duration_ms=2_000, tokens_in=100, tokens_out=20, model_ms=1_500, at=102.0)
    events: list[Event] = [
        Transitioned(id="t0", session_id="s1", source="start", target="planner", at=100.0), planned,
        Transitioned(id="t1", session_id="s1", source="planner", target="executor", at=102.5),
        SessionFinished(id="f", session_id="s1", status="cancelled", exit_code=23, at=110.0)]

    assert [(t.stage, t.state, t.duration_s) for t in stage_totals(events)] == [
        ("planner", "finished", 2.0), ("executor", "cancelled", 7.5)]
    assert stage_table(events).splitlines() == [
        "STAGE     RUNS  TOKENS IN  TOKENS OUT  MODEL  STAGE TIME",
        "planner   1     100        20          1.5 s  2.0 s",
        "executor  1     -          -           -      7.5 s, cancelled",
        "total     2     100        20          1.5 s  9.5 s"]
    paused = [*events[:3], SessionPaused(id="sp", session_id="s1", kind="escalation", code="ACODE-EXEC-003",
                                          message="m", exit_code=31, at=105.0), events[3]]
    assert [t.stage for t in stage_totals(paused)] == ["planner"], "cancelled while paused: no stage was running"


def test_files_changed_lists_files_never_a_directory_the_model_created() -> None:
    events: list[Event] = [_call("create_directory", "src"), _call("write_file", "src/hello.py"),
                           _call("create_directory", "empty")]
    assert files_changed(events) == "not compared with the baseline; written by the file tools: src/hello.py"
