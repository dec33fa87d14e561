"""The model's measured speed: the server's timings and cache figures in the answer's
usage, the speeds kept per model, and the first-token wait they stretch."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from actors.llm.http import HttpModel
from actors.llm.meter import Meter
from actors.llm.pace import MARGIN, Pace
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.errors import ModelError
from protocol.plans.results import Usage
from tests.actors.llm.conftest import ask
from tests.modelserver import ModelServer, Text


def _request(user: str) -> ModelRequest:
    return ModelRequest(stage="planner", call_site="test", messages=[
        ChatMessage(role="system", content="You are the planner of acode, a coding agent."),
        ChatMessage(role="user", content=user)])


def test_the_servers_timings_and_cached_prompt_tokens_reach_the_answers_usage(
        server: ModelServer, make: Callable[..., HttpModel], kind: str) -> None:
    server.queue(Text("one two three four " * 20, chunks=5, first_s=0.05),
                 Text("five six seven " * 20, chunks=5, first_s=0.05))
    model = make()
    first = ask(model, _request("Add a farewell function. " * 20))
    second = ask(model, _request("Add a farewell function. " * 20 + "And a greeting."))

    for usage in (first.usage, second.usage):
        assert usage.prompt_n > 0 and usage.prompt_ms >= 40 and usage.completion_ms > 0
    if kind == "openai":  # llama.cpp says what its prompt cache served; Ollama does not
        assert first.usage.cached_tokens == 0
        assert second.usage.cached_tokens > 0
        assert second.usage.prompt_n + second.usage.cached_tokens == second.usage.prompt_tokens
    speeds = model.pace.speeds("test-model")
    assert speeds.prompt_tps > 0 and speeds.answer_tps > 0


def test_a_long_prompt_gets_the_first_token_wait_its_measured_speed_needs(
        server: ModelServer, make: Callable[..., HttpModel]) -> None:
    # first_token_timeout_s 0.5: the second prompt is ten times the first, which took 0.2 s to
    # read; 0.8 s before its first token is normal for it, and it is not cut
    server.queue(Text("short answer " * 10, first_s=0.2), Text("another answer " * 10, first_s=0.8))
    model = make(first_token_timeout_s=0.5, max_retries=0)
    ask(model, _request("x" * 400))
    answer = ask(model, _request("y" * 4_000))
    assert answer.content.startswith("another answer")


def test_an_unmeasured_model_still_gets_only_the_configured_first_token_wait(
        server: ModelServer, make: Callable[..., HttpModel]) -> None:
    server.queue(Text("late answer", first_s=1.5))
    model = make(first_token_timeout_s=0.5, max_retries=0)
    with pytest.raises(ModelError) as caught:
        ask(model, _request("y" * 4_000), cancel=threading.Event())
    assert caught.value.code == "ACODE-LLM-008" and "sent no answer within 0.5s" in caught.value.message


def test_speeds_come_from_the_servers_timings_and_average_over_calls() -> None:
    pace = Pace()
    assert pace.first_token_s("m", 1_000) is None and pace.call_s("m", 1_000, 100) is None
    pace.observe("m", Usage(prompt_tokens=2_000, completion_tokens=100, prompt_n=2_000, prompt_ms=20_000,
                            completion_ms=10_000))
    assert (pace.speeds("m").prompt_tps, pace.speeds("m").answer_tps) == (100.0, 10.0)
    assert pace.first_token_s("m", 1_000) == pytest.approx(MARGIN * 10)
    assert pace.call_s("m", 1_000, 100) == pytest.approx(MARGIN * (10 + 10))
    pace.observe("m", Usage(prompt_tokens=2_000, completion_tokens=100, prompt_n=2_000, prompt_ms=10_000,
                            completion_ms=10_000))
    assert pace.speeds("m").prompt_tps == 150.0, "one call moves the average half way"
    pace.observe("m", Usage(prompt_tokens=2_000, completion_tokens=3, prompt_n=5, prompt_ms=1, completion_ms=1))
    assert pace.speeds("m").prompt_tps == 150.0, "a few tokens say nothing of the speed"
    assert pace.speeds("other").prompt_tps == 0


def test_without_timings_the_speeds_come_from_the_meter() -> None:
    now = [100.0]
    meter = Meter(clock=lambda: now[0])
    meter.restart()
    now[0] = 102.0  # the prompt: 2 s before the first piece
    meter.hear()
    now[0] = 107.0  # the answer: 5 s from the first piece to the last
    meter.hear()
    pace = Pace()
    speeds = pace.observe("m", Usage(prompt_tokens=1_200, completion_tokens=50, cached_tokens=200), meter)
    assert (speeds.prompt_tps, speeds.answer_tps) == (500.0, 10.0)
    estimated = Pace().observe("m", Usage(prompt_tokens=1_200, completion_tokens=50, estimated=True), meter)
    assert (estimated.prompt_tps, estimated.answer_tps) == (0, 0), "acode's own estimates are no measurement"
