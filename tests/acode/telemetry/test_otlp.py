"""``acode trace --json``'s document is OTLP-JSON: resourceSpans → scopeSpans → spans, hex ids,
nanosecond times as decimal strings, typed attribute values."""

from __future__ import annotations

import json
import re
from typing import Any

from acode.telemetry import build_trace, otlp_json
from tests.acode.telemetry.sessions import load


def _document() -> dict[str, Any]:
    session, events = load("killed_while_pausing_then_resumed")
    return json.loads(json.dumps(otlp_json(build_trace(session.id, events, session))))  # type: ignore[no-any-return]


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    (resource,) = document["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "acode.telemetry"
    assert resource["resource"]["attributes"] == [{"key": "service.name", "value": {"stringValue": "acode"}}]
    return scope["spans"]  # type: ignore[no-any-return]


def _attributes(span: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def test_every_span_has_hex_ids_string_nanos_and_one_root() -> None:
    spans = _spans(_document())
    trace_ids = {s["traceId"] for s in spans}
    assert len(trace_ids) == 1 and re.fullmatch(r"[0-9a-f]{32}", trace_ids.pop())
    assert all(re.fullmatch(r"[0-9a-f]{16}", s["spanId"]) for s in spans)
    roots = [s for s in spans if "parentSpanId" not in s]
    assert [r["name"] for r in roots] == ["invoke_agent acode"]
    ids = {s["spanId"] for s in spans}
    assert all(s["parentSpanId"] in ids for s in spans if "parentSpanId" in s)
    for span in spans:
        start, end = span["startTimeUnixNano"], span["endTimeUnixNano"]
        assert isinstance(start, str) and start.isdigit() and isinstance(end, str) and int(end) >= int(start)
        assert span["kind"] in (1, 3) and span["status"]["code"] in (0, 1, 2)


def test_attributes_follow_the_genai_conventions_with_typed_values() -> None:
    spans = _spans(_document())
    chat = next(s for s in spans if s["name"] == "chat test-model" and "acode.turn" in _attributes(s))
    a = _attributes(chat)
    assert chat["kind"] == 3  # CLIENT: a call to a model server
    assert a["gen_ai.operation.name"] == {"stringValue": "chat"}
    assert a["gen_ai.request.model"] == {"stringValue": "test-model"}
    assert a["gen_ai.usage.input_tokens"]["intValue"].isdigit()
    assert isinstance(a["gen_ai.response.time_to_first_chunk"]["doubleValue"], float)
    assert a["acode.replayed"] == {"boolValue": False}
    assert a["gen_ai.response.finish_reasons"]["arrayValue"]["values"][0]["stringValue"]
    tool = next(s for s in spans if s["name"] == "execute_tool write_file")
    t = _attributes(tool)
    assert t["gen_ai.operation.name"] == {"stringValue": "execute_tool"}
    assert t["gen_ai.tool.name"] == {"stringValue": "write_file"} and tool["parentSpanId"] == chat["spanId"]
    executor = next(s for s in spans if s["name"] == "invoke_agent executor")
    assert _attributes(executor)["gen_ai.agent.name"] == {"stringValue": "executor"}
    paused = next(e for e in executor["events"] if e["name"] == "session_paused")
    assert paused["timeUnixNano"].isdigit() and {"key": "acode.pause.kind", "value": {"stringValue": "user"}} \
        in paused["attributes"]


def test_a_failed_tool_call_is_an_error_span_with_its_message() -> None:
    spans = _spans(_document())
    failed = [s for s in spans if _attributes(s).get("acode.tool.ok") == {"boolValue": False}]
    assert failed and all(s["status"]["code"] == 2 and "does not exist" in s["status"]["message"] for s in failed)
