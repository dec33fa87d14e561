"""What real model servers do, played by the stand-in server, through a real ``acode run`` (issue 15).

Each test gives :class:`tests.modelserver.ModelServer` one of llama.cpp's behaviours (its
own bodies and strings) and shows acode's answer to it: caps on every request, a cut
answer reported as such, a correction that fits the context, a permanent 500 tried once
with its fix, a tool call kept when the stream fails after it, tools the server dropped
diagnosed, a context overflow named, and the doctor printing the server's context.
The session-level pause for these codes comes with the escalation issue; until then the
session fails with the code and the fix. A session's model settings are resolved by
``acode run``, so the tests share one acode for the module (``shared``), each with its own
server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.modelserver import Json, ModelServer, Text, ToolCalls, ToolCallsThenError
from tests.system.conftest import Acode
from tests.system.test_models import APPROVE, VERDICT, _configure, _run, _session_id, _workspace, done, plan, write

pytestmark = pytest.mark.system


def _executor(server: ModelServer) -> list:
    return [r for r in server.chats if r.stage == "executor"]


@pytest.fixture
def llama() -> Iterator[ModelServer]:
    """A llama-server with an 8,192-token context that tokenizes at 2 characters a token."""
    with ModelServer(n_ctx=8_192, chars_per_token=2.0) as running:
        yield running


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_every_request_of_a_session_carries_its_stages_answer_cap(shared: Acode, tmp_path: Path, kind: str) -> None:
    with ModelServer() as server:
        _configure(shared, server, kind, ACODE_MODEL__MAX_TOKENS="3000", ACODE_MODEL__STAGE_MAX_TOKENS="verifier=700")
        server.by_stage(planner=[plan()], executor=[write(), done()], verifier=[VERDICT], reviewer=[APPROVE])
        code, out = _run(shared, _workspace(tmp_path))
        assert code == 0, out
        caps = [(r.stage, r.body["options"]["num_predict"] if kind == "ollama" else r.body["max_tokens"])
                for r in server.chats]
    assert caps == [("planner", 3_000), ("executor", 3_000), ("executor", 3_000), ("verifier", 700),
                    ("reviewer", 3_000)]
    assert "turn 1: 1 tool call" in out and "turn 2: 1 tool call" in out, "each executor turn is shown"
    first, second = _executor(server)
    assert first.messages[0] == second.messages[0] and first.body["tools"] == second.body["tools"], \
        "the system prompt and the tool block are byte-identical across turns (the prompt cache keeps them)"
    assert second.reread_tokens < second.prompt_tokens // 2


def test_a_plan_cut_at_the_token_limit_is_reported_as_truncation_not_corrected(
        shared: Acode, tmp_path: Path) -> None:
    with ModelServer() as server:
        _configure(shared, server, "openai")
        looping = {"goal": "g", "status": "ready", "tasks": [{"label": "T1", "title": "x " * 2_000}]}
        server.by_stage(planner=[Json(looping, finish="length", usage=(900, 4_096)), plan()])
        code, out = _run(shared, _workspace(tmp_path))
        planner = [r for r in server.chats if r.stage == "planner"]
    assert code == 22, out  # paused (escalation): raise the limit, then `acode resume`
    assert "paused (escalation)" in out
    assert "ACODE-LLM-012" in out and "cut at the token limit after 4096 tokens" in out
    assert "model.stage_max_tokens.planner" in out
    assert len(planner) == 1, "a cut answer spends no correction round"


def test_a_correction_repeats_only_what_fits_the_context(shared: Acode, llama: ModelServer, tmp_path: Path) -> None:
    _configure(shared, llama, "openai")
    rejected = plan(depends=True).value  # a cycle: sent back for correction
    rejected["tasks"][0]["description"] = "explain " * 1_800  # 14,400 characters: 7,200 tokens here
    llama.by_stage(planner=[Json(rejected), plan()], executor=[write(), done()], verifier=[VERDICT],
                   reviewer=[APPROVE])
    code, out = _run(shared, _workspace(tmp_path))
    assert code == 0, out
    first, retry = [r for r in llama.chats if r.stage == "planner"]
    answer_tokens = llama.tokens(len(json.dumps(rejected)))
    assert first.prompt_tokens + answer_tokens > 8_192, "repeating the whole answer would not have fit"
    assert retry.prompt_tokens + 4_096 <= 8_192, "the retry leaves the answer its room"
    assert retry.prompt_tokens < 8_192 and "more characters of this answer not repeated" in retry.prompt
    assert "cycle" in retry.prompt.lower()


def test_llama_server_without_jinja_is_tried_once_and_the_session_names_the_fix(
        shared: Acode, tmp_path: Path) -> None:
    with ModelServer(jinja=False) as server:
        _configure(shared, server, "openai")
        server.by_stage(planner=[plan()], executor=[write(), done()])
        code, out = _run(shared, _workspace(tmp_path))
        executor = _executor(server)
    assert code == 22, out
    assert "paused (model_unavailable)" in out and "ACODE-LLM-014" in out
    assert "start llama-server with --jinja and a chat template that supports tools" in out
    assert len(executor) == 1, "a permanent 500 is not retried"
    shown = shared("show", _session_id(out))
    messages = "\n".join(line for line in shown.stdout.splitlines() if not line.startswith("fix "))  # the fix alone
    assert messages.count("ACODE-LLM-014") == messages.count("--jinja and a chat template"), shown.stdout
    assert "fix       start llama-server with --jinja" in shown.stdout


def test_a_complete_tool_call_is_kept_when_the_server_fails_after_it(shared: Acode, tmp_path: Path) -> None:
    with ModelServer() as server:
        _configure(shared, server, "openai")
        server.by_stage(planner=[plan()],
                        executor=[ToolCallsThenError([("write_file", {"path": "greet.txt", "content": "hello\n"})]),
                                  done()],
                        verifier=[VERDICT], reviewer=[APPROVE])
        code, out = _run(shared, _workspace(tmp_path))
        executor = _executor(server)
    assert code == 0, out
    assert (tmp_path / "w" / "greet.txt").read_text() == "hello\n"
    assert len(executor) == 2, "the call ran; nothing was asked twice"


def test_tools_the_server_drops_are_diagnosed_after_two_silent_turns(shared: Acode, tmp_path: Path) -> None:
    with ModelServer(tools_in_prompt=False) as server:  # a chat template without tool support
        _configure(shared, server, "openai")
        server.by_stage(planner=[plan()], executor=[Text("I will now write greet.txt.")] * 10)
        code, out = _run(shared, _workspace(tmp_path))
        executor = _executor(server)
    assert code == 22, out
    assert "paused (model_unavailable)" in out and "  fix: start llama-server with --jinja" in out
    assert "ACODE-LLM-015" in out and "left the tools out of the prompt" in out and "--jinja" in out
    assert len(executor) == 2, "not ten silent turns"
    assert "turn 1: no tool call ran" in out and "sent: No tool call found in your answer" in out


def test_a_prompt_over_the_servers_context_is_named_with_its_fix(shared: Acode, tmp_path: Path) -> None:
    with ModelServer(n_ctx=600) as server:
        _configure(shared, server, "openai")
        server.by_stage(planner=[plan()])
        code, out = _run(shared, _workspace(tmp_path))
        planner = [r for r in server.chats if r.stage == "planner"]
    assert code == 22, out
    assert "paused (escalation)" in out
    assert "ACODE-LLM-013" in out and "exceeds the available context size (600 tokens)" in out
    assert "--ctx-size" in out
    assert len(planner) == 1


def test_doctor_prints_the_servers_context_length(acode: Acode, tmp_path: Path) -> None:
    with ModelServer(n_ctx=4_096) as server:
        _configure(acode, server, "openai")
        server.responder = lambda request: (ToolCalls([("record_number", {"number": 7})])
                                            if request.body.get("tools") else Json({"answer": 5}))
        result = acode("doctor", "-w", str(tmp_path))
    assert result.returncode == 1
    assert "test-model's context is 4096 tokens (llama.cpp GET /props default_generation_settings.n_ctx)" \
        in result.stdout
    assert "llama-server --ctx-size 8192" in result.stdout


def test_arguments_that_are_not_json_are_corrected_without_poisoning_the_history(
        shared: Acode, tmp_path: Path) -> None:
    with ModelServer() as server:  # answers 500 to a history whose arguments are not JSON, as llama.cpp does
        _configure(shared, server, "openai")
        server.by_stage(planner=[plan()], executor=[ToolCalls([("write_file", '{"path": "greet.txt", "content": ')]),
                                                    write(), done()],
                        verifier=[VERDICT], reviewer=[APPROVE])
        code, out = _run(shared, _workspace(tmp_path))
        executor = _executor(server)
    assert code == 0, out
    assert len(executor) == 3
    second = executor[1]
    assert second.messages[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    correction = second.messages[3]["content"]
    assert '{"path": "greet.txt", "content": ' in correction and "not JSON" in correction
