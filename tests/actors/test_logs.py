"""Logging: the lines a process writes carry no secret, whatever the values and tracebacks hold."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import logs
from protocol.basics import redact
from protocol.basics.tracing import trace_id
from protocol.errors import ErrorInfo

GITHUB = "gh" + "p_" + "aB3dE5fG7h" * 3 + "J9kL2m"
KNOWN = "Zq8-" + "wX4vY2" * 4  # the value of a secret in the environment


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], str]]:
    """Logging configured as a process does (JSON), with a secret in the environment; the
    lines go to a buffer instead of stderr."""
    monkeypatch.setattr(redact, "_default", None)
    monkeypatch.setattr(redact, "_extra", set())
    monkeypatch.setenv("DEPLOY_API_TOKEN", KNOWN)
    logs.configure(actor="tester", instance="tester-1", json=True)
    buffer = io.StringIO()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buffer))
    try:
        yield buffer.getvalue
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()


def test_every_value_of_a_log_line_is_redacted(lines: Callable[[], str]) -> None:
    class Opaque:
        def __repr__(self) -> str:
            return f"Opaque({KNOWN})"

    logs.get_logger().info("tool_ran", output=f"token={GITHUB}", nested={"args": [KNOWN, 3, (GITHUB,)]},
                           error=ErrorInfo(code="ACODE-SBX-005", message=f"bad {KNOWN}"), opaque=Opaque(),
                           path=Path("/w/hello.py"), count=2, ok=True)
    text = lines()
    assert GITHUB not in text and KNOWN not in text
    line: dict[str, Any] = json.loads(text)
    assert line["output"] == "token=[REDACTED:github-token]"
    assert line["nested"] == {"args": ["[REDACTED:known-secret]", 3, ["[REDACTED:github-token]"]]}
    assert line["error"] == "ErrorInfo(code='ACODE-SBX-005', message='bad [REDACTED:known-secret]', retryable=False)"
    assert line["opaque"] == "Opaque([REDACTED:known-secret])"
    assert (line["path"], line["count"], line["ok"], line["actor"]) == ("PosixPath('/w/hello.py')", 2, True, "tester")


def test_a_line_of_plain_strings_and_numbers_is_redacted_too(lines: Callable[[], str]) -> None:
    """Such a line is first checked whole (actors.logs.redact_secrets); a secret in any value still goes."""
    logs.get_logger().info("tool_call_answered", key="k1", tool="read_file", ok=True, duration_ms=0.5,
                           summary=f"read {KNOWN}", error=None, output=f"token={GITHUB}")
    line = json.loads(lines())
    assert (line["summary"], line["output"]) == ("read [REDACTED:known-secret]", "token=[REDACTED:github-token]")
    assert (line["key"], line["ok"], line["duration_ms"], line["error"]) == ("k1", True, 0.5, None)


def test_a_logged_traceback_is_redacted(lines: Callable[[], str]) -> None:
    try:
        raise ValueError(f"could not parse {GITHUB} with {KNOWN}")
    except ValueError:
        logs.get_logger().exception("parse_failed")
    text = lines()
    assert GITHUB not in text and KNOWN not in text
    exception = json.loads(text)["exception"]
    assert "ValueError: could not parse [REDACTED:github-token] with [REDACTED:known-secret]" in exception


def test_redaction_runs_after_tracebacks_are_formatted_and_before_rendering(lines: Callable[[], str]) -> None:
    processors = structlog.get_config()["processors"]
    assert processors[-2] is logs.redact_secrets
    assert processors[-3] is structlog.processors.format_exc_info


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                                                      st.floats(allow_nan=False, allow_infinity=False),
                                                      st.text(max_size=20)), max_size=6))
@settings(max_examples=300)
def test_a_line_of_scalars_renders_as_the_json_renderer_would(event: dict[str, Any]) -> None:
    """The fast path (msgspec) of logs.render_json says what structlog's JSONRenderer says."""
    fast = logs.render_json(None, "info", dict(event))
    assert json.loads(fast) == json.loads(structlog.processors.JSONRenderer()(None, "info", dict(event)))


def test_a_line_with_another_value_shows_it_by_its_repr() -> None:
    line = json.loads(logs.render_json(None, "info", {"event": "x", "error": ErrorInfo(code="C", message="m"),
                                                       "path": Path("/w")}))
    assert line == {"event": "x", "error": "ErrorInfo(code='C', message='m', retryable=False)",
                    "path": "PosixPath('/w')"}


def test_no_line_drives_the_terminal_it_is_shown_on(lines: Callable[[], str]) -> None:
    """JSON lines (a log file someone will ``cat``) have C1 and bidi controls escaped as well
    as C0; a terminal's lines (``acode up`` in the foreground) show every one escaped."""
    hostile = "\x1b]52;c;Y3VybA==\x07\x9b2J\u202eevil"
    logs.get_logger().info("tool_ran", target=hostile)
    line = lines()
    assert "\x1b" not in line and "\x9b" not in line and "\u202e" not in line
    assert json.loads(line)["target"] == hostile
    structlog.reset_defaults()
    logs.configure(actor="tester", instance="tester-1", json=False)
    buffer = io.StringIO()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buffer))
    logs.get_logger().info("tool_ran", target=hostile)
    shown = buffer.getvalue()
    assert "\x1b" not in shown and "\x9b" not in shown and "\u202e" not in shown
    assert "x1b]52;c;Y3VybA==" in shown and "u202eevil" in shown
    logs.get_logger().info(hostile)  # the event itself, which the renderer never quotes
    event = buffer.getvalue().splitlines()[-1]
    assert "\x1b" not in event and "\x9b" not in event and "\u202e" not in event
    assert "\\x1b]52;c;Y3VybA==\\x07\\x9b2J\\u202eevil" in event


def test_a_line_that_names_a_session_carries_its_trace_id(lines: Callable[[], str]) -> None:
    session, other = "0196f3a2-7c1e-7d4b-8a5f-3e2b1c0d9e8f", "0196f3a2-0000-7d4b-8a5f-3e2b1c0d9e8f"
    log = logs.get_logger()
    log.info("stage_dispatched", session_id=session)
    with structlog.contextvars.bound_contextvars(session_id=other, trace_id=trace_id(other)):
        log.info("handled")  # the request's ids, bound by the worker
        log.info("hold_overridden", session_id=session)  # another session named: its own trace
    log.info("actor_ready")
    parsed = [json.loads(line) for line in lines().splitlines()]
    assert [(line.get("session_id"), line.get("trace_id")) for line in parsed] == [
        (session, "0196f3a27c1e7d4b8a5f3e2b1c0d9e8f"), (other, trace_id(other)),
        (session, "0196f3a27c1e7d4b8a5f3e2b1c0d9e8f"), (None, None)]
