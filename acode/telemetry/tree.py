"""A :class:`~acode.telemetry.spans.Trace` as text: one line per span, indented as a tree
(``acode trace``). Each line says when the span started (seconds after the session's
start), how long it took, its name and what matters of it: a stage's outcome and tokens, a
model call's tokens and first-token time, a tool call's risk, outcome and target. Span
events (pauses, resumes, retries...) of the session, stages and steps follow their span,
marked ``·``.
"""

from __future__ import annotations

from acode.telemetry.spans import Attr, Span, Trace

__all__ = ["render_tree"]

_EVENTS_OF = ("invoke_agent", "step ")  # the spans whose events are shown


def render_tree(trace: Trace) -> str:
    root = trace.root
    status = root.attributes.get("acode.session.status", "")
    lines = [f"trace {trace.trace_id}  session {trace.session_id}  {status}, {root.end - root.start:.1f} s"]
    children: dict[str, list[Span]] = {}
    for span in trace.spans[1:]:
        children.setdefault(span.parent, []).append(span)

    def walk(span: Span, lead: str, branch: str) -> None:
        lines.append(f"{span.start - root.start:+9.3f}s {span.end - span.start:9.3f}s  {lead}{branch}{span.name}"
                     f"{_detail(span)}")
        inner = lead + ("" if span is root else "   " if branch == "└─ " else "│  ")
        if span.name.startswith(_EVENTS_OF):
            for event in span.events:
                said = _said(event.attributes)
                lines.append(f"{event.at - root.start:+9.3f}s {'':9}   {inner}· {event.name}{said}")
        kids = children.get(span.span_id, [])
        for index, kid in enumerate(kids):
            walk(kid, inner, "└─ " if index == len(kids) - 1 else "├─ ")

    walk(root, "", "")
    return "\n".join(lines)


def _said(attributes: dict[str, Attr]) -> str:
    shown = [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in attributes.items()
             if value not in ("", [], None) and key not in ("acode.summary",)]
    text = " ".join(shown)
    return f"  {text[:160]}" if text else ""


def _tokens(a: dict[str, Attr]) -> str:
    tokens_in, tokens_out = a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens")
    if not tokens_in and not tokens_out:
        return ""
    return f"tokens {tokens_in or 0:,} in / {tokens_out or 0:,} out"


def _detail(span: Span) -> str:
    a = span.attributes
    operation = a.get("gen_ai.operation.name")
    parts: list[str] = []
    if operation == "chat":
        parts.append(_tokens(a))
        if a.get("gen_ai.response.time_to_first_chunk"):
            parts.append(f"first token {float(a['gen_ai.response.time_to_first_chunk']):.3f} s")  # type: ignore[arg-type]
        if a.get("acode.model.summed"):
            parts.append(f"{a.get('acode.model.calls', 0)} call(s) summed")
        if a.get("acode.replayed"):
            parts.append("replayed")
        if a.get("acode.correction"):
            parts.append("corrected")
    elif operation == "execute_tool":
        parts += [str(a.get("acode.tool.risk", "")), str(a.get("acode.tool.outcome", ""))]
        parts.append("ok" if a.get("acode.tool.ok") else "failed")
        if a.get("acode.tool.target"):
            parts.append(str(a["acode.tool.target"])[:80])
    elif "acode.stage" in a:
        parts.append(f"visit {a['acode.visit']}")
        if a.get("acode.attempts", 1) != 1:
            parts.append(f"{a['acode.attempts']} attempts")
        parts.append(_tokens(a))
        if span.status != "unset":
            parts.append(span.status)
    elif "acode.step" in a:
        parts.append(str(a.get("acode.step.status", "unfinished")))
    elif span.parent == "":
        parts.append(str(a.get("acode.session.status", "")))
        if "acode.exit_code" in a:
            parts.append(f"exit {a['acode.exit_code']}")
    elif "acode.hook.name" in a:
        parts.append(str(a.get("acode.hook.decision", "")))
    if span.status == "error" and span.message:
        parts.append(span.message[:100])
    shown = [p for p in parts if p]
    return f"  {'; '.join(shown)}" if shown else ""
