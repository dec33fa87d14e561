"""cli.sessionlogs: one session's lines from every actor's log file, merged in time order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.sessionlogs import render, session_lines
from protocol.errors import CliError
from protocol.tracing import trace_id

A = "0196f3a2-7c1e-7d4b-8a5f-3e2b1c0d9e8f"
B = "0196f3a2-7c1e-7d4b-8a5f-000000000000"  # shares the first 24 characters of A


def _line(second: int, event: str, **fields: Any) -> str:
    return json.dumps({"event": event, **fields, "level": fields.pop("level", "info"),
                       "timestamp": f"2026-11-27T18:00:{second:02d}.000000Z"})


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "coordinator.log").write_text("\n".join([
        _line(1, "session_submitted", session_id=A, trace_id=trace_id(A)),
        _line(4, "stage_dispatched", session_id=B, trace_id=trace_id(B)),
        _line(5, "session_settled", session_id=A, trace_id=trace_id(A), status="completed"),
    ]) + "\n")
    (folder / "sandbox.log").write_text("\n".join([
        f"Traceback (most recent call last): session {A}",  # not JSON: left out
        _line(2, "tool_call_answered", session_id=A, trace_id=trace_id(A), tool="read_file", level="warning"),
        _line(3, "reply_sent", trace_id=trace_id(A)),  # the trace alone still names it
        _line(3, "actor_ready"),
    ]) + "\n")
    (folder / "notes.txt").write_text(_line(0, "not_a_log", session_id=A) + "\n")
    return folder


def test_a_sessions_lines_from_every_log_are_merged_in_time_order(logs: Path) -> None:
    found = session_lines(logs, A[:25])
    assert (found.session_id, found.trace_id) == (A, trace_id(A))
    assert [(line.instance, line.fields["event"]) for line in found.lines] == [
        ("coordinator", "session_submitted"), ("sandbox", "tool_call_answered"), ("sandbox", "reply_sent"),
        ("coordinator", "session_settled")]
    assert [line.fields["event"] for line in session_lines(logs, trace_id(A)).lines] == [
        line.fields["event"] for line in found.lines]  # its trace id names it as well
    assert [line.instance for line in session_lines(logs, A, "sandbox").lines] == ["sandbox", "sandbox"]


def test_a_prefix_of_two_sessions_or_of_none_is_refused_with_its_code(logs: Path) -> None:
    with pytest.raises(CliError, match=r"2 sessions in the logs start with '0196f3a2-7c1e'; give more") as many:
        session_lines(logs, "0196f3a2-7c1e")
    with pytest.raises(CliError, match=r"no line of a session starting with 'ffff' in the logs in ") as none:
        session_lines(logs, "ffff")
    assert many.value.code == none.value.code == "ACODE-CLI-002"
    with pytest.raises(CliError, match="no line of a session"):
        session_lines(logs.parent / "absent", A)


def test_a_line_shows_time_instance_level_event_and_what_else_it_holds(logs: Path) -> None:
    found = session_lines(logs, A).lines
    assert render(found[1], 11) == ("2026-11-27 18:00:02.000000  sandbox      WARNING tool_call_answered "
                                    "tool=read_file")
    assert render(found[3], 11).endswith("  coordinator  session_settled status=completed")
