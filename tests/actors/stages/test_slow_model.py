"""A slow local model against the step timeout, through the stand-in server: a turn that
reads a long prompt and then writes for longer than ``step_timeout_s`` completes, while a
stream that stalls past the deadline is still cut (issue 25: a 120 s step timeout cut a
turn that spent 30 s reading a 2,000-token prompt and then wrote for 80 s)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors.llm.openai import OpenAICompatibleModel
from actors.stages.execution import executor
from protocol.plans.results import StageResult
from protocol.sessions.events import StepRetried
from protocol.sessions.session import OpenAIProvider
from tests.actors.stages.conftest import Run, Stack
from tests.actors.stages.test_executor import plan, step
from tests.modelserver import ModelServer, Stall, Text

# a call written as text, as the small local models write them
_WRITE = json.dumps({"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hello')\n"}})
_DONE = json.dumps({"name": "step_complete", "arguments": {"summary": "wrote hello.py"}})


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as stand_in:
        yield stand_in


def _live(stack: Stack, server: ModelServer, **settings: Any) -> tuple[Run, OpenAICompatibleModel]:
    """An executor stage whose model is the stand-in server (OpenAI format, as llama-server)."""
    run = stack.stage("executor", [], plan(step("S1")), **{"step_retry_limit": 2, **settings})
    model = OpenAICompatibleModel(OpenAIProvider(
        base_url=server.openai_url, model="test-model", first_token_timeout_s=10.0, idle_timeout_s=1.0,
        max_retries=0, backoff_initial_s=0.01))
    run.ctx.model.provider = model
    return run, model


def _timed(run: Run, model: OpenAICompatibleModel) -> tuple[StageResult, float]:
    """The executor's result on ``run`` and the seconds it took; the live model closed after."""
    try:
        started = time.monotonic()
        result = executor.run(run.ctx)
        return result, time.monotonic() - started
    finally:
        model.close()


def test_a_slow_first_turn_that_keeps_producing_past_the_step_timeout_completes(
        stack: Stack, server: ModelServer) -> None:
    # 1.2 s reading the prompt (past the 1 s step timeout), then tokens every 0.1 s
    server.queue(Text(f"{_WRITE}\n{_DONE}", chunks=8, first_s=1.2, pace_s=0.1))
    run, model = _live(stack, server, step_timeout_s=1.0)
    result, took = _timed(run, model)

    assert result.ok, result.summary
    assert took > 1.9, "the turn ran well past the step timeout"
    assert (run.workspace / "hello.py").read_text() == "print('hello')\n"
    assert len(server.chats) == 1 and server.early_closes == 0, "the answer was not cut"
    assert not [e for e in run.events() if isinstance(e, StepRetried)]


def test_a_stream_that_stalls_past_the_step_deadline_is_still_cut_and_the_next_try_goes_on(
        stack: Stack, server: ModelServer) -> None:
    server.queue(Stall(text=_WRITE, chunks=1, seconds=30), Text(f"{_WRITE}\n{_DONE}"))
    run, model = _live(stack, server, step_timeout_s=0.5)
    result, took = _timed(run, model)

    assert result.ok, result.summary
    assert took < 1.8, "cut when the stream went silent (0.5 s), not at the 2 s limit"
    assert len(server.chats) == 2 and server.early_closes == 1
    [retried] = [e for e in run.events() if isinstance(e, StepRetried)]
    assert retried.code == "ACODE-EXEC-006"
    assert run.ctx.model.tokens_cached > 0, "the second try's prompt shares its prefix: the server's cache served it"


def test_the_stages_metrics_carry_the_prompt_tokens_the_servers_cache_served(
        stack: Stack, server: ModelServer) -> None:
    server.queue(Text(_WRITE), Text(_DONE))
    run, model = _live(stack, server, step_timeout_s=30.0)
    try:
        result = executor.run(run.ctx)
    finally:
        model.close()
    assert result.ok, result.summary
    assert 0 < result.metrics.tokens_cached < result.metrics.tokens_in


def test_a_try_out_of_time_after_a_slow_turn_says_what_step_timeout_the_measured_pace_needs(
        stack: Stack, server: ModelServer) -> None:
    server.queue(Text(_WRITE, chunks=8, first_s=0.3, pace_s=0.1))
    run, model = _live(stack, server, step_timeout_s=0.5, step_retry_limit=1)
    try:
        result = executor.run(run.ctx)
    finally:
        model.close()

    assert not result.ok and result.error is not None and result.error.code == "ACODE-EXEC-006"
    assert len(server.chats) == 1 and server.early_closes == 0, \
        "the slow turn completed; the next one was not started past the timeout"
    said = re.search(r"its turns took (\d+)s each at this model's pace: raise step_timeout_seconds to (\d+) or "
                     r"more \(executor.step_timeout_seconds, or acode resume --step-timeout \2\)", result.error.message)
    assert said is not None, result.error.message
    assert int(said[2]) >= 5 * int(said[1]) and int(said[2]) % 10 == 0
