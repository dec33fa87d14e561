"""The thinking line: rewritten in place on a terminal, a plain line every few seconds off one."""

from __future__ import annotations

import io

import pytest

from cli.thinking import ThinkingLine, thinking_text
from protocol.sessions.progress import ModelProgress


def _at(seconds: float, tokens: int, *, done: bool = False, site: str = "plan") -> ModelProgress:
    return ModelProgress(session_id="s", stage="planner", call_site=site, tokens=tokens, elapsed_s=seconds, done=done)


def test_the_text_names_the_stage_tokens_and_seconds() -> None:
    assert thinking_text(_at(14.23, 812)) == "[PLANNER]   thinking… 812 tokens, 14.2 s"
    assert thinking_text(_at(0.5, 1)) == "[PLANNER]   thinking… 1 token, 0.5 s"
    executor = ModelProgress(session_id="s", stage="executor", tokens=1_234, elapsed_s=3)
    assert thinking_text(executor) == "[EXECUTOR]  thinking… 1,234 tokens, 3.0 s"


def test_the_text_starts_in_the_column_of_every_other_progress_line() -> None:
    from cli.progress import Progress
    from protocol.sessions.events import StageRetried

    for stage in ("planner", "executor", "verifier", "reviewer"):
        thinking = thinking_text(ModelProgress(session_id="s", stage=stage, tokens=1, elapsed_s=1))  # type: ignore[arg-type]
        retrying = Progress().line(StageRetried(id="e", session_id="s", stage=stage, visit=1, attempt=2,  # type: ignore[arg-type]
                                                reason="lost"))
        assert retrying is not None and retrying.index("retrying") == thinking.index("thinking"), (retrying, thinking)


def test_on_a_terminal_one_line_is_rewritten_then_cleared() -> None:
    out = io.StringIO()
    line = ThinkingLine(out, terminal=True)
    line.show(_at(0.5, 3))
    line.show(_at(1.0, 9))
    line.clear()
    line.clear()  # twice is harmless: nothing is shown
    assert out.getvalue() == ("\r\x1b[K[PLANNER]   thinking… 3 tokens, 0.5 s"
                              "\r\x1b[K[PLANNER]   thinking… 9 tokens, 1.0 s\r\x1b[K")
    line.show(_at(1.5, 12))
    line.show(_at(1.6, 12, done=True))
    assert out.getvalue().endswith("12 tokens, 1.5 s\r\x1b[K") and not line.shown


def test_off_a_terminal_a_plain_line_comes_each_interval_of_a_call() -> None:
    out = io.StringIO()
    line = ThinkingLine(out, terminal=False, every=10.0)
    for second in (0.5, 5.0, 9.9, 10.2, 12.0, 19.5, 20.4, 31.0):
        line.show(_at(second, int(second * 10)))
    line.clear()  # off a terminal there is nothing to clear
    assert out.getvalue().splitlines() == ["[PLANNER]   thinking… 102 tokens, 10.2 s",
                                           "[PLANNER]   thinking… 204 tokens, 20.4 s",
                                           "[PLANNER]   thinking… 310 tokens, 31.0 s"]


def test_off_a_terminal_each_call_has_its_own_interval_and_a_quick_one_prints_nothing() -> None:
    out = io.StringIO()
    line = ThinkingLine(out, terminal=False, every=10.0)
    line.show(_at(3.0, 5, site="turn1"))
    line.show(_at(3.1, 5, site="turn1", done=True))
    line.show(_at(10.5, 7, site="turn2"))
    assert out.getvalue() == "[PLANNER]   thinking… 7 tokens, 10.5 s\n"


def test_off_a_terminal_a_retried_attempt_of_the_same_call_counts_afresh() -> None:
    out = io.StringIO()
    line = ThinkingLine(out, terminal=False, every=1.0)
    line.show(_at(1.1, 5))  # attempt 1 was killed mid-answer: no done message ever comes
    retried = ModelProgress(session_id="s", stage="planner", call_site="plan", tokens=2, elapsed_s=1.0, attempt=2)
    line.show(retried)
    assert out.getvalue().splitlines() == ["[PLANNER]   thinking… 5 tokens, 1.1 s",
                                           "[PLANNER]   thinking… 2 tokens, 1.0 s"]


def test_the_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACODE_PROGRESS_INTERVAL_S", "0.5")
    assert ThinkingLine(io.StringIO(), terminal=False).every == 0.5
    monkeypatch.setenv("ACODE_PROGRESS_INTERVAL_S", "soon")
    assert ThinkingLine(io.StringIO(), terminal=False).every == 10.0
