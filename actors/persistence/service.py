"""The persistence actor: serves ``persistence`` requests from the store, publishes events.

It is the single writer of the database. Requests are handled inline on the loop thread
(``Worker(threads=0)``): one connection, one writer, no locks of our own; a commit costs
one fsync with ``synchronous = full`` (the default) and far less with ``normal``.
``capacity`` lets the broker queue requests here instead of in its own queue.

**Durability.** Every commit waits for the disk (``synchronous = full``) except the result of a
tool call without side effects (``FinishToolCall.rerun_safe``, or ``Commit.reads`` with their
``tool_called`` events: the reads a stage journals itself), the model-answer cache
(claims and answers), a stage's progress events (``protocol.sessions.events.PROGRESS_EVENTS``: a step started, a
turn answered, a step retried; no snapshot, plan or step record), and a group commit of only
such writes and reads. In WAL mode a power cut can lose such a commit only together with
every commit after it (the next full commit syncs the log whole), so nothing durable ever
depends on what was lost: the read runs again, the model is asked again, the replayed stage
reports its progress again (same event ids). Transitions, steps, intents and the results of
side-effecting calls stay durable before any answer.

**Group commit.** The handler only decodes a request and queues it (``DEFERRED``); when the
worker has read every request waiting on its socket (``drained``), the queued ones are served
in order inside one transaction (:meth:`Store.group`, one savepoint each, at most
:data:`_GROUP` of them) and committed with one fsync. Only then is any of them answered and
any of their events published: a reply is never sent for a write that is not durable, and a
crash before the commit loses the whole group, none of it acknowledged, so every sender
resends and the idempotent writes apply once. A request that fails answers its own error
(its savepoint is undone); a failed commit answers every request of the group with it.
A lone request costs what it did before: it is served as soon as it has been read.

**A commit that requires records waits here for them.** A commit whose ``requires`` names
events not stored yet (a stage's last writes, sent just before its result: see
``actors.stages.request.writes``) is not answered with its refusal at once: it is parked, and
tried again after the new requests of each later group, in the same transaction, so it
commits together with the write it waited for. After :data:`PARK_S` it is answered with
its refusal (ACODE-STORE-004, retryable) and the coordinator decides what next.

:func:`dispatch` maps each request type to one store call with ``match``; adding a type
to :data:`PersistenceRequest` without a case fails type checking (``assert_never``) and
the dispatch test. After the store has committed, every event inserted *now* is published
on the event stream as ``[session_id, msgpack event]``; an event a retried request had
already stored is not published again. **Paced**: at most one message every
:data:`PUBLISH_EVERY_S` (5 ms): events committed meanwhile wait, in order, and go out
together, one message per session, when the window has passed; a session's final event
(``protocol.sessions.events.is_final``, where ``acode run`` stops) goes out at once with whatever
waits. A follower wakes for fewer than half as many messages (7 instead of 15 in a W1
session), and sees each event at most 5 ms later; the stream was never the record (a follower reads
what it missed from ``GetEvents``), so events still waiting when the actor stops are
only read instead.

Options (``spec.options``, unknown keys refused):

- ``database``: the SQLite file (default ``<home>/acode.db``; relative to the home);
- ``synchronous``: ``"full"`` (default, every commit survives power loss) or ``"normal"``
  (commits survive a crash of this process, not of the machine).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, assert_never

import msgspec
import structlog
import zmq

from actors._base import Actor, Timer
from actors.paths import RunPaths
from actors.persistence.schema import LATEST
from actors.persistence.store import Store, Synchronous
from broker import wire
from broker.worker import DEFERRED, Request, Worker
from protocol import codec
from protocol.errors import AcodeError, ConfigError
from protocol.messages import (
    Ack,
    BeginToolCall,
    ClaimModelAnswer,
    Commit,
    Committed,
    Error,
    EventList,
    FinishToolCall,
    GetEvents,
    GetModelAnswers,
    GetPlan,
    GetReplayIndex,
    GetSession,
    GetSteps,
    ListSessions,
    Message,
    PersistenceReply,
    PersistenceRequest,
    PlanFound,
    RecordModelAnswer,
    SessionFound,
    SessionList,
    StepList,
)
from protocol.sessions.events import PROGRESS_EVENTS, Event, ToolCalled, is_final
from protocol.transport.spec import ActorSpec

__all__ = ["SERVICE", "PersistenceActor", "PersistenceOptions", "dispatch", "load_options"]

SERVICE = "persistence"
_CAPACITY = 32
_GROUP = 64  # requests per group commit at most
PUBLISH_EVERY_S = 0.005  # at most one event message this often (a session's final event: at once)
PARK_S = 2.0  # how long a commit waits here for the records it requires before it is refused
# Test hook for the group-commit drill: the first group of at least this many requests
# kills this process (SIGKILL) after its writes ran and before its commit.
FAULT_KILL_BEFORE_COMMIT = "ACODE_FAULT_KILL_BEFORE_GROUP_COMMIT"


class PersistenceOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    database: str = ""  # empty: <home>/acode.db
    synchronous: Synchronous = "full"


def load_options(spec: ActorSpec) -> tuple[PersistenceOptions, Path]:
    """The typed options of ``spec`` and the database path they name."""
    try:
        options = msgspec.convert(spec.options, PersistenceOptions)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"persistence options {spec.options!r} rejected: {exc}; allowed keys are "
                          "database and synchronous (full|normal)", code="ACODE-CFG-001") from exc
    home = Path(spec.home)
    path = home / options.database if options.database else RunPaths(home).database
    return options, path


def dispatch(store: Store, request: PersistenceRequest) -> tuple[PersistenceReply, list[Event]]:
    """Serve one request; return the reply and the events to publish (inserted now)."""
    match request:
        case Commit():
            _record_answers(store, request.answers)
            if request.reads:
                store.journal_reads(request.session_id, request.reads)
            appended = store.commit(request.session_id, request.events, snapshot=request.snapshot,
                                    plan=request.plan, steps=request.steps,
                                    requires=request.requires)
            index = store.replay_index(request.session_id, request.index_for) if request.index_for else None
            return Committed(seqs=appended.seqs, index=index), appended.inserted
        case FinishToolCall():
            carried = _carried(store, request.commit)
            appended = store.finish_tool_call(request.key, session_id=request.session_id,
                                              result=request.result, event=request.event,
                                              rerun_safe=request.rerun_safe)
            return Committed(seqs=appended.seqs, result=appended.first_result), carried + appended.inserted
        case BeginToolCall():
            return store.begin_tool_call(request.key, session_id=request.session_id, tool=request.tool,
                                         arguments=request.arguments, risk=request.risk,
                                         pre_image=request.pre_image), []
        case ClaimModelAnswer():
            carried = _carried(store, request.commit)
            _record_answers(store, request.answers)
            return store.claim_model_answer(request.request_hash, session_id=request.session_id,
                                            stage=request.stage), carried
        case RecordModelAnswer():
            store.record_model_answer(request.request_hash, request.answer, model_ms=request.model_ms)
            return Ack(), []
        case GetSession():
            snapshot = store.session(request.session_id)
            spent = msgspec.structs.replace(store.spent(request.session_id), running_s=snapshot.running_s)
            return SessionFound(session=snapshot, spent=spent), []
        case ListSessions():
            return SessionList(sessions=store.sessions(request.statuses, request.limit)), []
        case GetEvents():
            return EventList(events=store.events(request.session_id, request.after_seq, request.limit)), []
        case GetPlan():
            return PlanFound(plan=store.plan(request.session_id, request.version)), []
        case GetSteps():
            return StepList(steps=store.steps(request.session_id, request.visit)), []
        case GetReplayIndex():
            return store.replay_index(request.session_id, request.stage), []
        case GetModelAnswers():
            return store.model_answers(request.session_id, request.stage, request.after_seq, request.limit), []
        case _:
            assert_never(request)


def _carried(store: Store, commit: Commit | None) -> list[Event]:
    """Write the commit a request carries (a stage's held progress events and answers, see
    ``RunTool.commit``) before the request itself, in its group's transaction; return the
    events inserted now. A failure fails the carrying request, as the commit alone would."""
    if commit is None:
        return []
    _record_answers(store, commit.answers)
    if commit.reads:
        store.journal_reads(commit.session_id, commit.reads)
    if not (commit.events or commit.snapshot or commit.plan or commit.steps):
        return []
    return store.commit(commit.session_id, commit.events, snapshot=commit.snapshot, plan=commit.plan,
                        steps=commit.steps).inserted


def _record_answers(store: Store, answers: list[RecordModelAnswer]) -> None:
    """The model answers a request carries, recorded before it is served, in its group's
    transaction: committed with it, answered only after."""
    if answers:
        store.record_model_answers(answers)


def progress_only(commit: Commit) -> bool:
    """A commit of progress events alone (no snapshot, plan or step record), with the
    results of calls without side effects the stage journals itself and their
    ``tool_called`` events: see :func:`_relaxed`."""
    reads = {read.key for read in commit.reads}
    return (commit.snapshot is None and commit.plan is None and not commit.steps
            and all(isinstance(event, PROGRESS_EVENTS) or (isinstance(event, ToolCalled) and event.key in reads)
                    for event in commit.events))


def _requires(request: PersistenceRequest) -> bool:
    return isinstance(request, Commit) and request.requires is not None


def _relaxed(request: PersistenceRequest) -> bool:
    """Whether a group holding ``request`` may commit without waiting for the disk: it writes
    nothing, or only the result of a call without side effects (FinishToolCall.rerun_safe),
    the model-answer cache, or progress events (:data:`PROGRESS_EVENTS`, with the answers
    they carry): what a power cut loses with them is written again by the replayed stage."""
    match request:
        case FinishToolCall(rerun_safe=rerun_safe, commit=carried):
            return rerun_safe and (carried is None or progress_only(carried))
        case ClaimModelAnswer(commit=carried):
            return carried is None or progress_only(carried)
        case Commit():
            return progress_only(request)
        case RecordModelAnswer() | GetSession() | ListSessions() | GetEvents() | GetPlan() \
                | GetSteps() | GetReplayIndex() | GetModelAnswers():
            return True
        case _:
            return False


class PersistenceActor(Actor):
    actor = "persistence"

    def __init__(self, spec: ActorSpec, **kwargs: Any):
        super().__init__(spec, **kwargs)
        self.store: Store | None = None
        self.worker: Worker | None = None
        self._events: zmq.Socket[Any] | None = None
        self._queued: list[tuple[Request, PersistenceRequest]] = []
        # commits whose required records (Commit.requires) are not stored yet, with when they
        # came: tried again after each group's other requests, refused after PARK_S
        self._parked: list[tuple[Request, PersistenceRequest, float]] = []
        self._epochs: dict[str, int] = {}  # sender instance -> the newest epoch seen from it
        # events committed and not yet published (see _publish), by session, encoded
        self._unpublished: dict[str, list[bytes]] = {}
        self._published_at = float("-inf")  # loop clock of the last message
        self._publish_timer: Timer | None = None
        fault = os.environ.get(FAULT_KILL_BEFORE_COMMIT, "")
        self._kill_at_group = int(fault) if fault.isdigit() else 0

    def on_start(self) -> None:
        options, path = load_options(self.spec)
        self.store = Store(path, synchronous=options.synchronous)
        self.log.info("database_opened", path=str(path), schema_found=self.store.migrated_from,
                      schema=LATEST, synchronous=options.synchronous)
        self._events = self.socket(zmq.PUB)
        self._events.connect(self.spec.endpoints.events_in)
        self.worker = Worker(self, SERVICE, self.handle, capacity=_CAPACITY, threads=0, drained=self.serve_queued)
        self.worker.start()

    def on_stop(self) -> None:
        if self.worker is not None:
            self.worker.close()
        if self.store is not None:
            self.store.close()

    def busy(self) -> list[str]:
        return self.worker.busy() if self.worker is not None else []

    def handle(self, request: Request) -> Message:
        """Decode and queue; :meth:`serve_queued` answers once the group is durable."""
        body = codec.PERSISTENCE_REQUEST.decode(request.body)  # a bad body is answered at once
        self._queued.append((request, body))
        if len(self._queued) >= _GROUP:
            self.serve_queued()
        return DEFERRED

    def serve_queued(self, *, retry_parked: bool = False) -> None:
        """Serve the queued requests in one group commit, then answer them and publish."""
        assert self.store is not None and self.worker is not None, "requests arrive only after on_start()"
        group, self._queued = self._queued, []
        if not group and not (retry_parked and self._parked):
            return
        # A commit that requires records goes after the group's other requests, and a
        # parked one after those: the records it waits for may be among them, and then land
        # in the same transaction, just before it. (Requests of one group are concurrent:
        # a sender waits for a reply before it sends what depends on it.)
        parked, self._parked = self._parked, []
        for request, _ in group:
            sender, epoch = request.envelope.sender, request.envelope.epoch
            if epoch > self._epochs.get(sender, -1):
                self._epochs[sender] = epoch
        parked = self._drop_stale(parked)
        since = {request.id: at for request, _, at in parked}
        group = ([item for item in group if not _requires(item[1])] + [item for item in group if _requires(item[1])]
                 + [(request, body) for request, body, _ in parked])
        replies: list[PersistenceReply | Error] = []
        inserted: list[Event] = []
        try:
            with self.store.group(relaxed=all(_relaxed(body) for _, body in group)):
                for request, body in group:
                    reply, events = self._serve_one(request, body, alone=len(group) == 1)
                    replies.append(reply)
                    inserted.extend(events)
                if self._kill_at_group and len(group) >= self._kill_at_group:
                    self._die_before_commit(group)
        except AcodeError as exc:  # the commit failed: nothing of the group is durable
            self.log.warning("group_commit_failed", requests=len(group), error=str(exc))
            replies, inserted = [Error(error=exc.info()) for _ in group], []
        now = time.monotonic()
        for (request, body), reply in zip(group, replies, strict=True):
            if isinstance(reply, Error) and reply.error.code == "ACODE-STORE-004" \
                    and now - since.get(request.id, now) < PARK_S:
                if request.id not in since:
                    self.loop.call_later(PARK_S, self._expire_parked)
                self._parked.append((request, body, since.get(request.id, now)))
                continue
            self.worker.reply(request, reply)
            if isinstance(body, Commit) and body.snapshot is not None and not isinstance(reply, Error):
                # one line per transition (a dozen a session): what `acode logs --session` shows of this actor
                self.log.info("transition_stored", session_id=body.session_id, status=body.snapshot.status,
                              stage=body.snapshot.stage, events=len(body.events))
        self._publish(inserted)
        if len(group) > 1:
            self.log.debug("group_committed", requests=len(group), events=len(inserted))

    def _drop_stale(self, parked: list[tuple[Request, PersistenceRequest, float]]
                    ) -> list[tuple[Request, PersistenceRequest, float]]:
        """The parked commits whose sender has not restarted since. A restarted coordinator
        rebuilt its sessions from the log as it was, so a transition its predecessor left
        waiting here must never land after that: it is refused now (nobody waits for the
        answer), before any request of the new epoch is served."""
        kept = []
        for request, body, at in parked:
            envelope = request.envelope
            if envelope.epoch < self._epochs.get(envelope.sender, -1):
                assert self.worker is not None
                self.worker.reply(request, Error(error=AcodeError(
                    f"dropped: {envelope.sender} restarted (epoch {envelope.epoch} -> "
                    f"{self._epochs[envelope.sender]}) while this commit waited", code="ACODE-STORE-004",
                    retryable=False).info()))
                continue
            kept.append((request, body, at))
        return kept

    def _expire_parked(self) -> None:
        """Try the parked commits once more (nothing may have come since); answer those
        still refused after :data:`PARK_S` with their refusal (ACODE-STORE-004)."""
        self.serve_queued(retry_parked=True)

    def _serve_one(self, request: Request, body: PersistenceRequest, *,
                   alone: bool = False) -> tuple[PersistenceReply | Error, list[Event]]:
        """One request of a group; its failure is its own answer (its savepoint is undone:
        :meth:`Store.item`, which also spares the redaction scans of a clean request)."""
        assert self.store is not None
        try:
            with self.store.item(request.body, alone=alone):
                return dispatch(self.store, body)
        except AcodeError as exc:
            return Error(error=exc.info()), []
        except Exception as exc:  # noqa: BLE001 - a handler bug answers, it does not kill the actor
            with structlog.contextvars.bound_contextvars(request_id=request.id,
                                                         session_id=request.envelope.session_id,
                                                         trace_id=request.envelope.trace_id):
                self.log.exception("handler_failed", service=SERVICE, request_id=request.id)
            return Error(error=AcodeError(
                f"internal error in {SERVICE}: {type(exc).__name__}: {exc}").info()), []

    def _die_before_commit(self, group: list[tuple[Request, PersistenceRequest]]) -> None:
        """The fault drill: say which events the group held, then SIGKILL this process."""
        ids = [event.id for _, body in group if isinstance(body, Commit) for event in body.events]
        print(f"{FAULT_KILL_BEFORE_COMMIT}: killing persistence before committing a group of "
              f"{len(group)} requests; event ids: {','.join(ids)}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def _publish(self, events: list[Event]) -> None:
        """Publish ``events`` (just committed): one message per session, its topic then each
        event in seq order, and at most one message every :data:`PUBLISH_EVERY_S` (see the
        module): events committed meanwhile wait, in order, for the next one. A session's
        final event (``protocol.sessions.events.is_final``) goes out at once, with whatever waits."""
        for event in events:
            self._unpublished.setdefault(event.session_id, []).append(codec.encode(event))
        if not self._unpublished:
            return
        pending = self._publish_timer
        wait = self._published_at + PUBLISH_EVERY_S - self.loop.clock()
        if any(is_final(event) for event in events) or (wait <= 0 and pending is None):
            if pending is not None:
                pending.cancel()
            self._send_unpublished()
        elif pending is None:
            self._publish_timer = self.loop.call_later(wait, self._send_unpublished)

    def _send_unpublished(self) -> None:
        assert self._events is not None
        self._publish_timer = None
        self._published_at = self.loop.clock()
        waiting, self._unpublished = self._unpublished, {}
        for session_id, encoded in waiting.items():
            # A PUB socket never blocks: past its high-water mark it drops, and followers
            # catch up from GetEvents (the log, not the stream, is the record).
            wire.send(self._events, [session_id.encode(), *encoded])
            self.log.debug("events_published", session_id=session_id, count=len(encoded))
