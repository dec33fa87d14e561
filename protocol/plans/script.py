"""The scripted model file: the deterministic "model" of the demo, the tests and drills.

```yaml
version: 1
responses:
  planner:
    - json: {goal: …, status: ready, tasks: [...]}   # json: is sugar for content: <that JSON>
  executor:
    - tool_calls: [{name: write_file, arguments: {path: hello.py, content: "print('hello')\\n"}}]
    - tool_calls: [{name: step_complete, arguments: {summary: wrote hello.py}}]
  verifier:
    - json: {passed: true, summary: ok, criteria: []}
  reviewer:
    - json: {decision: approve, summary: looks right, issues: []}
```

Each stage's list is consumed in order across the whole session, cycles included. A
response may carry ``delay_s`` to simulate a slow model. The file is user-written, so
unknown keys are refused (a typo must fail loudly, not silently drop a tool call).
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

import msgspec
import msgspec.yaml

from protocol.basics.text import find_bad_text
from protocol.errors import ModelError
from protocol.plans.stages import Stage

__all__ = ["Script", "ScriptedResponse", "ScriptedToolCall", "load_script"]


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class ScriptedToolCall(_Strict, frozen=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    arguments: dict[str, Any] = {}


class ScriptedResponse(_Strict, frozen=True, kw_only=True):
    content: str | None = None
    json: Any = None
    tool_calls: list[ScriptedToolCall] = []
    delay_s: Annotated[float, msgspec.Meta(ge=0, le=3_600)] = 0.0

    def text(self) -> str:
        """The answer's text: ``content`` as given, or ``json`` encoded as JSON."""
        if self.content is not None:
            return self.content
        if self.json is not None:
            return msgspec.json.encode(self.json).decode()
        return ""


class Script(_Strict, frozen=True, kw_only=True):
    version: Literal[1]
    responses: dict[Stage, list[ScriptedResponse]] = {}


class _ScriptShape(_Strict, frozen=True, kw_only=True):
    """A script's top level with its responses left undecoded, so an error can name the stage."""

    version: Literal[1]
    responses: dict[Stage, list[Any]] = {}


def load_script(text: str | bytes, *, name: str = "<script>") -> Script:
    """Decode and check a scripted model file; errors carry ACODE-LLM-004, the file name and
    the response they are about (``responses.executor[1]``). Text read with
    ``errors="surrogateescape"`` is refused if it held bytes that are not UTF-8."""
    bad = find_bad_text(text) if isinstance(text, str) else None
    if bad is not None:
        raise ModelError(f"scripted model file {name} is not UTF-8 text: an undecodable byte "
                         f"(\\x{ord(bad.char) & 0xff:02x}) at character {bad.offset}; save it as UTF-8",
                         code="ACODE-LLM-004")
    try:
        shape = _shape(text)
    except msgspec.ValidationError as exc:
        raise ModelError(f"scripted model file {name} is invalid: {exc}; see README "
                         "'Scripted model format'", code="ACODE-LLM-004") from exc
    except msgspec.DecodeError as exc:
        raise ModelError(f"scripted model file {name} is not valid YAML: {exc}",
                         code="ACODE-LLM-004") from exc
    responses = {
        stage: [_response(raw, f"scripted model file {name}: responses.{stage}[{index}]")
                for index, raw in enumerate(items)]
        for stage, items in shape.responses.items()
    }
    return Script(version=shape.version, responses=responses)


def _shape(text: str | bytes) -> _ScriptShape:
    """The script's top level. A script written as JSON (a YAML document too) is read by
    msgspec's JSON parser, in microseconds, where PyYAML takes milliseconds for a few KB;
    a text that is not strict JSON (``{version: 1}``) is read as YAML."""
    if text.lstrip()[:1] in ("{", b"{"):
        try:
            return msgspec.json.decode(text, type=_ScriptShape)
        except msgspec.ValidationError:
            raise  # JSON, but not a script's shape: said as the YAML reading would say it
        except msgspec.DecodeError:
            pass  # YAML's flow style, comments, ...: the YAML parser decides
    return msgspec.yaml.decode(text, type=_ScriptShape)


def _response(raw: Any, where: str) -> ScriptedResponse:
    try:
        # The same conversion msgspec.yaml.decode applies after parsing.
        item = msgspec.convert(raw, ScriptedResponse, builtin_types=(datetime.datetime, datetime.date))
    except msgspec.ValidationError as exc:
        raise ModelError(f"{where} is invalid: {exc}; see README 'Scripted model format'",
                         code="ACODE-LLM-004") from exc
    if item.content is not None and item.json is not None:
        raise ModelError(f"{where} has both content and json; keep one", code="ACODE-LLM-004")
    if item.content is None and item.json is None and not item.tool_calls:
        raise ModelError(f"{where} is empty; give content, json or tool_calls", code="ACODE-LLM-004")
    return item
