"""The database schema as a list of migration steps, applied in order at open.

``PRAGMA user_version`` records how many steps a database has had: step ``n`` (1-based)
takes a database from version ``n - 1`` to ``n``. :func:`migrate` runs every missing
step and the version bump in one ``BEGIN IMMEDIATE`` transaction, so a crash mid-way
leaves the database at its old version, and two processes opening the same file at once
cannot both migrate it. A database newer than :data:`LATEST` (written by a later acode)
is refused rather than guessed at.

Never edit a released step: append a new one. Tables, one line each:

- ``sessions``: one row per session; ``snapshot`` is the msgpack ``SessionSnapshot``,
  ``status``/``created_at``/``updated_at`` are copied out of it for listing.
- ``events``: the append-only log; ``seq`` is 1, 2, … per session, ``body`` the msgpack
  event as published (with its ``seq`` and ``at``).
- ``plans``: every plan version of a session (first write of a version wins).
- ``steps``: finished executor steps per ``(session, visit, task, step)``; insertion order
  is the rowid order.
- ``tool_calls``: the tool-call journal, intent first, ``result`` once it is known.
- ``model_answers``: model answers by request hash, with their place ``seq`` in the
  ``(session, stage)`` sequence.
- ``usage`` (step 2): what each session has spent against its budget
  (:mod:`protocol.policy.budget`), counted in the transaction that first stores a model answer
  or a counted ``tool_called`` event, so a replayed answer or call never counts twice.

``tool_calls`` and ``model_answers`` are journals keyed by their own idempotency keys and
carry no foreign key to ``sessions``; the ``tool_called`` event that closes a tool call
does, through ``events``.
"""

from __future__ import annotations

import sqlite3

from protocol.errors import StorageError

__all__ = ["LATEST", "MIGRATIONS", "migrate"]

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the initial schema.
    (
        """CREATE TABLE sessions (
            id         TEXT PRIMARY KEY,
            status     TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            snapshot   BLOB NOT NULL
        )""",
        "CREATE INDEX sessions_by_created ON sessions (created_at)",
        """CREATE TABLE events (
            id         TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            seq        INTEGER NOT NULL CHECK (seq >= 1),
            type       TEXT NOT NULL,
            at         REAL NOT NULL,
            body       BLOB NOT NULL,
            UNIQUE (session_id, seq)
        )""",
        """CREATE TABLE plans (
            session_id TEXT NOT NULL REFERENCES sessions (id),
            version    INTEGER NOT NULL CHECK (version >= 1),
            plan       BLOB NOT NULL,
            PRIMARY KEY (session_id, version)
        )""",
        """CREATE TABLE steps (
            session_id TEXT NOT NULL REFERENCES sessions (id),
            visit      INTEGER NOT NULL,
            task       TEXT NOT NULL,
            step       TEXT NOT NULL,
            record     BLOB NOT NULL,
            PRIMARY KEY (session_id, visit, task, step)
        )""",
        """CREATE TABLE tool_calls (
            key         TEXT PRIMARY KEY,
            session_id  TEXT NOT NULL,
            tool        TEXT NOT NULL,
            arguments   BLOB NOT NULL,
            risk        TEXT NOT NULL,
            pre_image   TEXT,
            intent_at   REAL NOT NULL,
            result      BLOB,
            finished_at REAL
        )""",
        "CREATE INDEX tool_calls_by_session ON tool_calls (session_id)",
        """CREATE TABLE model_answers (
            request_hash TEXT PRIMARY KEY,
            session_id   TEXT NOT NULL,
            stage        TEXT NOT NULL,
            seq          INTEGER NOT NULL CHECK (seq >= 0),
            answer       BLOB,
            UNIQUE (session_id, stage, seq)
        )""",
    ),
    # 2: each session's spending against its budget (protocol.policy.budget); sessions from before count from here.
    (
        """CREATE TABLE usage (
            session_id TEXT PRIMARY KEY,
            tokens_in  INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            tool_calls INTEGER NOT NULL DEFAULT 0,
            model_ms   REAL NOT NULL DEFAULT 0
        )""",
    ),
)

#: The schema version this code writes and understands.
LATEST = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: str, steps: tuple[tuple[str, ...], ...] = MIGRATIONS) -> int:
    """Bring the database to version ``len(steps)``; return the version it had before.

    ``conn`` must be in autocommit mode (``isolation_level=None``). sqlite3 errors
    propagate for the caller's boundary to translate; a newer database raises
    :class:`StorageError` (ACODE-STORE-003). ``steps`` is for tests of the mechanism.
    """
    latest = len(steps)
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > latest:
            raise StorageError(
                f"database {path} has schema version {found}, newer than the version {latest} "
                "this acode knows; upgrade acode, or point the persistence actor at another "
                "database", code="ACODE-STORE-003")
        for version in range(found + 1, latest + 1):
            for statement in steps[version - 1]:
                conn.execute(statement)
        if found < latest:
            conn.execute(f"PRAGMA user_version = {latest}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found
