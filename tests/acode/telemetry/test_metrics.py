"""``acode metrics``: the Prometheus text parser reads it, and its counters are the figures
``acode show`` gives for the same sessions (its per-stage table, its events)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from acode.telemetry import Restarts, SessionRecord, exposition
from cli.progress import stage_totals
from protocol.sessions.events import SessionPaused, StageFinished, ToolCalled, Transitioned
from tests.acode.telemetry.sessions import NAMES, load


def _records() -> list[SessionRecord]:
    return [SessionRecord(*load(name)) for name in NAMES]


def samples(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample the parser read, by sample name and sorted labels."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def matches_show(text: str, records: list[SessionRecord]) -> None:
    """The counters of ``text`` are what ``acode show`` reports for ``records``."""
    got = samples(text)
    events = [e for r in records for e in r.events]
    statuses = Counter(r.session.status for r in records)
    assert {dict(k)["status"]: v for k, v in got["acode_sessions"].items() if v} == statuses
    transitions = Counter((e.source, e.target) for e in events if isinstance(e, Transitioned))
    assert {(dict(k)["source"], dict(k)["target"]): v for k, v in got["acode_transitions_total"].items()} \
        == transitions
    shown: dict[str, Any] = {}
    for record in records:  # show's per-stage table, summed over the sessions
        for total in stage_totals(record.events):
            row = shown.setdefault(total.stage, Counter())
            row.update({"runs": total.runs, "in": total.tokens_in, "out": total.tokens_out})
            row["model_s"] = row.get("model_s", 0) + total.model_s
            row["time_s"] = row.get("time_s", 0) + total.duration_s
    runs: Counter[str] = Counter()
    for key, value in got["acode_stage_runs_total"].items():
        runs[dict(key)["stage"]] += int(value)
    tokens: Counter[tuple[str, str]] = Counter()
    for key, value in got["acode_model_tokens_total"].items():
        tokens[(dict(key)["stage"], dict(key)["type"])] += int(value)
    model_s: dict[str, float] = {}
    for key, value in got["acode_model_seconds_total"].items():
        model_s[dict(key)["stage"]] = model_s.get(dict(key)["stage"], 0.0) + value
    for stage, row in shown.items():
        assert runs[stage] == row["runs"] == got["acode_stage_duration_seconds_count"][(("stage", stage),)]
        assert (tokens[(stage, "input")], tokens[(stage, "output")]) == (row["in"], row["out"])
        assert model_s[stage] == pytest.approx(row["model_s"], abs=0.01)
        assert got["acode_stage_duration_seconds_sum"][(("stage", stage),)] == pytest.approx(row["time_s"], abs=0.01)
    pauses = Counter(e.kind for e in events if isinstance(e, SessionPaused))
    assert {dict(k)["kind"]: v for k, v in got.get("acode_escalations_total", {}).items()} == pauses
    tools = sum(1 for e in events if isinstance(e, ToolCalled))
    assert sum(got["acode_tool_calls_total"].values()) == tools
    assert sum(v for k, v in got["acode_tool_call_duration_seconds_count"].items()) == tools


def test_the_metrics_parse_and_match_what_show_reports() -> None:
    records = _records()
    matches_show(exposition(records), records)


def test_histograms_are_cumulative_and_end_with_their_count() -> None:
    got = samples(exposition(_records()))
    buckets = got["acode_stage_duration_seconds_bucket"]
    for stage in ("planner", "executor", "verifier", "reviewer"):
        mine = sorted(((float(dict(k)["le"]), v) for k, v in buckets.items() if dict(k)["stage"] == stage))
        counts = [v for _, v in mine]
        assert counts == sorted(counts) and mine[-1][0] == float("inf")
        assert counts[-1] == got["acode_stage_duration_seconds_count"][(("stage", stage),)]


def test_tokens_are_labelled_by_stage_and_model() -> None:
    got = samples(exposition(_records()))
    models = {dict(k)["model"] for k in got["acode_model_tokens_total"]}
    assert models == {"scripted", "test-model"}
    session, events = load("executor_killed")
    old = [msgspec.structs.replace(e, model="", provider="") if isinstance(e, StageFinished) else e for e in events]
    got = samples(exposition([SessionRecord(session, old)]))
    assert {dict(k)["model"] for k in got["acode_model_tokens_total"]} == {"unknown"}, "events from before the field"


def test_restarts_are_counted_by_actor_with_labels_escaped() -> None:
    text = exposition([], [Restarts(actor="executor", instance="executor-1", restarts=2),
                           Restarts(actor='odd"name\\', instance="x\ny", restarts=1)])
    got = samples(text)["acode_actor_restarts_total"]
    assert got[(("actor", "executor"), ("instance", "executor-1"))] == 2
    assert got[(("actor", 'odd"name\\'), ("instance", "x\ny"))] == 1
    assert samples(text)["acode_sessions"] == {(("status", s),): 0 for s in
                                               ("running", "paused", "completed", "failed", "cancelled")}
