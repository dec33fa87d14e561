"""Ollama's native API: ``POST {base_url}/api/chat``, answered as NDJSON.

Each line of the stream is a chunk: ``message.content`` deltas, ``message.tool_calls``
(whole calls, arguments as JSON objects), an ``error`` field when the server fails
mid-answer, and a last chunk with ``done: true`` carrying ``prompt_eval_count`` and
``eval_count`` (with ``prompt_eval_duration`` and ``eval_duration`` in nanoseconds, the
model's speeds: :mod:`actors.llm.pace`) and ``done_reason`` (``length`` when the answer hit ``num_predict``, the
cap every request sets). The request sets ``num_ctx`` explicitly: Ollama's own default window is
small and silently truncates a long prompt from the front, losing the system prompt.
Ollama sends one chunk per generated token: the meter counts the chunks that carry text or
tool calls, and takes ``eval_count`` when the last chunk brings it.

A model that is not pulled answers 404 ``{"error": "model \\"x\\" not found, try pulling
it first"}``: that is ACODE-LLM-006, never retried. ``acode doctor`` uses
:meth:`OllamaModel.list_models`, :meth:`~OllamaModel.context_length` and
:meth:`~OllamaModel.version`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from actors.llm.http import HttpModel, Transient, decode_chunk, parse_arguments
from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer, ModelToolCall, Usage

__all__ = ["OllamaModel", "same_model"]


class _Function(msgspec.Struct):
    name: str = ""
    arguments: Any = None


class _ToolCall(msgspec.Struct):
    function: _Function
    id: str = ""


class _Message(msgspec.Struct):
    content: str = ""
    tool_calls: list[_ToolCall] | None = None


class _Chunk(msgspec.Struct):
    message: _Message | None = None
    done: bool = False
    error: Any = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    prompt_eval_duration: float | None = None  # nanoseconds
    eval_duration: float | None = None
    done_reason: str | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode


def _ms(nanoseconds: float | None) -> float:
    return min(max(0.0, nanoseconds or 0.0) / 1e6, 1e11)


def same_model(wanted: str, listed: str) -> bool:
    """Ollama lists ``llama3`` as ``llama3:latest``; both name the same model."""
    def norm(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"
    return norm(wanted) == norm(listed)


def _message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in message.tool_calls]
    if message.role == "tool" and message.name:
        out["tool_name"] = message.name
    return out


class OllamaModel(HttpModel):
    name = "ollama"
    label = "Ollama"
    chat_path = "/api/chat"
    start_hint = "start it with `ollama serve`, or fix base_url"

    def request_body(self, request: ModelRequest, model: str, max_tokens: int) -> dict[str, Any]:
        spec = self.spec
        temperature = spec.temperature if request.temperature is None else request.temperature
        options: dict[str, Any] = {"num_ctx": spec.num_ctx, "num_predict": max_tokens, "temperature": temperature}
        if spec.seed is not None:
            options["seed"] = spec.seed
        body: dict[str, Any] = {"model": model, "messages": [_message(m) for m in request.messages],
                                "stream": True, "options": options}
        if request.tools:
            body["tools"] = request.tools
        if request.json_schema is not None:
            body["format"] = request.json_schema
        return body

    def missing_model(self, status: int, message: str, model: str) -> ModelError | None:
        lowered = message.lower()
        if "not found" in lowered and ("model" in lowered or (model and model in message)):
            return ModelError(f"model {model!r} is not pulled on Ollama at {self.base_url}; run: ollama pull {model}",
                              code="ACODE-LLM-006")
        return None

    def read_stream(self, lines: Iterator[str], model: str, meter: Meter | None = None) -> ModelAnswer:
        meter = meter or Meter()
        content: list[str] = []
        calls: list[ModelToolCall] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                chunk = decode_chunk(line, _decode_chunk, _Chunk)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise ModelError(f"Ollama at {self.base_url} sent a line that is not an answer chunk ({exc}): "
                                 f"{line[:120]!r}; is base_url an Ollama server?", code="ACODE-LLM-010") from exc
            if chunk.error is not None:
                return self.interrupted(chunk.error, model, 404, content="".join(content), calls=calls,
                                        usage=Usage())
            if chunk.message is not None:
                if chunk.message.content or chunk.message.tool_calls:
                    meter.chunk()
                content.append(chunk.message.content)
                for call in chunk.message.tool_calls or []:
                    calls.append(parse_arguments(call.id or f"call_{len(calls)}", call.function.name,
                                                 call.function.arguments))
            if chunk.done:
                meter.counted(chunk.eval_count or 0)
                return ModelAnswer(content="".join(content), tool_calls=calls, usage=Usage(
                    prompt_tokens=chunk.prompt_eval_count or 0, completion_tokens=chunk.eval_count or 0,
                    prompt_n=chunk.prompt_eval_count or 0, prompt_ms=_ms(chunk.prompt_eval_duration),
                    completion_ms=_ms(chunk.eval_duration)), finish_reason=(chunk.done_reason or "")[:64])
        raise Transient(f"Ollama at {self.base_url} ended the stream before {model}'s answer was done",
                        code="ACODE-LLM-010", fix="check the server's log")

    # -- acode doctor ---------------------------------------------------------------------------

    def version(self, *, timeout: float = 5.0) -> str:
        body = self.fetch_json("GET", "/api/version", timeout=timeout)
        return str(body.get("version", "?")) if isinstance(body, dict) else "?"

    def list_models(self, *, timeout: float = 5.0) -> list[str]:
        body = self.fetch_json("GET", "/api/tags", timeout=timeout)
        models = body.get("models") if isinstance(body, dict) else None
        if not isinstance(models, list):
            raise ModelError(f"Ollama at {self.base_url} answered GET /api/tags without a model list; is base_url "
                             "an Ollama server?", code="ACODE-LLM-010")
        return [str(m.get("name") or m.get("model")) for m in models if isinstance(m, dict)]

    def context_length(self, model: str, *, timeout: float = 5.0) -> int | None:
        """The model's trained context window, from ``model_info["<arch>.context_length"]``."""
        body = self.fetch_json("POST", "/api/show", {"model": model}, timeout=timeout)
        info = body.get("model_info") if isinstance(body, dict) else None
        if not isinstance(info, dict):
            return None
        value = info.get(f"{info.get('general.architecture')}.context_length")
        if not isinstance(value, int):
            value = next((v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)), None)
        return value
