"""Opening the database: migrations, refusal of a newer schema, pragmas, and the error boundary."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from actors.persistence.schema import LATEST, MIGRATIONS, migrate
from actors.persistence.store import Store
from protocol.basics.ids import new_id
from protocol.errors import ConfigError, StorageError
from tests.actors.persistence import records

TABLES = {"sessions", "events", "plans", "steps", "tool_calls", "model_answers", "usage"}


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def test_a_fresh_file_gets_every_migration_in_wal_mode(home: Path) -> None:
    path = home / "acode.db"
    with Store(path) as store:
        assert store.migrated_from == 0
    assert _query(path, "PRAGMA user_version") == [(LATEST,)]
    assert _query(path, "PRAGMA journal_mode") == [("wal",)]
    tables = {name for (name,) in _query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == TABLES


def test_reopening_a_current_database_migrates_nothing_and_keeps_the_data(home: Path) -> None:
    path = home / "acode.db"
    session_id = new_id()
    with Store(path) as store:
        store.commit(session_id, [records.created(session_id)], snapshot=records.snapshot(session_id))
    with Store(path, synchronous="normal") as store:
        assert store.migrated_from == LATEST
        assert [e.seq for e in store.events(session_id)] == [1]


def test_a_database_newer_than_this_code_is_refused_and_left_alone(home: Path) -> None:
    path = home / "acode.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    with pytest.raises(StorageError) as info:
        Store(path)
    assert info.value.code == "ACODE-STORE-003"
    assert info.value.message == (f"database {path} has schema version {LATEST + 1}, newer than the version "
                                  f"{LATEST} this acode knows; upgrade acode, or point the persistence "
                                  "actor at another database")
    assert _query(path, "PRAGMA user_version") == [(LATEST + 1,)]
    assert _query(path, "SELECT name FROM sqlite_master") == []


def test_migration_steps_run_in_order_from_the_version_found(home: Path) -> None:
    step_two = ("CREATE TABLE approvals (id TEXT PRIMARY KEY)",)
    with closing(sqlite3.connect(home / "acode.db", isolation_level=None)) as conn:
        assert migrate(conn, "acode.db") == 0
        assert migrate(conn, "acode.db", (*MIGRATIONS, step_two)) == LATEST
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST + 1,)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'approvals'").fetchone() == ("approvals",)


def test_a_failing_migration_step_leaves_the_database_at_its_old_version(home: Path) -> None:
    broken = ("CREATE TABLE approvals (id TEXT PRIMARY KEY)", "CREATE TABLE approvals (id TEXT)")
    with closing(sqlite3.connect(home / "acode.db", isolation_level=None)) as conn:
        migrate(conn, "acode.db")
        with pytest.raises(sqlite3.OperationalError):
            migrate(conn, "acode.db", (*MIGRATIONS, broken))
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST,)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'approvals'").fetchone() is None


def test_a_sqlite_failure_becomes_a_storage_error_naming_the_file(home: Path) -> None:
    path = home / "no-such-dir" / "acode.db"
    with pytest.raises(StorageError) as info:
        Store(path)
    assert info.value.code == "ACODE-STORE-001"
    assert info.value.message == (f"database error while opening the database in {path}: unable to open "
                                  "database file; check the disk space and the file's permissions, then retry")
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_a_closed_store_refuses_work_and_closes_twice_quietly(home: Path) -> None:
    store = Store(home / "acode.db")
    store.close()
    store.close()
    with pytest.raises(StorageError) as info:
        store.sessions()
    assert info.value.message == f"the store for {home / 'acode.db'} is closed; open a new one"


def test_an_unknown_synchronous_level_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Store(home / "acode.db", synchronous="off")  # type: ignore[arg-type]
    assert str(info.value) == ("synchronous 'off' is not one of full, normal; fix the persistence options "
                               "(ACODE-CFG-001)")
