"""One session's trace through every actor's log (issue 29, part 3): a scripted session on a
real actor set, then every actor that handled it has lines with its trace id, and ``acode
logs --session`` merges them in time order, from the files alone (acode down as well)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from protocol.tracing import trace_id
from tests.system.conftest import Acode, json_lines, last_json
from tests.system.test_pipeline import HELLO_SCRIPT

pytestmark = pytest.mark.system

# every actor a session passes through (the broker forwards bytes and writes no line per request)
HANDLERS = ("coordinator", "planner", "executor", "verifier", "reviewer", "sandbox", "persistence")


def _lines(home: Path) -> dict[str, list[dict[str, Any]]]:
    return {path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
            for path in sorted((home / "run" / "logs").glob("*.log"))}


def test_every_actor_that_handles_a_session_logs_its_trace_and_logs_session_merges_them(
        shared: Acode, tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    (tmp_path / "s.yaml").write_text(HELLO_SCRIPT)
    run = shared("run", "Create hello.py that prints hello", "--workspace", str(workspace), "--provider", "scripted",
                 "--script", str(tmp_path / "s.yaml"), "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    session = last_json(run.stdout)["session"]["id"]
    trace = trace_id(session)

    logs = _lines(shared.home)
    mine = {instance: [line for line in lines if line.get("trace_id") == trace] for instance, lines in logs.items()}
    for instance in HANDLERS:
        assert mine.get(instance), f"{instance} wrote no line with the session's trace id {trace}"
    for instance, lines in logs.items():  # a line names the session and carries its trace, or neither
        for line in lines:
            assert (line.get("session_id") == session) == (line.get("trace_id") == trace), (instance, line)
    handled = {(line["instance"], line["event"]) for lines in mine.values() for line in lines}
    assert {("coordinator", "stage_dispatched"), ("planner", "stage_started"), ("executor", "stage_finished"),
            ("sandbox", "tool_call_answered"), ("persistence", "transition_stored")} <= handled, handled

    # the files alone: a copy of the logs in a home where acode never ran
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(shared.home / "run" / "logs", elsewhere / "run" / "logs")
    shown = shared("--home", str(elsewhere), "logs", "--session", session[:13])  # a unique prefix is enough
    assert shown.returncode == 0, shown.stderr
    header, *body = shown.stdout.splitlines()
    count = sum(len(lines) for lines in mine.values())
    assert header.startswith(f"session {session} (trace {trace}): {count} lines from ")
    assert len(body) == count and {line.split()[2] for line in body} == set(HANDLERS)
    stamps = [" ".join(line.split()[:2]) for line in body]
    assert stamps == sorted(stamps), "in time order across the files"

    merged = json_lines(shared("logs", "--session", trace, "--json").stdout)  # its trace id names it too
    assert [line["timestamp"] for line in merged] == sorted(line["timestamp"] for lines in mine.values()
                                                             for line in lines)
    assert {line["trace_id"] for line in merged} == {trace}

    missing = shared("--home", str(elsewhere), "logs", "--session", "ffffffff")
    assert missing.returncode == 1 and "ACODE-CLI-002" in missing.stderr and "'ffffffff'" in missing.stderr
