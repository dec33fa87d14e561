"""Reading the two stream formats, including what real servers do that the stand-in does not.

These feed lines straight to ``read_stream``: variants such as tool-call deltas without an
index (some llama.cpp builds) or a stream ending without ``[DONE]`` are pinned here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors.llm.http import Transient, lines
from actors.llm.meter import Meter
from actors.llm.ollama import OllamaModel, same_model
from actors.llm.openai import OpenAICompatibleModel, sse_data
from actors.llm.toolcalls import check
from protocol import codec
from protocol.errors import ModelError
from protocol.sessions.session import OllamaProvider, OpenAIProvider


@pytest.fixture
def ollama() -> Any:
    model = OllamaModel(OllamaProvider(model="m"))
    yield model
    model.close()


@pytest.fixture
def openai() -> Any:
    model = OpenAICompatibleModel(OpenAIProvider(model="m"))
    yield model
    model.close()


def _sse(*events: Any) -> list[str]:
    out = []
    for event in events:
        out += [f"data: {event if isinstance(event, str) else json.dumps(event)}", ""]
    return out


def _delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_sse_data_joins_multi_line_events_and_skips_comments() -> None:
    assert list(sse_data(iter([": ping", "data: a", "data: b", "", "event: x", "data:c", ""]))) == ["a\nb", "c"]


def test_openai_tool_call_deltas_without_index_are_assembled_by_id(openai: Any) -> None:
    stream = _sse(
        _delta(tool_calls=[{"id": "a", "function": {"name": "read_file", "arguments": '{"pa'}}]),
        _delta(tool_calls=[{"function": {"name": "read_file", "arguments": 'th": "x"}'}}]),
        _delta(tool_calls=[{"id": "b", "function": {"name": "list_directory", "arguments": {"path": "."}}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}, "[DONE]")
    answer = openai.read_stream(iter(stream), "m")
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [
        ("a", "read_file", {"path": "x"}), ("b", "list_directory", {"path": "."})]


def test_openai_usage_comes_from_the_last_chunk(openai: Any) -> None:
    stream = _sse(_delta(content="hi"), {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
                  "[DONE]")
    answer = openai.read_stream(iter(stream), "m")
    assert (answer.content, answer.usage.prompt_tokens, answer.usage.completion_tokens) == ("hi", 9, 2)


def test_openai_stream_without_done_but_finished_is_accepted(openai: Any) -> None:
    stream = _sse(_delta(content="ok"), {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    assert openai.read_stream(iter(stream), "m").content == "ok"


def test_openai_stream_that_just_stops_is_transient(openai: Any) -> None:
    with pytest.raises(Transient) as caught:
        openai.read_stream(iter(_sse(_delta(content="half"))), "m")
    assert caught.value.code == "ACODE-LLM-010"


def test_openai_garbage_is_unreadable_and_not_retried(openai: Any) -> None:
    with pytest.raises(ModelError) as caught:
        openai.read_stream(iter(["data: <html>"]), "m")
    assert caught.value.code == "ACODE-LLM-010"
    assert "'<html>'; does base_url end in /v1?" in caught.value.message


def test_openai_error_event_about_the_model_is_a_missing_model(openai: Any) -> None:
    with pytest.raises(ModelError) as caught:
        openai.read_stream(iter(_sse({"error": {"message": "No models loaded. Please load a model first."}})), "m")
    assert caught.value.code == "ACODE-LLM-006"


def test_ollama_keeps_the_servers_call_ids_and_ignores_thinking(ollama: Any) -> None:
    stream = [json.dumps({"message": {"role": "assistant", "content": "", "thinking": "hmm"}, "done": False}),
              json.dumps({"message": {"role": "assistant", "content": "", "tool_calls": [
                  {"id": "call_x", "function": {"index": 0, "name": "read_file", "arguments": {"path": "a"}}}]},
                  "done": False}),
              "",
              json.dumps({"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 4})]
    answer = ollama.read_stream(iter(stream), "m")
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("call_x", "read_file", {"path": "a"})]
    assert (answer.content, answer.usage.prompt_tokens, answer.usage.completion_tokens) == ("", 0, 4)


def test_ollama_stream_without_done_is_transient(ollama: Any) -> None:
    with pytest.raises(Transient) as caught:
        ollama.read_stream(iter([json.dumps({"message": {"content": "half"}, "done": False})]), "m")
    assert caught.value.code == "ACODE-LLM-010"


def test_ollama_garbage_is_unreadable_and_not_retried(ollama: Any) -> None:
    with pytest.raises(ModelError) as caught:
        ollama.read_stream(iter(["data: {}"]), "m")
    assert caught.value.code == "ACODE-LLM-010"
    assert "is base_url an Ollama server?" in caught.value.message


def test_ollama_error_line_about_a_missing_model_is_a_missing_model(ollama: Any) -> None:
    with pytest.raises(ModelError) as caught:
        ollama.read_stream(iter([json.dumps({"error": "model 'm' not found"})]), "m")
    assert caught.value.code == "ACODE-LLM-006"
    assert caught.value.message.endswith("run: ollama pull m")


@pytest.mark.parametrize(("wanted", "listed", "same"), [
    ("llama3", "llama3:latest", True), ("llama3:latest", "llama3", True),
    ("qwen2.5-coder:7b", "qwen2.5-coder:7b", True),
    ("qwen2.5-coder", "qwen2.5-coder:7b", False), ("host:5000/ns/model", "host:5000/ns/model:latest", True),
])
def test_ollama_names_match_with_or_without_latest(wanted: str, listed: str, same: bool) -> None:
    assert same_model(wanted, listed) is same


def test_the_meter_counts_ollama_chunks_that_carry_text_or_calls_then_takes_eval_count(ollama: Any) -> None:
    meter = Meter()
    seen: list[int] = []

    def lines() -> Any:
        for piece in ["The", " plan", "", " is"]:
            yield json.dumps({"message": {"role": "assistant", "content": piece}, "done": False})
            seen.append(meter.tokens)
        yield json.dumps({"message": {"role": "assistant", "content": "",
                                      "tool_calls": [{"function": {"name": "read_file", "arguments": {}}}]},
                          "done": False})
        seen.append(meter.tokens)
        yield json.dumps({"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 42})

    ollama.read_stream(lines(), "m", meter)
    assert seen == [1, 2, 2, 3, 4], "an empty chunk is not a token"
    assert (meter.tokens, meter.counted_by) == (42, "server")


def test_the_meter_counts_openai_deltas_and_a_running_usage_count_wins(openai: Any) -> None:
    meter = Meter()
    seen: list[tuple[int, str]] = []

    def lines() -> Any:
        for event in [_delta(content="a"), _delta(content="b"),
                      _delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "x", "arguments": "{"}}]),
                      {**_delta(content="c"), "usage": {"prompt_tokens": 9, "completion_tokens": 7}},
                      _delta(content="d"),  # chunks no longer count once the server does
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]:
            yield from _sse(event)
            seen.append((meter.tokens, meter.counted_by))
        yield from _sse("[DONE]")

    openai.read_stream(lines(), "m", meter)
    assert seen == [(1, "chunks"), (2, "chunks"), (3, "chunks"), (7, "server"), (7, "server"), (7, "server")]


def test_a_meter_restarts_its_count_for_a_retry_and_stops_its_seconds_when_finished() -> None:
    now = [100.0]
    meter = Meter(clock=lambda: now[0])
    meter.chunk(5)
    now[0] = 102.5
    meter.restart()
    assert (meter.tokens, meter.elapsed()) == (0, 2.5), "a retried answer starts from nothing; the wait goes on"
    meter.finish()
    now[0] = 110.0
    assert meter.elapsed() == 2.5


# -- a lone UTF-16 surrogate escape, which msgspec refuses -------------------------------------------

def _storable(answer: Any) -> None:
    """The answer goes on the wire and into the record as it is."""
    assert codec.encode(answer)


def test_openai_chunks_with_a_lone_surrogate_keep_the_answer_and_the_call_for_the_executor_to_refuse(
        openai: Any) -> None:
    # json.dumps writes "\udcff" as the escape msgspec refuses; as a raw character inside the
    # arguments' fragment, and as an escape in the arguments' own JSON text
    stream = _sse(
        _delta(content="I think \udcff so"),
        _delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "write_file", "arguments": '{"path": "x'}}]),
        _delta(tool_calls=[{"index": 0, "function": {"arguments": '\udcff", "content": "y"}'}}]),
        _delta(tool_calls=[{"index": 1, "id": "b", "function": {
            "name": "run_terminal", "arguments": json.dumps({"command": "echo \ud800"})}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}, "[DONE]")
    answer = openai.read_stream(iter(stream), "m")
    assert answer.content == "I think \ufffd so"
    assert [(c.id, c.name, c.arguments, c.invalid_arguments) for c in answer.tool_calls] == [
        ("a", "write_file", {}, '{"path": "x\\udcff", "content": "y"}'),
        ("b", "run_terminal", {}, '{"command": "echo \\ud800"}')]
    _storable(answer)
    assert [(check(c) or "").split(" holds ")[0] for c in answer.tool_calls] == [
        "invalid arguments for write_file: `$.path`", "invalid arguments for run_terminal: `$.command`"]


def test_ollama_chunks_with_a_lone_surrogate_keep_the_answer_and_the_call_for_the_executor_to_refuse(
        ollama: Any) -> None:
    stream = [json.dumps({"message": {"role": "assistant", "content": "caf\udcff"}, "done": False}),
              json.dumps({"message": {"role": "assistant", "content": "", "tool_calls": [
                  {"function": {"name": "modify_file", "arguments": {
                      "path": "a.py", "edits": [{"search": "\udcff", "replace": "é"}]}}}]}, "done": False}),
              json.dumps({"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 4})]
    answer = ollama.read_stream(iter(stream), "m")
    assert answer.content == "caf\ufffd"
    [call] = answer.tool_calls
    assert (call.arguments, call.invalid_arguments) == (
        {}, '{"path": "a.py", "edits": [{"search": "\\udcff", "replace": "é"}]}')
    _storable(answer)
    assert (check(call) or "").startswith(
        "invalid arguments for modify_file: `$.edits[0].search` holds a lone UTF-16 surrogate (\\udcff) at "
        "character offset 0")


def test_invalid_utf8_from_the_server_is_read_as_replacement_characters(openai: Any) -> None:
    raw = [b'data: {"choices": [{"index": 0, "delta": {"content": "a\xff\xed\xb3\xbfb"}, "finish_reason": "stop"}]}\n',
           b"\n", b"data: [DONE]\n", b"\n"]
    answer = openai.read_stream(lines(iter(raw)), "m")
    assert answer.content == "a\ufffd\ufffd\ufffd\ufffdb"
    _storable(answer)


def test_a_chunk_malformed_otherwise_is_still_refused(openai: Any, ollama: Any) -> None:
    with pytest.raises(ModelError, match="not a chat chunk"):
        openai.read_stream(iter(['data: {"choices": [NaN], "x": "\\udcff"}']), "m")  # json reads it: not a chunk
    with pytest.raises(ModelError, match="not an answer chunk"):
        ollama.read_stream(iter(['{"message": {"content": "\\udcff"}, "done": nope}']), "m")  # not JSON at all
