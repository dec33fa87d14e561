"""One session's trace through every actor's log (issue 29, part 3): a scripted session on a
real actor set, then every actor that handled it has lines with its trace id, and ``acode
logs --session`` merges them in time order, from the files alone (acode down as well).
And the logs stay bounded: ``acode up`` with ``logs.max_mb``/``logs.keep`` rotates them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from protocol.basics.tracing import trace_id
from tests.harness import wait_until
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


def test_acode_up_rotates_each_log_past_the_configured_limit_before_its_writer_opens_it_or_while_it_runs(
        acode: Acode) -> None:
    (acode.home / "config.yml").write_text("logs: {max_mb: 0.01, keep: 2}\n")  # 10 KiB
    logs = acode.home / "run" / "logs"
    logs.mkdir(mode=0o700, parents=True)
    seeded = {name: f'{{"event": "before_{name}"}}\n'.encode() * 1_000 for name in ("coordinator", "planner",
                                                                                     "mcp-gone")}
    for name, content in seeded.items():  # 25-30 KB each, past the limit
        (logs / f"{name}.log").write_bytes(content)
    (logs / "planner.log.1").write_text("older\n")
    (logs / "planner.log.2").write_text("oldest\n")  # beyond keep once the others shift

    assert acode.up().returncode == 0

    # renamed before their writer opened them: by acode up (its coordinator), the supervisor (a child)
    assert (logs / "coordinator.log.1").read_bytes() == seeded["coordinator"]
    assert (logs / "planner.log.1").read_bytes() == seeded["planner"]
    assert (logs / "planner.log.2").read_text() == "older\n" and not (logs / "planner.log.3").exists()
    assert b"before_planner" not in (logs / "planner.log").read_bytes()  # the new child's own lines
    # a log no child of this run opens (an MCP server's from before): copied and emptied in place
    # by the coordinator's periodic pass, which runs first as its loop starts
    wait_until(lambda: (logs / "mcp-gone.log.1").exists(), timeout=10, what="the periodic pass")
    assert (logs / "mcp-gone.log.1").read_bytes() == seeded["mcp-gone"]
    assert (logs / "mcp-gone.log").read_bytes() == b""
    rotated = {line["log"] for line in _lines(acode.home)["coordinator"] if line["event"] == "log_rotated"}
    assert {"planner.log", "mcp-gone.log"} <= rotated
    assert (logs / "planner.log.1").stat().st_mode & 0o777 == 0o600
