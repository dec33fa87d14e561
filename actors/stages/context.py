"""What a stage function works with: its request, the model, persistence and the sandbox.

One :class:`StageContext` per ``RunStage`` request, on the stage actor's worker thread.
Every call goes through the broker with the thread's own client (``ThreadClients``); each
resends until its deadline, so a restarted persistence or sandbox only delays a stage.
"""

from __future__ import annotations

import threading
import time
from typing import Any, TypeVar

from actors.llm.provider import ChatMessage, ModelRequest, Provider
from actors.llm.recorded import RecordedModel
from actors.llm.scripted import ScriptedModel
from actors.stages.answers import parse_answer, schema_of
from actors.stages.untrusted import Fence
from broker.threads import ThreadClients
from protocol import codec
from protocol.errors import ModelError
from protocol.events import Event
from protocol.messages import Commit, Message, RunStage, RunTool
from protocol.results import ModelAnswer, StageMetrics, StageResult, StepRecord, ToolResult
from protocol.session import ProviderSpec, ScriptedProvider

__all__ = ["StageContext", "make_provider"]

T = TypeVar("T")
PERSISTENCE_TIMEOUT = 120.0  # a restarting persistence delays a stage; it does not fail it
_providers: dict[tuple[str, str], Provider] = {}
_providers_lock = threading.Lock()


def make_provider(spec: ProviderSpec | None) -> Provider:
    """The session's model (scripted files are parsed once per process and cached)."""
    match spec:
        case ScriptedProvider(script_yaml=text, script_name=name):
            key = (name, text)
            with _providers_lock:
                provider = _providers.get(key)
                if provider is None:
                    provider = ScriptedModel.from_yaml(text, source=name or "<script>")
                    if len(_providers) > 32:
                        _providers.clear()
                    _providers[key] = provider
            return provider
        case None:
            raise ModelError("this session has no model configured; run it with --provider scripted "
                             "--script FILE", code="ACODE-LLM-001")


class StageContext:
    def __init__(self, request: RunStage, *, clients: ThreadClients, cancel: threading.Event, log: Any):
        self.request = request
        self.clients = clients
        self.cancel = cancel
        self.log = log
        self.started = time.monotonic()
        self.tool_calls = 0
        self.fence = Fence()  # one nonce per dispatch; see actors.stages.untrusted
        self.model = RecordedModel(make_provider(request.settings.provider), self.persistence,
                                   session_id=request.session_id, visit=request.visit, cancel=cancel)

    @property
    def session_id(self) -> str:
        return self.request.session_id

    def persistence(self, body: Message) -> Any:
        return self.clients.call("persistence", body, timeout=PERSISTENCE_TIMEOUT,
                                 decoder=codec.PERSISTENCE_REPLY, session_id=self.session_id)

    def commit(self, events: list[Event], step: StepRecord | None = None) -> None:
        self.persistence(Commit(session_id=self.session_id, events=events, step=step))

    def tool(self, key: str, tool: str, arguments: dict[str, Any], *, timeout_s: float | None = None) -> ToolResult:
        """Run one tool call in the sandbox (idempotent by ``key``)."""
        settings = self.request.settings
        timeout_s = timeout_s or settings.command_timeout
        self.tool_calls += 1
        reply = self.clients.call(
            "sandbox",
            RunTool(key=key, session_id=self.session_id, workspace=self.request.workspace, tool=tool,
                    arguments=arguments, timeout_s=timeout_s, output_limit_bytes=settings.output_limit_bytes,
                    policy=settings.sandbox),
            timeout=timeout_s + PERSISTENCE_TIMEOUT, decoder=codec.SANDBOX_REPLY, session_id=self.session_id)
        return reply.result  # type: ignore[no-any-return]

    def ask(self, type_: type[T], *, call_site: str, system: str, user: str) -> T:
        """Ask the model for a structured answer (a plan, a verdict) and validate it."""
        answer = self.chat(type_, call_site=call_site, messages=[
            ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)])
        return parse_answer(answer.content, type_, stage=self.request.stage)

    def chat(self, type_: type[Any], *, call_site: str, messages: list[ChatMessage]) -> ModelAnswer:
        """One model call with a whole conversation (e.g. a correction after an invalid
        answer), asking for ``type_``'s JSON schema; the caller parses the raw answer."""
        return self.model.complete(ModelRequest(
            stage=self.request.stage, call_site=call_site, json_schema=schema_of(type_), nonce=self.fence.nonce,
            messages=messages))

    def result(self, *, ok: bool, summary: str, **fields: Any) -> StageResult:
        request = self.request
        metrics = StageMetrics(duration_ms=(time.monotonic() - self.started) * 1000,
                               model_calls=self.model.calls, replayed_model_calls=self.model.replayed,
                               tool_calls=self.tool_calls, tokens_in=self.model.tokens_in,
                               tokens_out=self.model.tokens_out)
        return StageResult(session_id=request.session_id, stage=request.stage, visit=request.visit,
                           attempt=request.attempt, ok=ok, summary=summary, metrics=metrics, **fields)
