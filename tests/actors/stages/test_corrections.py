"""A correction repeats the head of a rejected answer, sized by tokens to fit the context (issue 15 #3)."""

from __future__ import annotations

import pytest

from actors.llm.provider import ChatMessage
from actors.stages.prompting.corrections import ECHO_CHARS, correction
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer, Usage
from protocol.sessions.session import OpenAIProvider, ScriptedProvider, SessionSettings

MESSAGES = [ChatMessage(role="system", content="You are the planner of acode." + " rules" * 300),
            ChatMessage(role="user", content="the task and the workspace " * 100)]
PROBLEMS = "That plan cannot be used. Its problems:\n- T1: a cycle S1 -> S2 -> S1"


def _settings(num_ctx: int) -> SessionSettings:
    return SessionSettings(provider=OpenAIProvider(model="m", num_ctx=num_ctx))


def _tokens(messages: list[ChatMessage], ratio: float) -> float:
    return sum(len(m.content) for m in messages) / ratio


def test_only_the_head_of_a_long_answer_is_repeated_with_all_the_problems() -> None:
    answer = ModelAnswer(content="{" + '"x": 1, ' * 2_500 + "}",
                         usage=Usage(prompt_tokens=900, completion_tokens=14_000))
    out = correction(MESSAGES, answer, PROBLEMS, settings=_settings(8_192), stage="planner")
    head, problems = out[-2], out[-1]
    assert head.role == "assistant" and head.content.startswith('{"x": 1')
    assert len(head.content) < ECHO_CHARS + 80 and "more characters of this answer not repeated" in head.content
    assert problems.content == PROBLEMS


def test_the_retry_fits_the_context_at_the_answers_own_characters_a_token() -> None:
    # 1.4 characters a token (dense JSON on a small vocabulary): repeating all of it, as the
    # planner did, makes 1,500 + 2,857 + the 4,096 answer > 8,192 (the 400)
    text = "[" + ",".join(['{"a":1}'] * 500) + "]"
    answer = ModelAnswer(content=text, usage=Usage(prompt_tokens=1_500, completion_tokens=round(len(text) / 1.4)))
    assert 1_500 + len(text) / 1.4 + 4_096 > 8_192
    out = correction(MESSAGES, answer, PROBLEMS, settings=_settings(8_192), stage="planner")
    added = len(out[-2].content) / 1.4 + len(out[-1].content) / 1.4
    assert 1_500 + added + 4_096 <= 8_192


def test_a_conversation_that_leaves_no_room_fails_with_the_context_code() -> None:
    answer = ModelAnswer(content="{}", usage=Usage(prompt_tokens=7_900, completion_tokens=10))
    with pytest.raises(ModelError) as caught:
        correction(MESSAGES, answer, PROBLEMS, settings=_settings(8_192), stage="planner")
    assert caught.value.code == "ACODE-LLM-013" and "--ctx-size" in caught.value.message


def test_without_server_counts_the_estimate_is_conservative() -> None:
    answer = ModelAnswer(content="y" * 5_000, usage=Usage(prompt_tokens=1, completion_tokens=1, estimated=True))
    out = correction(MESSAGES, answer, PROBLEMS, settings=_settings(4_096), stage="planner")
    prompt = _tokens(MESSAGES, 2.0)
    assert prompt + len(out[-2].content) / 2.0 + len(PROBLEMS) / 2.0 <= 4_096 - 1_024


def test_the_scripted_model_gets_the_head_too() -> None:
    settings = SessionSettings(provider=ScriptedProvider(script_yaml="responses: {}"))
    out = correction(MESSAGES, ModelAnswer(content="z" * 30_000), PROBLEMS, settings=settings, stage="planner")
    assert len(out[-2].content) < ECHO_CHARS + 80
