"""The scripted model: answers come from a YAML script, in order, per stage.

Response ``seq`` of the stage's list answers the stage's ``seq``-th distinct request of
the session (persistence assigns ``seq`` when the request is first seen, so a retried
request gets the same response). ``delay_s`` simulates a slow model; the wait ends early
if the stage is cancelled. It does not stream: a meter it is given stays at 0 tokens.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from actors.llm.provider import ModelRequest
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer, ModelToolCall, Usage
from protocol.plans.script import Script, load_script

if TYPE_CHECKING:
    from actors.llm.meter import Meter

__all__ = ["ScriptedModel"]


class ScriptedModel:
    name = "scripted"

    def __init__(self, script: Script, *, source: str = "<script>"):
        self.script = script
        self.source = source

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "<script>") -> ScriptedModel:
        return cls(load_script(text, name=source), source=source)

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        responses = self.script.responses.get(request.stage, [])
        if seq >= len(responses):
            raise ModelError(
                f"the scripted model has no response left for the {request.stage} (it has {len(responses)}, "
                f"this is request {seq + 1}, at {request.call_site}); add responses under "
                f"responses.{request.stage} in {self.source}", code="ACODE-LLM-002")
        response = responses[seq]
        if response.delay_s and cancel.wait(response.delay_s):
            raise ModelError(f"the {request.stage} stage was cancelled while the model was answering",
                             code="ACODE-ORCH-007")
        text = response.text()
        calls = [ModelToolCall(id=f"call_{seq}_{i}", name=c.name, arguments=c.arguments)
                 for i, c in enumerate(response.tool_calls)]
        prompt = sum(len(m.content) for m in request.messages) // 4
        return ModelAnswer(content=text, tool_calls=calls,
                           usage=Usage(prompt_tokens=prompt, completion_tokens=len(text) // 4 + 8 * len(calls),
                                       estimated=True))  # a count of characters, not of a tokenizer
