"""The stand-in model server itself: the lead's pipeline tests rely on these behaviours."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest

from actors.llm.provider import ChatMessage, ModelRequest
from protocol.plans.stages import Stage
from tests.actors.llm.conftest import REQUEST, ask, model_for, spec_for
from tests.harness import REPO
from tests.modelserver import ByStage, Json, ModelServer, Received, Stall, Status, Text, ToolCalls


def _request(stage: Stage) -> ModelRequest:
    return ModelRequest(stage=stage, call_site="t", messages=[
        ChatMessage(role="system", content=f"You are the {stage} of acode. Do the thing."),
        ChatMessage(role="user", content="go")])


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_by_stage_answers_each_stage_from_its_own_list(server: ModelServer, kind: str) -> None:
    responder = server.by_stage(planner=[Json({"goal": "g"})], executor=[Text("e1"), Text("e2")],
                                reviewer=[Text("r")])
    model = model_for(spec_for(kind, server.url if kind == "ollama" else server.openai_url, max_retries=0))
    try:
        stages: list[Stage] = ["executor", "planner", "reviewer", "executor"]
        answers = [ask(model, _request(stage)).content for stage in stages]
    finally:
        model.close()
    assert answers == ["e1", '{"goal": "g"}', "r", "e2"]
    assert [r.stage for r in server.chats] == ["executor", "planner", "reviewer", "executor"]
    assert responder.left("executor") == 0


def test_a_request_with_nothing_queued_is_refused_and_recorded(server: ModelServer) -> None:
    server.by_stage(planner=[Text("p")])
    response = httpx.post(f"{server.url}/api/chat", json={
        "model": "test-model", "messages": [{"role": "system", "content": "You are the verifier of acode."}]})
    assert response.status_code == 400
    assert response.json() == {"error": "stand-in model server: no reply queued for the verifier (request /api/chat)"}
    assert [r.stage for r in server.unanswered] == ["verifier"]


def test_a_plain_callable_can_answer(server: ModelServer) -> None:
    def echo(request: Received) -> Text:
        return Text(f"you said {request.messages[-1]['content']}")

    server.responder = echo
    model = model_for(spec_for("openai", server.openai_url))
    try:
        assert ask(model).content == f"you said {REQUEST.messages[-1].content}"
    finally:
        model.close()


def test_models_are_listed_in_each_servers_shape(server: ModelServer) -> None:
    server.models = ["test-model", "qwen2.5-coder:7b"]
    tags = httpx.get(f"{server.url}/api/tags").json()
    assert [m["name"] for m in tags["models"]] == ["test-model:latest", "qwen2.5-coder:7b"]
    listed = httpx.get(f"{server.openai_url}/models").json()
    assert [m["id"] for m in listed["data"]] == ["test-model", "qwen2.5-coder:7b"]
    show = httpx.post(f"{server.url}/api/show", json={"model": "qwen2.5-coder:7b"}).json()
    assert show["model_info"]["llama.context_length"] == 32_768
    assert httpx.post(f"{server.url}/api/show", json={"model": "nope"}).status_code == 404


def test_a_missing_model_gets_each_servers_real_404(server: ModelServer) -> None:
    body = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
    ollama = httpx.post(f"{server.url}/api/chat", json=body)
    assert (ollama.status_code, ollama.json()) == (404, {"error": 'model "nope" not found, try pulling it first'})
    openai = httpx.post(f"{server.openai_url}/chat/completions", json=body)
    assert openai.status_code == 404
    assert openai.json()["error"]["code"] == "model_not_found"
    assert openai.json()["error"]["message"].startswith('Model "nope" not found. Please specify a valid model.')
    assert server.unanswered == []


def test_a_request_a_real_server_would_refuse_gets_a_400(server: ModelServer) -> None:
    server.queue(Text("never used"))
    bad = {"model": "test-model", "messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]}
    response = httpx.post(f"{server.url}/api/chat", json=bad)
    assert response.status_code == 400
    assert "cannot unmarshal string" in response.json()["error"]
    orphan = {"model": "test-model", "messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]}
    response = httpx.post(f"{server.openai_url}/chat/completions", json=orphan)
    assert response.status_code == 400


def test_status_replies_carry_their_headers_and_body(server: ModelServer) -> None:
    server.queue(Status(429, headers={"Retry-After": "3"}), Status(503, "overloaded"))
    body = {"model": "test-model", "messages": []}
    first = httpx.post(f"{server.openai_url}/chat/completions", json=body)
    assert (first.status_code, first.headers["retry-after"]) == (429, "3")
    assert first.json()["error"]["message"] == "stand-in server error 429"
    second = httpx.post(f"{server.url}/api/chat", json=body)
    assert (second.status_code, second.text) == (503, "overloaded")


def test_an_actor_subprocess_reaches_it_over_tcp(server: ModelServer) -> None:
    server.queue(ToolCalls([("read_file", {"path": "a.py"})]))
    script = textwrap.dedent(f"""
        import json, threading
        from actors.llm.ollama import OllamaModel
        from actors.llm.provider import ChatMessage, ModelRequest
        from protocol.sessions.session import OllamaProvider
        model = OllamaModel(OllamaProvider(base_url={server.url!r}, model="test-model"))
        answer = model.complete(ModelRequest(stage="executor", call_site="t", messages=[
            ChatMessage(role="system", content="You are the executor of acode.")]), seq=0, cancel=threading.Event())
        print(json.dumps([[c.name, c.arguments] for c in answer.tool_calls]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [["read_file", {"path": "a.py"}]]
    assert [r.stage for r in server.chats] == ["executor"]


def test_by_stage_can_be_filled_after_the_start() -> None:
    responder = ByStage()
    responder.add("planner", Text("a"), Text("b"))
    assert responder.left("planner") == 2


def test_a_client_that_waits_out_a_silent_start_gets_the_whole_answer(server: ModelServer) -> None:
    server.queue(Stall(text="late but whole", seconds=0.2, headers=False))
    model = model_for(spec_for("ollama", server.url))
    try:
        assert ask(model).content == "late but whole"
    finally:
        model.close()
    assert server.early_closes == 0
