"""cli.sessionlogs: one session's lines from every actor's log file, merged in time order;
and ``acode logs`` reading the rotated files (``x.log.1`` …) as part of their instance's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli.sessionlogs import render, session_lines
from protocol.basics.tracing import trace_id
from protocol.errors import CliError

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


C = "0196f3a2-7c1e-7d4b-8a5f-cccccccccccc"  # its lines were all rotated out of the live files


@pytest.fixture
def rotated(logs: Path) -> Path:
    """The fixture's logs after rotations: older lines in ``.1`` and ``.2``, as actors/logrotate.py leaves them."""
    (logs / "coordinator.log.2").write_text(_line(0, "session_submitted", session_id=C, trace_id=trace_id(C)) + "\n")
    (logs / "coordinator.log.1").write_text("\n".join([
        _line(0, "session_created", session_id=A, trace_id=trace_id(A)),
        _line(0, "session_settled", session_id=C, trace_id=trace_id(C), status="completed")]) + "\n")
    (logs / "sandbox.log.1").write_text(_line(1, "tool_call_answered", session_id=A, trace_id=trace_id(A),
                                              tool="list_files") + "\n")
    return logs


def test_a_sessions_lines_rotated_out_of_the_live_files_are_found_in_time_order(rotated: Path) -> None:
    found = session_lines(rotated, A[:25])
    assert [(line.instance, line.fields["event"]) for line in found.lines] == [
        ("coordinator", "session_created"), ("coordinator", "session_submitted"), ("sandbox", "tool_call_answered"),
        ("sandbox", "tool_call_answered"), ("sandbox", "reply_sent"), ("coordinator", "session_settled")]
    assert [line.fields.get("tool") for line in found.lines[2:4]] == ["list_files", "read_file"]
    gone = session_lines(rotated, C)  # nothing of it left in a live file
    assert [(line.instance, line.fields["event"]) for line in gone.lines] == [
        ("coordinator", "session_submitted"), ("coordinator", "session_settled")]  # .2, then .1: same second
    assert [line.instance for line in session_lines(rotated, A, "sandbox").lines] == ["sandbox"] * 3


def _acode(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACODE_")}
    return subprocess.run([sys.executable, "-c", "from cli.app import main; main()", "--home", str(home), *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_acode_logs_lists_instances_not_rotated_files_and_tails_across_the_rotation(rotated: Path) -> None:
    home = rotated.parent / "home"
    (home / "run").mkdir(parents=True)
    rotated.rename(home / "run" / "logs")
    (home / "run" / "logs" / "verifier.log.1").write_text("only rotated\n")  # its live file not yet written

    listed = _acode(home, "logs")
    assert listed.stdout.strip().endswith(": coordinator, sandbox, verifier"), listed.stdout + listed.stderr

    tail = _acode(home, "logs", "sandbox", "-n", "5")  # the live file holds 4 lines: 1 more from .1
    assert [line.split()[0] for line in tail.stdout.splitlines()] == [
        '{"event":', "Traceback", '{"event":', '{"event":', '{"event":']
    assert "list_files" in tail.stdout.splitlines()[0]
    assert _acode(home, "logs", "verifier").stdout == "only rotated\n"

    shown = _acode(home, "logs", "--session", C)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"session {C} (trace {trace_id(C)}): 2 lines from coordinator"
