"""Traces and metrics of sessions, built after the fact from their event logs.

Pure functions, no I/O: :func:`build_trace` turns one session's events into a tree of
spans named after the OpenTelemetry GenAI semantic conventions (session and stage visits
``invoke_agent``, model calls ``chat {model}``, tool calls ``execute_tool {tool}``);
:func:`otlp_json` writes them as OTLP-JSON and :func:`render_tree` as text (``acode
trace``). :func:`exposition` counts sessions, transitions, stage and tool-call times,
tokens, restarts and escalations in the Prometheus text format (``acode metrics``). The
event log is the only source, so a crashed and resumed session gives the same one tree as
an undisturbed one, and the ids are derived (:mod:`protocol.basics.tracing`), never stored.
"""

from acode.telemetry.metrics import Restarts, SessionRecord, exposition
from acode.telemetry.otlp import otlp_json
from acode.telemetry.spans import Span, SpanEvent, Trace, build_trace
from acode.telemetry.tree import render_tree

__all__ = ["Restarts", "SessionRecord", "Span", "SpanEvent", "Trace", "build_trace", "exposition", "otlp_json",
           "render_tree"]
