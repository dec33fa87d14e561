"""A stage's model: the session's provider behind the record, with the user's hand on it.

One :class:`StageModel` per ``RunStage`` request, made by the
:class:`~actors.stages.request.context.StageContext`. Its :attr:`~StageModel.recorded` is a
:class:`~actors.llm.recorded.RecordedModel` (the replay layer: an answer recorded is
answered from the record) wired to the rest of the stage:

- its claims come from the stage's replay index and its requests go to persistence through
  the stage's writes (:mod:`actors.stages.request.writes`), so its pending answer rides on the
  stage's next write;
- before every call the user's safe point (:mod:`actors.stages.request.control`: a paused session
  stops there, what the stage held written first), and the user's steering is added to the
  request the provider gets, after the record's key was taken;
- a live call is watched (:class:`~actors.stages.request.callwatch.CallWatch`: its deadline, the
  stage's cancel, what the stage holds written if it runs long) and its meter handed to
  ``watch`` (the stage actor's :class:`~actors.stages.progress.ProgressBoard` publishes it).

The model is asked from the stage's own thread only. :meth:`StageModel.ask` asks for a
structured answer and corrects an invalid one; :meth:`StageModel.chat` sends a whole
conversation. :func:`make_provider` makes the session's provider once per process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, assert_never

import msgspec

from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage, ModelRequest, Provider
from actors.llm.recorded import RecordedModel, Spender
from actors.llm.scripted import ScriptedModel
from actors.stages.prompting.answers import parse_answer, schema_of
from actors.stages.prompting.corrections import correction
from actors.stages.prompting.untrusted import Fence
from actors.stages.request.callwatch import CallWatch
from actors.stages.request.control import WorkControl, with_guidance
from actors.stages.request.writes import StageWrites
from broker.threads import ThreadClients
from protocol import codec
from protocol.errors import ModelError
from protocol.messages import RunStage
from protocol.plans.results import ModelAnswer
from protocol.sessions.session import OllamaProvider, OpenAIProvider, ProviderSpec, ScriptedProvider

__all__ = ["StageModel", "make_provider"]

T = TypeVar("T")
_providers: dict[bytes, Provider] = {}
_providers_lock = threading.Lock()


def make_provider(spec: ProviderSpec | None) -> Provider:
    """The session's model, made once per process for each distinct spec and cached
    (scripted files are parsed once; an HTTP provider keeps its client)."""
    if spec is None:
        raise ModelError("this session has no model configured; run it with --provider scripted "
                         "--script FILE", code="ACODE-LLM-001")
    key = codec.encode(spec)  # tagged by kind, so equal fields of two kinds never collide
    with _providers_lock:
        provider = _providers.get(key)
        if provider is None:
            provider = _new_provider(spec)
            if len(_providers) > 32:
                _providers.clear()  # an HTTP provider keeps no connection open; dropping it is enough
            _providers[key] = provider
    return provider


def _new_provider(spec: ProviderSpec) -> Provider:
    match spec:
        case ScriptedProvider(script_yaml=text, script_name=name):
            return ScriptedModel.from_yaml(text, source=name or "<script>")
        # The HTTP providers are imported when one is used: they load httpx (and ssl), some
        # 4 MB of resident memory in each stage actor that a scripted model never needs.
        case OllamaProvider():
            from actors.llm.ollama import OllamaModel

            return OllamaModel(spec)
        case OpenAIProvider():
            from actors.llm.openai import OpenAICompatibleModel

            return OpenAICompatibleModel(spec)
        case _:
            assert_never(spec)


class StageModel:
    """The model of one stage request, and the questions a stage asks it."""

    def __init__(self, request: RunStage, writes: StageWrites, *, clients: ThreadClients, control: WorkControl,
                 fence: Fence, cancel: threading.Event, log: Any, watch: Callable[[Meter], None] | None = None,
                 spend: Spender | None = None):
        """``clients``: the stage's broker clients (the call watch's thread releases its own
        as it ends); ``watch``: gets each live call's meter (the stage actor's progress)."""
        self.request = request
        self.control = control
        self.fence = fence  # one nonce per dispatch; see actors.stages.prompting.untrusted
        self.log = log
        self.writes = writes
        self.calls = CallWatch(writes.flush, on_exit=clients.release, log=log)
        self.recorded = RecordedModel(make_provider(request.settings.provider), writes.persistence,
                                      session_id=request.session_id, visit=request.visit, cancel=cancel,
                                      before=self._before, amend=self._steered,
                                      claims=lambda: writes.replay_index().claims, calls=self.calls,
                                      watch=watch, spend=spend)  # the stage actor publishes each call's progress

    def ask(self, type_: type[T], *, call_site: str, system: str, user: str, corrections: int = 2) -> T:
        """Ask the model for a structured answer (a verdict, a review) and validate it. An
        answer that does not decode goes back to the model with the problem, at most
        ``corrections`` times (call sites ``<call_site>/retry<n>``, so a replay finds them),
        before ModelError ACODE-LLM-003."""
        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        site = call_site
        for attempt in range(corrections + 1):
            answer = self.chat(type_, call_site=site, messages=messages)
            try:
                return parse_answer(answer.content, type_, stage=self.request.stage)
            except ModelError as exc:
                if attempt == corrections:
                    raise
                self.log.info("answer_corrected", call_site=site, problem=exc.message[:300])
                messages = correction(messages, answer, f"That answer was refused: {exc.message}. Answer again "
                                      "with one JSON object of the shape asked for.",
                                      settings=self.request.settings, stage=self.request.stage)
                site = f"{call_site}/retry{attempt + 1}"
        raise AssertionError("unreachable")

    def chat(self, type_: type[object], *, call_site: str, messages: list[ChatMessage]) -> ModelAnswer:
        """One model call with a whole conversation (e.g. a correction after an invalid
        answer), asking for ``type_``'s JSON schema; the caller parses the raw answer."""
        return self.recorded.complete(ModelRequest(
            stage=self.request.stage, call_site=call_site, json_schema=schema_of(type_), nonce=self.fence.nonce,
            messages=messages))

    def close(self) -> None:
        """The stage has ended: stop watching calls (harmless twice)."""
        self.calls.close()

    def _before(self, request: ModelRequest) -> None:
        """Stop here if the user paused the session (WorkPaused), after writing what the
        stage held back."""
        self.control.safe_point(f"model call {request.call_site}", first=self.writes.flush)

    def _steered(self, request: ModelRequest) -> ModelRequest:
        """``request`` as the model gets it: with the user's steering so far (fenced), if any."""
        guidance = self.control.guidance(self.fence)
        if not guidance:
            return request
        return msgspec.structs.replace(request, messages=with_guidance(request.messages, guidance))
