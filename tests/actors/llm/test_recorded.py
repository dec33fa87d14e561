"""The record of model answers: model time and progress meters per call (replays cost nothing),
and the key answers are stored under (its value must never change)."""

from __future__ import annotations

import hashlib
import struct
import threading
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage, ModelRequest
from actors.llm.recorded import CallTiming, RecordedModel, request_hash
from protocol import codec
from protocol.messages import ClaimModelAnswer, Message, ModelAnswerClaim, RecordModelAnswer
from protocol.plans.results import ModelAnswer, ModelToolCall, Usage


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


class _StreamingModel(_SlowModel):
    """Sends its first piece after ``first`` seconds, the rest by ``seconds``."""

    def __init__(self, clock: _Clock, first: float, seconds: float):
        super().__init__(clock, seconds, tokens=3)
        self.first = first

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        assert meter is not None
        self.clock.now += self.first
        meter.hear()
        self.clock.now += self.seconds - self.first
        return ModelAnswer(content="ok")


def test_the_last_call_says_its_time_and_first_token_time_and_a_replay_none() -> None:
    clock, record = _Clock(), _Record()
    recorded = RecordedModel(_StreamingModel(clock, first=0.25, seconds=2.0), record, session_id="s", visit=1,
                             cancel=threading.Event(), clock=clock)
    recorded.complete(_request("plan"))
    assert recorded.last_call == CallTiming(duration_ms=2_000.0, first_token_ms=250.0)
    recorded.complete(_request("plan/2"))
    assert recorded.last_call.first_token_ms == 250.0
    recorded.flush()
    again = RecordedModel(_SlowModel(clock, 1.0, 1), record, session_id="s", visit=1, cancel=threading.Event(),
                          clock=clock)
    again.complete(_request("plan"))
    assert again.last_call == CallTiming(replayed=True)
    again.complete(_request("plan/new"))
    assert again.last_call == CallTiming(duration_ms=1_000.0), "no stream: no first-token time"


def _reference_hash(session_id: str, visit: int, request: ModelRequest) -> str:
    """The key as first defined: SHA-256 of the whole array, the nonce replaced in it at once."""
    payload = codec.encode([session_id, request.stage, visit, request.call_site, request.messages,
                            request.tools, request.json_schema])
    if request.nonce:
        payload = payload.replace(request.nonce.encode(), b"\x00nonce\x00")
    return hashlib.sha256(payload).hexdigest()


def test_the_request_hash_of_a_known_request_is_the_one_stored_before() -> None:
    request = ModelRequest(stage="executor", call_site="T1/S1/turn1", nonce="0123abcd4567ef89",
                           messages=[ChatMessage(role="system", content="fence 0123abcd4567ef89"),
                                     ChatMessage(role="user", content="read a.txt")],
                           tools=[{"type": "function", "function": {"name": "read_file"}}])
    assert request_hash("0190a3b4-1234-7abc-8def-0123456789ab", 1, request) \
        == "afaa2fe9f7e909f863261f5576286996811841b1494f46d487ab1cae542c4568"


_TEXT = st.text(alphabet="ab\x00é", max_size=12)  # a small alphabet: copies of the nonce everywhere, across parts too
_TOOLS: list[list[dict[str, Any]]] = [
    [], [{"name": "ab"}], [{"type": "function", "function": {"name": "read_file", "description": "abab"}}]]


@settings(max_examples=400)
@given(nonces=st.lists(st.text(alphabet="ab\x00é", max_size=5), min_size=1, max_size=3),
       contents=st.lists(_TEXT, max_size=3), call_site=_TEXT, tools=st.sampled_from(range(len(_TOOLS))),
       schema=st.one_of(st.none(), st.dictionaries(_TEXT, _TEXT, max_size=2)))
def test_the_request_hash_is_the_hash_of_the_whole_array_with_the_nonce_replaced(
        nonces: list[str], contents: list[str], call_site: str, tools: int, schema: dict[str, Any] | None) -> None:
    for nonce in nonces:  # one tool list asked with several nonces in a row (dispatches)
        request = ModelRequest(stage="executor", call_site=call_site, nonce=nonce, tools=_TOOLS[tools],
                               json_schema=schema, messages=[ChatMessage(role="user", content=c) for c in contents])
        assert request_hash("s" + nonce, 2, request) == _reference_hash("s" + nonce, 2, request)


_ENDS_IN_E2 = struct.unpack(">d", b"\x3f\xf0\x00\x00\x00\x00\x00\xe2")[0]  # a float whose last byte leads UTF-8


def test_a_nonce_crossing_from_the_messages_into_the_tools_is_replaced_as_in_the_whole_array() -> None:
    call = ModelToolCall(id="c", name="x", arguments={"v": _ENDS_IN_E2})
    messages = [ChatMessage(role="assistant", tool_calls=[call])]
    tools = [{"name": "read_file"}]
    assert codec.encode(messages).endswith(b"\xe2") and codec.encode(tools).startswith(b"\x91\x81")
    nonce = b"\xe2\x91\x81".decode()  # the messages' last byte, the tools' first two
    request = ModelRequest(stage="executor", call_site="T1/S1/turn1", nonce=nonce, messages=messages, tools=tools)
    assert request_hash("s", 1, request) == _reference_hash("s", 1, request)
    assert request_hash("s", 1, request) != _reference_hash("s", 1, msgspec.structs.replace(request, nonce="zz"))


def test_a_nonce_crossing_from_the_tools_into_the_schema_is_replaced_as_in_the_whole_array() -> None:
    tools = [{"name": "read_file", "v": _ENDS_IN_E2}]
    schema = {"a": 1}
    assert codec.encode(tools).endswith(b"\xe2") and codec.encode(schema).startswith(b"\x81\xa1")
    nonce = b"\xe2\x81\xa1".decode()
    request = ModelRequest(stage="executor", call_site="T1/S1/turn1", nonce=nonce, tools=tools, json_schema=schema,
                           messages=[ChatMessage(role="user", content="read it")])
    assert request_hash("s", 1, request) == _reference_hash("s", 1, request)
    assert request_hash("s", 1, request) != _reference_hash("s", 1, msgspec.structs.replace(request, nonce="zz"))
