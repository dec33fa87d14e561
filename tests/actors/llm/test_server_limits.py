"""What real model servers need from a provider (issue 15): output caps on every request,
a cut answer reported as such, permanent server errors tried once, complete tool calls
kept when the stream fails after them, and arguments that were not JSON never echoed."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from actors.llm.http import HttpModel
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.calls.tools import tool_definitions
from protocol.errors import ModelError
from protocol.plans.results import ModelToolCall
from tests.actors.llm.conftest import REQUEST, ask
from tests.modelserver import Json, ModelServer, Text, ToolCalls, ToolCallsThenError

Make = Callable[..., HttpModel]
EXECUTOR = ModelRequest(stage="executor", call_site="t", tools=tool_definitions(), messages=REQUEST.messages)


def _cap(body: dict, kind: str) -> int:
    return int(body["options"]["num_predict"] if kind == "ollama" else body["max_tokens"])


def test_every_request_carries_the_stages_cap(server: ModelServer, make: Make, kind: str) -> None:
    server.queue(Text("a"), Text("b"), Text("c"), Text("d"))
    model = make(max_tokens=3_000, stage_max_tokens={"executor": 1_500})
    ask(model)
    ask(model, EXECUTOR)
    ask(make(), ModelRequest(stage="verifier", call_site="t", messages=REQUEST.messages))
    ask(make(), ModelRequest(stage="verifier", call_site="t", messages=REQUEST.messages, max_tokens=64))
    assert [_cap(r.body, kind) for r in server.chats] == [3_000, 1_500, 1_024, 64]


def test_the_cap_never_exceeds_the_context_left_after_the_prompt(server: ModelServer, make: Make,
                                                                 kind: str) -> None:
    server.queue(Text("a"), Text("b"))
    long = ModelRequest(stage="planner", call_site="t", messages=[
        ChatMessage(role="system", content="You are the planner of acode."),
        ChatMessage(role="user", content="x" * 12_000)])  # 3,000 tokens at 4 characters a token
    ask(make(num_ctx=4_096), long)
    ask(make(num_ctx=2_048), long)  # the prompt alone fills it: the floor, and the server decides
    caps = [_cap(r.body, kind) for r in server.chats]
    assert 4_096 - 3_010 <= caps[0] <= 4_096 - 3_000
    assert caps[1] == 256


@pytest.mark.parametrize("reply", [Text("{\"goal\": \"loop", finish="length", usage=(900, 4_096)),
                                   Json({"goal": "x" * 40}, finish="length", usage=(900, 4_096))])
def test_an_answer_cut_at_the_cap_is_its_own_error_and_not_retried(server: ModelServer, make: Make,
                                                                     reply: Text | Json) -> None:
    server.queue(reply, Text("never asked"))
    with pytest.raises(ModelError) as caught:
        ask(make())
    assert caught.value.code == "ACODE-LLM-012"
    assert "cut at the token limit after 4096 tokens" in caught.value.message
    assert "model.stage_max_tokens.planner" in caught.value.message and "--ctx-size" in caught.value.message
    assert len(server.chats) == 1


@pytest.mark.parametrize("kind", ["openai"])
def test_a_context_overflow_is_recognised_with_its_fix_and_tried_once(make: Make, kind: str) -> None:
    with ModelServer(n_ctx=1_024) as small:
        model = make(base_url=small.openai_url, num_ctx=8_192)
        big = ModelRequest(stage="planner", call_site="t", messages=[
            ChatMessage(role="system", content="You are the planner of acode."),
            ChatMessage(role="user", content="y" * 8_000)])
        with pytest.raises(ModelError) as caught:
            ask(model, big)
        assert caught.value.code == "ACODE-LLM-013"
        assert "exceeds the available context size (1024 tokens)" in caught.value.message
        assert "--ctx-size" in caught.value.message and "model.num_ctx" in caught.value.message
        assert len(small.chats) == 1


@pytest.mark.parametrize("kind", ["openai"])
def test_llama_server_without_jinja_is_a_permanent_error_tried_once(make: Make, kind: str) -> None:
    with ModelServer(jinja=False) as plain:
        plain.queue(ToolCalls([("read_file", {"path": "a"})]))
        with pytest.raises(ModelError) as caught:
            ask(make(base_url=plain.openai_url, max_retries=3), EXECUTOR)
        assert caught.value.code == "ACODE-LLM-014"
        assert "start llama-server with --jinja and a chat template that supports tools" in caught.value.message
        assert len(plain.chats) == 1, "a permanent 500 is not retried"
        ask(make(base_url=plain.openai_url), REQUEST)  # without tools it answers


def test_a_complete_tool_call_is_kept_when_the_stream_fails_after_it(server: ModelServer, make: Make) -> None:
    server.queue(ToolCallsThenError([("write_file", {"path": "a.txt", "content": "hi\n"})]))
    answer = ask(make(max_retries=3), EXECUTOR)
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("write_file", {"path": "a.txt",
                                                                                   "content": "hi\n"})]
    assert len(server.chats) == 1, "not retried identically"


def test_output_the_server_could_not_parse_comes_back_for_a_correction(server: ModelServer, make: Make) -> None:
    server.queue(ToolCallsThenError([]))
    answer = ask(make(max_retries=3), EXECUTOR)
    assert answer.tool_calls == [] and answer.format_error.startswith("Failed to parse input at pos 57")
    assert len(server.chats) == 1


def test_arguments_that_were_not_json_go_back_as_an_empty_object(server: ModelServer, make: Make,
                                                                 kind: str) -> None:
    bad = ModelToolCall(id="call_8", name="write_file", invalid_arguments='{"path": ')
    request = ModelRequest(stage="executor", call_site="t", tools=tool_definitions(), messages=[
        *REQUEST.messages, ChatMessage(role="assistant", tool_calls=[bad]),
        ChatMessage(role="tool", tool_call_id="call_8", name="write_file", content="error: not JSON")])
    server.queue(Text("ok"))
    assert ask(make(), request).content == "ok"  # llama.cpp (the stand-in) answers 500 to '{"path": '


def test_the_servers_prompt_counts_calibrate_the_estimate(server: ModelServer, make: Make) -> None:
    server.chars_per_token = 2.0
    server.queue(Text("a"), Text("b"))
    model = make(num_ctx=8_192)
    request = ModelRequest(stage="planner", call_site="t", messages=[
        ChatMessage(role="system", content="You are the planner of acode."),
        ChatMessage(role="user", content="z" * 6_000)])
    ask(model, request)
    ask(model, request)
    first, second = (_cap(r.body, "x" if r.kind == "openai" else "ollama") for r in server.chats)
    assert first == 4_096  # 6,000 characters at 4 a token leave room for the planner's 4,096
    assert second < 8_192 - 2_900, "at 2 characters a token the prompt takes ~3,000 of the 8,192"


def test_a_cancelled_wait_is_still_a_cancel(server: ModelServer, make: Make) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ModelError) as caught:
        ask(make(), cancel=cancel)
    assert caught.value.code == "ACODE-LLM-011"


@pytest.mark.parametrize(("message", "code", "fix"), [
    ("Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error", "ACODE-LLM-016",
     "raise model.max_tokens"),
    ("Jinja Exception: System message must be at the beginning", "ACODE-LLM-014", "--chat-template-file"),
])
def test_known_permanent_500_bodies_are_tried_once_with_their_fix(server: ModelServer, make: Make, message: str,
                                                                 code: str, fix: str) -> None:
    from tests.modelserver import Status

    server.queue(Status(500, {"error": {"code": 500, "message": message, "type": "server_error"}}), Text("no"))
    with pytest.raises(ModelError) as caught:
        ask(make(max_retries=3))
    assert caught.value.code == code and fix in caught.value.message
    assert len(server.chats) == 1


def test_an_unknown_500_is_still_retried(server: ModelServer, make: Make) -> None:
    from tests.modelserver import Status

    server.queue(Status(500, {"error": {"code": 500, "message": "slot busy", "type": "server_error"}}), Text("ok"))
    assert ask(make(max_retries=3)).content == "ok"
    assert len(server.chats) == 2
