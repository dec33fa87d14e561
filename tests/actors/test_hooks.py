"""One hook, run for real: scripts as subprocesses (exit codes, JSON answers, a hang killed
with its process group), webhooks to a stand-in HTTP server on loopback, conditions, and
records read instead of a second run."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import hooks
from protocol.policy.hooks import HookDecision, HookSettings, HookSpec

FACTS: dict[str, object] = {"session": "s1", "task": "t", "workspace": "/w", "status": "running", "stage": "executor",
                            "iteration": 1, "step": "T1/S1", "tool": "run_terminal", "args": "{}", "path": "",
                            "command": "rm -rf build", "risk": "destructive"}


def script(code: str, **more: Any) -> HookSpec:
    return HookSpec(action="script", run=[sys.executable, "-c", code], **more)


def run(spec: HookSpec, point: str = "pre_tool", cwd: str = "/", **more: Any) -> HookDecision:
    return hooks.run_hook(spec, point, FACTS, cwd=cwd, **more)  # type: ignore[arg-type]


def test_a_script_gets_the_facts_as_json_on_stdin_and_in_acode_variables(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    code = (f"import json, os, sys; data = json.load(sys.stdin); open({str(out)!r}, 'w').write(json.dumps("
            "[data, os.environ['ACODE_COMMAND'], os.environ['ACODE_HOOK_POINT'], os.getcwd()]))")
    assert run(script(code), cwd=str(tmp_path)).decision == "continue"
    data, command, point, cwd = json.loads(out.read_text())
    assert data == {"schema_version": 1, "hook_point": "pre_tool", **FACTS}
    assert (command, point, cwd) == ("rm -rf build", "pre_tool", str(tmp_path))


@pytest.mark.parametrize(("code", "decision", "reason"), [
    ("pass", "continue", ""),
    ("import sys; print('not here', file=sys.stderr); sys.exit(2)", "deny", "not here"),
    ("print('{\"decision\": \"ask\", \"reason\": \"a human should look\"}')", "ask", "a human should look"),
    ("print('{\"decision\": \"block\", \"reason\": \"no\"}')", "deny", "no"),
    ('print(\'{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "policy"}}\')',
     "deny", "policy"),
    ("import sys; sys.exit(1)", "deny", "the hook failed: "),  # fail closed at pre_tool
    ("print('not json')", "deny", "the hook failed: its output is not JSON"),
    ("print('{\"decision\": \"maybe\"}')", "deny", "the hook failed: it decided 'maybe'"),
])
def test_what_a_script_answers_at_pre_tool(code: str, decision: str, reason: str) -> None:
    answer = run(script(code))
    assert answer.decision == decision and answer.reason.startswith(reason)


def test_a_failure_elsewhere_goes_on_and_on_failure_allow_lets_a_pre_tool_call_run() -> None:
    assert run(script("import sys; sys.exit(3)"), point="on_pause").decision == "continue"
    assert run(script("import sys; sys.exit(3)", on_failure="allow")).decision == "allow"
    blocked = run(script("import sys; print('stop', file=sys.stderr); sys.exit(2)"), point="step_end")
    assert (blocked.decision, blocked.reason) == ("pause", "stop")  # exit 2 outside pre_tool pauses


def test_a_script_that_hangs_is_killed_with_its_process_group_at_its_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (f"import subprocess, time; p = subprocess.Popen(['sleep', '60']); open({str(pidfile)!r}, 'w')"
            ".write(str(p.pid)); time.sleep(60)")
    started = time.monotonic()
    answer = run(script(code, timeout=1.0))
    assert time.monotonic() - started < 10
    assert answer.decision == "deny" and "did not finish within 1s (killed)" in answer.failed
    child = int(pidfile.read_text())
    for _ in range(100):  # the child, in the script's group, was killed too (reaped by init)
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"the script's child {child} outlived the timeout")


class _Hook(http.server.BaseHTTPRequestHandler):
    answer = b""
    status = 200
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the handler's name
        length = int(self.headers["Content-Length"])
        type(self).received.append(json.loads(self.rfile.read(length)))
        self.send_response(type(self).status)
        self.send_header("Content-Length", str(len(type(self).answer)))
        self.end_headers()
        self.wfile.write(type(self).answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Hook.received, _Hook.answer, _Hook.status = [], b"", 200
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_webhook_on_loopback_receives_the_documented_payload_and_its_answer_decides(server: str) -> None:
    _Hook.answer = b'{"decision": "deny", "reason": "from the webhook"}'
    answer = run(HookSpec(action="webhook", url=server))
    assert (answer.decision, answer.reason) == ("deny", "from the webhook")
    assert _Hook.received == [{"schema_version": 1, "hook_point": "pre_tool", **FACTS}]
    _Hook.answer, _Hook.status = b"", 500
    assert run(HookSpec(action="webhook", url=server)).failed == f"webhook {server} answered 500"


def test_a_webhook_off_this_machine_is_refused_unless_the_user_allows_its_host() -> None:
    refused = run(HookSpec(action="webhook", url="http://203.0.113.9/hook", timeout=1), point="on_pause")
    assert "is not on this machine; list its host in hooks.allow_hosts" in refused.failed
    assert hooks.webhook_host_allowed("http://[::1]:8/x", []) and hooks.webhook_host_allowed("http://localhost/", [])
    assert hooks.webhook_host_allowed("https://hooks.example/x", ["hooks.example"])
    assert not hooks.webhook_host_allowed("file:///etc/passwd", [])


def test_hooks_of_a_point_run_in_order_their_conditions_hold_and_a_denial_stops_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "log"

    def note(word: str, **more: Any) -> HookSpec:
        return script(f"open({str(log)!r}, 'a').write({word!r} + '\\n')", **more)

    settings = HookSettings(pre_tool=[note("first"), note("skipped", condition='tool == "write_file"'),
                                      script("import sys; sys.exit(2)"), note("never")])
    ran = hooks.run_point(settings, "pre_tool", FACTS, session_id="s1", occurrence="k1", cwd=str(tmp_path))
    assert log.read_text() == "first\n"
    assert [(e.hook, e.decision) for e in ran] == [("pre_tool[0]", "continue"), ("pre_tool[2]", "deny")]
    assert ran[1].id == hooks.event_id("s1", "pre_tool", "k1", 2)

    recorded = {e.id: hooks.recorded(e) for e in ran}  # a replay reads them
    again = hooks.run_point(settings, "pre_tool", FACTS, session_id="s1", occurrence="k1", cwd=str(tmp_path),
                            recorded=recorded)
    assert [(e.id, e.decision) for e in again] == [(e.id, e.decision) for e in ran] and log.read_text() == "first\n"


def test_an_intent_is_made_durable_first_and_a_hook_begun_but_unrecorded_is_not_run_again(tmp_path: Path) -> None:
    log = tmp_path / "log"
    settings = HookSettings(pre_tool=[script(f"open({str(log)!r}, 'a').write('ran\\n')")])
    order: list[str] = []

    def started(intent: Any) -> None:
        order.append(f"intent {intent.hook} {log.exists()}")

    ran = hooks.run_point(settings, "pre_tool", FACTS, session_id="s1", occurrence="k1", cwd=str(tmp_path),
                          started=started)
    assert order == ["intent pre_tool[0] False"] and log.read_text() == "ran\n"  # the intent before the run
    assert ran[0].decision == "continue"

    # a crash after the intent and before the record: the replay does not run it again, and fails closed
    again = hooks.run_point(settings, "pre_tool", FACTS, session_id="s1", occurrence="k2", cwd=str(tmp_path),
                            begun={hooks.started_id("s1", "pre_tool", "k2", 0)}, started=started)
    assert log.read_text() == "ran\n" and len(order) == 1
    assert again[0].decision == "deny" and "its outcome is unknown" in again[0].failed
    elsewhere = hooks.run_point(HookSettings(on_pause=settings.pre_tool), "on_pause", FACTS, session_id="s1",
                                occurrence="e1", cwd=str(tmp_path), begun={hooks.started_id("s1", "on_pause", "e1", 0)})
    assert elsewhere[0].decision == "continue" and log.read_text() == "ran\n"
