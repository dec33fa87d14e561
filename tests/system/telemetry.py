"""What ``acode trace`` and ``acode metrics`` must show of a session that crossed a kill -9 and
a resume, checked through the CLI on a real acode (tests/system/test_human.py's kill drill
calls :func:`check_trace_and_metrics` on its session: no actor set of its own)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec

from acode.telemetry import SessionRecord
from protocol.sessions.events import Event
from protocol.sessions.session import SessionSnapshot
from tests.acode.telemetry.collector import Collector
from tests.acode.telemetry.test_metrics import matches_show, samples
from tests.system.conftest import Acode, shown_json

__all__ = ["check_trace_and_metrics"]


def _one_tree(spans: list[dict[str, Any]]) -> None:
    ids = [s["spanId"] for s in spans]
    assert len(ids) == len(set(ids)), "span ids are unique"
    roots = [s for s in spans if not s.get("parentSpanId")]
    assert [r["name"] for r in roots] == ["invoke_agent acode"], "one root"
    parents = {s["spanId"]: s.get("parentSpanId", "") for s in spans}
    for span in spans:  # every span reaches the root through parents that exist
        seen, at = set(), span["spanId"]
        while parents[at]:
            assert parents[at] in parents, f"{span['name']}: parent {parents[at]} missing"
            assert at not in seen, "no cycle"
            seen.add(at)
            at = parents[at]
        assert at == roots[0]["spanId"]


def check_trace_and_metrics(acode: Acode, session_id: str, *, restarted: str) -> None:
    """``acode trace --json`` is one connected tree holding the kill and the resume;
    ``acode metrics`` parses and its counters are what ``acode show`` reports; ``acode
    export`` sends the same spans to a collector."""
    traced = acode("trace", session_id[:8], "--json")
    assert traced.returncode == 0, traced.stderr
    document = json.loads(traced.stdout)
    (resource,) = document["resourceSpans"]
    spans: list[dict[str, Any]] = resource["scopeSpans"][0]["spans"]
    assert {s["traceId"] for s in spans} == {uuid.UUID(session_id).hex}
    _one_tree(spans)
    stage = next(s for s in spans if s["name"] == f"invoke_agent {restarted}")
    events = [e["name"] for e in stage["events"]]
    assert "stage_retried" in events and "session_resumed" in events, events
    assert any(s["name"].startswith("execute_tool ") for s in spans)
    assert any(s["name"].startswith("chat ") for s in spans)
    text = acode("trace", session_id)
    assert text.returncode == 0 and text.stdout.startswith(f"trace {uuid.UUID(session_id).hex}  session {session_id}")

    measured = acode("metrics")
    assert measured.returncode == 0, measured.stderr
    shown = shown_json(acode, session_id)
    record = SessionRecord(msgspec.convert(shown["session"], SessionSnapshot),
                           msgspec.convert(shown["events"], list[Event]))
    matches_show(measured.stdout, [record])  # the only session of this acode
    restarts = samples(measured.stdout)["acode_actor_restarts_total"]
    assert sum(v for k, v in restarts.items() if dict(k)["actor"] == restarted) == 1, restarts

    with Collector() as collector:  # the opt-in exporter: the same spans, through the OpenTelemetry SDK
        (acode.home / "telemetry.yml").write_text(f"endpoint: {collector.endpoint}\n")
        exported = acode("export", "--once", "--all")
        assert exported.returncode == 0, exported.stdout + exported.stderr
    assert f"session {session_id} completed: {len(spans)} spans sent" in exported.stdout
    assert sorted(s.span_id.hex() for s in collector.spans) == sorted(s["spanId"] for s in spans)
