"""Both HTTP providers against the stand-in server, over real loopback HTTP.

Every test runs once per wire format (Ollama NDJSON, OpenAI SSE): the ``make`` fixture
builds a provider of the test's kind with small timeouts and backoffs.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from actors.llm.http import HttpModel, estimate_tokens
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.calls.tools import tool_definitions
from protocol.errors import ModelError
from protocol.plans.results import ModelToolCall
from tests.actors.llm.conftest import REQUEST, ask
from tests.harness import free_port
from tests.modelserver import (
    Disconnect,
    Json,
    MissingModel,
    ModelServer,
    Stall,
    Status,
    StreamError,
    Text,
    TextToolCalls,
    ToolCalls,
)

Make = Callable[..., HttpModel]




# -- answers ----------------------------------------------------------------------------------

def test_streamed_text_is_joined_from_its_chunks(server: ModelServer, make: Make) -> None:
    server.queue(Text("The plan has three steps.", chunks=5))
    answer = ask(make())
    assert answer.content == "The plan has three steps."
    assert answer.tool_calls == []
    [received] = server.chats
    assert received.body["stream"] is True
    assert received.body["model"] == "test-model"
    assert received.body["messages"][0] == {"role": "system", "content": REQUEST.messages[0].content}


def test_native_tool_calls_come_back_with_object_arguments(server: ModelServer, make: Make) -> None:
    server.queue(ToolCalls([("read_file", {"path": "greet.py"}), ("write_file", {"path": "a.py", "content": "x"})]))
    answer = ask(make(), ModelRequest(stage="executor", call_site="T1/S1/turn1", messages=REQUEST.messages,
                                      tools=tool_definitions()))
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [
        ("read_file", {"path": "greet.py"}), ("write_file", {"path": "a.py", "content": "x"})]
    assert len({c.id for c in answer.tool_calls}) == 2 and all(c.id for c in answer.tool_calls)
    assert server.chats[0].body["tools"] == tool_definitions()


def test_tool_calls_written_as_text_stay_text(server: ModelServer, make: Make) -> None:
    server.queue(TextToolCalls([("read_file", {"path": "a.py"})]))
    answer = ask(make())
    assert answer.tool_calls == []
    assert '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>' == answer.content


def test_invalid_tool_call_arguments_are_kept_as_text_not_raised(server: ModelServer, make: Make) -> None:
    server.queue(ToolCalls([("write_file", '{"path": "a.py", "content": '), ("read_file", '["a.py"]')]))
    answer = ask(make())
    assert [(c.name, c.arguments, c.invalid_arguments) for c in answer.tool_calls] == [
        ("write_file", {}, '{"path": "a.py", "content": '), ("read_file", {}, '["a.py"]')]


def test_the_json_schema_is_passed_through(server: ModelServer, make: Make, kind: str) -> None:
    schema = {"$ref": "#/$defs/VerifierAnswer", "$defs": {"VerifierAnswer": {
        "type": "object", "properties": {"passed": {"type": "boolean"}}, "required": ["passed"]}}}
    server.queue(Json({"passed": True}))
    answer = ask(make(), ModelRequest(stage="verifier", call_site="verdict", messages=REQUEST.messages,
                                      json_schema=schema))
    assert answer.content == '{"passed": true}'
    body = server.chats[0].body
    if kind == "ollama":
        assert body["format"] == schema
    else:
        assert body["response_format"] == {"type": "json_schema",
                                           "json_schema": {"name": "VerifierAnswer", "schema": schema}}


def test_sampling_options_are_sent(server: ModelServer, make: Make, kind: str) -> None:
    server.queue(Text("a"), Text("b"))
    ask(make(num_ctx=16_384, temperature=0.2, seed=42))
    ask(make())
    first, second = (r.body for r in server.chats)
    if kind == "ollama":
        assert first["options"] == {"num_ctx": 16_384, "num_predict": 4_096, "temperature": 0.2, "seed": 42}
        assert second["options"] == {"num_ctx": 8_192, "num_predict": 4_096, "temperature": 0.0}
    else:
        assert (first["temperature"], first["seed"]) == (0.2, 42)
        assert first["stream_options"] == {"include_usage": True}
        assert second["temperature"] == 0.0 and "seed" not in second


def test_stage_models_pick_the_model_per_stage(server: ModelServer, make: Make) -> None:
    server.models = ["test-model", "coder"]
    server.queue(Text("a"), Text("b"))
    model = make(stage_models={"executor": "coder"})
    ask(model)
    ask(model, ModelRequest(stage="executor", call_site="t", messages=REQUEST.messages))
    assert [r.model for r in server.chats] == ["test-model", "coder"]


def test_usage_comes_from_the_server_or_else_from_the_estimate(server: ModelServer, make: Make) -> None:
    server.queue(Text("twelve chars", usage=(123, 45)), Text("twelve chars", usage="omit"))
    model = make()
    reported, estimated = ask(model).usage, ask(model).usage
    assert (reported.prompt_tokens, reported.completion_tokens) == (123, 45)
    assert estimated.prompt_tokens == estimate_tokens(REQUEST) > 0
    assert estimated.completion_tokens == 3  # 12 characters at 4 a token


def test_a_conversation_with_tool_results_is_sent_in_the_servers_shape(server: ModelServer, make: Make,
                                                                       kind: str) -> None:
    call = ModelToolCall(id="call_7", name="read_file", arguments={"path": "a.py"})
    bad = ModelToolCall(id="call_8", name="write_file", invalid_arguments='{"path": ')
    request = ModelRequest(stage="executor", call_site="t", tools=tool_definitions(), messages=[
        *REQUEST.messages,
        ChatMessage(role="assistant", content="", tool_calls=[call, bad]),
        ChatMessage(role="tool", tool_call_id="call_7", name="read_file", content="1\tprint('hi')"),
        ChatMessage(role="tool", tool_call_id="call_8", name="write_file", content="error ACODE-EXEC-007")])
    server.queue(Text("done"))
    assert ask(make(), request).content == "done"  # the stand-in refuses (400) a shape its server would
    assistant, result, _ = server.chats[0].body["messages"][2:]
    if kind == "ollama":
        assert assistant["tool_calls"] == [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}},
                                           {"function": {"name": "write_file", "arguments": {}}}]
        assert result == {"role": "tool", "content": "1\tprint('hi')", "tool_name": "read_file"}
    else:
        assert assistant["tool_calls"] == [
            {"id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.py"}'}},
            # not '{"path": ': llama.cpp refuses a history whose arguments are not JSON (HTTP 500)
            {"id": "call_8", "type": "function", "function": {"name": "write_file", "arguments": "{}"}}]
        assert result == {"role": "tool", "tool_call_id": "call_7", "content": "1\tprint('hi')"}


# -- retries ------------------------------------------------------------------------------------

def test_a_500_is_retried_and_the_next_answer_used(server: ModelServer, make: Make) -> None:
    server.queue(Status(500), Status(503), Text("recovered"))
    assert ask(make()).content == "recovered"
    assert len(server.chats) == 3


def test_server_errors_past_the_retries_fail_with_the_servers_message(server: ModelServer, make: Make) -> None:
    server.queue(*[Status(500, {"error": "llama runner process has terminated"})] * 3)
    with pytest.raises(ModelError) as caught:
        ask(make(max_retries=2))
    assert caught.value.code == "ACODE-LLM-007"
    assert "answered HTTP 500: llama runner process has terminated after 3 attempts" in caught.value.message
    assert len(server.chats) == 3


def test_a_429_waits_as_long_as_retry_after_says(server: ModelServer, make: Make) -> None:
    server.queue(Status(429, headers={"Retry-After": "1"}), Text("after the wait"))
    assert ask(make(backoff_max_s=5)).content == "after the wait"
    first, second = server.chats
    assert second.at - first.at >= 0.95  # the backoff alone (at most 0.05 s) would have come back sooner


def test_a_retry_after_beyond_backoff_max_fails_at_once(server: ModelServer, make: Make) -> None:
    server.queue(Status(429, headers={"Retry-After": "120"}), Text("never asked"))
    with pytest.raises(ModelError) as caught:
        ask(make(backoff_max_s=30))
    assert caught.value.code == "ACODE-LLM-007"
    assert "the server asks to wait 120s, longer than backoff_max_s (30s)" in caught.value.message
    assert len(server.chats) == 1


def test_a_stream_that_stalls_hits_the_idle_timeout_and_is_retried(server: ModelServer, make: Make) -> None:
    server.queue(Stall(text="half an answer", chunks=1, seconds=30), Text("whole answer"))
    started = time.monotonic()
    assert ask(make(idle_timeout_s=0.3)).content == "whole answer"
    assert time.monotonic() - started < 2.0
    assert server.wait_for(lambda: server.early_closes == 1, timeout=2)  # the stalled request was closed


def test_a_stall_shorter_than_the_idle_timeout_is_waited_out(server: ModelServer, make: Make) -> None:
    server.queue(Stall(text="slow but steady", chunks=1, seconds=0.3))
    assert ask(make(idle_timeout_s=2.0)).content == "slow but steady"
    assert len(server.chats) == 1 and server.early_closes == 0


def test_no_first_token_in_time_times_out_after_the_retries(server: ModelServer, make: Make) -> None:
    server.queue(Stall(chunks=0, seconds=30), Stall(chunks=0, seconds=30, headers=False))
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        ask(make(first_token_timeout_s=0.3, max_retries=1))
    assert caught.value.code == "ACODE-LLM-008"
    assert "sent no answer within 0.3s after 2 attempts; raise first_token_timeout_s" in caught.value.message
    assert 0.6 <= time.monotonic() - started < 2.0
    assert server.wait_for(lambda: server.early_closes == 2, timeout=2)


def test_a_stream_cut_mid_answer_is_retried(server: ModelServer, make: Make) -> None:
    server.queue(Disconnect(chunks=2), Text("complete"))
    assert ask(make()).content == "complete"
    assert len(server.chats) == 2


def test_an_error_in_the_stream_is_retried_then_reported(server: ModelServer, make: Make) -> None:
    server.queue(StreamError("out of memory"), Text("fine now"))
    assert ask(make()).content == "fine now"
    server.queue(*[StreamError("out of memory")] * 2)
    with pytest.raises(ModelError) as caught:
        ask(make(max_retries=1))
    assert caught.value.code == "ACODE-LLM-007"
    assert "failed in the middle of test-model's answer: out of memory after 2 attempts" in caught.value.message


def test_a_refused_connection_is_retried_then_reported_unreachable(make: Make, kind: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
    with pytest.raises(ModelError) as caught:
        ask(make(base_url=base, max_retries=2))
    assert caught.value.code == "ACODE-LLM-005"
    assert f"at {base} is unreachable" in caught.value.message
    assert "after 3 attempts" in caught.value.message
    assert ("ollama serve" if kind == "ollama" else "Start Server") in caught.value.message


# -- failures that are not retried ------------------------------------------------------------------

def test_a_missing_model_fails_at_once_and_says_how_to_get_it(server: ModelServer, make: Make, kind: str) -> None:
    queue = server.queue(Text("never used"))
    with pytest.raises(ModelError) as caught:
        ask(make(model="qwen2.5-coder:7b"))
    assert caught.value.code == "ACODE-LLM-006"
    if kind == "ollama":
        assert caught.value.message.endswith("run: ollama pull qwen2.5-coder:7b")
    else:
        assert "'qwen2.5-coder:7b' is not available" in caught.value.message
        assert "lms load qwen2.5-coder:7b" in caught.value.message
    assert len(server.chats) == 1  # no retry reached the server
    assert len(queue.replies) == 1


def test_a_missing_model_reply_is_recognised_in_either_shape(server: ModelServer, make: Make) -> None:
    server.queue(MissingModel())
    with pytest.raises(ModelError) as caught:
        ask(make())
    assert caught.value.code == "ACODE-LLM-006"
    assert len(server.chats) == 1


@pytest.mark.parametrize("status", [400, 401, 422])
def test_other_4xx_fail_fast_with_the_servers_message(server: ModelServer, make: Make, kind: str,
                                                      status: int) -> None:
    server.queue(Status(status, {"error": {"message": "context length exceeded"}}), Text("never used"))
    with pytest.raises(ModelError) as caught:
        ask(make())
    assert caught.value.code == "ACODE-LLM-007"
    assert f"answered HTTP {status}: context length exceeded" in caught.value.message
    if status == 401:
        assert caught.value.message.endswith("check the server's access settings" if kind == "ollama" else
                                             "set api_key_env to the environment variable holding the server's key")
    assert len(server.chats) == 1


def test_a_wrong_path_says_to_check_base_url(server: ModelServer, make: Make) -> None:
    with pytest.raises(ModelError) as caught:
        ask(make(base_url=server.url + "/nothing-here"))
    assert caught.value.code == "ACODE-LLM-007"
    assert "HTTP 404: 404 page not found; check base_url" in caught.value.message


def test_a_remote_base_url_is_refused_before_any_connection(make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    connects: list[object] = []
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connects.append(a))
    with pytest.raises(ModelError) as caught:
        ask(make(base_url="http://203.0.113.5:11434"))
    assert caught.value.code == "ACODE-LLM-009"
    assert "'http://203.0.113.5:11434' points to 203.0.113.5" in caught.value.message
    assert "allow_remote: true" in caught.value.message
    assert connects == []


# -- cancellation -------------------------------------------------------------------------------

def _cancel_after(seconds: float) -> tuple[threading.Event, list[float]]:
    """An event set from a timer thread in ``seconds``; the list receives when it was set."""
    cancel, when = threading.Event(), []

    def fire() -> None:
        when.append(time.monotonic())
        cancel.set()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return cancel, when


def test_cancel_closes_the_request_and_raises_promptly(server: ModelServer, make: Make) -> None:
    server.queue(Stall(chunks=1, seconds=30))
    cancel, when = _cancel_after(0.3)
    with pytest.raises(ModelError) as caught:
        ask(make(first_token_timeout_s=60, idle_timeout_s=60), cancel=cancel)
    assert time.monotonic() - when[0] < 0.5
    assert caught.value.code == "ACODE-LLM-011"
    assert "the planner stage was cancelled while test-model was answering" in caught.value.message
    assert server.wait_for(lambda: server.early_closes == 1, timeout=2)  # the server saw the client leave
    assert len(server.chats) == 1


def test_cancel_while_waiting_for_the_first_token_closes_the_request(server: ModelServer, make: Make) -> None:
    server.queue(Stall(chunks=0, seconds=30, headers=False))
    cancel, when = _cancel_after(0.2)
    with pytest.raises(ModelError) as caught:
        ask(make(first_token_timeout_s=60), cancel=cancel)
    assert time.monotonic() - when[0] < 0.5
    assert caught.value.code == "ACODE-LLM-011"
    assert server.wait_for(lambda: server.early_closes == 1, timeout=2)


def test_cancel_during_a_backoff_ends_the_wait(server: ModelServer, make: Make) -> None:
    queue = server.queue(Status(429, headers={"Retry-After": "20"}), Text("never asked"))
    cancel, when = _cancel_after(0.2)
    with pytest.raises(ModelError) as caught:
        ask(make(backoff_max_s=60), cancel=cancel)
    assert time.monotonic() - when[0] < 0.5
    assert caught.value.code == "ACODE-LLM-011"
    assert len(server.chats) == 1 and len(queue.replies) == 1


def test_a_cancel_already_set_sends_nothing(server: ModelServer, make: Make) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ModelError) as caught:
        ask(make(), cancel=cancel)
    assert caught.value.code == "ACODE-LLM-011"
    assert server.chats == []
