"""Recorded model answers: every answer is stored under a hash of its request.

When a stage is dispatched again after a crash, it makes the same requests in the same
order (tool results come back from the sandbox journal unchanged); each is answered from
the record, so recovery costs no tokens and reaches the same outcome. The hash covers the
session, stage, visit, call site, messages, tools and schema, never the attempt number
or the nonce untrusted text is fenced with.

**Where a request goes in its stage's sequence.** Each request has a place (0, 1, 2, …
per session and stage; the scripted model serves the response at that place). With the
stage's claims known (``claims``: the attempt's replay index, see
:mod:`actors.stages.request.writes`), a request whose hash is not among them cannot have a
recorded answer: it is placed here, one past the last, and the model is asked at once; its
claim is written with its answer (``RecordModelAnswer.seq``). A known hash (a replay) is
claimed through persistence (``ClaimModelAnswer``), which answers the recorded answer, or
its place if none was recorded. A lost claim is placed again at the same place by the
replay, so the scripted model answers the same.

**When an answer is recorded.** A new answer is not sent on its own: it stays pending in
this object and rides on the stage's next write to persistence, recorded in the same
transaction before it: a commit (``Commit.answers``), a claim (``ClaimModelAnswer.answers``),
or a read journaled by the sandbox (``RunTool.commit``; see :mod:`actors.stages.request.writes`).
That saves a broker round trip a turn. What a replay needs (DESIGN §3) still holds, because
nothing that depends on an answer can become durable or happen without it:

- events, steps and the plan: written by a ``Commit``, which carries the pending answer in
  its own transaction (the answer is durable with them, or neither is);
- tool calls: the stage's context records it before a call with side effects, so the answer
  a side effect follows is recorded first; a read's result is journaled by the same write
  as the answer that asked for it, or a later one;
- the stage's result, which the coordinator acts on: the context flushes before building it.

So a stage killed (or persistence killed) while an answer is pending loses only that answer,
and nothing depended on it yet: the replay asks the model again at that call site, and may
get a different answer, as if the first one had never come. Every answer something did
depend on is answered from the record, the same as before.

Two hooks let a stage put a human's hand on its calls (:mod:`actors.stages.request.control`):
``before`` runs ahead of every call (a paused session stops there, raising), and
``amend`` changes the request the *provider* gets (the user's steering is added) after the
hash was taken from the request as the stage made it. So steering that arrived during an
attempt does not change the keys of that attempt's calls: a retried attempt replays
every recorded answer, and only the calls it makes live carry the steering.

A live call is watched (``calls``, a :class:`CallWatcher`; the stage's is
:class:`actors.stages.request.callwatch.CallWatch`, handed in by the stage): its deadline (which
spares a call still at work until ``limit``, by its meter), the stage's cancel, and what
the stage holds written if it runs long. This layer names only what it needs of the watch
(:class:`CallWatcher`, :class:`WatchedCall`), so it imports nothing from the stages above
it. :meth:`RecordedModel.expected_s` is the provider's estimate of a normal call's time,
for a stage that sets a deadline.

A live answer is made storable first (:func:`actors.llm.toolcalls.storable_answer`): a
lone UTF-16 surrogate in it, which no encoder takes, would fail the record, and the replay
after it the same way; its text is scrubbed and a call's arguments holding one are kept as
escaped JSON text for the executor to refuse with a tool error.

Each call the provider answers gets a :class:`~actors.llm.meter.Meter`, handed to
``watch`` before the call (the stage actor publishes its progress) and finished after it;
``model_ms`` sums the time those calls took. A replayed answer costs no model time and
shows no progress.

The session's budget (:mod:`protocol.policy.budget`) is asked only about live calls
(``spend``, a :class:`Spender`): before one (:meth:`Spender.check`, which raises to stop
the stage there) and after it (:meth:`Spender.spent`); a replayed answer was counted when
it was first recorded, and its ``model_ms`` goes with it (``RecordModelAnswer.model_ms``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from actors.llm import toolcalls
from actors.llm.meter import Meter
from actors.llm.provider import ModelRequest, Paced, Provider
from protocol import codec
from protocol.errors import ModelError
from protocol.messages import ClaimModelAnswer, Message, ModelAnswerClaim, RecordModelAnswer
from protocol.plans.results import ModelAnswer

__all__ = ["CallTiming", "CallWatcher", "DeadlinePassed", "RecordedModel", "WatchedCall", "prompt_tokens",
           "request_hash"]


@dataclass(frozen=True)
class CallTiming:
    """One call's time: all of it, and until the first piece of the answer arrived (0: the
    provider does not stream); a replayed answer took none."""

    duration_ms: float = 0.0
    first_token_ms: float = 0.0
    replayed: bool = False


class DeadlinePassed(ModelError):
    """A live model call abandoned at the caller's deadline (``complete(deadline=...)``)."""


class WatchedCall(Protocol):
    """One live call as its watcher holds it: ``stop`` is set to abandon the call (its
    deadline passed, or the stage was cancelled); ``expired`` says it was the deadline."""

    @property
    def stop(self) -> threading.Event: ...

    @property
    def expired(self) -> bool: ...


class CallWatcher(Protocol):
    """What watches live calls: :meth:`call` watches one for as long as its block runs
    (``limit`` and ``meter``: a call still at work may outlive its deadline up to ``limit``)."""

    def call(self, cancel: threading.Event, deadline: float | None = None, *, limit: float | None = None,
             meter: Meter | None = None) -> AbstractContextManager[WatchedCall]: ...


def prompt_tokens(request: ModelRequest) -> int:
    """The request's prompt in tokens, estimated at 4 characters a token: every message's
    text and tool calls, and the tool definitions."""
    chars = sum(len(m.content) + (len(msgspec.json.encode(m.tool_calls)) if m.tool_calls else 0)
                for m in request.messages)
    if request.tools:
        chars += _tools(request.tools).json_chars
    return -(-chars // 4)


_PLACEHOLDER = b"\x00nonce\x00"
_ARRAY7 = b"\x97"  # msgpack's header of a 7-element array


def request_hash(session_id: str, visit: int, request: ModelRequest) -> str:
    """The record's key: SHA-256 of the msgpack array ``[session, stage, visit, call site,
    messages, tools, schema]``, the dispatch's nonce replaced by a placeholder everywhere
    in it (see ``untrusted``). The value is stored: it must never change.

    The array's bytes are put together from three parts: the first five elements under the
    seven's header, the tool definitions (one list for every call of a stage, encoded once:
    :func:`_tools`) and the schema."""
    head = codec.encode([session_id, request.stage, visit, request.call_site, request.messages])
    payload = b"".join((_ARRAY7, memoryview(head)[1:], _tools(request.tools).msgpack,
                        codec.encode(request.json_schema)))
    if request.nonce:
        payload = payload.replace(request.nonce.encode(), _PLACEHOLDER)
    return hashlib.sha256(payload).hexdigest()


class _Tools:
    """One list of tool definitions, encoded: msgpack (for the hash) and its JSON's length
    (for the estimate)."""

    __slots__ = ("definitions", "json_chars", "msgpack")

    def __init__(self, definitions: list[dict[str, Any]]):
        self.definitions = definitions
        self.msgpack = codec.encode(definitions)
        self.json_chars = len(msgspec.json.encode(definitions))


_NO_TOOLS = _Tools([])
_last_tools: _Tools | None = None


def _tools(definitions: list[dict[str, Any]]) -> _Tools:
    """The encodings of ``definitions``, kept for the last list seen: a stage sends the
    same list on every call (the executor's module constant, never changed in place, is
    known by identity); another list is encoded anew."""
    global _last_tools
    if not definitions:
        return _NO_TOOLS
    last = _last_tools
    if last is None or last.definitions is not definitions:
        last = _last_tools = _Tools(definitions)
    return last


class Spender(Protocol):
    """The session's budget as this layer sees it (the stage's :class:`actors.stages.request.spending.Spending`)."""

    def check(self, prompt_tokens: int, *, where: str) -> None: ...

    def spent(self, answer: ModelAnswer, model_ms: float) -> None: ...


class RecordedModel:
    """A provider behind the record; counts calls and replays for the stage's metrics."""

    def __init__(self, provider: Provider, persistence: Callable[[Message], Any], *, session_id: str,
                 visit: int, cancel: threading.Event, before: Callable[[ModelRequest], None] | None = None,
                 amend: Callable[[ModelRequest], ModelRequest] | None = None,
                 watch: Callable[[Meter], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 claims: Callable[[], dict[str, int]] | None = None, calls: CallWatcher | None = None,
                 spend: Spender | None = None):
        self.provider = provider
        self.spend = spend
        self.claims = claims
        self.watched = calls
        self._places: dict[str, int] | None = None  # hash -> place, known and placed (see _claim)
        self._next_place = 0
        self.before = before
        self.amend = amend
        self.persistence = persistence
        self.session_id = session_id
        self.visit = visit
        self.cancel = cancel
        self.watch = watch
        self.clock = clock
        self.calls = 0  # model calls made, replayed ones included
        self.replayed = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.tokens_cached = 0  # of tokens_in, served from the server's prompt cache
        self.prompt_tokens_est = 0  # acode's estimate of every prompt, replayed or not
        self.largest_prompt_est = 0
        self.model_ms = 0.0  # time spent waiting for the provider's answers (replays count 0)
        self.last_call = CallTiming()  # the latest call's timing (the executor's turn event carries it)
        self._pending: list[RecordModelAnswer] = []  # recorded with the next write (see the module)
        self._pending_lock = threading.Lock()  # tool calls (which flush) may come from helper threads

    def take_pending(self) -> list[RecordModelAnswer]:
        """The answers not yet sent, now the caller's to send with its next write."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        return pending

    def flush(self) -> None:
        """Record the pending answer now (before a side effect that depends on it); a
        :class:`~actors.stages.request.writes.StageWrites` sends it with its own writes instead."""
        for record in self.take_pending():
            self.persistence(record)

    def expected_s(self, request: ModelRequest) -> float | None:
        """How long a normal live call with ``request`` takes at the model's measured pace
        (None: not measured, or a provider that does not measure)."""
        return self.provider.expected_s(request) if isinstance(self.provider, Paced) else None

    def complete(self, request: ModelRequest, *, deadline: float | None = None,
                 limit: float | None = None) -> ModelAnswer:
        """The recorded answer, else the provider's (recorded). At ``deadline`` (monotonic;
        the executor's step time) a live call is abandoned: :class:`DeadlinePassed`; with a
        ``limit``, a call still at work goes on up to it (the :class:`CallWatcher`)."""
        cancel = self.cancel
        if cancel.is_set():
            raise ModelError(f"the {request.stage} attempt was abandoned by the coordinator; not asking the model",
                             code="ACODE-LLM-011")
        if self.before is not None:
            self.before(request)
        sent = self.amend(request) if self.amend is not None else request
        estimated = prompt_tokens(sent)
        self.prompt_tokens_est += estimated
        self.largest_prompt_est = max(self.largest_prompt_est, estimated)
        digest = request_hash(self.session_id, self.visit, request)
        claim = self._claim(digest, request)
        self.calls += 1
        if claim.answer is not None:
            self.replayed += 1
            self.last_call = CallTiming(replayed=True)
            return claim.answer
        if self.spend is not None:
            self.spend.check(estimated, where=f"model call {request.call_site}")
        meter = Meter(call_site=request.call_site, clock=self.clock)
        if self.watch is not None:
            self.watch(meter)
        try:
            # text with no UTF-8 form (a lone surrogate) could not be recorded, nor replayed
            answer = toolcalls.storable_answer(self._ask(sent, claim.seq, meter, deadline, limit))
        finally:
            meter.finish()
            took_ms = meter.elapsed() * 1000
            self.model_ms += took_ms
            first = meter.first_heard
            self.last_call = CallTiming(duration_ms=round(took_ms, 1), first_token_ms=round(
                (first - meter.started) * 1000, 1) if first is not None else 0.0)
        with self._pending_lock:
            self._pending.append(RecordModelAnswer(request_hash=digest, answer=answer, seq=claim.seq,
                                                   session_id=self.session_id, stage=request.stage,
                                                   model_ms=round(took_ms, 1)))
        if self.spend is not None:
            self.spend.spent(answer, took_ms)
        self.tokens_in += answer.usage.prompt_tokens
        self.tokens_out += answer.usage.completion_tokens
        self.tokens_cached += answer.usage.cached_tokens
        return answer

    def _claim(self, digest: str, request: ModelRequest) -> ModelAnswerClaim:
        """The request's place in its stage's sequence, and its answer if recorded. With the
        stage's claims known (``claims``), a request not among them is placed here, one past
        the last, and claimed with its answer; a known one (a replay) asks persistence."""
        if self._places is None and self.claims is not None:
            self._places = dict(self.claims())  # this attempt's own copy: it adds what it places
            self._next_place = max(self._places.values(), default=-1) + 1
        if self._places is not None and digest not in self._places:
            place = self._next_place
            self._next_place += 1
            self._places[digest] = place
            return ModelAnswerClaim(seq=place)
        claim: ModelAnswerClaim = self.persistence(
            ClaimModelAnswer(request_hash=digest, session_id=self.session_id, stage=request.stage,
                             answers=self.take_pending()))
        return claim

    def _ask(self, request: ModelRequest, seq: int, meter: Meter, deadline: float | None,
             limit: float | None) -> ModelAnswer:
        """The provider's answer, the call watched (its deadline, the stage's cancel, and
        what the stage holds back written if it runs long: the :class:`CallWatcher`)."""
        if self.watched is None:
            return self.provider.complete(request, seq=seq, cancel=self.cancel, meter=meter)
        with self.watched.call(self.cancel, deadline, limit=limit, meter=meter) as watched:
            try:
                return self.provider.complete(request, seq=seq, cancel=watched.stop, meter=meter)
            except ModelError as exc:
                if watched.expired:
                    raise DeadlinePassed(f"{exc.message} (the deadline passed)", code=exc.code) from exc
                raise
