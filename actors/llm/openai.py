"""OpenAI-compatible servers (LM Studio, llama.cpp's server, vLLM): ``POST {base_url}/chat/completions``.

The answer streams as server-sent events: ``data: {chunk}`` lines ending with ``data:
[DONE]``. Text comes as ``delta.content``; a tool call comes in pieces keyed by
``index`` (the id and name first, then the arguments as fragments of one JSON string),
assembled here. Arguments that do not decode to a JSON object are kept as text in
``ModelToolCall.invalid_arguments``: the executor tells the model what was wrong instead
of failing the stage. ``stream_options.include_usage`` asks for a last chunk with the
token counts, and ``max_tokens`` caps the answer (``finish_reason: "length"`` when it
hit the cap). The meter counts the deltas that carry text or a piece of a tool call (one
token each on llama.cpp, LM Studio and vLLM), or takes a ``usage`` block's
``completion_tokens`` whenever a chunk carries one (vLLM's ``continuous_usage_stats``, the
last chunk). The server's own work comes with the answer when it says it: llama.cpp's
``timings`` (``prompt_n`` tokens evaluated in ``prompt_ms``, ``predicted_ms``, ``cache_n``
served from its prompt cache) and ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's
name for the cached share) go into :class:`~protocol.plans.results.Usage`.

A model the server does not have answers (LM Studio) 404 ``{"error": {"message": "Model
\\"x\\" not found...", "code": "model_not_found"}}``: ACODE-LLM-006, never retried. The key
for servers that want one comes from the environment variable ``api_key_env`` names, at
each request; it is never stored in settings or logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import msgspec

from actors.llm.http import HttpModel, Transient, decode_chunk, parse_arguments
from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer, ModelToolCall, Usage
from protocol.sessions.session import OpenAIProvider

__all__ = ["OpenAICompatibleModel", "sse_data"]


class _FunctionDelta(msgspec.Struct):
    name: str | None = None
    arguments: Any = None


class _ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _FunctionDelta | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: Any = None  # {"cached_tokens": n}, read by _figure


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    timings: Any = None  # llama.cpp's: {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n", ...}
    error: Any = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_MISSING = re.compile(r"model.*(not found|does not exist|not loaded)|no models? (is )?loaded|model_not_found",
                      re.IGNORECASE | re.DOTALL)


def _figure(block: Any, key: str) -> float:
    """A non-negative number out of a block of a server's figures (0 when it is not one)."""
    value = block.get(key) if isinstance(block, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e12:
        return 0.0
    return float(value)


def _usage(usage: Usage, timings: Any, details: Any) -> Usage:
    """The counts with the server's timings and cache figures added (what it did not say stays 0)."""
    cached = _figure(timings, "cache_n") or _figure(details, "cached_tokens")
    return msgspec.structs.replace(
        usage, completion_tokens=usage.completion_tokens or int(_figure(timings, "predicted_n")),
        cached_tokens=int(cached), prompt_n=int(_figure(timings, "prompt_n")),
        prompt_ms=_figure(timings, "prompt_ms"), completion_ms=_figure(timings, "predicted_ms"))


def sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The data of each server-sent event (``data:`` lines of one event joined by newlines)."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


def _message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        # Arguments that were not JSON go back as {}: llama.cpp's template path parses every
        # call in the history and refuses the whole request otherwise; the raw text and the
        # problem are in the correction the executor sends.
        out["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": msgspec.json.encode(c.arguments).decode()}}
            for c in message.tool_calls]
    return out


def _schema_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref")
    name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else str(schema.get("title") or "answer")
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer"


class _Call:
    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class OpenAICompatibleModel(HttpModel):
    name = "openai"
    label = "the OpenAI-compatible server"
    chat_path = "/chat/completions"
    start_hint = "start the server (LM Studio: Developer tab, Start Server), or fix base_url (it ends in /v1)"
    spec: OpenAIProvider  # HttpModel takes either spec; this model is only ever built with its own

    def headers(self) -> dict[str, str]:
        variable = self.spec.api_key_env
        if not variable:
            return {}
        key = os.environ.get(variable, "")
        if not key:
            raise ModelError(f"api_key_env names {variable!r}, which is not set in the stage actors' environment; "
                             f"export {variable} before `acode up`, or clear api_key_env", code="ACODE-LLM-001")
        return {"Authorization": f"Bearer {key}"}

    def request_body(self, request: ModelRequest, model: str, max_tokens: int) -> dict[str, Any]:
        spec = self.spec
        temperature = spec.temperature if request.temperature is None else request.temperature
        body: dict[str, Any] = {"model": model, "messages": [_message(m) for m in request.messages],
                                "temperature": temperature, "max_tokens": max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}}
        if spec.seed is not None:
            body["seed"] = spec.seed
        if request.tools:
            body["tools"] = request.tools
        if request.json_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": _schema_name(request.json_schema), "schema": request.json_schema}}
        return body

    def missing_model(self, status: int, message: str, model: str) -> ModelError | None:
        if status >= 500 or not _MISSING.search(message):
            return None
        return ModelError(f"model {model!r} is not available on {self.label} at {self.base_url}: {message[:200]}; "
                          f"load it (LM Studio: `lms load {model}` or the Developer tab) or set model to one that "
                          f"GET {self.base_url}/models lists", code="ACODE-LLM-006")

    def read_stream(self, lines: Iterator[str], model: str, meter: Meter | None = None) -> ModelAnswer:
        meter = meter or Meter()
        content: list[str] = []
        calls: dict[int, _Call] = {}
        usage = Usage()
        timings: Any = None
        details: Any = None
        finished = False
        reason = ""
        for data in sse_data(lines):
            if data.strip() == "[DONE]":
                finished = True
                break
            try:
                chunk = decode_chunk(data, _decode_chunk, _Chunk)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise ModelError(f"{self.label} at {self.base_url} sent an event that is not a chat chunk ({exc}): "
                                 f"{data[:120]!r}; does base_url end in /v1?", code="ACODE-LLM-010") from exc
            if chunk.error is not None:
                return self.interrupted(chunk.error, model, 400, content="".join(content),
                                        calls=self._calls(calls), usage=usage)
            if chunk.usage is not None:
                usage = Usage(prompt_tokens=chunk.usage.prompt_tokens or 0,
                              completion_tokens=chunk.usage.completion_tokens or 0)
                details = chunk.usage.prompt_tokens_details or details
                meter.counted(usage.completion_tokens)
            timings = chunk.timings or timings
            for choice in (chunk.choices or [])[:1]:
                finished = finished or choice.finish_reason is not None
                reason = (choice.finish_reason or reason)[:64]
                delta = choice.delta
                if delta is None:
                    continue
                if delta.content or delta.tool_calls:
                    meter.chunk()
                content.append(delta.content or "")
                for piece in delta.tool_calls or []:
                    self._add(calls, piece)
        if not finished:
            raise Transient(f"{self.label} at {self.base_url} ended the stream before {model}'s answer was done",
                            code="ACODE-LLM-010", fix="check the server's log")
        return ModelAnswer(content="".join(content), tool_calls=self._calls(calls),
                           usage=_usage(usage, timings, details), finish_reason=reason)

    @staticmethod
    def _calls(calls: dict[int, _Call]) -> list[ModelToolCall]:
        return [parse_arguments(call.id or f"call_{i}", call.name, "".join(call.arguments))
                for i, call in enumerate(calls[k] for k in sorted(calls))]

    @staticmethod
    def _add(calls: dict[int, _Call], piece: _ToolCallDelta) -> None:
        index = piece.index
        if index is None:  # some servers leave it out: a new id starts a new call
            last = max(calls, default=-1)
            new = last < 0 or bool(piece.id and calls[last].id and piece.id != calls[last].id)
            index = last + 1 if new else last
        call = calls.setdefault(index, _Call())
        if piece.id and not call.id:
            call.id = piece.id
        if piece.function is not None:
            if piece.function.name and not call.name:
                call.name = piece.function.name
            arguments = piece.function.arguments
            if isinstance(arguments, str):
                call.arguments.append(arguments)
            elif arguments is not None:  # an object, from a lenient server
                call.arguments.append(msgspec.json.encode(arguments).decode())

    # -- acode doctor ---------------------------------------------------------------------------

    def list_models(self, *, timeout: float = 5.0) -> list[str]:
        body = self.fetch_json("GET", "/models", timeout=timeout)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ModelError(f"{self.label} at {self.base_url} answered GET /models without a model list; does "
                             "base_url end in /v1?", code="ACODE-LLM-010")
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]

    def context_length(self, model: str, *, timeout: float = 5.0) -> tuple[int, str] | None:
        """The context the server gives ``model``, and where it said so; None when it does not say.

        llama.cpp: ``GET /props`` ``default_generation_settings.n_ctx`` (what one request gets),
        else ``GET /v1/models`` ``data[].meta.n_ctx``; vLLM: ``data[].max_model_len``; LM Studio:
        ``GET /api/v0/models`` ``loaded_context_length`` (else ``max_context_length``).
        """
        found = self._quietly(lambda: self.fetch_json("GET", "/props", timeout=timeout, root=True))
        settings = found.get("default_generation_settings") if isinstance(found, dict) else None
        if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
            return settings["n_ctx"], "llama.cpp GET /props default_generation_settings.n_ctx"
        for path, root, source in (("/models", False, "GET /v1/models"), ("/api/v0/models", True,
                                                                           "LM Studio GET /api/v0/models")):
            listed = self._quietly(lambda p=path, r=root: self.fetch_json("GET", p, timeout=timeout, root=r))
            data = listed.get("data") if isinstance(listed, dict) else None
            entry = next((m for m in data or [] if isinstance(m, dict) and m.get("id") == model), None)
            if entry is None:
                continue
            meta = entry.get("meta")
            if not isinstance(meta, dict):
                meta = {}
            for value, field in ((meta.get("n_ctx"), "meta.n_ctx"), (entry.get("max_model_len"), "max_model_len"),
                                 (entry.get("loaded_context_length"), "loaded_context_length"),
                                 (entry.get("max_context_length"), "max_context_length")):
                if isinstance(value, int) and value > 0:
                    return value, f"{source} {field}"
        return None

    @staticmethod
    def _quietly(call: Any) -> Any:
        try:
            return call()
        except ModelError:
            return None  # this server does not have that endpoint
