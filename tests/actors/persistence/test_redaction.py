"""Nothing secret is stored: the raw database file holds no token and no known secret value."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from actors.persistence.service import dispatch
from actors.persistence.store import Store
from protocol import codec
from protocol.basics import redact
from protocol.basics.ids import new_id
from protocol.errors import ErrorInfo
from protocol.messages import Commit
from protocol.plans.results import ModelAnswer, ModelToolCall, ToolResult
from protocol.sessions.events import SessionFinished, StageFinished, ToolCalled
from tests.actors.persistence import records

GITHUB = "gh" + "p_" + "aB3dE5fG7h" * 3 + "J9kL2m"
KNOWN = "Zq8-" + "wX4vY2" * 4  # the value of a secret in the environment
SECRETS = [GITHUB.encode(), KNOWN.encode()]
LEAK = f"a {GITHUB} and {KNOWN}"
REDACTED = "a [REDACTED:github-token] and [REDACTED:known-secret]"


@pytest.fixture
def store(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A store with the process's own redactor, made with a secret in the environment."""
    monkeypatch.setattr(redact, "_default", None)
    monkeypatch.setattr(redact, "_extra", set())
    monkeypatch.setenv("DEPLOY_API_TOKEN", KNOWN)
    with Store(home / "acode.db") as store:
        yield store


def _raw(path: str) -> bytes:
    """The database file and its write-ahead log, byte for byte."""
    return b"".join(p.read_bytes() for p in (Path(path), Path(path + "-wal")) if p.exists())


def test_no_record_leaves_a_secret_in_the_database_file(store: Store) -> None:
    session_id = new_id()
    snapshot = msgspec.structs.replace(records.snapshot(session_id), task=LEAK)
    failure = ErrorInfo(code="ACODE-EXEC-002", message=LEAK)
    appended = store.commit(
        session_id,
        [records.created(session_id),
         StageFinished(id=new_id(), session_id=session_id, stage="executor", visit=1, attempt=1, ok=False,
                       summary=LEAK, error=failure)],
        snapshot=snapshot, plan=records.plan(1, goal=LEAK),
        steps=[records.step(session_id, summary=LEAK)])
    key = f"{session_id}:e1:T1/S1:t0:c0"
    store.begin_tool_call(key, session_id=session_id, tool="run_terminal", risk="execute",
                          arguments={"command": f"curl -H 'X-Token: {KNOWN}' {GITHUB}"})
    result = ToolResult(key=key, tool="run_terminal", ok=False, output=LEAK, error=failure,
                        exit_code=1, risk="execute")
    finished = store.finish_tool_call(key, session_id=session_id, result=result, event=ToolCalled(
        id=new_id(), session_id=session_id, key=key, tool="run_terminal", ok=False, summary=LEAK))
    request_hash = hashlib.sha256(b"a model request").hexdigest()
    store.claim_model_answer(request_hash, session_id=session_id, stage="executor")
    store.record_model_answer(request_hash, ModelAnswer(content=LEAK, tool_calls=[
        ModelToolCall(id="call-1", name="write_file", arguments={"path": ".env", "content": f"TOKEN={KNOWN}"})]))
    store.commit(session_id, [SessionFinished(id=new_id(), session_id=session_id, status="failed", exit_code=1,
                                              error=failure)])

    raw = _raw(store.path)
    assert [secret for secret in SECRETS if secret in raw] == []
    # The records are there, redacted, and the ids and hashes that are keys are untouched.
    assert b"[REDACTED:github-token]" in raw and b"[REDACTED:known-secret]" in raw
    assert request_hash.encode() in raw and session_id.encode() in raw and key.encode() in raw
    assert store.events(session_id)[1].error == ErrorInfo(code="ACODE-EXEC-002", message=REDACTED)
    assert store.session(session_id).task == REDACTED
    # What is published is what was stored.
    assert finished.inserted == store.events(session_id)[2:3]
    assert appended.inserted == store.events(session_id)[:2]
    assert finished.inserted[0].summary == REDACTED

    store.close()  # the last connection checkpoints the log into the database file
    assert [secret for secret in SECRETS if secret in _raw(store.path)] == []


def test_a_journaled_call_is_found_again_by_its_key(store: Store) -> None:
    session_id = new_id()
    store.commit(session_id, snapshot=records.snapshot(session_id))
    key = f"{session_id}:e1:{GITHUB}/S1:t0:c0"  # a step label from the model may hold anything
    store.begin_tool_call(key, session_id=session_id, tool="read_file")
    store.finish_tool_call(key, session_id=session_id, result=records.tool_result(key, output="ok"),
                           event=records.tool_called(session_id, key))
    state = store.begin_tool_call(key, session_id=session_id, tool="read_file")
    assert state.state == "done"
    assert state.result is not None and state.result.output == "ok"
    assert GITHUB.encode() not in _raw(store.path)


def _through_a_group(store: Store, requests: list[Commit]) -> None:
    """Serve ``requests`` as the persistence actor does: one group, one item per request
    with its encoded body (the scan of the body decides whether its records are scanned)."""
    with store.group():
        for request in requests:
            with store.item(codec.encode(request)):
                dispatch(store, request)


def test_a_request_carrying_a_secret_is_redacted_record_by_record_in_a_group(store: Store) -> None:
    session_id = new_id()
    clean = Commit(session_id=session_id, snapshot=records.snapshot(session_id), events=[records.created(session_id)])
    leaky = Commit(session_id=session_id, events=[StageFinished(
        id=new_id(), session_id=session_id, stage="executor", visit=1, attempt=1, ok=False, summary=LEAK)],
        steps=[records.step(session_id, summary=LEAK)])
    _through_a_group(store, [clean, leaky, Commit(session_id=session_id, events=[records.transitioned(session_id)])])
    assert [secret for secret in SECRETS if secret in _raw(store.path)] == []
    summaries = [getattr(event, "summary", None) for event in store.events(session_id)]
    assert summaries[1] == REDACTED and len(summaries) == 3
    assert store.steps(session_id, 1)[0].summary == REDACTED


def test_a_clean_request_trusts_only_its_own_records(store: Store) -> None:
    """A clean body spares the scans of its own records only: a write made after its item
    (here a plain commit outside any item) is scanned again."""
    session_id = new_id()
    _through_a_group(store, [Commit(session_id=session_id, snapshot=records.snapshot(session_id))])
    store.commit(session_id, [StageFinished(id=new_id(), session_id=session_id, stage="executor", visit=1,
                                            attempt=1, ok=False, summary=LEAK)])
    with store.item(codec.encode(Commit(session_id=session_id))):  # outside a group: no savepoint, still scoped
        pass
    store.commit(session_id, steps=[records.step(session_id, summary=LEAK)])
    assert [secret for secret in SECRETS if secret in _raw(store.path)] == []
    assert store.events(session_id)[0].summary == REDACTED  # type: ignore[union-attr]


def test_named_secrets_and_connection_string_passwords_are_not_stored(store: Store) -> None:
    """issue 24 #10: ``password=…`` and a URL's password go the way of provider tokens."""
    session_id = new_id()
    store.commit(session_id, snapshot=records.snapshot(session_id))
    content = 'DB_PASSWORD=hunter2-x9\nDATABASE_URL=postgres://app:s3cr3t-77@db/app\n{"api_key": "k-5150"}\n'
    key = f"{session_id}:e1:T1/S1:t0:c0"
    store.begin_tool_call(key, session_id=session_id, tool="write_file", risk="write",
                          arguments={"path": ".env", "content": content})
    store.finish_tool_call(key, session_id=session_id, result=records.tool_result(key, output=content),
                           event=ToolCalled(id=new_id(), session_id=session_id, key=key, tool="write_file", ok=True,
                                            summary=content))
    store.close()
    raw = _raw(store.path)
    assert [s for s in (b"hunter2-x9", b"s3cr3t-77", b"k-5150") if s in raw] == []
    assert b"DB_PASSWORD=[REDACTED:secret-value]" in raw and b"postgres://app:[REDACTED:url-password]@db" in raw
