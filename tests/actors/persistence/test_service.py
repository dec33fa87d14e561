"""The actor's dispatch (in-process, on a real store) and its options."""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.persistence.service import PersistenceOptions, dispatch, load_options
from actors.persistence.store import Store
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError, ConfigError
from protocol.messages import (
    Ack,
    BeginToolCall,
    ClaimModelAnswer,
    Commit,
    Committed,
    EventList,
    FinishToolCall,
    GetEvents,
    GetModelAnswers,
    GetPlan,
    GetReplayIndex,
    GetSession,
    GetSteps,
    JournaledRead,
    ListSessions,
    Message,
    ModelAnswerClaim,
    ModelAnswerList,
    PersistenceRequest,
    PlanFound,
    RecordModelAnswer,
    ReplayIndex,
    SessionFound,
    SessionList,
    StepList,
    ToolCallState,
)
from protocol.plans.results import ModelAnswer, ToolResult
from protocol.transport.spec import ActorSpec, Endpoints
from tests.actors.persistence import records

SESSION = new_id()

# A minimal valid instance of every request, and the reply type it must get.
MINIMAL: dict[type[Message], tuple[Callable[[], Message], type[Message]]] = {
    Commit: (lambda: Commit(session_id=SESSION), Committed),
    GetSession: (lambda: GetSession(session_id=SESSION), SessionFound),
    ListSessions: (lambda: ListSessions(), SessionList),
    GetEvents: (lambda: GetEvents(session_id=SESSION), EventList),
    GetPlan: (lambda: GetPlan(session_id=SESSION), PlanFound),
    GetSteps: (lambda: GetSteps(session_id=SESSION, visit=1), StepList),
    GetReplayIndex: (lambda: GetReplayIndex(session_id=SESSION, stage="executor"), ReplayIndex),
    GetModelAnswers: (lambda: GetModelAnswers(session_id=SESSION), ModelAnswerList),
    BeginToolCall: (lambda: BeginToolCall(key="k1", session_id=SESSION, tool="read_file"), ToolCallState),
    FinishToolCall: (lambda: FinishToolCall(key="k2", session_id=SESSION, result=records.tool_result("k2"),
                                            event=records.tool_called(SESSION, "k2")), Committed),
    ClaimModelAnswer: (lambda: ClaimModelAnswer(request_hash="h1", session_id=SESSION, stage="planner"),
                       ModelAnswerClaim),
    RecordModelAnswer: (lambda: RecordModelAnswer(request_hash="h0", answer=records.answer("hi")), Ack),
}


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    with Store(home / "acode.db") as store:
        store.commit(SESSION, snapshot=records.snapshot(SESSION), plan=records.plan(1))
        store.claim_model_answer("h0", session_id=SESSION, stage="planner")
        yield store


def test_the_minimal_requests_cover_every_persistence_request_type() -> None:
    assert set(MINIMAL) == set(typing.get_args(PersistenceRequest))


@pytest.mark.parametrize("kind", typing.get_args(PersistenceRequest), ids=lambda kind: kind.__name__)
def test_dispatch_answers_every_request_type_with_its_reply(store: Store, kind: type[Message]) -> None:
    build, reply_type = MINIMAL[kind]
    reply, _ = dispatch(store, build())  # type: ignore[arg-type]
    assert type(reply) is reply_type


def test_dispatch_returns_for_publication_only_the_events_inserted_now(store: Store) -> None:
    event = records.created(SESSION)
    reply, published = dispatch(store, Commit(session_id=SESSION, events=[event]))
    assert reply == Committed(seqs=[1])
    assert [(e.id, e.seq) for e in published] == [(event.id, 1)]
    assert dispatch(store, Commit(session_id=SESSION, events=[event])) == (Committed(seqs=[1]), [])


def test_a_commit_asking_for_a_replay_index_gets_it_with_what_it_wrote(store: Store) -> None:
    """The coordinator's transition commit reads the next stage's replay index (RunStage.replay)."""
    answer = RecordModelAnswer(request_hash="h1", answer=ModelAnswer(content="x"), seq=1, session_id=SESSION,
                               stage="planner")
    read = JournaledRead(key="k-read", result=ToolResult(key="k-read", tool="read_file", ok=True, output="a"))
    reply, _ = dispatch(store, Commit(session_id=SESSION, answers=[answer], reads=[read], index_for="planner"))
    assert isinstance(reply, Committed) and reply.index is not None
    assert reply.index.claims == {"h0": 0, "h1": 1} and reply.index.tool_keys == ["k-read"]
    plain, _ = dispatch(store, Commit(session_id=SESSION))
    assert isinstance(plain, Committed) and plain.index is None



def test_a_request_that_fails_in_a_group_leaves_nothing_of_itself_and_the_others_commit(store: Store) -> None:
    """One savepoint per request (Store.item): the read and the answer a failing commit wrote
    before its refused event are undone with it; the requests around it are kept."""
    before = Commit(session_id=SESSION, events=[records.created(SESSION)])
    read = JournaledRead(key="k-lost", result=ToolResult(key="k-lost", tool="read_file", ok=True, output="a"))
    answer = RecordModelAnswer(request_hash="h-lost", answer=ModelAnswer(content="x"), seq=5, session_id=SESSION,
                               stage="executor")
    failing = Commit(session_id=SESSION, answers=[answer], reads=[read], events=[records.created(new_id())])
    after = Commit(session_id=SESSION, events=[records.transitioned(SESSION)])
    outcomes: list[str] = []
    with store.group():
        for request in (before, failing, after):
            try:
                with store.item(codec.encode(request)):
                    dispatch(store, request)
                outcomes.append("ok")
            except AcodeError as exc:
                outcomes.append(exc.code)
    assert outcomes == ["ok", "ACODE-PROTO-002", "ok"]
    assert [event.seq for event in store.events(SESSION)] == [1, 2]
    index = store.replay_index(SESSION, "executor")
    assert "k-lost" not in index.tool_keys and "h-lost" not in index.claims


def test_a_lone_request_needs_no_savepoint_and_when_it_fails_its_group_rolls_back(store: Store) -> None:
    seen: list[str] = []
    store._connection().set_trace_callback(seen.append)
    read = JournaledRead(key="k-alone", result=ToolResult(key="k-alone", tool="read_file", ok=True, output="a"))
    failing = Commit(session_id=SESSION, reads=[read], events=[records.created(new_id())])  # another session's
    with store.group(), pytest.raises(AcodeError), store.item(codec.encode(failing), alone=True):
        dispatch(store, failing)
    assert not [statement for statement in seen if "SAVEPOINT" in statement] and seen[-1] == "ROLLBACK"
    assert "k-alone" not in store.replay_index(SESSION, "executor").tool_keys
    good = Commit(session_id=SESSION, events=[records.created(SESSION)])
    with store.group(), store.item(codec.encode(good), alone=True):  # the next group commits again
        dispatch(store, good)
    assert seen[-1] == "COMMIT" and [event.seq for event in store.events(SESSION)] == [1]

def _spec(home: Path, **options: object) -> ActorSpec:
    endpoints = Endpoints(broker="ipc://b", events_in="ipc://i", events_out="ipc://o", supervisor="ipc://s")
    return ActorSpec(actor="persistence", instance="persistence", epoch=1, home=str(home),
                     endpoints=endpoints, options=options)


def test_options_default_to_full_sync_and_the_database_in_the_home(home: Path) -> None:
    assert load_options(_spec(home)) == (PersistenceOptions(synchronous="full"), home / "acode.db")


def test_a_relative_database_option_lives_in_the_home_and_an_absolute_one_stays(home: Path) -> None:
    assert load_options(_spec(home, database="other.db"))[1] == home / "other.db"
    assert load_options(_spec(home, database="/var/x.db", synchronous="normal")) == (
        PersistenceOptions(database="/var/x.db", synchronous="normal"), Path("/var/x.db"))


def test_an_unknown_option_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_options(_spec(home, databse="typo.db"))
    assert info.value.code == "ACODE-CFG-001"
    assert info.value.message == ("persistence options {'databse': 'typo.db'} rejected: Object contains "
                                  "unknown field `databse`; allowed keys are database and synchronous "
                                  "(full|normal)")


def test_answers_carried_by_a_commit_or_a_claim_are_recorded_with_it_and_an_unclaimed_one_is_dropped(
        store: Store) -> None:
    """A stage sends the model's last answer with its next write (actors.llm.recorded): the
    write's own transaction records it first; a hash never claimed fails nothing (a cache)."""
    carried = [RecordModelAnswer(request_hash="h0", answer=records.answer("first")),
               RecordModelAnswer(request_hash="never-claimed", answer=records.answer("lost"))]
    reply, inserted = dispatch(store, Commit(session_id=SESSION, events=[records.transitioned(SESSION)],
                                             answers=carried))
    assert isinstance(reply, Committed) and len(reply.seqs) == 1 and len(inserted) == 1
    claim, _ = dispatch(store, ClaimModelAnswer(request_hash="h0", session_id=SESSION, stage="planner"))
    assert isinstance(claim, ModelAnswerClaim) and claim.answer == records.answer("first")
    reply, _ = dispatch(store, ClaimModelAnswer(
        request_hash="h2", session_id=SESSION, stage="planner",
        answers=[RecordModelAnswer(request_hash="h0", answer=records.answer("second"))]))
    assert isinstance(reply, ModelAnswerClaim) and reply.seq == 1 and reply.answer is None
    claim, _ = dispatch(store, ClaimModelAnswer(request_hash="h0", session_id=SESSION, stage="planner"))
    assert isinstance(claim, ModelAnswerClaim) and claim.answer == records.answer("first")  # the first stays
    claim, _ = dispatch(store, ClaimModelAnswer(request_hash="never-claimed", session_id=SESSION, stage="planner"))
    assert isinstance(claim, ModelAnswerClaim) and claim.answer is None and claim.seq == 2


def test_get_model_answers_reads_the_recorded_answers_by_stage_and_place_leaving_claims_without_one(
        store: Store) -> None:
    """``acode run --verbose`` and ``acode show --answers``: answers after a place, each stage's last place."""
    for seq, text in enumerate(["first", "second"]):
        store.record_model_answers([RecordModelAnswer(request_hash=f"e{seq}", answer=ModelAnswer(content=text),
                                                      seq=seq, session_id=SESSION, stage="executor")])
    store.claim_model_answer("e-pending", session_id=SESSION, stage="executor")  # place 2, no answer yet
    store.record_model_answer("h0", ModelAnswer(content="the plan"))  # the fixture's planner claim, place 0

    reply, published = dispatch(store, GetModelAnswers(session_id=SESSION, stage="executor"))
    assert isinstance(reply, ModelAnswerList) and published == []
    assert [(a.stage, a.seq, a.answer.content) for a in reply.answers] == [("executor", 0, "first"),
                                                                          ("executor", 1, "second")]
    assert reply.last == {"executor": 1, "planner": 0}
    after, _ = dispatch(store, GetModelAnswers(session_id=SESSION, stage="executor", after_seq=0))
    assert isinstance(after, ModelAnswerList) and [a.answer.content for a in after.answers] == ["second"]
    every, _ = dispatch(store, GetModelAnswers(session_id=SESSION))  # in the order claimed
    assert isinstance(every, ModelAnswerList)
    assert [a.answer.content for a in every.answers] == ["the plan", "first", "second"]
    only_last, _ = dispatch(store, GetModelAnswers(session_id=SESSION, limit=0))
    assert only_last == ModelAnswerList(last={"executor": 1, "planner": 0})
