"""The SQLite store behind the persistence actor: one connection, one writer, no ZeroMQ.

Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction (or a savepoint of a
group commit, :meth:`Store.group`: several writes, one transaction) and idempotent by the id
the sender chose, because requests are delivered at least once and this process may be
killed between its commit and its reply:

- an event whose id is already stored is skipped and answered with its stored ``seq``;
  a new one gets ``max(seq) + 1`` of its session, read inside the same transaction, so
  a session's seqs are 1, 2, … with no gap and no duplicate;
- plans (per version) and step records (per visit, task, step): the first write wins;
- tool calls: the intent is written once; a result is written once (a second finish
  keeps the first result);
- model answers: a request hash keeps the place in its ``(session, stage)`` sequence it
  claimed first, and the answer recorded first;
- an ``anomaly_detected`` event is stored with the session's health as the records stored
  before it say (:mod:`protocol.sessions.health`), worked out here, where they all are.

Records naming another session than the request's, an event without an id and a plan
without a version are refused (ProtocolError, ACODE-PROTO-002) and the transaction rolls
back. Reading the events of an unknown session answers an empty list (a follower may ask
before the session's first commit); every other read of a missing record is NotFoundError
(ACODE-STORE-002) with what to do next. Nothing here assumes it is the only process
writing: ``BEGIN IMMEDIATE`` serializes writers, so a second one would be slow, not wrong.

The connection is opened in WAL mode with the configured ``synchronous`` level and a busy
timeout. Lower-layer errors (``sqlite3.Error``, an unreadable stored blob) become
:class:`StorageError` (ACODE-STORE-001) in one place, :meth:`Store._errors`. Blobs are
msgpack written with :func:`protocol.codec.encode` and read with typed decoders built once.

Nothing secret is stored: every record is redacted (:mod:`protocol.basics.redact`) as it is encoded,
in one place, :meth:`Store._blob`, and so are the free-text columns (tool names, tool-call
keys, step labels). Ids acode makes are stored as they are: session and event ids (UUIDv7)
and request hashes (sha256 hex), which the redactor leaves alone. An appended event is
returned (and published) as stored, redacted.

Size: one class around one connection. Its transactions (the error boundary, a group's
savepoints, the synchronous level) and the records written and read through them share
its private state, and each write's idempotency rule above reads next to the transaction
it runs in; split, the rules would sit a file away from the writes they govern.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from actors.hooks import recorded
from actors.persistence.schema import migrate
from protocol.basics.redact import Redactor, default_redactor
from protocol.calls.tools import Risk
from protocol.codec import encode
from protocol.errors import ConfigError, NotFoundError, ProtocolError, StorageError
from protocol.messages import (
    JournaledRead,
    ModelAnswerClaim,
    ModelAnswerList,
    RecordedAnswer,
    RecordModelAnswer,
    ReplayIndex,
    ToolCallState,
)
from protocol.plans.plan import TaskPlan
from protocol.plans.results import ModelAnswer, Requirement, StepRecord, ToolResult
from protocol.policy.budget import Spent
from protocol.sessions.events import AnomalyDetected, Event, HookRan, ToolCalled
from protocol.sessions.health import session_health
from protocol.sessions.session import SessionSnapshot, Stage

__all__ = ["Appended", "Store", "Synchronous"]

Synchronous = Literal["full", "normal"]
T = TypeVar("T")

_SYNCHRONOUS: dict[str, str] = {"full": "FULL", "normal": "NORMAL"}
_BUSY_TIMEOUT_MS = 5_000
_EVENT = msgspec.msgpack.Decoder(Event)
_SNAPSHOT = msgspec.msgpack.Decoder(SessionSnapshot)
_PLAN = msgspec.msgpack.Decoder(TaskPlan)
_STEP = msgspec.msgpack.Decoder(StepRecord)
_RESULT = msgspec.msgpack.Decoder(ToolResult)
_ANSWER = msgspec.msgpack.Decoder(ModelAnswer)


class Appended(msgspec.Struct, frozen=True, kw_only=True):
    """What an append did: the seq of each event in request order, and the events it
    inserted now (as stored: with ``seq`` and ``at``), which are the ones to publish.
    ``first_result``: a tool call's result journaled before, kept instead of the one sent."""

    seqs: list[int]
    inserted: list[Event]
    first_result: ToolResult | None = None


def _session_not_found(session_id: str) -> NotFoundError:
    return NotFoundError(f"session {session_id} not found; list sessions with `acode sessions`",
                         code="ACODE-STORE-002")


def _check_owner(kind: str, ident: str, owner: str, session_id: str) -> None:
    if owner != session_id:
        raise ProtocolError(f"{kind} {ident} belongs to session {owner}, but the request is for "
                            f"session {session_id}; send each session's records in its own request",
                            code="ACODE-PROTO-002")


class Store:
    """The acode database. Not thread-safe: one store, one thread (the actor's loop).

    Opening creates or migrates the file; ``migrated_from`` is the schema version it had
    (0 for a new database). ``redactor`` defaults to the process's.
    """

    def __init__(self, path: str | Path, *, synchronous: Synchronous = "full",
                 clock: Callable[[], float] = time.time, redactor: Redactor | None = None):
        if synchronous not in _SYNCHRONOUS:
            raise ConfigError(f"synchronous {synchronous!r} is not one of {', '.join(_SYNCHRONOUS)}; "
                              "fix the persistence options", code="ACODE-CFG-001")
        self.path = str(path)
        self._clock = clock
        self._redactor = redactor or default_redactor()
        self._conn: sqlite3.Connection | None = None
        self._grouped = False  # inside group(): writes are savepoints of one transaction
        self._in_item = False  # inside item(): the request's writes share its savepoint
        self._undo_group = False  # the group's only item failed: roll back instead of committing
        self._trusted = False  # inside item() of a request whose every string is clean
        self._synchronous = _SYNCHRONOUS[synchronous]
        self._sync_now = self._synchronous  # the connection's level now (see _relaxed)
        with self._errors("opening the database"):
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                self.migrated_from = self._configure(conn, _SYNCHRONOUS[synchronous])
            except BaseException:
                conn.close()
                raise
        self._conn = conn

    def _configure(self, conn: sqlite3.Connection, synchronous: str) -> int:
        """Set the connection's pragmas and migrate; return the schema version found."""
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StorageError(f"database {self.path} cannot use WAL mode (it is in {mode!r} mode); "
                               "keep the acode home on a local filesystem", code="ACODE-STORE-001")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        # A savepoint's undo log (the statement sub-journal) in memory: it only ever rolls
        # back inside an open transaction, so a file buys nothing, and making one per
        # group commit cost a temp file's create, unlink and close each time.
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA foreign_keys = ON")
        return migrate(conn, self.path)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the error boundary and transactions ----------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StorageError(f"database error while {action} in {self.path}: {exc}; check the "
                               "disk space and the file's permissions, then retry",
                               code="ACODE-STORE-001",
                               retryable=isinstance(exc, sqlite3.OperationalError)) from exc
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise StorageError(f"a stored record is unreadable while {action} in {self.path}: "
                               f"{exc}; the database may be damaged", code="ACODE-STORE-001") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError(f"the store for {self.path} is closed; open a new one",
                               code="ACODE-STORE-001")
        return self._conn

    @contextmanager
    def _read(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._errors(action):
            yield self._connection()

    def _relaxed(self, conn: sqlite3.Connection, relaxed: bool) -> None:
        """Set the level the next transaction commits with: ``synchronous = normal`` when
        ``relaxed`` (durable against any process crash, not against a power cut), else the
        store's own. In WAL mode the next ``full`` commit syncs a relaxed one too (the log is
        one file, synced whole), so a power cut loses a relaxed commit only with every commit
        after it. The level stays set until a transaction needs the other one (a PRAGMA is
        one statement, and runs of relaxed or of full commits are the common case); it is
        called before every transaction begins, never inside one."""
        level = "NORMAL" if relaxed else self._synchronous
        if level != self._sync_now:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._sync_now = level

    @contextmanager
    def _write(self, action: str, *, relaxed: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction: commit when the block ends, roll back if it raises
        (``relaxed``: see :meth:`_relaxed`).

        Inside :meth:`group` it is a savepoint of the group's transaction instead: its
        writes are undone alone if it raises, and made durable only by the group's commit.
        Inside :meth:`item` it is part of the item's savepoint (undone with the whole item).
        """
        with self._errors(action):
            conn = self._connection()
            if self._in_item:
                yield conn
                return
            if not self._grouped:
                self._relaxed(conn, relaxed)
            begin, end, undo = (("SAVEPOINT write", "RELEASE write", "ROLLBACK TO write") if self._grouped
                                else ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"))
            conn.execute(begin)
            try:
                yield conn
                conn.execute(end)
            except BaseException:
                if conn.in_transaction:
                    conn.execute(undo)
                    if self._grouped:
                        conn.execute(end)
                raise

    @contextmanager
    def group(self, *, relaxed: bool = False) -> Iterator[None]:
        """Group commit: every write made in the block shares one transaction, committed
        (one fsync) when the block ends, or rolled back whole if the block raises or the
        commit fails. The caller must not acknowledge any write of the block before it
        ends: until then nothing of it is durable, and a crash loses all of it together.

        A write that raises inside the block undoes only its own changes (a savepoint);
        the others stay in the group. Reads inside the block see the group's writes.
        ``relaxed`` (every write of the group may be): see :meth:`_relaxed`.
        """
        if self._grouped:
            raise RuntimeError(f"a group commit on {self.path} is already open; groups do not nest")
        with self._errors("committing a group of writes"):
            conn = self._connection()
            self._relaxed(conn, relaxed)
            conn.execute("BEGIN IMMEDIATE")
            self._grouped, self._undo_group = True, False
            try:
                yield
                conn.execute("ROLLBACK" if self._undo_group else "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._grouped = False

    @contextmanager
    def item(self, body: bytes = b"", *, alone: bool = False) -> Iterator[None]:
        """One request of a :meth:`group`: every write it makes shares one savepoint, undone
        together if the block raises (a request that fails leaves nothing of itself in the
        group), instead of one savepoint per write. Outside a group it changes nothing: each
        write is its own transaction. ``alone``: the group's only request (the common case);
        no savepoint, and if it raises the group rolls back when it ends instead of
        committing: the same outcome, two statements fewer.

        ``body``: the request's encoded form (msgpack). When :meth:`Redactor.clean` finds
        nothing to redact in it, nothing the request stores can hold a secret (every string
        it stores comes from the request), so the records it writes are not scanned again one
        by one; otherwise each is redacted as it is encoded (:meth:`_blob`)."""
        trusted = bool(body) and self._redactor.clean(body)
        if not self._grouped:
            self._trusted = trusted
            try:
                yield
            finally:
                self._trusted = False
            return
        if self._in_item:
            raise RuntimeError(f"an item of a group commit on {self.path} is already open; items do not nest")
        with self._errors("writing one request of a group"):
            conn = self._connection()
            if not alone:
                conn.execute("SAVEPOINT item")
            self._in_item, self._trusted = True, trusted
            try:
                yield
                if not alone:
                    conn.execute("RELEASE item")
            except BaseException:
                if alone:
                    self._undo_group = True
                elif conn.in_transaction:
                    conn.execute("ROLLBACK TO item")
                    conn.execute("RELEASE item")
                raise
            finally:
                self._in_item = self._trusted = False

    # -- writes ---------------------------------------------------------------------------

    def commit(self, session_id: str, events: Iterable[Event] = (), *,
               snapshot: SessionSnapshot | None = None, plan: TaskPlan | None = None,
               steps: Sequence[StepRecord] = (), requires: Requirement | None = None) -> Appended:
        """Upsert the snapshot, append the events, keep the plan and the step records: one transaction.

        Without a snapshot the session must exist (NotFoundError, ACODE-STORE-002). With
        ``requires``, nothing is written unless each of its records is stored
        (ACODE-STORE-004, retryable: they are on their way).
        """
        with self._write(f"committing to session {session_id}") as conn:
            if requires is not None:
                _require(conn, session_id, requires)
            if snapshot is not None:
                _check_owner("snapshot", snapshot.id, snapshot.id, session_id)
                conn.execute(
                    "INSERT INTO sessions (id, status, created_at, updated_at, snapshot) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
                    "updated_at = excluded.updated_at, snapshot = excluded.snapshot",
                    (session_id, snapshot.status, snapshot.created_at, snapshot.updated_at,
                     self._blob(snapshot)))
            else:
                self._require_session(conn, session_id)
            appended = self._append(conn, session_id, events)
            if plan is not None:
                if plan.version < 1:
                    raise ProtocolError(f"plan {plan.id or '(no id)'} of session {session_id} has "
                                        f"version {plan.version}; finalize the plan (versions start "
                                        "at 1) before committing it", code="ACODE-PROTO-002")
                conn.execute("INSERT INTO plans (session_id, version, plan) VALUES (?, ?, ?) "
                             "ON CONFLICT DO NOTHING", (session_id, plan.version, self._blob(plan)))
            for step in steps:
                _check_owner("step record", f"{step.task}/{step.step}", step.session_id, session_id)
                conn.execute("INSERT INTO steps (session_id, visit, task, step, record) "
                             "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                             (session_id, step.visit, self._text(step.task), self._text(step.step),
                              self._blob(step)))
        return appended

    def begin_tool_call(self, key: str, *, session_id: str, tool: str,
                        arguments: dict[str, Any] | None = None, risk: Risk = "read",
                        pre_image: str | None = None) -> ToolCallState:
        """Journal a tool call's intent (``new``), or say what the call with ``key`` did."""
        key = self._text(key)
        with self._write(f"journaling tool call {key}") as conn:
            row = conn.execute("SELECT pre_image, result FROM tool_calls WHERE key = ?",
                               (key,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO tool_calls (key, session_id, tool, arguments, risk, "
                             "pre_image, intent_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (key, session_id, self._text(tool), self._blob(arguments or {}), risk,
                              pre_image, self._clock()))
                return ToolCallState(state="new", pre_image=pre_image)
            first_pre_image, result = row
            if result is None:
                return ToolCallState(state="pending", pre_image=first_pre_image)
            return ToolCallState(state="done", pre_image=first_pre_image, result=_RESULT.decode(result))

    def finish_tool_call(self, key: str, *, session_id: str, result: ToolResult,
                         event: Event, rerun_safe: bool = False) -> Appended:
        """Journal the result and append ``event``: one transaction. A call journaled without
        an intent (one without side effects) gets its row here.

        If ``key`` already has a result, the first one stays: nothing is written, the event is
        not appended (unless it is this very event, resent: then its seq is answered), and that
        first result is returned as ``first_result`` (None when ``result`` was stored now).
        ``rerun_safe`` (a call without side effects) commits it relaxed (:meth:`_relaxed`)."""
        key = self._text(key)
        with self._write(f"journaling the result of tool call {key}", relaxed=rerun_safe) as conn:
            self._require_session(conn, session_id)
            row = conn.execute("SELECT result FROM tool_calls WHERE key = ?", (key,)).fetchone()
            if row is not None and row[0] is not None:
                seq = conn.execute("SELECT seq FROM events WHERE id = ?", (event.id,)).fetchone()
                return Appended(seqs=[seq[0]] if seq else [], inserted=[], first_result=_RESULT.decode(row[0]))
            now = self._clock()
            conn.execute(
                "INSERT INTO tool_calls (key, session_id, tool, arguments, risk, intent_at, result, "
                "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "result = excluded.result, finished_at = excluded.finished_at "
                "WHERE tool_calls.result IS NULL",
                (key, session_id, self._text(result.tool), self._blob({}), result.risk, now,
                 self._blob(result), now))
            return self._append(conn, session_id, [event])

    def claim_model_answer(self, request_hash: str, *, session_id: str, stage: Stage) -> ModelAnswerClaim:
        """The place (and answer, once recorded) of ``request_hash`` in its stage's sequence;
        an unknown hash takes the next place: 0, 1, 2, … per ``(session, stage)`` (one past the
        last, as a stage that places its requests itself counts, see :meth:`replay_index`).

        Claims and answers are a cache of the model: committed relaxed (:meth:`_relaxed`). A
        power cut loses one only with every commit after it, so nothing durable depends on a
        lost answer, and the stage asks the model again."""
        with self._write(f"claiming model answer {request_hash}", relaxed=True) as conn:
            row = conn.execute("SELECT seq, answer FROM model_answers WHERE request_hash = ?",
                               (request_hash,)).fetchone()
            if row is not None:
                seq, answer = row
                return ModelAnswerClaim(seq=seq, answer=None if answer is None else _ANSWER.decode(answer))
            (seq,) = conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM model_answers WHERE session_id = ? "
                                  "AND stage = ?",
                                  (session_id, stage)).fetchone()
            conn.execute("INSERT INTO model_answers (request_hash, session_id, stage, seq) "
                         "VALUES (?, ?, ?, ?)", (request_hash, session_id, stage, seq))
            return ModelAnswerClaim(seq=seq)

    def record_model_answer(self, request_hash: str, answer: ModelAnswer, *, model_ms: float = 0.0) -> None:
        """Store the answer of a claimed hash (the first recorded answer stays, and only it is
        counted in the session's usage)."""
        with self._write(f"recording model answer {request_hash}", relaxed=True) as conn:
            row = conn.execute("SELECT answer IS NULL, session_id FROM model_answers WHERE request_hash = ?",
                               (request_hash,)).fetchone()
            if row is None:
                raise NotFoundError(f"model answer claim {request_hash} not found; claim the request "
                                    "hash before recording its answer", code="ACODE-STORE-002")
            if row[0]:
                conn.execute("UPDATE model_answers SET answer = ? WHERE request_hash = ?",
                             (self._blob(answer), request_hash))
                _spend(conn, row[1], answer=answer, model_ms=model_ms)

    def record_model_answers(self, answers: Iterable[RecordModelAnswer]) -> int:
        """Store each answer whose hash was claimed (the first recorded answer stays); one
        that carries its place (``seq``, placed by the stage from :meth:`replay_index`) is
        claimed now unless its hash or place is taken. One without a claim is dropped, not
        an error: these ride on another write (``Commit.answers``) that must not fail for a
        cache entry, and commit with it when both are in one group. Committed relaxed
        alone. Returns how many were kept."""
        kept = 0
        with self._write("recording model answers", relaxed=True) as conn:
            for record in answers:
                blob = self._blob(record.answer)
                if record.seq >= 0 and record.stage is not None:
                    inserted = conn.execute(
                        "INSERT INTO model_answers (request_hash, session_id, stage, seq, answer) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        (record.request_hash, record.session_id, record.stage, record.seq, blob)).rowcount
                    if inserted:
                        kept += 1
                        _spend(conn, record.session_id, answer=record.answer, model_ms=record.model_ms)
                        continue
                row = conn.execute("SELECT session_id FROM model_answers WHERE request_hash = ? AND answer IS NULL",
                                   (record.request_hash,)).fetchone()
                if row is not None:
                    conn.execute("UPDATE model_answers SET answer = ? WHERE request_hash = ?",
                                 (blob, record.request_hash))
                    kept += 1
                    _spend(conn, row[0], answer=record.answer, model_ms=record.model_ms)
        return kept

    def journal_reads(self, session_id: str, reads: Iterable[JournaledRead]) -> None:
        """Journal results of calls without side effects that a stage ran itself
        (``RunTool.held``); a key that has a result keeps it. Committed relaxed alone (as
        :meth:`finish_tool_call` with ``rerun_safe``)."""
        with self._write(f"journaling reads of session {session_id}", relaxed=True) as conn:
            now = self._clock()
            for read in reads:
                conn.execute(
                    "INSERT INTO tool_calls (key, session_id, tool, arguments, risk, intent_at, result, "
                    "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                    "result = excluded.result, finished_at = excluded.finished_at "
                    "WHERE tool_calls.result IS NULL",
                    (self._text(read.key), session_id, self._text(read.result.tool), self._blob({}),
                     read.result.risk, now, self._blob(read.result), now))

    def replay_index(self, session_id: str, stage: Stage) -> ReplayIndex:
        """What a stage attempt replays: the claims of ``(session, stage)`` (hash → place), the
        keys of the session's journaled tool calls and its step records (every visit)."""
        with self._read(f"reading the replay index of session {session_id}") as conn:
            claims = dict(conn.execute("SELECT request_hash, seq FROM model_answers WHERE session_id = ? "
                                       "AND stage = ?", (session_id, stage)).fetchall())
            keys = [key for (key,) in conn.execute("SELECT key FROM tool_calls WHERE session_id = ?",
                                                   (session_id,))]
            steps = [_STEP.decode(blob) for (blob,) in conn.execute(
                "SELECT record FROM steps WHERE session_id = ? ORDER BY rowid", (session_id,))]
            spent = _spent(conn, session_id)
            hooks = {}
            for (blob,) in conn.execute("SELECT body FROM events WHERE session_id = ? AND type = 'hook_ran'",
                                        (session_id,)):
                ran = _EVENT.decode(blob)
                if isinstance(ran, HookRan):
                    hooks[ran.id] = recorded(ran)
            begun = [key for (key,) in conn.execute(
                "SELECT id FROM events WHERE session_id = ? AND type = 'hook_started'", (session_id,))]
        return ReplayIndex(claims=claims, tool_keys=keys, steps=steps, spent=spent, hooks=hooks, hooks_started=begun)

    def model_answers(self, session_id: str, stage: Stage | None = None, after_seq: int = -1,
                      limit: int = 100) -> ModelAnswerList:
        """The answers recorded for a session's model requests (a claim without an answer is
        left out): of ``stage`` in their places' order, or of every stage in the order they were
        claimed; with each stage's highest answered place (``last``)."""
        with self._read(f"reading the model answers of session {session_id}") as conn:
            where, wanted = ("AND stage = ? ", (stage,)) if stage is not None else ("", ())
            order = "seq" if stage is not None else "rowid"
            rows = conn.execute(f"SELECT stage, seq, answer FROM model_answers WHERE session_id = ? {where}"
                                f"AND seq > ? AND answer IS NOT NULL ORDER BY {order} LIMIT ?",
                                (session_id, *wanted, after_seq, limit)).fetchall() if limit else []
            last = dict(conn.execute("SELECT stage, MAX(seq) FROM model_answers WHERE session_id = ? "
                                     "AND answer IS NOT NULL GROUP BY stage", (session_id,)).fetchall())
        return ModelAnswerList(answers=[RecordedAnswer(stage=row_stage, seq=seq, answer=_ANSWER.decode(blob))
                                        for row_stage, seq, blob in rows], last=last)

    def spent(self, session_id: str) -> Spent:
        """What the session's records say it spent (protocol.policy.budget; ``running_s`` is the snapshot's)."""
        with self._read(f"reading the usage of session {session_id}") as conn:
            return _spent(conn, session_id)

    # -- reads ----------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionSnapshot:
        with self._read(f"reading session {session_id}") as conn:
            row = conn.execute("SELECT snapshot FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise _session_not_found(session_id)
            return _SNAPSHOT.decode(row[0])

    def sessions(self, statuses: Iterable[str] = (), limit: int = 100) -> list[SessionSnapshot]:
        """Sessions newest first (by ``created_at``), only those in ``statuses`` if any."""
        wanted = list(statuses)
        where = f"WHERE status IN ({', '.join('?' * len(wanted))}) " if wanted else ""
        with self._read("listing sessions") as conn:
            rows = conn.execute(f"SELECT snapshot FROM sessions {where}"
                                "ORDER BY created_at DESC, id DESC LIMIT ?", (*wanted, limit))
            return [_SNAPSHOT.decode(blob) for (blob,) in rows]

    def events(self, session_id: str, after_seq: int = 0, limit: int = 10_000) -> list[Event]:
        """A session's events with ``seq > after_seq``, in seq order (none for an unknown one)."""
        with self._read(f"reading the events of session {session_id}") as conn:
            rows = conn.execute("SELECT body FROM events WHERE session_id = ? AND seq > ? "
                                "ORDER BY seq LIMIT ?", (session_id, after_seq, limit))
            return [_EVENT.decode(blob) for (blob,) in rows]

    def plan(self, session_id: str, version: int = 0) -> TaskPlan:
        """Plan ``version`` of a session; version 0 is the latest."""
        with self._read(f"reading a plan of session {session_id}") as conn:
            if version == 0:
                row = conn.execute("SELECT plan FROM plans WHERE session_id = ? "
                                   "ORDER BY version DESC LIMIT 1", (session_id,)).fetchone()
            else:
                row = conn.execute("SELECT plan FROM plans WHERE session_id = ? AND version = ?",
                                   (session_id, version)).fetchone()
            if row is not None:
                return _PLAN.decode(row[0])
        if version == 0:
            raise NotFoundError(f"session {session_id} has no plan yet; the planner records one "
                                "when it finishes", code="ACODE-STORE-002")
        raise NotFoundError(f"plan version {version} of session {session_id} not found; ask for "
                            "version 0 to get the latest", code="ACODE-STORE-002")

    def steps(self, session_id: str, visit: int) -> list[StepRecord]:
        """The step records of one executor visit, in the order they were first written."""
        with self._read(f"reading the steps of session {session_id}") as conn:
            rows = conn.execute("SELECT record FROM steps WHERE session_id = ? AND visit = ? "
                                "ORDER BY rowid", (session_id, visit))
            return [_STEP.decode(blob) for (blob,) in rows]

    # -- what is stored -------------------------------------------------------------------

    def _blob(self, record: Any) -> bytes:
        """``record`` redacted and encoded: every blob this store writes is made here."""
        return self._stored(record)[0]

    def _stored(self, record: T) -> tuple[bytes, T]:
        """``record`` as stored: its blob and the record the blob holds (``record`` itself
        unless something in it was redacted)."""
        encoded = encode(record)
        if self._trusted or self._redactor.clean(encoded):
            return encoded, record  # nothing in it to redact (the common case): encoded once
        redacted = self._redactor.redact_value(record)
        return encode(redacted), redacted

    def _text(self, text: str) -> str:
        """A free-text column's value, redacted."""
        return text if self._trusted else self._redactor.redact(text)

    # -- helpers inside a transaction -----------------------------------------------------

    @staticmethod
    def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise _session_not_found(session_id)

    def _append(self, conn: sqlite3.Connection, session_id: str, events: Iterable[Event]) -> Appended:
        seqs: list[int] = []
        inserted: list[Event] = []
        last: int | None = None
        for event in events:
            if not event.id:
                raise ProtocolError(f"an event of session {session_id} has an empty id; give every "
                                    "event a UUIDv7 so a retried commit stays idempotent",
                                    code="ACODE-PROTO-002")
            _check_owner("event", event.id, event.session_id, session_id)
            if last is None:
                (last,) = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?",
                                       (session_id,)).fetchone()
            seq = last + 1
            if isinstance(event, AnomalyDetected):
                event = _with_health(conn, session_id, event)
            body, stored = self._stored(msgspec.structs.replace(event, seq=seq, at=event.at or self._clock()))
            if conn.execute("INSERT INTO events (id, session_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT (id) DO NOTHING",
                            (stored.id, session_id, seq, stored.__struct_config__.tag, stored.at, body)).rowcount:
                last = seq
                seqs.append(seq)
                inserted.append(stored)
                if isinstance(stored, ToolCalled) and stored.counted:
                    _spend(conn, session_id, tool_calls=1)
                continue
            # stored before (a resent commit): answer its seq, publish nothing
            seqs.append(conn.execute("SELECT seq FROM events WHERE id = ?", (event.id,)).fetchone()[0])
        return Appended(seqs=seqs, inserted=inserted)


def _spend(conn: sqlite3.Connection, session_id: str, *, answer: ModelAnswer | None = None, model_ms: float = 0.0,
           tool_calls: int = 0) -> None:
    """Count what was stored now in the session's usage (in its transaction: never twice)."""
    tokens_in, tokens_out = (answer.usage.prompt_tokens, answer.usage.completion_tokens) if answer else (0, 0)
    conn.execute("INSERT INTO usage (session_id, tokens_in, tokens_out, tool_calls, model_ms) VALUES (?, ?, ?, ?, ?) "
                 "ON CONFLICT (session_id) DO UPDATE SET tokens_in = tokens_in + excluded.tokens_in, "
                 "tokens_out = tokens_out + excluded.tokens_out, tool_calls = tool_calls + excluded.tool_calls, "
                 "model_ms = model_ms + excluded.model_ms",
                 (session_id, tokens_in, tokens_out, tool_calls, model_ms))


def _with_health(conn: sqlite3.Connection, session_id: str, event: AnomalyDetected) -> AnomalyDetected:
    """``event`` with the session's health as its records say it is now, the event itself
    counted (protocol.sessions.health); a copy already stored keeps the figure it was stored with."""
    if conn.execute("SELECT 1 FROM events WHERE id = ?", (event.id,)).fetchone() is not None:
        return event
    row = conn.execute("SELECT snapshot FROM sessions WHERE id = ?", (session_id,)).fetchone()
    snapshot = _SNAPSHOT.decode(row[0])
    events = [_EVENT.decode(blob) for (blob,) in conn.execute(
        "SELECT body FROM events WHERE session_id = ? ORDER BY seq", (session_id,))]
    spent = _spent(conn, session_id).plus(Spent(running_s=snapshot.running_s))
    return msgspec.structs.replace(event, health=session_health([*events, event], snapshot.settings.budget, spent))


def _spent(conn: sqlite3.Connection, session_id: str) -> Spent:
    row = conn.execute("SELECT tokens_in, tokens_out, tool_calls, model_ms FROM usage WHERE session_id = ?",
                       (session_id,)).fetchone()
    return Spent() if row is None else Spent(tokens_in=row[0], tokens_out=row[1], tool_calls=row[2], model_ms=row[3])


def _require(conn: sqlite3.Connection, session_id: str, requires: Requirement) -> None:
    """Raise ACODE-STORE-004 (retryable) unless every record ``requires`` names is stored."""
    missing: list[str] = []
    wanted = list(dict.fromkeys(requires.events))
    for start in range(0, len(wanted), 500):  # SQLite's bound on parameters
        part = wanted[start:start + 500]
        found = {row[0] for row in conn.execute(
            f"SELECT id FROM events WHERE id IN ({','.join('?' * len(part))})", part)}
        missing += [key for key in part if key not in found]
    if missing:
        raise StorageError(f"the commit to session {session_id} depends on {len(missing)} record(s) not stored yet "
                           f"(first: {missing[0]}); it is refused until they are (a stage's last write on its way)",
                           code="ACODE-STORE-004", retryable=True)
