"""The record of model answers: model time and progress meters per call (replays cost nothing)."""

from __future__ import annotations

import threading
from typing import Any

from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage, ModelRequest
from actors.llm.recorded import RecordedModel
from protocol.messages import ClaimModelAnswer, Message, ModelAnswerClaim, RecordModelAnswer
from protocol.results import ModelAnswer, Usage


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class _Record:
    """Persistence's side of the record, in memory."""

    def __init__(self) -> None:
        self.answers: dict[str, ModelAnswer] = {}

    def __call__(self, body: Message) -> Any:
        if isinstance(body, ClaimModelAnswer):
            self.record(body.answers)  # answers pending in the model ride on the next claim
            return ModelAnswerClaim(seq=len(self.answers), answer=self.answers.get(body.request_hash))
        assert isinstance(body, RecordModelAnswer)
        self.record([body])
        return None

    def record(self, records: list[RecordModelAnswer]) -> None:
        for record in records:
            self.answers[record.request_hash] = record.answer


class _SlowModel:
    """Takes ``seconds`` of the injected clock to answer, streaming ``tokens`` pieces."""

    name = "slow"

    def __init__(self, clock: _Clock, seconds: float, tokens: int):
        self.clock = clock
        self.seconds = seconds
        self.tokens = tokens
        self.meters: list[Meter | None] = []

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        self.meters.append(meter)
        if meter is not None:
            meter.chunk(self.tokens)
        self.clock.now += self.seconds
        return ModelAnswer(content="ok", usage=Usage(prompt_tokens=10, completion_tokens=self.tokens))


def _request(site: str) -> ModelRequest:
    return ModelRequest(stage="planner", call_site=site, messages=[ChatMessage(role="user", content=site)])


def test_model_time_sums_the_calls_the_model_answered_and_a_replay_counts_none() -> None:
    clock, record = _Clock(), _Record()
    watched: list[Meter] = []
    model = _SlowModel(clock, seconds=1.5, tokens=12)
    recorded = RecordedModel(model, record, session_id="s", visit=1, cancel=threading.Event(),
                             watch=watched.append, clock=clock)
    recorded.complete(_request("plan"))
    recorded.complete(_request("plan/retry1"))
    assert recorded.model_ms == 3_000
    assert [m.tokens for m in watched] == [12, 12] and all(m.finished is not None for m in watched)
    assert model.meters == watched, "the provider moves the meter the stage actor publishes"

    recorded.flush()  # what a stage does before it ends: the last answer is recorded too
    again = RecordedModel(model, record, session_id="s", visit=1, cancel=threading.Event(),
                          watch=watched.append, clock=clock)  # a re-dispatched stage
    again.complete(_request("plan"))
    assert (again.replayed, again.model_ms, len(watched)) == (1, 0.0, 2), "a replay: no model time, no progress"
