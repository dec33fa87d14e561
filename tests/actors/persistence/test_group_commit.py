"""Group commit: several queued writes, one transaction, nothing acknowledged before it.

On the store: a group's writes become durable together or not at all, and a failing write
undoes only itself. On the real process: persistence is killed with SIGKILL after a group's
writes ran and before its commit (the fault drill ``ACODE_FAULT_KILL_BEFORE_GROUP_COMMIT``);
the SQLite file then holds none of that group and no sender had an answer for any of it,
and after a restart the resends store every write exactly once.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace as msgspec_replace

from actors.persistence.service import FAULT_KILL_BEFORE_COMMIT, PARK_S
from actors.persistence.store import Store
from broker.client import Client
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError, ProtocolError
from protocol.messages import Commit, GetEvents
from protocol.plans.results import Requirement
from tests.actors.persistence import records
from tests.harness import Harness, wait_until

REPLY = codec.PERSISTENCE_REPLY


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    with Store(home / "acode.db") as store:
        yield store


def _event_ids(path: Path) -> list[str]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM events ORDER BY session_id, seq")]


def test_a_group_is_durable_only_when_it_ends(store: Store, home: Path) -> None:
    sid = new_id()
    first, second = records.created(sid), records.transitioned(sid)
    with store.group():
        store.commit(sid, [first], snapshot=records.snapshot(sid))
        store.commit(sid, [second])
        assert [e.id for e in store.events(sid)] == [first.id, second.id]  # the group sees its writes
        assert _event_ids(home / "acode.db") == []  # nobody else does: nothing is committed yet
    assert _event_ids(home / "acode.db") == [first.id, second.id]


def test_a_group_that_raises_leaves_nothing(store: Store, home: Path) -> None:
    sid = new_id()
    with pytest.raises(RuntimeError, match="stop"), store.group():
        store.commit(sid, [records.created(sid)], snapshot=records.snapshot(sid))
        raise RuntimeError("stop")
    assert _event_ids(home / "acode.db") == []
    store.commit(sid, [records.created(sid)], snapshot=records.snapshot(sid))  # the store still works
    assert len(_event_ids(home / "acode.db")) == 1


def test_a_failing_write_in_a_group_undoes_only_itself(store: Store, home: Path) -> None:
    sid, other = new_id(), new_id()
    kept = records.created(sid)
    with store.group():
        store.commit(sid, [kept], snapshot=records.snapshot(sid))
        with pytest.raises(ProtocolError) as refused:
            # the first event is fine, the second names another session: the whole write goes
            store.commit(sid, [records.transitioned(sid), records.transitioned(other)])
        assert refused.value.code == "ACODE-PROTO-002"
        later = records.transitioned(sid)
        store.commit(sid, [later])
    assert _event_ids(home / "acode.db") == [kept.id, later.id]
    assert [e.seq for e in store.events(sid)] == [1, 2]


def test_groups_do_not_nest(store: Store) -> None:
    with store.group(), pytest.raises(RuntimeError, match="groups do not nest"), store.group():
        pass


def test_a_group_killed_before_its_commit_is_all_lost_unacknowledged_then_resent_once(harness: Harness) -> None:
    total, window = 300, 32
    harness.start("broker")
    victim = harness.start("persistence", env={FAULT_KILL_BEFORE_COMMIT: "2"})
    client: Client = harness.client(resend_interval=0.2)
    sid = new_id()
    client.call("persistence", Commit(session_id=sid, snapshot=records.snapshot(sid)), timeout=10, decoder=REPLY)
    commits = records.CommitPump(client, sid, total=total, window=window, timeout=60, poll_ms=20)
    pump, ids, answers = commits.pump, commits.ids, commits.answers

    def killed() -> bool:
        if victim.poll() is not None:
            return True
        assert pump() < total, "every commit was answered and no group of 2 or more ever formed"
        return False

    wait_until(killed, timeout=60, what="persistence to kill itself before a group commit")
    assert victim.returncode == -9
    line = next(line for line in harness.log("persistence").splitlines() if line.startswith(FAULT_KILL_BEFORE_COMMIT))
    lost = re.search(r"event ids: (\S+)", line)
    assert lost is not None, line
    lost_ids = lost.group(1).split(",")
    assert len(lost_ids) >= 2
    answered_before = {ids[n] for n in answers}

    # all-or-nothing: the file holds none of the group, and no sender heard about any of it
    stored = _event_ids(harness.paths.database)
    assert not set(lost_ids) & set(stored)
    assert not set(lost_ids) & answered_before
    assert answered_before <= set(stored)  # every answer was for a durable write

    harness.start("persistence")
    wait_until(lambda: pump() == total, timeout=60, what="every commit answered after the restart")
    assert not [a for a in answers.values() if isinstance(a, AcodeError)]
    events = client.call("persistence", GetEvents(session_id=sid), timeout=10, decoder=REPLY).events
    assert [e.seq for e in events] == list(range(1, total + 1))
    assert sorted(e.id for e in events) == sorted(ids)


def test_a_group_waits_for_the_disk_unless_every_request_in_it_is_a_read_or_a_rerun_safe_result() -> None:
    from actors.persistence.service import _relaxed
    from protocol.messages import ClaimModelAnswer, FinishToolCall, GetSession

    sid = new_id()
    finish = FinishToolCall(key="k", session_id=sid, result=records.tool_result("k"),
                            event=records.tool_called(sid, "k"))
    assert _relaxed(msgspec_replace(finish, rerun_safe=True)) and _relaxed(GetSession(session_id=sid))
    assert _relaxed(ClaimModelAnswer(request_hash="a" * 64, session_id=sid, stage="executor"))  # a cache
    assert not _relaxed(finish)  # a side-effecting call's result
    assert not _relaxed(Commit(session_id=sid, events=[records.transitioned(sid)]))  # a transition


def test_progress_events_commit_relaxed_and_anything_more_waits_for_the_disk() -> None:
    """A step started or a turn answered decides nothing (the replay writes it again): relaxed,
    with the model answers it carries; beside a step record, a transition or a snapshot it
    waits for the disk, and so does any event not in PROGRESS_EVENTS."""
    from actors.persistence.service import _relaxed
    from protocol.messages import RecordModelAnswer
    from protocol.sessions.events import StepFinished, StepStarted, TurnAnswered

    sid = new_id()
    started = StepStarted(id=new_id(), session_id=sid, at=1.0, visit=1, task="T1", step="S1")
    turn = TurnAnswered(id=new_id(), session_id=sid, at=1.0, visit=1, task="T1", step="S1", turn=1)
    answer = RecordModelAnswer(request_hash="a" * 64, answer=records.answer("hi"))
    assert _relaxed(Commit(session_id=sid, events=[started, turn], answers=[answer]))
    assert _relaxed(Commit(session_id=sid, answers=[answer]))  # the cache alone
    assert not _relaxed(Commit(session_id=sid, events=[turn], steps=[records.step(sid)]))
    assert not _relaxed(Commit(session_id=sid, events=[turn, records.transitioned(sid)]))
    assert not _relaxed(Commit(session_id=sid, events=[turn], snapshot=records.snapshot(sid)))
    finished = StepFinished(id=new_id(), session_id=sid, at=1.0, visit=1, task="T1", step="S1", status="completed")
    assert not _relaxed(Commit(session_id=sid, events=[finished]))


def _session(harness: Harness, sender: str = "test", epoch: int = 0) -> tuple[Client, str]:
    """A broker and persistence, a client of them, and a session it created."""
    harness.start("broker")
    harness.start("persistence")
    client = harness.client(sender=sender, epoch=epoch)
    sid = new_id()
    client.call("persistence", Commit(session_id=sid, snapshot=records.snapshot(sid), events=[records.created(sid)]),
                timeout=10, decoder=codec.PERSISTENCE_REPLY)
    return client, sid


def test_a_commit_that_requires_records_waits_for_them_and_commits_with_them(harness: Harness) -> None:
    client, sid = _session(harness)
    stage_write = records.tool_called(sid, f"{sid}:t1")
    transition = records.transitioned(sid)
    answers: list[Any] = []
    waiting = client.send("persistence", Commit(session_id=sid, events=[transition],
                                                requires=Requirement(events=[stage_write.id])),
                          timeout=10, decoder=codec.PERSISTENCE_REPLY,
                          on_reply=lambda reply, error: answers.append((reply, error)))
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:  # parked: no answer while the record it requires is missing
        client.socket.poll(20)
        client.on_readable()
    assert answers == [] and waiting
    client.call("persistence", Commit(session_id=sid, events=[stage_write]), timeout=10,
                decoder=codec.PERSISTENCE_REPLY)
    wait_until(lambda: (client.socket.poll(20), client.on_readable(), answers)[2], what="the parked commit answered")
    assert answers[0][1] is None
    events = client.call("persistence", GetEvents(session_id=sid), timeout=10, decoder=codec.PERSISTENCE_REPLY).events
    assert [e.id for e in events][-2:] == [stage_write.id, transition.id]


def test_a_commit_whose_required_records_never_come_is_refused_after_the_park(harness: Harness) -> None:
    client, sid = _session(harness)
    started = time.monotonic()
    with pytest.raises(AcodeError) as refused:
        client.call("persistence", Commit(session_id=sid, events=[records.transitioned(sid)],
                                          requires=Requirement(events=[new_id()])),
                    timeout=10, decoder=codec.PERSISTENCE_REPLY)
    assert (refused.value.code, refused.value.retryable) == ("ACODE-STORE-004", True)
    assert PARK_S <= time.monotonic() - started < PARK_S + 2.0


def test_a_waiting_commit_of_a_sender_that_restarted_since_never_lands(harness: Harness) -> None:
    # A coordinator killed while its transition waits here: its successor rebuilt the session
    # from the log as it was, so the old transition must not land later, when the record it
    # waited for does.
    old, sid = _session(harness, sender="coordinator", epoch=1)
    stage_write = records.tool_called(sid, f"{sid}:t1")
    stale = records.transitioned(sid)
    old.send("persistence", Commit(session_id=sid, events=[stale], requires=Requirement(events=[stage_write.id])),
             timeout=10, decoder=codec.PERSISTENCE_REPLY, on_reply=lambda reply, error: None)
    old.socket.poll(200)
    new = harness.client(sender="coordinator", epoch=2)
    new.call("persistence", GetEvents(session_id=sid), timeout=10, decoder=codec.PERSISTENCE_REPLY)  # its recovery
    new.call("persistence", Commit(session_id=sid, events=[stage_write]), timeout=10,
             decoder=codec.PERSISTENCE_REPLY)  # the record the old transition waited for
    events = new.call("persistence", GetEvents(session_id=sid), timeout=10, decoder=codec.PERSISTENCE_REPLY).events
    assert stale.id not in [e.id for e in events]
