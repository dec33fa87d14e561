"""Error codes appear once wherever the CLI shows an error (issue 15 #12)."""

from __future__ import annotations

from cli.render import Progress, session_detail
from protocol.errors import ErrorInfo, ModelError, with_code
from protocol.events import SessionFinished
from protocol.session import SessionSnapshot

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
    from protocol.events import TurnAnswered

    silent = TurnAnswered(id="t1", session_id="s1", visit=1, task="T1", step="S1", turn=2, prompt_tokens=812,
                          completion_tokens=40, correction="No tool call found in your answer. Call one of the tools")
    line = Progress().line(silent)
    assert line == ("[EXECUTOR]  T1/S1 turn 2: no tool call ran (812+40 tokens); sent: No tool call found in your "
                    "answer. Call one of the tools")
    busy = TurnAnswered(id="t2", session_id="s1", visit=1, task="T1", step="S1", turn=1, tool_calls=2,
                        prompt_tokens=9, completion_tokens=3, estimated=True)
    assert Progress().line(busy) == "[EXECUTOR]  T1/S1 turn 1: 2 tool calls"
