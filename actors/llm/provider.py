"""What a stage asks a model, and the interface every provider implements.

A :class:`ModelRequest` is a chat (system/user/assistant/tool messages), the tools the
model may call, and optionally a JSON schema its answer must follow. Providers answer a
:class:`~protocol.plans.results.ModelAnswer` (text and/or tool calls). ``seq`` is the request's
place in its stage's sequence for the session, assigned durably by persistence; only the
scripted provider uses it (it serves response number ``seq``).

``nonce`` is the random marker the stage wrapped untrusted text in (see
``actors.stages.prompting.untrusted``); it changes on every dispatch, so the recorded-answer hash
replaces it with a placeholder and a replayed stage still finds its answers.
``max_tokens`` overrides the provider's answer cap (``acode doctor``'s tiny probes).

``meter`` (optional) is moved as the answer streams in (``actors.llm.meter``): it feeds
the live "thinking…" line. A provider that does not stream may ignore it.

A provider that measures its model's speed is also :class:`Paced`: ``expected_s`` says how
long a normal call with a request takes (``actors.llm.pace``), for stage deadlines.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import msgspec

from protocol.plans.results import ModelAnswer, ModelToolCall
from protocol.plans.stages import Stage

if TYPE_CHECKING:
    from actors.llm.meter import Meter

__all__ = ["ChatMessage", "ModelRequest", "Paced", "Provider"]


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ModelToolCall] = []
    tool_call_id: str = ""
    name: str = ""


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    stage: Stage
    call_site: str  # where in the stage this call is made, e.g. "T1/S2/turn3"
    messages: list[ChatMessage]
    tools: list[dict[str, Any]] = []
    json_schema: dict[str, Any] | None = None
    nonce: str = ""
    max_tokens: int = 0  # the answer's cap; 0: the provider's setting for the stage
    temperature: float | None = None  # None: the provider's setting (the executor lowers it for a repeated answer)


class Provider(Protocol):
    """A model. ``cancel`` is set when the stage is abandoned: stop waiting, raise.
    ``meter``, when given, counts the answer's pieces as they stream in."""

    @property
    def name(self) -> str: ...  # read-only, so a class attribute (HttpModel's) satisfies it

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer: ...


@runtime_checkable
class Paced(Protocol):
    """A provider that knows its model's measured speed."""

    def expected_s(self, request: ModelRequest) -> float | None: ...
