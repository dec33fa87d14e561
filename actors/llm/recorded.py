"""Recorded model answers: every answer is stored under a hash of its request.

When a stage is dispatched again after a crash, it makes the same requests in the same
order (tool results come back from the sandbox journal unchanged); each is answered from
the record, so recovery costs no tokens and reaches the same outcome. The hash covers the
session, stage, visit, call site, messages, tools and schema, never the attempt number
or the nonce untrusted text is fenced with.

Each call the provider answers gets a :class:`~actors.llm.meter.Meter`, handed to
``watch`` before the call (the stage actor publishes its progress) and finished after it;
``model_ms`` sums the time those calls took. A replayed answer costs no model time and
shows no progress.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from actors.llm.meter import Meter
from actors.llm.provider import ModelRequest, Provider
from protocol import codec
from protocol.errors import ModelError
from protocol.messages import ClaimModelAnswer, Message, ModelAnswerClaim, RecordModelAnswer
from protocol.results import ModelAnswer

__all__ = ["RecordedModel", "prompt_tokens", "request_hash"]


def prompt_tokens(request: ModelRequest) -> int:
    """The request's prompt in tokens, estimated at 4 characters a token: every message's
    text and tool calls, and the tool definitions."""
    chars = sum(len(m.content) + (len(msgspec.json.encode(m.tool_calls)) if m.tool_calls else 0)
                for m in request.messages)
    if request.tools:
        chars += len(msgspec.json.encode(request.tools))
    return -(-chars // 4)


def request_hash(session_id: str, visit: int, request: ModelRequest) -> str:
    """The record's key; the dispatch's nonce is replaced by a placeholder (see ``untrusted``)."""
    payload = codec.encode([session_id, request.stage, visit, request.call_site, request.messages,
                            request.tools, request.json_schema])
    if request.nonce:
        payload = payload.replace(request.nonce.encode(), b"\x00nonce\x00")
    return hashlib.sha256(payload).hexdigest()


class RecordedModel:
    """A provider behind the record; counts calls and replays for the stage's metrics."""

    def __init__(self, provider: Provider, persistence: Callable[[Message], Any], *, session_id: str,
                 visit: int, cancel: threading.Event, watch: Callable[[Meter], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.provider = provider
        self.persistence = persistence
        self.session_id = session_id
        self.visit = visit
        self.cancel = cancel
        self.watch = watch
        self.clock = clock
        self.calls = 0
        self.replayed = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.prompt_tokens_est = 0  # acode's estimate of every prompt, replayed or not
        self.largest_prompt_est = 0
        self.model_ms = 0.0  # time spent waiting for the provider's answers (replays count 0)

    def complete(self, request: ModelRequest, *, cancel: threading.Event | None = None) -> ModelAnswer:
        """The recorded answer, else the provider's (recorded). ``cancel`` replaces the
        stage's cancel event for this call (the executor's step deadline sets it too)."""
        cancel = cancel or self.cancel
        if cancel.is_set():
            raise ModelError(f"the {request.stage} attempt was abandoned by the coordinator; not asking the model",
                             code="ACODE-LLM-011")
        estimated = prompt_tokens(request)
        self.prompt_tokens_est += estimated
        self.largest_prompt_est = max(self.largest_prompt_est, estimated)
        digest = request_hash(self.session_id, self.visit, request)
        claim: ModelAnswerClaim = self.persistence(
            ClaimModelAnswer(request_hash=digest, session_id=self.session_id, stage=request.stage))
        self.calls += 1
        if claim.answer is not None:
            self.replayed += 1
            return claim.answer
        meter = Meter(call_site=request.call_site, clock=self.clock)
        if self.watch is not None:
            self.watch(meter)
        try:
            answer = self.provider.complete(request, seq=claim.seq, cancel=cancel, meter=meter)
        finally:
            meter.finish()
            self.model_ms += meter.elapsed() * 1000
        self.persistence(RecordModelAnswer(request_hash=digest, answer=answer))
        self.tokens_in += answer.usage.prompt_tokens
        self.tokens_out += answer.usage.completion_tokens
        return answer
