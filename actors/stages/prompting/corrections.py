"""Sending a rejected structured answer back to the model with its problems, within the context.

A correction is the conversation so far, the rejected answer as the assistant's turn and
a user message listing the problems. Repeating the whole answer can overflow the context
(a 20,000-character plan of dense JSON is ~14,000 tokens on a small vocabulary), so
:func:`correction` repeats at most :data:`ECHO_CHARS` of its head, and less when the
request would not fit:

- the previous request's size is the server's exact prompt count when it gave one (else
  its characters at :data:`actors.llm.tokens.CONSERVATIVE`);
- the answer's characters a token come from its exact completion count (same fallback);
- room is left for an answer as long as the rejected one (half again, at least
  :data:`ANSWER_FLOOR` tokens), never more than the stage's cap.

Everything it uses is recorded (the messages, the answer and its usage, the settings), so
a replayed stage sends the same bytes. When not even the problems fit, the stage fails
with ACODE-LLM-013 instead of sending a request the server will refuse.
"""

from __future__ import annotations

from actors.llm import tokens
from actors.llm.provider import ChatMessage
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer
from protocol.plans.stages import Stage
from protocol.sessions.session import OllamaProvider, OpenAIProvider, SessionSettings

__all__ = ["ECHO_CHARS", "correction"]

ECHO_CHARS = 1_500  # of a rejected answer's head, at most, repeated to the model
ANSWER_FLOOR = 1_024  # tokens kept free for the corrected answer, at least (within the cap)
_PER_MESSAGE = 16  # template tokens around one message
_MARGIN = 64


def _chars(messages: list[ChatMessage]) -> int:
    return sum(len(m.content) for m in messages)


def correction(messages: list[ChatMessage], answer: ModelAnswer, problems: str, *, settings: SessionSettings,
               stage: Stage) -> list[ChatMessage]:
    """``messages`` followed by the head of ``answer`` and the user message ``problems``."""
    spec = settings.provider
    content = answer.content
    if not isinstance(spec, OllamaProvider | OpenAIProvider):  # the scripted model has no window
        return _messages(messages, content[:ECHO_CHARS], len(content), problems)
    usage = answer.usage
    prompt_chars = _chars(messages)
    before = usage.prompt_tokens if not usage.estimated and usage.prompt_tokens else \
        tokens.estimate(prompt_chars, tokens.CONSERVATIVE)
    prompt_ratio = tokens.chars_per_token(prompt_chars, usage)
    answer_ratio = tokens.chars_per_token(len(content), usage, completion=True)
    cap = spec.max_tokens_for(stage)
    answer_room = min(cap, max(ANSWER_FLOOR, usage.completion_tokens * 3 // 2))
    left = spec.num_ctx - answer_room - before - 2 * _PER_MESSAGE - _MARGIN
    need = tokens.estimate(len(problems), prompt_ratio)
    if need > left:
        fits = int(max(0, left) * prompt_ratio)
        if fits < 200:
            raise ModelError(
                f"the {stage}'s correction cannot fit the context: the conversation already takes {before} of "
                f"num_ctx {spec.num_ctx} tokens and the answer needs about {answer_room}; raise model.num_ctx (and "
                "the server's context, llama-server --ctx-size), or lower the stage's budget "
                "(planner.context_tokens)", code="ACODE-LLM-013")
        problems = problems[:fits - 1] + "…"
        need = tokens.estimate(len(problems), prompt_ratio)
    head = int(max(0, left - need) * answer_ratio)
    return _messages(messages, content[:min(ECHO_CHARS, head)], len(content), problems)


def _messages(messages: list[ChatMessage], head: str, length: int, problems: str) -> list[ChatMessage]:
    if len(head) < length:
        head += f"\n… [{length - len(head)} more characters of this answer not repeated]"
    return [*messages, ChatMessage(role="assistant", content=head), ChatMessage(role="user", content=problems)]
