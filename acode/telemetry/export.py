"""Sending sessions' traces to an OpenTelemetry collector: opt-in, through the official SDK.

Nothing here runs unless the user asks (``acode export``), and the SDK is an optional extra
(``pip install acode[otel]``): :func:`exporter` says how to get it when it is missing. The
settings are the user's alone (``$ACODE_HOME/telemetry.yml``, never a workspace's file):
the default endpoint is the collector on this machine, and spans go elsewhere only to a
host the user wrote there.

A trace is built from the event log (:func:`acode.telemetry.build_trace`) and handed to
the SDK's OTLP/HTTP exporter as finished spans (:func:`readable_spans`), with acode's own
ids, so the collector's trace is the one ``acode trace --json`` prints. :class:`Follower`
decides which sessions to send: each one once it has ended (completed, failed, cancelled),
again if it is resumed and ends again (the same span ids, grown).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from acode.telemetry.spans import Trace
from protocol.errors import ConfigError
from protocol.sessions.session import SessionSnapshot

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["DEFAULT_ENDPOINT", "ENDED", "ExportSettings", "Follower", "exporter", "readable_spans"]

DEFAULT_ENDPOINT = "http://127.0.0.1:4318/v1/traces"  # an OpenTelemetry collector's OTLP/HTTP port, on loopback
ENDED = frozenset({"completed", "failed", "cancelled"})


class ExportSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``$ACODE_HOME/telemetry.yml``: where ``acode export`` sends traces (OTLP over HTTP)."""

    endpoint: Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s/]+(/\S*)?$")] = DEFAULT_ENDPOINT
    headers: dict[str, str] = {}  # e.g. a collector's authorization header
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    interval_seconds: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 5.0


def exporter(settings: ExportSettings) -> SpanExporter:
    """The SDK's OTLP/HTTP span exporter for ``settings`` (ACODE-CFG-003 without the extra)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ConfigError("exporting traces needs the OpenTelemetry SDK, an optional extra: "
                          "pip install 'acode[otel]'", code="ACODE-CFG-003") from exc
    return OTLPSpanExporter(endpoint=settings.endpoint, headers=dict(settings.headers),
                            timeout=settings.timeout_seconds)


def readable_spans(trace: Trace, *, service: str = "acode") -> list[ReadableSpan]:
    """``trace``'s spans as the SDK's finished spans, with their own ids and times."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    resource = Resource.create({"service.name": service})
    scope = InstrumentationScope("acode.telemetry")
    trace_id = int(trace.trace_id, 16)
    kinds = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
    codes = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}

    def context(span_id: str) -> SpanContext:
        return SpanContext(trace_id, int(span_id, 16), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def attributes(values: dict[str, Any]) -> dict[str, Any]:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}

    return [ReadableSpan(
        name=span.name, context=context(span.span_id), parent=context(span.parent) if span.parent else None,
        resource=resource, attributes=attributes(span.attributes), kind=kinds[span.kind],
        events=[Event(e.name, attributes(e.attributes), timestamp=_nanos(e.at)) for e in span.events],
        status=Status(codes[span.status], span.message if span.status == "error" and span.message else None),
        start_time=_nanos(span.start), end_time=_nanos(span.end), instrumentation_scope=scope,
    ) for span in trace.spans]


def _nanos(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


class Follower:
    """Which sessions to send now: those that have ended since they were last sent (by
    their ``updated_at``). Without ``backfill``, the sessions already ended when it starts
    are taken as sent (:meth:`start`): only what ends from then on goes."""

    def __init__(self) -> None:
        self.sent: dict[str, float] = {}  # session id -> its updated_at when sent

    def start(self, sessions: Iterable[SessionSnapshot], *, backfill: bool) -> None:
        if not backfill:
            self.sent.update({s.id: s.updated_at for s in sessions if s.status in ENDED})

    def due(self, sessions: Iterable[SessionSnapshot]) -> list[SessionSnapshot]:
        return [s for s in sessions if s.status in ENDED and self.sent.get(s.id) != s.updated_at]

    def done(self, session: SessionSnapshot) -> None:
        self.sent[session.id] = session.updated_at
