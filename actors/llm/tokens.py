"""Counting tokens without the model's tokenizer: characters per token, learned from the server.

A request is sized in characters (messages, tool calls, tool definitions, schema); the
server's usage block then says how many tokens those characters were. The ratio differs a
lot between models and texts (English prose ~4 characters a token, dense JSON on a small
vocabulary ~1.4), so:

- :class:`Calibration` keeps, per model, the ratio the server's last exact prompt count
  showed; a provider estimates the next prompt with it (:data:`UNCALIBRATED` before any
  count) to cap the answer at what is left of the context;
- a stage that must make a request fit (a correction that repeats part of a rejected
  answer) uses the exact counts of its own conversation's answers, or
  :data:`CONSERVATIVE` when the server gave none: that keeps the request a pure function
  of the recorded answers, so a replayed stage sends the same bytes.
"""

from __future__ import annotations

import math
import threading

import msgspec

from actors.llm.provider import ModelRequest
from protocol.plans.results import Usage

__all__ = ["CONSERVATIVE", "UNCALIBRATED", "Calibration", "chars_per_token", "estimate", "request_chars"]

UNCALIBRATED = 4.0  # characters a token, before the server has counted any prompt of the model
CONSERVATIVE = 2.0  # what a stage assumes when a request must fit and no count is known
_LOWEST, _HIGHEST = 1.0, 8.0  # ratios outside this are measurement noise (tiny texts, template overhead)


def request_chars(request: ModelRequest, *, schema: bool = True) -> int:
    """The characters of a request: messages, their tool calls, tools and (``schema``) the
    JSON schema. Servers turn the schema into a grammar, not prompt text, so calibration
    leaves it out; a rough upper estimate keeps it."""
    chars = sum(len(m.content) + len(msgspec.json.encode(m.tool_calls)) * bool(m.tool_calls)
                for m in request.messages)
    if request.tools:
        chars += len(msgspec.json.encode(request.tools))
    if schema and request.json_schema is not None:
        chars += len(msgspec.json.encode(request.json_schema))
    return chars


def estimate(chars: int, ratio: float) -> int:
    return math.ceil(chars / ratio)


def chars_per_token(chars: int, usage: Usage, *, completion: bool = False) -> float:
    """The ratio one exact count shows (``completion``: of the answer, else of the prompt);
    :data:`CONSERVATIVE` when the count was acode's own estimate or is missing."""
    tokens = usage.completion_tokens if completion else usage.prompt_tokens
    if usage.estimated or tokens <= 0 or chars <= 0:
        return CONSERVATIVE
    return min(_HIGHEST, max(_LOWEST, chars / tokens))


class Calibration:
    """Per model, the characters a token its server's last exact prompt count showed."""

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}
        self._lock = threading.Lock()

    def ratio(self, model: str) -> float:
        with self._lock:
            return self._ratios.get(model, UNCALIBRATED)

    def observe(self, model: str, chars: int, usage: Usage) -> None:
        if usage.estimated or usage.prompt_tokens <= 0 or chars < 200:
            return  # a tiny prompt is mostly template tokens: no evidence
        with self._lock:
            self._ratios[model] = min(_HIGHEST, max(_LOWEST, chars / usage.prompt_tokens))
