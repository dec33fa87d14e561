"""A session's events as one tree of spans: real sessions that crossed a kill -9, a pause and a
resume give one connected tree, built the same every time, named as the GenAI conventions say."""

from __future__ import annotations

import uuid

import pytest

from acode.telemetry import Span, Trace, build_trace, render_tree
from acode.telemetry.spans import step_key
from actors.stages.execution.step import _base_key
from protocol.plans.plan import PlanStep, PlanTask
from protocol.sessions.events import (
    Event,
    SessionCreated,
    StageFinished,
    StepRetried,
    StepStarted,
    ToolCalled,
    Transitioned,
    TurnAnswered,
)
from tests.acode.telemetry.sessions import NAMES, load


def _built(name: str) -> tuple[Trace, list[Event]]:
    session, events = load(name)
    return build_trace(session.id, events, session), events


def _by_name(trace: Trace, prefix: str) -> list[Span]:
    return [s for s in trace.spans if s.name.startswith(prefix)]


def assert_one_tree(trace: Trace) -> None:
    """One root, every parent known, every span reachable from the root, ids unique."""
    ids = [s.span_id for s in trace.spans]
    assert len(ids) == len(set(ids))
    assert [s for s in trace.spans if not s.parent] == [trace.root]
    known = set(ids)
    assert all(s.parent in known for s in trace.spans if s.parent)
    seen = {trace.root.span_id}
    for span in trace.spans[1:]:  # each after its parent
        assert span.parent in seen, span.name
        seen.add(span.span_id)
    assert all(s.start <= s.end for s in trace.spans)


@pytest.mark.parametrize("name", NAMES)
def test_a_killed_and_resumed_session_is_one_tree_built_the_same_every_time(name: str) -> None:
    trace, events = _built(name)
    assert_one_tree(trace)
    assert trace.trace_id == uuid.UUID(trace.session_id).hex
    again, _ = _built(name)
    assert [(s.span_id, s.parent, s.name, s.start, s.end) for s in again.spans] \
        == [(s.span_id, s.parent, s.name, s.start, s.end) for s in trace.spans]


@pytest.mark.parametrize("name", NAMES)
def test_every_turn_is_a_chat_span_in_its_step_and_every_call_an_execute_tool_span(name: str) -> None:
    trace, events = _built(name)
    turns = [e for e in events if isinstance(e, TurnAnswered)]
    calls = [e for e in events if isinstance(e, ToolCalled)]
    spans = {s.span_id: s for s in trace.spans}
    chats = [s for s in _by_name(trace, "chat") if not s.attributes.get("acode.model.summed")]
    assert len(chats) == len(turns)
    assert all(spans[c.parent].name.startswith("step T1/") for c in chats)
    assert sorted(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == sorted(t.prompt_tokens for t in turns)
    tools = _by_name(trace, "execute_tool ")
    assert sorted(t.attributes["gen_ai.tool.call.id"] for t in tools) == sorted(c.key for c in calls)
    writes = [t for t in tools if t.attributes["gen_ai.tool.name"] == "write_file"]
    assert writes and all(spans[w.parent].name.startswith("chat ") for w in writes), "under the turn that asked"
    assert all(w.attributes["acode.tool.risk"] == "write" and w.attributes["gen_ai.operation.name"] == "execute_tool"
               for w in writes)


def test_a_stage_visit_holds_its_attempts_and_the_kill_between_them() -> None:
    trace, events = _built("executor_killed")
    (executor,) = _by_name(trace, "invoke_agent executor")
    assert executor.attributes["acode.attempts"] == 2 and executor.status == "ok"
    retried = [e for e in executor.events if e.name == "stage_retried"]
    assert len(retried) == 1 and "killed by SIGKILL" in str(retried[0].attributes["acode.reason"])
    finished = [e for e in events if isinstance(e, StageFinished) and e.stage == "executor"]
    assert executor.attributes["gen_ai.usage.input_tokens"] == sum(e.tokens_in for e in finished)
    assert [s.name for s in trace.spans if s.parent == trace.root.span_id] \
        == ["invoke_agent planner", "invoke_agent executor", "invoke_agent verifier", "invoke_agent reviewer"]


def test_the_pause_and_the_resume_are_events_of_the_stage_they_stopped() -> None:
    trace, _ = _built("killed_while_pausing_then_resumed")
    (executor,) = _by_name(trace, "invoke_agent executor")
    names = [e.name for e in executor.events]
    assert names.index("pause_requested") < names.index("session_paused") < names.index("session_resumed")
    assert [e.attributes["acode.pause.kind"] for e in executor.events if e.name == "session_paused"] == ["user"]
    assert executor.attributes["acode.attempts"] == 3


def test_a_streamed_turn_has_its_model_and_first_token_time() -> None:
    trace, events = _built("killed_while_pausing_then_resumed")
    chats = [s for s in _by_name(trace, "chat test-model") if "acode.turn" in s.attributes]
    assert chats and all(s.kind == "client" for s in chats)
    for span in chats:
        assert span.attributes["gen_ai.request.model"] == "test-model"
        assert span.attributes["gen_ai.provider.name"] == "ollama"
        assert 0 < float(span.attributes["gen_ai.response.time_to_first_chunk"]) <= span.end - span.start  # type: ignore[arg-type]


def test_the_other_stages_model_calls_are_one_summed_span_per_attempt() -> None:
    trace, events = _built("executor_killed")
    finished: dict[str, StageFinished] = {e.stage: e for e in events
                                          if isinstance(e, StageFinished) and e.stage != "executor"}
    summed = [s for s in _by_name(trace, "chat ") if s.attributes.get("acode.model.summed")]
    spans = {s.span_id: s for s in trace.spans}
    assert sorted(spans[s.parent].attributes["acode.stage"] for s in summed) == sorted(finished)  # type: ignore[type-var]
    for span in summed:
        event = finished[str(spans[span.parent].attributes["acode.stage"])]
        assert span.attributes["acode.model.calls"] == event.model_calls == 1
        assert span.attributes["gen_ai.usage.output_tokens"] == event.tokens_out
        assert span.end - span.start == pytest.approx(event.model_ms / 1000, abs=1e-6)


def test_a_session_cut_short_is_still_one_tree_of_what_happened() -> None:
    """A crashed session's log ends anywhere: the spans it opened end with its last event."""
    session, events = load("executor_killed")
    for cut in (1, 5, 17, 30, len(events) - 1):
        trace = build_trace(session.id, events[:cut])
        assert_one_tree(trace)
        assert trace.root.attributes["acode.session.status"] == "running"
        assert trace.root.end == max(e.at for e in events[:cut])


def test_a_steps_second_try_has_its_own_turns_and_calls() -> None:
    """The executor's keys of a second try carry ``:k2``; its turns count from 1 again."""
    base = step_key("s", 1, "T1", "S1")
    events: list[Event] = [
        SessionCreated(id="e1", session_id="s", seq=1, at=10.0, task="t", workspace="/w"),
        Transitioned(id="e2", session_id="s", seq=2, at=11.0, source="planner", target="executor"),
        StepStarted(id="e3", session_id="s", seq=3, at=11.5, visit=1, task="T1", step="S1"),
        TurnAnswered(id="e4", session_id="s", seq=4, at=12.0, visit=1, task="T1", step="S1", turn=1, duration_ms=400),
        ToolCalled(id="e5", session_id="s", seq=5, at=12.5, key=f"{base}:t1:c0", tool="write_file", duration_ms=100),
        StepRetried(id="e6", session_id="s", seq=6, at=13.0, visit=1, task="T1", step="S1", attempt=2, of=2),
        TurnAnswered(id="e7", session_id="s", seq=7, at=14.0, visit=1, task="T1", step="S1", turn=1, duration_ms=500),
        ToolCalled(id="e8", session_id="s", seq=8, at=14.5, key=f"{base}:k2:t1:c0", tool="write_file"),
        ToolCalled(id="e9", session_id="s", seq=9, at=14.6, key=f"{base}:k2:ctx0", tool="read_file"),
        ToolCalled(id="e10", session_id="s", seq=10, at=14.7, key="s:v1:check:A1", tool="run_terminal"),
    ]
    trace = build_trace("s", events)
    assert_one_tree(trace)
    spans = {s.span_id: s for s in trace.spans}
    parent = {str(s.attributes["gen_ai.tool.call.id"]): spans[s.parent] for s in _by_name(trace, "execute_tool")}
    assert parent[f"{base}:t1:c0"].attributes["acode.try"] == 1
    assert parent[f"{base}:k2:t1:c0"].attributes["acode.try"] == 2
    assert parent[f"{base}:k2:ctx0"].name == "step T1/S1"
    assert parent["s:v1:check:A1"].name == "invoke_agent executor", "the stage at work"
    first = parent[f"{base}:t1:c0"]
    assert first.start == pytest.approx(11.6) and first.end == 12.0  # ended with its event, began its duration before


def test_the_step_key_is_the_executors() -> None:
    for task, step in (("T1", "S1"), ("a-task-with-a-long-label", "and-a-long-step-label")):
        made = _base_key("sess", 3, PlanTask(label=task, title="t", steps=[]),  # type: ignore[call-arg]
                         PlanStep(label=step, title="s", action="write_file"))  # type: ignore[call-arg]
        assert step_key("sess", 3, task, step) == made


def test_the_text_tree_shows_each_span_under_its_parent_with_what_matters() -> None:
    trace, _ = _built("killed_while_pausing_then_resumed")
    text = render_tree(trace)
    lines = text.splitlines()
    assert lines[0] == f"trace {trace.trace_id}  session {trace.session_id}  completed, " \
                       f"{trace.root.end - trace.root.start:.1f} s"
    assert "invoke_agent acode  completed; exit 0" in lines[1]
    assert any("├─ invoke_agent executor  visit 1; 3 attempts; tokens 2,165 in / 12 out; ok" in line
               for line in lines)
    assert any("│  · session_paused  kind=user" in line for line in lines)
    assert any("└─ execute_tool write_file  write; done; ok; greet.txt" in line for line in lines)
