"""The store on real SQLite files: idempotent writes, seq numbering, first-write-wins, journals."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.persistence.store import Store
from protocol.basics.ids import new_id
from protocol.errors import NotFoundError, ProtocolError, StorageError
from protocol.messages import ModelAnswerClaim, RecordModelAnswer, ToolCallState
from protocol.plans.results import Requirement, Usage
from protocol.plans.stages import SessionStatus
from protocol.policy.budget import Spent
from protocol.sessions.events import Event
from tests.actors.persistence import records

NOW = 1_000.0


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    with Store(home / "acode.db", clock=lambda: NOW) as store:
        yield store


@pytest.fixture
def session(store: Store) -> str:
    session_id = new_id()
    store.commit(session_id, snapshot=records.snapshot(session_id))
    return session_id


def _rows(store: Store, table: str) -> int:
    with closing(sqlite3.connect(store.path)) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


# -- events -------------------------------------------------------------------------------


def test_a_commit_with_a_snapshot_creates_the_session_and_numbers_events_from_1(store: Store) -> None:
    session_id = new_id()
    events: list[Event] = [records.created(session_id), records.transitioned(session_id)]
    appended = store.commit(session_id, events, snapshot=records.snapshot(session_id))
    assert appended.seqs == [1, 2]
    assert [e.seq for e in appended.inserted] == [1, 2]
    assert store.session(session_id) == records.snapshot(session_id)
    assert store.events(session_id) == appended.inserted


def test_a_retried_commit_returns_the_same_seqs_and_stores_nothing_new(store: Store, session: str) -> None:
    events: list[Event] = [records.created(session), records.transitioned(session)]
    first = store.commit(session, events)
    again = store.commit(session, events)
    assert again.seqs == first.seqs == [1, 2]
    assert again.inserted == []
    assert _rows(store, "events") == 2


def test_a_retry_mixed_with_new_events_numbers_only_the_new_ones(store: Store, session: str) -> None:
    old = records.created(session)
    store.commit(session, [old])
    new = records.transitioned(session)
    appended = store.commit(session, [new, old])
    assert appended.seqs == [2, 1]
    assert [e.id for e in appended.inserted] == [new.id]


def test_an_event_repeated_inside_one_commit_is_stored_once(store: Store, session: str) -> None:
    event = records.created(session)
    appended = store.commit(session, [event, event])
    assert appended.seqs == [1, 1]
    assert len(appended.inserted) == 1


def test_seqs_are_contiguous_per_session_and_independent_between_sessions(store: Store) -> None:
    a, b = new_id(), new_id()
    store.commit(a, snapshot=records.snapshot(a))
    store.commit(b, snapshot=records.snapshot(b))
    for _ in range(5):
        store.commit(a, [records.transitioned(a), records.transitioned(a)])
        store.commit(b, [records.transitioned(b)])
    assert [e.seq for e in store.events(a)] == list(range(1, 11))
    assert [e.seq for e in store.events(b)] == list(range(1, 6))


def test_an_event_without_a_time_gets_the_commit_time_and_a_given_time_is_kept(store: Store, session: str) -> None:
    untimed, timed = records.created(session), records.created(session, at=42.5)
    store.commit(session, [untimed, timed])
    assert [e.at for e in store.events(session)] == [NOW, 42.5]


def test_events_after_a_seq_come_in_seq_order_up_to_the_limit(store: Store, session: str) -> None:
    store.commit(session, [records.transitioned(session) for _ in range(6)])
    assert [e.seq for e in store.events(session, after_seq=2, limit=3)] == [3, 4, 5]
    assert store.events(new_id()) == []


def test_a_commit_without_a_snapshot_to_an_unknown_session_is_not_found(store: Store) -> None:
    session_id = new_id()
    with pytest.raises(NotFoundError) as info:
        store.commit(session_id, [records.created(session_id)])
    assert info.value.code == "ACODE-STORE-002"
    assert str(info.value) == (f"session {session_id} not found; list sessions with `acode sessions` "
                               "(ACODE-STORE-002)")
    assert _rows(store, "events") == 0


def test_a_refused_commit_stores_nothing_of_itself(store: Store, session: str) -> None:
    stranger = records.created(new_id())
    with pytest.raises(ProtocolError) as info:
        store.commit(session, [records.created(session), stranger])
    assert info.value.code == "ACODE-PROTO-002"
    assert info.value.message == (f"event {stranger.id} belongs to session {stranger.session_id}, but the "
                                  f"request is for session {session}; send each session's records in "
                                  "its own request")
    assert _rows(store, "events") == 0


def test_a_commit_that_requires_events_not_stored_yet_is_refused_retryably_and_passes_once_they_are(
        store: Store, session: str) -> None:
    stage_write = records.tool_called(session, f"{session}:t1")  # the stage's last write, still on its way
    transition = records.transitioned(session)
    requires = Requirement(events=[stage_write.id])
    with pytest.raises(StorageError) as info:
        store.commit(session, [transition], requires=requires)
    assert (info.value.code, info.value.retryable) == ("ACODE-STORE-004", True)
    assert stage_write.id in info.value.message and session in info.value.message
    assert [e.id for e in store.events(session)] == []  # nothing of the refused commit
    store.commit(session, [stage_write])  # the stage's write lands
    store.commit(session, [transition], requires=requires)
    assert [e.id for e in store.events(session)] == [stage_write.id, transition.id]  # in the order they depend


# -- sessions -----------------------------------------------------------------------------


def test_a_later_snapshot_replaces_the_session_but_keeps_its_creation_time(store: Store, session: str) -> None:
    later = records.snapshot(session, status="completed", created_at=999.0, updated_at=200.0)
    store.commit(session, snapshot=later)
    assert store.session(session) == later
    with closing(sqlite3.connect(store.path)) as conn:
        row = conn.execute("SELECT status, created_at, updated_at FROM sessions").fetchone()
    assert row == ("completed", 100.0, 200.0)


def test_sessions_are_listed_newest_first_and_filtered_by_status(store: Store) -> None:
    ids = [new_id() for _ in range(4)]
    statuses: list[SessionStatus] = ["running", "completed", "running", "failed"]
    for n, (session_id, status) in enumerate(zip(ids, statuses, strict=True)):
        store.commit(session_id, snapshot=records.snapshot(session_id, status=status, created_at=float(n)))
    assert [s.id for s in store.sessions()] == ids[::-1]
    assert [s.id for s in store.sessions(["running", "failed"])] == [ids[3], ids[2], ids[0]]
    assert [s.id for s in store.sessions(limit=2)] == [ids[3], ids[2]]


def test_an_unknown_session_is_not_found_with_what_to_do(store: Store) -> None:
    with pytest.raises(NotFoundError) as info:
        store.session("0193-missing")
    assert str(info.value) == ("session 0193-missing not found; list sessions with `acode sessions` "
                               "(ACODE-STORE-002)")


# -- plans and steps ----------------------------------------------------------------------


def test_the_first_write_of_a_plan_version_wins_and_version_0_reads_the_latest(store: Store, session: str) -> None:
    store.commit(session, plan=records.plan(1, "first"))
    store.commit(session, plan=records.plan(1, "rewritten"))
    store.commit(session, plan=records.plan(2, "second"))
    assert store.plan(session, 1).goal == "first"
    assert store.plan(session, 0).goal == "second"
    assert _rows(store, "plans") == 2


def test_a_missing_plan_is_not_found_with_what_to_do(store: Store, session: str) -> None:
    with pytest.raises(NotFoundError) as latest:
        store.plan(session)
    assert str(latest.value) == (f"session {session} has no plan yet; the planner records one when it "
                                 "finishes (ACODE-STORE-002)")
    store.commit(session, plan=records.plan(1))
    with pytest.raises(NotFoundError) as version:
        store.plan(session, 3)
    assert str(version.value) == (f"plan version 3 of session {session} not found; ask for version 0 "
                                  "to get the latest (ACODE-STORE-002)")


def test_a_draft_plan_without_a_version_is_refused(store: Store, session: str) -> None:
    with pytest.raises(ProtocolError) as info:
        store.commit(session, plan=records.plan(0))
    assert info.value.code == "ACODE-PROTO-002"
    assert "finalize the plan (versions start at 1)" in info.value.message


def test_the_first_write_of_a_step_wins_and_a_visit_lists_steps_in_insertion_order(store: Store, session: str) -> None:
    store.commit(session, steps=[records.step(session, name="S2", summary="first")])
    store.commit(session, steps=[records.step(session, name="S1")])
    store.commit(session, steps=[records.step(session, name="S2", summary="again")])
    store.commit(session, steps=[records.step(session, visit=2, name="S1")])
    assert [(s.step, s.summary) for s in store.steps(session, 1)] == [("S2", "first"), ("S1", "done")]
    assert [s.step for s in store.steps(session, 2)] == ["S1"]
    assert store.steps(session, 3) == []


# -- tool calls ---------------------------------------------------------------------------


def test_a_tool_call_goes_from_new_to_pending_to_done_keeping_the_first_pre_image(store: Store, session: str) -> None:
    begin: dict[str, Any] = dict(session_id=session, tool="write_file", arguments={"path": "hello.py"}, risk="write")
    assert store.begin_tool_call("k1", pre_image="v1", **begin) == ToolCallState(state="new", pre_image="v1")
    assert store.begin_tool_call("k1", pre_image="v2", **begin) == ToolCallState(state="pending", pre_image="v1")
    result = records.tool_result("k1")
    store.finish_tool_call("k1", session_id=session, result=result, event=records.tool_called(session, "k1"))
    assert store.begin_tool_call("k1", pre_image="v3", **begin) == ToolCallState(
        state="done", pre_image="v1", result=result)


def test_a_second_finish_keeps_the_first_result_and_does_not_repeat_the_event(store: Store, session: str) -> None:
    store.begin_tool_call("k1", session_id=session, tool="write_file")
    event = records.tool_called(session, "k1")
    first = store.finish_tool_call("k1", session_id=session, result=records.tool_result("k1", "first"),
                                   event=event)
    again = store.finish_tool_call("k1", session_id=session, result=records.tool_result("k1", "second"),
                                   event=event)
    assert first.seqs == again.seqs == [1]
    assert again.inserted == []
    assert store.begin_tool_call("k1", session_id=session, tool="write_file").result == records.tool_result(
        "k1", "first")


def test_finishing_a_call_without_an_intent_journals_it_as_done(store: Store, session: str) -> None:
    result = records.tool_result("k9")
    store.finish_tool_call("k9", session_id=session, result=result, event=records.tool_called(session, "k9"))
    state = store.begin_tool_call("k9", session_id=session, tool="write_file")
    assert state == ToolCallState(state="done", result=result)


def test_a_result_journaled_before_results_said_a_written_hash_still_decodes_without_one(
        store: Store, session: str) -> None:
    """A journal written by an acode whose ToolResult had no ``sha256`` (the row as it wrote
    it, a msgpack map of the fields then set) replays: the executor then falls back to a
    write_file's content, as it did then."""
    store.begin_tool_call("k1", session_id=session, tool="modify_file", risk="write", pre_image="absent")
    old = msgspec.msgpack.encode({"key": "k1", "tool": "modify_file", "ok": True, "output": "applied 1 edit to a.py",
                                  "risk": "write", "path": "a.py"})
    with closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("UPDATE tool_calls SET result = ? WHERE key = 'k1'", (old,))
    state = store.begin_tool_call("k1", session_id=session, tool="modify_file")
    assert state.state == "done" and state.result is not None
    assert (state.result.output, state.result.path, state.result.sha256) == ("applied 1 edit to a.py", "a.py", "")


def test_finishing_a_call_of_an_unknown_session_stores_nothing(store: Store) -> None:
    session_id = new_id()
    with pytest.raises(NotFoundError) as info:
        store.finish_tool_call("k1", session_id=session_id, result=records.tool_result("k1"),
                               event=records.tool_called(session_id, "k1"))
    assert info.value.code == "ACODE-STORE-002"
    assert _rows(store, "tool_calls") == 0


# -- model answers ------------------------------------------------------------------------


def test_claims_count_0_1_2_per_session_and_stage_and_a_known_hash_keeps_its_place(store: Store) -> None:
    a, b = new_id(), new_id()
    seqs = [store.claim_model_answer(h, session_id=a, stage="executor").seq for h in ("h1", "h2", "h3")]
    assert seqs == [0, 1, 2]
    assert store.claim_model_answer("h2", session_id=a, stage="executor") == ModelAnswerClaim(seq=1)
    assert store.claim_model_answer("p1", session_id=a, stage="planner").seq == 0
    assert store.claim_model_answer("x1", session_id=b, stage="executor").seq == 0
    assert store.claim_model_answer("h4", session_id=a, stage="executor").seq == 3


def test_a_recorded_answer_is_served_to_later_claims_and_the_first_answer_stays(store: Store) -> None:
    session_id = new_id()
    store.claim_model_answer("h1", session_id=session_id, stage="planner")
    store.record_model_answer("h1", records.answer("first"))
    store.record_model_answer("h1", records.answer("second"))
    claim = store.claim_model_answer("h1", session_id=session_id, stage="planner")
    assert claim == ModelAnswerClaim(seq=0, answer=records.answer("first"))


def test_usage_counts_each_answer_and_each_counted_call_once_whatever_is_resent(store: Store, session: str) -> None:
    """The budget's counts (protocol.policy.budget): the first stored answer of a hash, by any of
    the three ways an answer is written, and each counted tool_called event, once."""
    answer = msgspec.structs.replace(records.answer("a"), usage=Usage(prompt_tokens=100, completion_tokens=7))
    store.claim_model_answer("h1", session_id=session, stage="planner")
    for _ in range(2):
        store.record_model_answer("h1", answer, model_ms=250.0)
        store.record_model_answers([RecordModelAnswer(request_hash="h1", answer=answer, model_ms=250.0)])
        store.record_model_answers([RecordModelAnswer(request_hash="h2", answer=answer, seq=5, session_id=session,
                                                      stage="executor", model_ms=50.0)])
    counted = msgspec.structs.replace(records.tool_called(session, "k1"), counted=True)
    acode_own = records.tool_called(session, "k2")
    for _ in range(2):
        store.finish_tool_call("k1", session_id=session, result=records.tool_result("k1"), event=counted)
        store.commit(session, [acode_own])
    assert store.spent(session) == Spent(tokens_in=200, tokens_out=14, tool_calls=1, model_ms=300.0)
    assert store.replay_index(session, "planner").spent == store.spent(session)
    assert store.spent(new_id()) == Spent()


def test_recording_an_answer_for_an_unclaimed_hash_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError) as info:
        store.record_model_answer("h-unknown", records.answer("x"))
    assert str(info.value) == ("model answer claim h-unknown not found; claim the request hash before "
                               "recording its answer (ACODE-STORE-002)")


def test_a_finish_meeting_a_journaled_result_answers_it_and_appends_no_second_event(
        store: Store, session: str) -> None:
    """A call without side effects is run before anything is journaled; a second run of it
    (a replayed stage) learns from its finish that a result was journaled first."""
    first = store.finish_tool_call("r1", session_id=session, result=records.tool_result("r1", "the bytes"),
                                   event=records.tool_called(session, "r1"))
    assert first.first_result is None and first.seqs == [1]
    again = store.finish_tool_call("r1", session_id=session, result=records.tool_result("r1", "changed since"),
                                   event=records.tool_called(session, "r1"))
    assert again.first_result == records.tool_result("r1", "the bytes")
    assert again.seqs == [] and again.inserted == []
    assert [e.seq for e in store.events(session)] == [1]


def _statements(store: Store) -> list[str]:
    seen: list[str] = []
    store._connection().set_trace_callback(seen.append)
    return seen


def _commit_levels(seen: list[str], start: str = "FULL") -> list[str]:
    """The ``synchronous`` level each COMMIT of the trace ran at (the store's level is
    ``start`` before it)."""
    level, levels = start, []
    for statement in seen:
        if statement.startswith("PRAGMA synchronous = "):
            level = statement.removeprefix("PRAGMA synchronous = ")
        elif statement == "COMMIT":
            levels.append(level)
    return levels


def test_a_rerun_safe_result_commits_without_waiting_for_the_disk_and_everything_else_with(
        store: Store, session: str) -> None:
    seen = _statements(store)
    store.finish_tool_call("r1", session_id=session, result=records.tool_result("r1"),
                           event=records.tool_called(session, "r1"), rerun_safe=True)
    store.finish_tool_call("r2", session_id=session, result=records.tool_result("r2"),
                           event=records.tool_called(session, "r2"), rerun_safe=True)
    store.finish_tool_call("w1", session_id=session, result=records.tool_result("w1"),
                           event=records.tool_called(session, "w1"))
    store.commit(session, [records.transitioned(session)])
    assert _commit_levels(seen) == ["NORMAL", "NORMAL", "FULL", "FULL"]
    # the level is switched only when it changes, and never inside a transaction
    assert [s for s in seen if s.startswith("PRAGMA")] == ["PRAGMA synchronous = NORMAL", "PRAGMA synchronous = FULL"]
    assert {seen[i + 1] for i, s in enumerate(seen) if s.startswith("PRAGMA")} == {"BEGIN IMMEDIATE"}
    with closing(sqlite3.connect(store.path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM tool_calls WHERE result IS NOT NULL").fetchone() == (3,)


def test_a_group_is_relaxed_only_when_asked_and_a_store_at_normal_is_left_alone(store: Store, home: Path) -> None:
    seen = _statements(store)
    with store.group(relaxed=True):
        pass
    with store.group():
        pass
    assert _commit_levels(seen) == ["NORMAL", "FULL"]
    with Store(home / "normal.db", synchronous="normal") as normal:
        seen = _statements(normal)
        with normal.group(relaxed=True):
            pass
        assert not [s for s in seen if s.startswith("PRAGMA")]


def test_the_model_answer_cache_commits_relaxed(store: Store, session: str) -> None:
    seen = _statements(store)
    store.claim_model_answer("h" * 64, session_id=session, stage="executor")
    store.record_model_answer("h" * 64, records.answer("hi"))
    assert _commit_levels(seen) == ["NORMAL", "NORMAL"]
