"""The shared pieces of the HTTP providers: estimates, arguments, Retry-After, logging, keys."""

from __future__ import annotations

import email.utils

import pytest
import structlog

from actors.llm.http import estimate_tokens, lines, parse_arguments, retry_after_seconds
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.calls.tools import tool_definitions
from protocol.errors import ModelError
from protocol.plans.results import ModelToolCall
from tests.actors.llm.conftest import REQUEST, ask, model_for, spec_for
from tests.modelserver import ModelServer, Status, Text


def test_the_estimate_counts_four_characters_a_token_over_everything_sent() -> None:
    messages = [ChatMessage(role="user", content="x" * 400)]
    assert estimate_tokens(ModelRequest(stage="planner", call_site="t", messages=messages)) == 100
    with_tools = estimate_tokens(ModelRequest(stage="executor", call_site="t", messages=messages,
                                              tools=tool_definitions()))
    with_schema = estimate_tokens(ModelRequest(stage="planner", call_site="t", messages=messages,
                                               json_schema={"type": "object", "description": "y" * 400}))
    calls = [ChatMessage(role="assistant", tool_calls=[ModelToolCall(id="c", name="write_file",
                                                                     arguments={"content": "z" * 400})])]
    with_calls = estimate_tokens(ModelRequest(stage="executor", call_site="t", messages=messages + calls))
    assert with_tools > 100 + 500  # the tool definitions are a few thousand characters
    assert 200 < with_schema < 220
    assert 200 < with_calls < 230


@pytest.mark.parametrize(("raw", "arguments", "invalid"), [
    ({"path": "a"}, {"path": "a"}, ""),
    ('{"path": "a"}', {"path": "a"}, ""),
    ("", {}, ""),
    ("  ", {}, ""),
    ('{"path": ', {}, '{"path": '),
    ('["a"]', {}, '["a"]'),
    ("null", {}, "null"),
    (["a"], {}, '["a"]'),
])
def test_arguments_become_an_object_or_stay_as_invalid_text(raw: object, arguments: dict[str, object],
                                                            invalid: str) -> None:
    call = parse_arguments("c1", "read_file", raw)
    assert (call.arguments, call.invalid_arguments) == (arguments, invalid)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds("-3") == 0.0
    now = 1_700_000_000.0
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_lines_are_split_across_chunk_boundaries() -> None:
    assert list(lines([b'{"a":', b' 1}\r\n{"b"', b": 2}\n\n", b"tail"])) == ['{"a": 1}', '{"b": 2}', "", "tail"]
    assert list(lines([b"caf\xc3", b"\xa9\n"])) == ["café"]


def test_a_prompt_larger_than_num_ctx_logs_a_warning(server: ModelServer) -> None:
    big = ModelRequest(stage="planner", call_site="t", messages=[*REQUEST.messages,
                                                                 ChatMessage(role="user", content="x" * 8_000)])
    server.queue(Text("ok"), Text("ok"))
    model = model_for(spec_for("ollama", server.url, num_ctx=1_024))
    try:
        with structlog.testing.capture_logs() as logs:
            ask(model, big)
            ask(model)
    finally:
        model.close()
    warnings = [e for e in logs if e["event"] == "prompt_may_exceed_context"]
    assert len(warnings) == 1
    assert warnings[0]["num_ctx"] == 1_024 and warnings[0]["estimated_tokens"] == estimate_tokens(big)
    assert warnings[0]["log_level"] == "warning"


def test_the_api_key_is_sent_as_a_bearer_token_and_never_logged(server: ModelServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACODE_TEST_KEY", "sk-test-0123456789abcdef")
    server.queue(Text("ok"))
    model = model_for(spec_for("openai", server.openai_url, api_key_env="ACODE_TEST_KEY"))
    try:
        with structlog.testing.capture_logs() as logs:
            ask(model)
    finally:
        model.close()
    assert server.chats[0].headers["authorization"] == "Bearer sk-test-0123456789abcdef"
    assert "sk-test" not in repr(logs)
    assert "sk-test" not in repr(model.__dict__)


def test_a_missing_key_variable_fails_before_sending(server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACODE_TEST_KEY", raising=False)
    model = model_for(spec_for("openai", server.openai_url, api_key_env="ACODE_TEST_KEY"))
    try:
        with pytest.raises(ModelError) as caught:
            ask(model)
    finally:
        model.close()
    assert caught.value.code == "ACODE-LLM-001"
    assert "api_key_env names 'ACODE_TEST_KEY', which is not set" in caught.value.message
    assert server.chats == []


def test_retries_are_logged_with_their_reason(server: ModelServer) -> None:
    server.queue(Status(503), Text("ok"))
    model = model_for(spec_for("ollama", server.url))
    try:
        with structlog.testing.capture_logs() as logs:
            ask(model)
    finally:
        model.close()
    [retry] = [e for e in logs if e["event"] == "model_call_retry"]
    assert (retry["attempt"], retry["of"], retry["code"]) == (1, 3, "ACODE-LLM-007")
    assert "answered HTTP 503" in retry["reason"]
    [done] = [e for e in logs if e["event"] == "model_answered"]
    assert done["attempts"] == 2 and done["provider"] == "ollama"
