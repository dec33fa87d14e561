"""The views of :mod:`cli.views` in words: ``acode show --stage``, ``--cycle`` and the step
table of the default view (:mod:`cli.show` prints the one asked for). Times are seconds
since the session's first event (``+1.234s``), as the default view's transitions are; the
text goes out through :func:`cli.render.echo`, which escapes what a model or a command put
in it.
"""

from __future__ import annotations

from cli.render import one_line, table
from cli.views import Cycle, StageVisit, StepTiming
from protocol.errors import with_code
from protocol.plans.stages import STAGES

__all__ = ["cycle_text", "stage_text", "step_table", "visit_lines"]


def _tokens(tokens_in: int, tokens_out: int, estimated: bool) -> str:
    if not (tokens_in or tokens_out):
        return "-"
    return f"{'~' if estimated else ''}{tokens_in:,}+{tokens_out:,}"


def _took(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f}s"


def step_table(steps: list[StepTiming], *, indent: str = "  ", visit: bool = True) -> list[str]:
    """One row a step: its visit, label, status, time, tries, turns, the model's tool calls,
    tokens in+out (``~``: acode's estimate); no lines when there are no steps."""
    if not steps:
        return []
    head = ["VISIT"] * visit + ["STEP", "STATUS", "TIME", "TRIES", "TURNS", "CALLS", "TOKENS"]
    rows = [head]
    for s in steps:
        rows.append([str(s.visit)] * visit + [s.label, s.status, _took(s.duration_s), str(s.tries), str(s.turns),
                                              str(s.tool_calls), _tokens(s.tokens_in, s.tokens_out, s.estimated)])
    return [indent + line for line in table(rows).splitlines()]


def visit_lines(visit: StageVisit, start: float) -> list[str]:
    """A stage visit: how it began, its figures, each attempt's end, and what happened in it."""
    cycle = f", {visit.cycle_kind} cycle {visit.cycle}" if visit.cycle_kind else ""
    went = "; still in it"
    if visit.left_at is not None and visit.next:
        when = f"+{visit.left_at - start:.3f}s"
        went = f"; left {when} for {visit.next}" if visit.next.split()[0] in STAGES else \
            f"; session {visit.next} {when}"
    lines = [f"{visit.stage} visit {visit.visit}: entered +{visit.entered_at - start:.3f}s from {visit.source}"
             f"{cycle} ({one_line(visit.reason, 120)}){went}"]
    wall = f", wall {visit.wall_s:.3f}s" if visit.wall_s is not None else ""
    cached = f" ({visit.tokens_cached:,} cached)" if visit.tokens_cached else ""
    lines.append(f"  attempts {visit.attempts}; stage time {visit.duration_s:.3f}s{wall}; tokens "
                 f"{visit.tokens_in:,} in{cached} / {visit.tokens_out:,} out; model {visit.model_s:.1f} s")
    for end in visit.finished:
        verdict = "ok" if end.ok else with_code("FAILED", end.code)
        lines.append(f"  attempt {end.attempt} {verdict} in {end.duration_s:.3f}s: {one_line(end.summary, 200)}")
    if visit.plan:
        lines.append(f"  {visit.plan}")
    if visit.steps:
        lines.append("  steps:")
        lines += step_table(visit.steps, indent="    ", visit=False)
    if visit.checks:
        lines.append("  checks:")
        for check in visit.checks:
            result = "passed" if check.passed else "FAILED"
            code = f" (exit {check.exit_code})" if check.exit_code is not None else ""
            evidence = f": {one_line(check.evidence, 160)}" if check.evidence and not check.passed else ""
            lines.append(f"    {check.label} `{one_line(check.command, 80)}` {result}{code}{evidence}")
    if visit.rework:
        lines.append(f"  {one_line(visit.rework, 300)}")
    if visit.tool_calls:
        lines.append(f"  tool calls ({len(visit.tool_calls)}):")
        for call in visit.tool_calls:
            mark = "ok" if call.ok else ("UNKNOWN" if call.outcome == "unknown" else "error")
            target = f" {one_line(call.target, 60)}" if call.target else ""
            lines.append(f"    +{call.at - start:.3f}s {call.tool}{target} ({call.risk}) -> "
                         f"{mark} in {call.duration_ms:.0f} ms: {one_line(call.summary, 100)}")
    for approval in visit.approvals:
        lines.append(f"  {one_line(approval, 200)}")
    for pause in visit.pauses:
        back = f"; resumed +{pause.resumed_at - start:.3f}s ({one_line(pause.resumed, 80)})" \
            if pause.resumed_at is not None else "; not resumed"
        lines.append(f"  paused +{pause.at - start:.3f}s ({pause.kind}): "
                     f"{with_code(one_line(pause.message, 200), pause.code)}{back}")
    return lines


def stage_text(stage: str, found: list[StageVisit], start: float, session_id: str) -> str:
    """``acode show SESSION --stage STAGE``: every visit of the stage."""
    if not found:
        return f"session {session_id}: the {stage} was never entered"
    lines = [f"session {session_id}: {stage}, {len(found)} visit(s)"]
    for visit in found:
        lines += ["", *visit_lines(visit, start)]
    return "\n".join(lines)


def cycle_text(chosen: list[Cycle], start: float, session_id: str, stage: str | None = None) -> str:
    """``acode show SESSION --cycle N``: each stretch of cycle N, its transitions and visits
    (``stage``: only that stage's visits)."""
    lines = [f"session {session_id}"]
    for part in chosen:
        name = f"{part.kind} cycle {part.cycle}" if part.kind else "cycle 0 (the first pass)"
        until = f" to +{part.ended_at - start:.3f}s" if part.ended_at is not None else ""
        lines += ["", f"{name}: from +{part.started_at - start:.3f}s{until}", "  transitions:"]
        for t in part.transitions:
            note = f" ({t.cycle_kind} cycle {t.cycle})" if t.cycle_kind else ""
            lines.append(f"    +{t.at - start:.3f}s {t.source:>8} -> {t.target:<9} {one_line(t.reason, 100)}{note}")
        shown = [v for v in part.visits if stage is None or v.stage == stage]
        if stage is not None and not shown:
            lines.append(f"  no {stage} visit in it")
        for visit in shown:
            lines += ["", *["  " + line for line in visit_lines(visit, start)]]
    return "\n".join(lines)

