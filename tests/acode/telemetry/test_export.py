"""The opt-in exporter: a session's trace reaches an OpenTelemetry collector through the
official SDK with acode's own ids; settings come from the user's file, loopback by default;
each session is sent once it has ended, and again only if it changed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from acode.telemetry import build_trace, otlp_json
from acode.telemetry.export import DEFAULT_ENDPOINT, ExportSettings, Follower, exporter, readable_spans
from cli.commands.telemetry import export_settings
from protocol.errors import ConfigError
from protocol.sessions.session import SessionSnapshot
from tests.acode.telemetry.collector import Collector
from tests.acode.telemetry.sessions import load

pytest.importorskip("opentelemetry.sdk")


def test_a_trace_reaches_the_collector_with_acodes_own_ids() -> None:
    session, events = load("killed_while_pausing_then_resumed")
    trace = build_trace(session.id, events, session)
    expected = otlp_json(trace)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    with Collector() as collector:
        sender = exporter(ExportSettings(endpoint=collector.endpoint, timeout_seconds=5))
        try:
            assert sender.export(readable_spans(trace)).name == "SUCCESS"
        finally:
            sender.shutdown()
    got = [(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name) for s in collector.spans]
    assert got == [(s["traceId"], s["spanId"], s.get("parentSpanId", ""), s["name"]) for s in expected]
    assert collector.resources[0]["service.name"] == "acode"
    chat = next(s for s in collector.spans if s.name == "chat test-model" and any(
        a.key == "acode.turn" for a in s.attributes))
    assert chat.kind == 3  # SPAN_KIND_CLIENT
    values = {a.key: a.value for a in chat.attributes}
    assert values["gen_ai.request.model"].string_value == "test-model"
    assert values["gen_ai.usage.input_tokens"].int_value > 0
    assert values["gen_ai.response.finish_reasons"].array_value.values[0].string_value


def test_a_collector_that_refuses_is_a_failed_export() -> None:
    session, events = load("executor_killed")
    with Collector(status=400) as collector:  # 400: not retried
        sender = exporter(ExportSettings(endpoint=collector.endpoint, timeout_seconds=2))
        try:
            assert sender.export(readable_spans(build_trace(session.id, events, session))).name == "FAILURE"
        finally:
            sender.shutdown()


def test_settings_are_the_users_file_with_loopback_by_default(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.yml"
    assert export_settings(path) == ExportSettings() and ExportSettings().endpoint == DEFAULT_ENDPOINT
    assert DEFAULT_ENDPOINT.startswith("http://127.0.0.1:")
    path.write_text("endpoint: http://collector.lan:4318/v1/traces\nheaders: {authorization: Bearer x}\n")
    named = export_settings(path)
    assert named.endpoint == "http://collector.lan:4318/v1/traces" and named.headers == {"authorization": "Bearer x"}
    path.write_text("endpiont: http://x\n")
    with pytest.raises(ConfigError) as caught:
        export_settings(path)
    assert caught.value.code == "ACODE-CFG-001" and "endpiont" in caught.value.message
    assert str(path) in caught.value.message
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"endpoint": "ftp://x"}, ExportSettings)


def _snapshot(session_id: str, status: str, updated_at: float) -> SessionSnapshot:
    return SessionSnapshot(id=session_id, task="t", workspace="/w", status=status,  # type: ignore[arg-type]
                           updated_at=updated_at)


def test_a_session_is_sent_once_it_ends_and_again_only_when_it_changed() -> None:
    before = [_snapshot("old", "completed", 1.0), _snapshot("run", "running", 1.0)]
    follower = Follower()
    follower.start(before, backfill=False)
    assert follower.due(before) == [], "what ended before the exporter started is not sent"
    now = [_snapshot("old", "completed", 1.0), _snapshot("run", "failed", 2.0)]
    assert [s.id for s in follower.due(now)] == ["run"]
    follower.done(now[1])
    assert follower.due(now) == []
    resumed = [_snapshot("run", "completed", 3.0)]
    assert [s.id for s in follower.due(resumed)] == ["run"], "resumed and ended again"
    backfilled = Follower()
    backfilled.start(before, backfill=True)
    assert [s.id for s in backfilled.due(before)] == ["old"]
