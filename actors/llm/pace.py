"""How fast a model answers on its server, measured, and how long a call should take.

A local model's speed depends on the machine: a 1.5B model on two CPU threads evaluates a
prompt at tens of tokens a second and writes a few tokens a second, so a fixed timeout
that suits one machine cuts normal calls on another. :class:`Pace` keeps, per model, the
last speeds measured (an exponential average, so one odd call moves it only part way):

- **prompt** tokens a second: the server's own timings (``Usage.prompt_n`` evaluated in
  ``prompt_ms``: llama.cpp's ``timings``, Ollama's ``prompt_eval_duration``), else the
  wait for the first byte of the answer (:class:`~actors.llm.meter.Meter`) for the prompt
  tokens the server did not serve from its cache;
- **answer** tokens a second: ``completion_tokens`` in ``completion_ms``, else the answer's
  tokens over the time from its first byte to its last.

A measurement of fewer than :data:`MIN_TOKENS` tokens says more about overheads than
speed, and is not taken. From the speeds, before a call: :meth:`Pace.first_token_s` (the
prompt, every token evaluated as if nothing were cached) and :meth:`Pace.call_s` (that,
plus the answer's cap written at the answer speed), each times :data:`MARGIN`; None until
the model has been measured. These estimates only stretch timeouts (a timeout is not a
recorded answer: a replay never depends on one), always within bounds the caller sets.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from actors.llm.meter import Meter
from protocol.plans.results import Usage

__all__ = ["MARGIN", "MIN_TOKENS", "Pace", "Speeds"]

MARGIN = 1.5  # an estimate is this many times the measured time (a normal call fits inside it)
MIN_TOKENS = 16  # fewer tokens than this in a measurement: not a speed
_WEIGHT = 0.5  # how far one new measurement moves the average


@dataclass(frozen=True)
class Speeds:
    """A model's measured speeds in tokens a second (0: not measured yet)."""

    prompt_tps: float = 0.0
    answer_tps: float = 0.0

    def describe(self) -> str:
        parts = [f"prompt {self.prompt_tps:.0f} tokens/s" if self.prompt_tps else "",
                 f"answer {self.answer_tps:.1f} tokens/s" if self.answer_tps else ""]
        return ", ".join(p for p in parts if p)


class Pace:
    """The speeds measured per model (one per provider; calls may come from several threads)."""

    def __init__(self) -> None:
        self._speeds: dict[str, Speeds] = {}
        self._lock = threading.Lock()

    def speeds(self, model: str) -> Speeds:
        with self._lock:
            return self._speeds.get(model, Speeds())

    def observe(self, model: str, usage: Usage, meter: Meter | None = None) -> Speeds:
        """Take one answer's figures (the server's timings, else the meter's); the speeds now."""
        prompt = _rate(usage.prompt_n, usage.prompt_ms / 1000)
        answer = _rate(usage.completion_tokens, usage.completion_ms / 1000)
        if meter is not None and meter.first_heard is not None and not usage.estimated:
            if not prompt:  # the server gave no timings: the wait for the first byte was the prompt's
                prompt = _rate(usage.prompt_tokens - usage.cached_tokens, meter.first_heard - meter.attempt_started)
            if not answer and meter.heard is not None:
                answer = _rate(usage.completion_tokens, meter.heard - meter.first_heard)
        with self._lock:
            old = self._speeds.get(model, Speeds())
            new = Speeds(prompt_tps=_average(old.prompt_tps, prompt), answer_tps=_average(old.answer_tps, answer))
            self._speeds[model] = new
        return new

    def first_token_s(self, model: str, prompt_tokens: int) -> float | None:
        """How long the server may take over ``prompt_tokens`` before the answer's first
        token, at the measured prompt speed (times :data:`MARGIN`); None when not measured."""
        speeds = self.speeds(model)
        if not speeds.prompt_tps:
            return None
        return MARGIN * prompt_tokens / speeds.prompt_tps

    def call_s(self, model: str, prompt_tokens: int, answer_cap: int) -> float | None:
        """How long a whole call may take: the prompt and an answer of ``answer_cap`` tokens
        at the measured speeds (times :data:`MARGIN`); None until both were measured."""
        speeds = self.speeds(model)
        if not speeds.prompt_tps or not speeds.answer_tps:
            return None
        return MARGIN * (prompt_tokens / speeds.prompt_tps + answer_cap / speeds.answer_tps)


def _rate(tokens: int, seconds: float) -> float:
    return tokens / seconds if tokens >= MIN_TOKENS and seconds > 0 else 0.0


def _average(old: float, new: float) -> float:
    if not new:
        return old
    return new if not old else old + _WEIGHT * (new - old)
