"""A :class:`~acode.telemetry.spans.Trace` as OTLP-JSON (what ``acode trace --json`` prints).

The shape is OTLP's ``ExportTraceServiceRequest`` in its JSON mapping: ``resourceSpans``
→ ``scopeSpans`` → ``spans``; ids are lowercase hex (trace 32 digits, span 16), times
nanoseconds since the Unix epoch written as decimal strings (int64 in protobuf's JSON
mapping), as are integer attribute values (``intValue``); a float is a ``doubleValue``,
a list of strings an ``arrayValue``. A collector takes the document as it is
(``POST /v1/traces`` with ``Content-Type: application/json``): OTLP/JSON receivers ignore
fields they do not know, such as the ``schema_version`` acode's JSON lines carry.
"""

from __future__ import annotations

from typing import Any

from acode.telemetry.spans import Attr, Span, Trace

__all__ = ["SCOPE", "otlp_json"]

SCOPE = "acode.telemetry"
_KINDS = {"internal": 1, "client": 3}  # SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT
_STATUS = {"unset": 0, "ok": 1, "error": 2}  # STATUS_CODE_UNSET, _OK, _ERROR


def otlp_json(trace: Trace, *, service: str = "acode") -> dict[str, Any]:
    """The trace as one OTLP-JSON document (builtins, ready for ``json.dumps``)."""
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes({"service.name": service})},
        "scopeSpans": [{"scope": {"name": SCOPE}, "spans": [_span(trace.trace_id, s) for s in trace.spans]}],
    }]}


def _nanos(seconds: float) -> str:
    return str(round(seconds * 1_000_000_000))


def _span(trace_id: str, span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": trace_id, "spanId": span.span_id}
    if span.parent:
        out["parentSpanId"] = span.parent
    out.update({"name": span.name, "kind": _KINDS[span.kind], "startTimeUnixNano": _nanos(span.start),
                "endTimeUnixNano": _nanos(span.end), "attributes": _attributes(span.attributes)})
    if span.events:
        out["events"] = [{"timeUnixNano": _nanos(e.at), "name": e.name, "attributes": _attributes(e.attributes)}
                         for e in span.events]
    status: dict[str, Any] = {"code": _STATUS[span.status]}
    if span.message:
        status["message"] = span.message
    out["status"] = status
    return out


def _attributes(attributes: dict[str, Attr]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def _value(value: Attr) -> dict[str, Any]:
    if isinstance(value, bool):  # before int: a bool is an int
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [{"stringValue": item} for item in value]}}
    return {"stringValue": value}
