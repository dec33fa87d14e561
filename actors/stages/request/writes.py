"""A stage's conversation with persistence: what it holds back, what it writes behind, the replay index.

One :class:`StageWrites` per ``RunStage`` request, made by the
:class:`~actors.stages.request.context.StageContext`. Every request goes through the broker with
the calling thread's own client (``ThreadClients``) and resends until its deadline
(:data:`PERSISTENCE_TIMEOUT`), so a restarted persistence only delays a stage. It may be
called from several threads at once (the verifier runs independent checks in parallel);
what it holds is guarded by a lock.

**What a stage holds back.** Progress events (``protocol.sessions.events.PROGRESS_EVENTS``: a step
started, a turn answered, a step retried; committed without a step record), the model's
answers (see :mod:`actors.llm.recorded`; :attr:`StageWrites.answers` takes them) and the
results of reads with their ``tool_called`` events (:meth:`StageWrites.hold_reads`) are
not sent on their own: the stage's next write carries them, first in its transaction, in
the order they came: the next :meth:`~StageWrites.commit` (merged), a model claim
(``ClaimModelAnswer.commit``, only when replaying), or a read journaled by the sandbox
(``RunTool.commit``: :meth:`~StageWrites.carried`). Before a tool call with side effects,
any other request, or the stage's result, :meth:`~StageWrites.flush` writes them and
waits; a model call that runs :data:`~actors.stages.request.callwatch.FLUSH_AFTER` seconds gets
them written meanwhile (the call watch), so followers see a step's reads while the model
thinks. So nothing that depends on what was held happens or becomes durable without it; a
stage killed while holding them loses only them, and its replay writes them again (same
event ids) or asks the model again.

**A step's record is written behind.** ``commit(..., wait=False)`` (the executor's step
records) hands the commit to a writer thread and returns at once, so the next steps'
model turns and reads overlap its round trip. Every other one is held instead, as the
progress events are, and goes with the next step's write: half the commits, and half the
work they make persistence, the broker and this process do while the next reads run on
two cores (about 3 % of a W1 session). A slow model call still gets it written after
:data:`~actors.stages.request.callwatch.FLUSH_AFTER` (the call watch). The writer sends one
commit at a time, in the order they were made; those made while one is on its way wait
as one commit, merged (at most :data:`BEHIND_STEPS` step records; the next then waits),
so the steps go at the pace of their reads, not of the commits: at most
:data:`BEHIND_STEPS` records queued and one held are unsent. Each is still durable
before anything depends on it: every other write, a tool call with side effects, a
journaled read and the stage's result first wait for all of them (:meth:`_settle`). A
stage killed meanwhile is where it would be had it died just before sending them (the
later steps' held reads wrote nothing): its replay runs those steps again, their reads
again, and asks the model again for what it answered in them. If a write fails, its
error is raised by every later write of the stage, so nothing made after it is written
and the stage ends with that error, as it would have at the commit itself.

**A result does not wait for the stage's last writes** (in the stage actor:
:attr:`StageContext.result_behind <actors.stages.request.context.StageContext.result_behind>`,
:meth:`~StageWrites.flush_behind`). What the stage still holds is sent behind, and the
result names the events of every write not yet known durable (``StageResult.requires``);
the coordinator's transition carries them (``Commit.requires``) and persistence holds it
until they are stored (committing it with them; after ``PARK_S`` it refuses it,
ACODE-STORE-004, retryable, and the coordinator asks again), so the coordinator still acts
only on a result whose answers are durable, and a crash of the coordinator meanwhile
still finds them (no model call is asked twice), one round trip sooner. A held write with
no event (a model answer alone) cannot be named so; then the result waits for it as
before. If a named write never lands (the stage actor died before it left), the
coordinator counts the attempt as lost after ``REQUIRED_WAIT_S`` and dispatches it again.

**A turn is one round trip.** The attempt's replay index (:meth:`~StageWrites.replay_index`:
the claims of its stage, the session's journaled tool keys, its step records) comes with
the dispatch (``RunStage.replay``, read with the transition's commit) or is asked for
once. A model request not among the claims is placed by
:class:`~actors.llm.recorded.RecordedModel` itself, without a claim round trip; a read
(:data:`protocol.calls.tools.RERUN_SAFE_TOOLS`) under a key not journaled (:meth:`~StageWrites.journaled`)
runs ``held`` (the sandbox writes nothing and answers its event; the stage journals it
with its next write, ``Commit.reads``). A key journaled, or held and not yet written, goes
through the sandbox's journal, which answers the first result, so a replay reads the bytes
the stage read (see :mod:`actors.stages.request.sandboxcalls`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec

from broker.threads import ThreadClients
from protocol import codec
from protocol.messages import (
    ClaimModelAnswer,
    Commit,
    GetReplayIndex,
    JournaledRead,
    Message,
    RecordModelAnswer,
    ReplayIndex,
    RunStage,
    ToolDone,
)
from protocol.plans.results import Requirement, StepRecord, ToolResult
from protocol.sessions.events import PROGRESS_EVENTS, Event

__all__ = ["BEHIND_STEPS", "PERSISTENCE_TIMEOUT", "StageWrites"]

T = TypeVar("T")
PERSISTENCE_TIMEOUT = 120.0  # a restarting persistence delays a stage; it does not fail it
BEHIND_STEPS = 3  # step records a write behind gathers at most while the one before it is on its way


def _merged(first: Commit, then: Commit) -> Commit:
    """Two writes behind as one, ``first``'s records before ``then``'s (both carry only
    events, step records, answers and reads: see :meth:`StageWrites.commit`)."""
    return msgspec.structs.replace(first, events=[*first.events, *then.events], steps=[*first.steps, *then.steps],
                                   answers=[*first.answers, *then.answers], reads=[*first.reads, *then.reads])


def _no_answers() -> list[RecordModelAnswer]:
    return []


class StageWrites:
    """What one stage request writes to persistence, and what it holds back for its next write."""

    def __init__(self, request: RunStage, *, clients: ThreadClients, log: Any,
                 writer: ThreadPoolExecutor | None = None):
        """``writer``: the one-thread pool that sends the writes behind (``commit(wait=False)``),
        the stage actor's, kept across its requests with its thread's broker client; without
        it this makes its own at the first such write and lets it go at :meth:`close`."""
        self.session_id = request.session_id
        self.stage = request.stage
        self.clients = clients
        self.log = log
        # the model's answers not yet recorded (RecordedModel.take_pending): every write carries them
        self.answers: Callable[[], list[RecordModelAnswer]] = _no_answers
        self._lock = threading.Lock()
        self._held: list[Event] = []  # progress events for the next request (see the module)
        self._reads: list[JournaledRead] = []  # results of reads the stage journals itself, with _held
        self._held_steps: list[StepRecord] = []  # a step record held with _held: every other one (commit)
        self._send_lock = threading.RLock()  # what is held goes out in the order it was taken
        self._index: ReplayIndex | None = request.replay  # else fetched at the first model call or read
        self._journaled: set[str] = set(request.replay.tool_keys if request.replay else ())  # or held to be
        self._behind: Future[Any] | None = None  # the last write sent behind (commit(wait=False))
        self._queued: Commit | None = None  # written behind, not sent yet: later ones merge into it
        self._queue_lock = threading.Lock()  # _queued, between this thread and the writer's
        self._failure: BaseException | None = None  # a write behind that failed: every later one raises it
        self._unsettled: list[str] = []  # event ids of the writes behind, until they are known durable
        self._eventless = False  # a write behind without an event: the result must wait for it
        self._writer = writer  # its thread; else made at the first such write, and this object's
        self._own_writer = writer is None

    # -- what persistence holds already --------------------------------------------------------

    def replay_index(self) -> ReplayIndex:
        """What this attempt replays: read with the transition's commit and carried by the
        dispatch (``RunStage.replay``), else asked once, at the first model call or read. The
        model requests claimed in this stage (``RecordedModel`` places a new one itself,
        without a claim round trip), the session's journaled tool calls (a read under another
        key runs ``held``: the stage journals its result with its next write) and its steps."""
        with self._lock:
            index = self._index
        if index is None:
            index = self.persistence(GetReplayIndex(session_id=self.session_id, stage=self.stage))
            assert isinstance(index, ReplayIndex)
            with self._lock:
                if self._index is None:
                    self._index = index
                    self._journaled.update(index.tool_keys)
                index = self._index
        return index

    def journaled(self, keys: Iterable[str]) -> bool:
        """Whether one of ``keys`` is in the sandbox's journal, or held to be written there
        (the replay index is read first, if it was not yet)."""
        self.replay_index()
        with self._lock:
            return any(key in self._journaled for key in keys)

    # -- requests ------------------------------------------------------------------------------

    def persistence(self, body: Message) -> Any:
        """One request to persistence, carrying what the stage held back (see the module):
        a model claim carries it, anything else is preceded by it."""
        if isinstance(body, ClaimModelAnswer):
            with self._send_lock:
                body = msgspec.structs.replace(body, commit=self._take_held(with_answers=False))
                return self._call_persistence(body)
        if not isinstance(body, Commit | RecordModelAnswer | GetReplayIndex):  # the index depends on nothing held
            self.flush()
        return self._call_persistence(body)

    def commit(self, events: list[Event], step: StepRecord | None = None, *, wait: bool = True) -> None:
        """Append ``events`` (and ``step``), with what the stage held back first, in one
        transaction, durable when this returns; progress events alone are held back instead
        and written with the stage's next request (see the module). ``wait=False``: sent
        behind, durable before the stage's next write or side effect (see the module)."""
        if step is None and events and all(isinstance(event, PROGRESS_EVENTS) for event in events):
            with self._lock:
                self._held.extend(events)
            return
        if not wait and step is not None:
            with self._lock:
                if not self._held_steps:  # every other step's record goes with the next one's (see the module)
                    self._held.extend(events)
                    self._held_steps.append(step)
                    return
        with self._send_lock:
            if wait:
                self._settle()
            held = self._take_held()
            if held is not None:
                events = [*held.events, *events]
            body = Commit(session_id=self.session_id, events=events,
                          steps=[*(held.steps if held is not None else []), *([step] if step is not None else [])],
                          answers=held.answers if held is not None else [],
                          reads=held.reads if held is not None else [])
            if wait:
                self._send_persistence(body)
                return
            self._write_behind(body)

    def hold_reads(self, reads: Iterable[tuple[str, ToolDone]]) -> list[ToolResult]:
        """Hold each read's event and result (run ``held``: the sandbox wrote nothing) for the
        next write, in the order given, and mark its key journaled; their results. An error
        raised while ``reads`` is walked leaves the reads before it held."""
        results: list[ToolResult] = []
        with self._lock:
            for key, done in reads:
                if done.event is not None:
                    self._held.append(done.event)
                    self._reads.append(JournaledRead(key=key, result=done.result))
                    self._journaled.add(key)
                results.append(done.result)
        return results

    def carried(self, send: Callable[[Commit | None], T]) -> T:
        """``send`` (a request that journals: ``RunTool.commit``) given what the stage holds,
        once the writes behind are durable, so what it depends on is written with it."""
        with self._send_lock:
            self._settle()
            return send(self._take_held())

    def flush(self) -> None:
        """Write what the stage held back now, and wait until it and the write behind are
        durable (from any thread: the call watch flushes during a long model call)."""
        with self._send_lock:
            self._settle()
            held = self._take_held()
            if held is not None:
                self._send_persistence(held)

    def flush_behind(self) -> Requirement | None:
        """Send what the stage holds behind its other writes, without waiting, and return
        the events of every write not known durable (None: all of them are). A write with
        no event cannot be named so: then this waits, as :meth:`flush` does. A write that
        failed raises here, as :meth:`flush` would."""
        with self._send_lock:
            if self._failure is not None:
                raise self._failure
            held = self._take_held()
            if self._eventless or (held is not None and not held.events):  # a write it cannot name
                self._settle()
                if held is not None:
                    self._send_persistence(held)
                return None
            if held is not None:
                self._write_behind(held)
            behind = self._behind
            if behind is None or (behind.done() and behind.exception() is None and self._queued is None):
                return None  # every write is durable already
            return Requirement(events=list(self._unsettled))

    def close(self) -> None:
        """The stage has ended: if the writer thread is this object's own, let it go once a
        write still behind (a stage that failed) is done (the actor's stays, for its next
        request)."""
        if self._writer is not None and self._own_writer:
            self._writer.submit(self.clients.release)
            self._writer.shutdown(wait=False)

    # -- inside --------------------------------------------------------------------------------

    def _take_held(self, *, with_answers: bool = True) -> Commit | None:
        """The held events and (``with_answers``) the model's pending answer as one Commit,
        now the caller's to send; None when nothing is held. A claim leaves the answer to
        the model's own claim (``ClaimModelAnswer.answers``)."""
        with self._lock:
            events, self._held = self._held, []
            reads, self._reads = self._reads, []
            steps, self._held_steps = self._held_steps, []
        answers = self.answers() if with_answers else []
        if not events and not answers and not reads:
            return None
        return Commit(session_id=self.session_id, events=events, answers=answers, reads=reads, steps=steps)

    def _call_persistence(self, body: Message) -> Any:
        """One request to persistence, after the write behind (if any) is durable."""
        self._settle()
        return self._send_persistence(body)

    def _send_persistence(self, body: Message) -> Any:
        return self.clients.call("persistence", body, timeout=PERSISTENCE_TIMEOUT,
                                 decoder=codec.PERSISTENCE_REPLY, session_id=self.session_id)

    def _settle(self) -> None:
        """Wait until the writes sent behind are durable; raise their error if one failed
        (every time: after a failed write the stage writes nothing more)."""
        with self._send_lock:
            behind = self._behind
            if behind is not None:
                behind.result()  # the writer sends in order: the last one done, all are
                self._behind = None
                self._unsettled, self._eventless = [], False

    def _write_behind(self, body: Commit) -> None:
        """Send ``body`` from the writer thread, after the writes before it. While one is
        on its way, the next waits, and later ones merge into it (while they hold at most
        :data:`BEHIND_STEPS` step records; past that, this waits for the writes before it):
        a commit per round trip, whatever the pace of the steps."""
        with self._queue_lock:
            queued = self._queued
            if queued is not None and len(queued.steps) + len(body.steps) <= BEHIND_STEPS:
                self._queued = _merged(queued, body)
                self._note(body)
                return
        if queued is not None:
            self._settle()
        self._note(body)
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix=f"{self.stage}-writer")
        with self._queue_lock:
            self._queued = body
        self._behind = self._writer.submit(self._send_queued)

    def _note(self, body: Commit) -> None:
        """Remember what ``body``, sent behind, holds, until it is known durable."""
        self._unsettled.extend(event.id for event in body.events)
        self._eventless = self._eventless or not body.events

    def _send_queued(self) -> None:
        """On the writer thread: send what is queued (the write behind and whatever merged
        into it), unless a write before it failed."""
        with self._queue_lock:
            body, self._queued = self._queued, None
        if self._failure is not None:
            raise self._failure
        assert body is not None, "one send is submitted per queued write"
        try:
            self._send_persistence(body)
        except BaseException as exc:
            self._failure = exc
            self.log.warning("stage_write_failed", error=str(exc))
            raise
