"""A stand-in model server for tests: Ollama's and the OpenAI API's wire formats over loopback HTTP.

It listens on 127.0.0.1 (a free port), in a thread, so acode's actor subprocesses reach it
over TCP like a real server. One port serves both formats, as Ollama itself does::

    POST /api/chat  GET /api/tags  POST /api/show  GET /api/version     (Ollama, NDJSON stream)
    POST /v1/chat/completions  GET /v1/models                          (OpenAI, SSE stream)

Chat requests are answered from a programmable responder::

    with ModelServer(models=["test-model"]) as server:
        server.by_stage(planner=[Json(plan)], executor=[ToolCalls([("write_file", {...})]),
                                                        ToolCalls([("step_complete", {"summary": "ok"})])])
        spec = OllamaProvider(base_url=server.url, model="test-model")
        # or OpenAIProvider(base_url=server.openai_url, model="test-model")
        ...
        assert [r.stage for r in server.chats] == ["planner", "executor", "executor"]

Replies: :class:`Text`, :class:`Json`, :class:`ToolCalls` (native), :class:`TextToolCalls`
(calls written as text), :class:`Status` (any status, body, headers), :class:`MissingModel`,
:class:`Stall`, :class:`Disconnect`, :class:`StreamError`, :class:`ToolCallsThenError`.
``finish="length"`` on :class:`Text`/:class:`Json` ends the answer as cut at the token limit;
``pace_s`` on them waits that long before each piece (a slow model streaming its answer), and
``first_s`` that long after the headers before the first (a slow model reading a long prompt).

An answer that reports usage also reports the server's timings as the real servers do:
llama.cpp's ``timings`` in the OpenAI format (``prompt_n``: the tokens after the common
prefix with the stage's previous prompt, ``cache_n``: the rest, ``prompt_ms``: from the
request to the first piece, ``predicted_n``/``predicted_ms``: the answer), Ollama's
``prompt_eval_duration``/``eval_duration`` in nanoseconds.

Server options that play what a real llama.cpp server does (its own bodies and strings):

- ``jinja=False``: llama-server without ``--jinja``: an OpenAI-format request with tools
  gets HTTP 500 ``tools param requires --jinja flag`` (no reply is consumed);
- ``n_ctx=N``: the context size. It is reported in ``GET /v1/models`` (``meta.n_ctx``) and
  ``GET /props`` (``props=False``: an older server without it); an OpenAI-format prompt over it gets llama.cpp's 400
  ``exceed_context_size_error``;
- ``chars_per_token``: how the stand-in "tokenizes" (prompt counts, the overflow check);
- ``tools_in_prompt=False``: a chat template without tool support: the tools silently
  leave the prompt (the prompt count shows it, as a real server's does).

Each chat request's prompt is rendered as a template would (system, tool block, messages);
``Received.reread_tokens`` is what a prompt cache could not reuse from the same stage's
previous request (the tokens after the common prefix). A request for a model not in
``models`` gets each server's real 404 without consuming a reply; a request no reply is
queued for gets a 400 naming the stage (recorded in ``unanswered``), so a test fails fast.
Every request is recorded (:class:`Received`); connections the client closed before the
reply ended are counted in ``early_closes``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "ByStage",
    "Disconnect",
    "Json",
    "MissingModel",
    "ModelServer",
    "Queue",
    "Received",
    "Reply",
    "Stall",
    "Status",
    "StreamError",
    "Text",
    "TextToolCalls",
    "ToolCalls",
    "ToolCallsThenError",
]

Kind = Literal["ollama", "openai"]
UsageFigures = tuple[int, int] | Literal["auto", "omit"]  # (prompt, completion); "omit": report none
_CALL_IDS = itertools.count(1)
_STAGE = re.compile(r"^\s*You are the (planner|executor|verifier|reviewer) of acode")
FILE_STEP_SYSTEM = "You are an expert programmer. You change one file of a project at a time."


# -- replies ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Text:
    """Text, streamed in ``chunks`` pieces, ``pace_s`` apart, the first ``first_s`` after the headers."""

    text: str
    chunks: int = 3
    usage: UsageFigures = "auto"
    finish: str = "stop"
    pace_s: float = 0.0
    first_s: float = 0.0


@dataclass(frozen=True)
class Json:
    """A JSON value, as the answer's text (what a model asked for a schema writes), in
    ``chunks`` pieces ``pace_s`` apart."""

    value: Any
    chunks: int = 3
    usage: UsageFigures = "auto"
    finish: str = "stop"
    pace_s: float = 0.0
    first_s: float = 0.0


@dataclass(frozen=True)
class ToolCalls:
    """Native tool calls: (name, arguments). Arguments given as a str are sent as that raw text."""

    calls: list[tuple[str, dict[str, Any] | str]]
    text: str = ""
    usage: UsageFigures = "auto"


@dataclass(frozen=True)
class TextToolCalls:
    """Tool calls written in the answer's text instead of the native field (a model whose
    template does not support tools): ``<tool_call>{json}</tool_call>`` blocks ("tags") or a
    bare JSON object per line ("json")."""

    calls: list[tuple[str, dict[str, Any]]]
    style: Literal["tags", "json"] = "tags"
    usage: UsageFigures = "auto"


@dataclass(frozen=True)
class Status:
    """An HTTP error: ``body`` a dict (sent as JSON), a str (sent as is) or None (the server's
    own error shape with a default message)."""

    status: int
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MissingModel:
    """The 404 each server sends for a model it does not have, with its real body shape."""


@dataclass(frozen=True)
class Stall:
    """Send the headers and ``chunks`` pieces of ``text`` (0: only the headers), then go silent for
    ``seconds`` or until the client leaves; a client still there gets the rest. ``headers=False``:
    silent before sending anything at all, then the whole answer."""

    text: str = "a slow answer"
    chunks: int = 1
    seconds: float = 30.0
    headers: bool = True


@dataclass(frozen=True)
class Disconnect:
    """Send ``chunks`` pieces of ``text``, then close the connection mid-stream."""

    text: str = "a cut answer"
    chunks: int = 1


@dataclass(frozen=True)
class StreamError:
    """Send ``chunks`` pieces of ``text``, then an error in the stream (Ollama: an ``error``
    line; OpenAI: an ``error`` event), and end the response."""

    message: str = "the model runner stopped"
    text: str = "an answer"
    chunks: int = 1


@dataclass(frozen=True)
class ToolCallsThenError:
    """Complete native tool calls, then an error in the stream (what llama.cpp sends when its
    chat parser fails on what the model wrote after a valid call), no normal end."""

    calls: list[tuple[str, dict[str, Any]]]
    message: str = "Failed to parse input at pos 57: </tool_call>\n<tool_call>"


Reply = (Text | Json | ToolCalls | TextToolCalls | Status | MissingModel | Stall | Disconnect | StreamError
         | ToolCallsThenError)


@dataclass
class Received:
    """One request as the server saw it (``body`` is the parsed JSON, None without one)."""

    kind: Kind
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    stage: str | None = None
    reply: Reply | None = None
    at: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic())
    prompt: str = ""  # a chat request's prompt as a template renders it
    prompt_tokens: int = 0  # at the server's chars_per_token
    reread_tokens: int = 0  # after the common prefix with the same stage's previous chat request

    @property
    def model(self) -> str:
        return str(self.body.get("model") or self.body.get("name") or "") if isinstance(self.body, dict) else ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []


Responder = Callable[[Received], Reply | None]  # None: nothing queued (answered 400)


class Queue:
    """Replies in order, whatever the stage."""

    def __init__(self, replies: Iterable[Reply] = ()):
        self.replies: deque[Reply] = deque(replies)
        self._lock = threading.Lock()

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def __call__(self, request: Received) -> Reply | None:
        with self._lock:
            return self.replies.popleft() if self.replies else None


class ByStage:
    """Each stage's replies in order; the stage is read from the system prompt."""

    def __init__(self, **replies: Iterable[Reply]):
        self.replies: dict[str, deque[Reply]] = {stage: deque(r) for stage, r in replies.items()}
        self._lock = threading.Lock()

    def add(self, stage: str, *replies: Reply) -> None:
        with self._lock:
            self.replies.setdefault(stage, deque()).extend(replies)

    def left(self, stage: str) -> int:
        with self._lock:
            return len(self.replies.get(stage, ()))

    def __call__(self, request: Received) -> Reply | None:
        with self._lock:
            queue = self.replies.get(request.stage or "")
            return queue.popleft() if queue else None


# -- the server ---------------------------------------------------------------------------------

class ModelServer:
    """The stand-in server; a context manager (``with ModelServer() as server:``)."""

    def __init__(self, responder: Responder | None = None, *, models: Iterable[str] | None = ("test-model",),
                 context_length: int = 32_768, architecture: str = "llama", jinja: bool = True,
                 n_ctx: int | None = None, chars_per_token: float = 4.0, tools_in_prompt: bool = True,
                 props: bool = True, port: int = 0):
        self.responder: Responder = responder or Queue()
        self.requested_port = port  # 0: a free one; a server "restarted" passes the old one
        self.jinja = jinja
        self.n_ctx = n_ctx
        self.chars_per_token = chars_per_token
        self.tools_in_prompt = tools_in_prompt
        self.props = props
        self.models: list[str] | None = None if models is None else list(models)  # None: any model
        self.context_length = context_length
        self.architecture = architecture
        self.requests: list[Received] = []
        self.unanswered: list[Received] = []
        self.early_closes = 0
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def __enter__(self) -> ModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        httpd = _HTTPServer(("127.0.0.1", self.requested_port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="modelserver", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving as a server going down does: stop listening first (a client retrying
        is refused), then end stalled replies at once; every handler thread is joined."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.socket.close()
        self._stop.set()
        self._httpd.server_close()
        assert self._thread is not None
        self._thread.join()
        self._httpd = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Ollama's base_url."""
        return f"http://127.0.0.1:{self.port}"

    ollama_url = url

    @property
    def openai_url(self) -> str:
        """An OpenAI-compatible base_url (with /v1)."""
        return f"{self.url}/v1"

    # programming it
    def queue(self, *replies: Reply) -> Queue:
        """Answer the next chat requests with these replies, in order, whatever the stage."""
        if not isinstance(self.responder, Queue):
            self.responder = Queue()
        self.responder.add(*replies)
        return self.responder

    def by_stage(self, **replies: Iterable[Reply]) -> ByStage:
        """Answer each stage from its own list (``planner=[...], executor=[...]``)."""
        self.responder = ByStage(**replies)
        return self.responder

    # what happened
    @property
    def chats(self) -> list[Received]:
        """The chat requests (either format), in arrival order."""
        with self._changed:
            return [r for r in self.requests if r.path in ("/api/chat", "/v1/chat/completions")]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate()`` holds (checked whenever a request arrives or a client leaves)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def _record(self, received: Received) -> None:
        with self._changed:
            if received.path in ("/api/chat", "/v1/chat/completions") and isinstance(received.body, dict):
                received.prompt = _render(received.body, tools=self.tools_in_prompt)
                received.prompt_tokens = self.tokens(len(received.prompt))
                before = next((r.prompt for r in reversed(self.requests) if r.prompt and r.stage == received.stage),
                              "")
                common = len(os.path.commonprefix([before, received.prompt]))
                received.reread_tokens = self.tokens(len(received.prompt) - common)
            self.requests.append(received)
            self._changed.notify_all()

    def _client_left(self) -> None:
        with self._changed:
            self.early_closes += 1
            self._changed.notify_all()

    def tokens(self, chars: int) -> int:
        return int(-(-chars // self.chars_per_token))

    def _known(self, model: str) -> bool:
        if self.models is None:
            return True
        return any(_tagged(model) == _tagged(m) for m in self.models)


def _tagged(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _split(text: str, parts: int) -> list[str]:
    parts = max(1, parts)
    size = -(-len(text) // parts) or 1
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
    return pieces or [""]


def _render(body: dict[str, Any], *, tools: bool) -> str:
    """The prompt a chat template makes of a request: the system message, then the tool
    block (as templates put it), then each message with its tool calls."""
    parts: list[str] = []
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index, message in enumerate(messages):
        parts.append(f"<|{message.get('role')}|>{message.get('content') or ''}")
        for call in message.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function") or call, sort_keys=True))
        if index == 0 and tools and body.get("tools"):
            parts.append("<|tools|>" + json.dumps(body["tools"]))
    if not messages and tools and body.get("tools"):
        parts.append("<|tools|>" + json.dumps(body["tools"]))
    return "\n".join(parts)


def _stage_of(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "system":
            content = str(message.get("content") or "")
            # a step answered as one whole file (actors.stages.execution.filestep)
            if content.startswith(FILE_STEP_SYSTEM):
                return "executor"
            match = _STAGE.match(content)
            return match.group(1) if match else None
    return None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads
    block_on_close = True
    owner: ModelServer


class _Left(Exception):
    """The client went away."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10.0  # a client that connects and says nothing does not hold a thread for ever
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    # routing
    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        self.close_connection = True
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        kind: Kind = "openai" if path.startswith("/v1/") else "ollama"
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        received = Received(kind=kind, method=method, path=path, body=body, stage=_stage_of(body),
                            headers={k.lower(): v for k, v in self.headers.items()})
        owner._record(received)
        try:
            match (method, path):
                case ("GET", "/api/version"):
                    self._json(200, {"version": "0.0.0-standin"})
                case ("GET", "/api/tags"):
                    self._json(200, {"models": [{"name": _tagged(m), "model": _tagged(m), "size": 1,
                                                 "digest": "0" * 64, "details": {"format": "gguf"}}
                                                for m in owner.models or []]})
                case ("POST", "/api/show"):
                    self._show(received)
                case ("GET", "/v1/models"):
                    meta = {} if owner.n_ctx is None else {"meta": {"n_ctx": owner.n_ctx, "n_ctx_train": 32_768,
                                                                    "n_vocab": 262_144}}
                    self._json(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "standin",
                                                                 **meta} for m in owner.models or []]})
                case ("GET", "/props") if owner.n_ctx is not None and owner.props:
                    self._json(200, {"default_generation_settings": {"n_ctx": owner.n_ctx}, "total_slots": 1,
                                     "chat_template": "{{ messages }}"})
                case ("POST", "/api/chat") | ("POST", "/v1/chat/completions"):
                    self._chat(received)
                case _:
                    self._whole(404, b"404 page not found", "text/plain")
        except _Left:
            if not owner._stop.is_set():  # not the server closing under a stalled reply
                owner._client_left()

    # plain answers
    def _whole(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError as exc:
            raise _Left from exc

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._whole(status, json.dumps(value).encode(), "application/json", headers)

    def _error(self, kind: Kind, status: int, message: str, *, code: str | None = None,
               headers: dict[str, str] | None = None) -> None:
        """An error in the server's own shape."""
        if kind == "ollama":
            self._json(status, {"error": message}, headers)
        else:
            self._json(status, {"error": {"message": message, "type": "invalid_request_error",
                                          "param": "model" if code == "model_not_found" else None, "code": code}},
                       headers)

    def _missing(self, received: Received) -> None:
        model = received.model
        if received.kind == "ollama":
            self._error("ollama", 404, f'model "{model}" not found, try pulling it first')
        else:
            listed = "\n".join(self.server.owner.models or [])
            self._error("openai", 404, f'Model "{model}" not found. Please specify a valid model.\n\n'
                                       f"Your models:\n\n{listed}", code="model_not_found")

    def _show(self, received: Received) -> None:
        owner = self.server.owner
        if not owner._known(received.model):
            self._error("ollama", 404, f"model '{received.model}' not found")
            return
        arch = owner.architecture
        self._json(200, {"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
                         "details": {"format": "gguf", "family": arch},
                         "model_info": {"general.architecture": arch, f"{arch}.context_length": owner.context_length,
                                        f"{arch}.embedding_length": 4096},
                         "capabilities": ["completion", "tools"]})

    # chat
    def _chat(self, received: Received) -> None:
        owner = self.server.owner
        problem = _invalid(received)
        if problem:
            self._error(received.kind, 400, problem)
            return
        if not owner._known(received.model):
            self._missing(received)
            return
        if received.kind == "openai" and received.body.get("tools") and not owner.jinja:
            self._json(500, {"error": {"code": 500, "message": "tools param requires --jinja flag",
                                       "type": "server_error"}})
            return
        broken = _unparsable_arguments(received)
        if broken is not None:  # llama.cpp's template path parses every call in the history
            message = ("Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error "
                       f"at line 1, column {len(broken) + 1}: syntax error while parsing value")
            self._json(500, {"error": {"code": 500, "message": message, "type": "server_error"}})
            return
        if received.kind == "openai" and owner.n_ctx is not None and received.prompt_tokens > owner.n_ctx:
            n = received.prompt_tokens
            self._json(400, {"error": {"code": 400, "message": f"request ({n} tokens) exceeds the available context "
                                                               f"size ({owner.n_ctx} tokens), try increasing it",
                                       "type": "exceed_context_size_error", "n_prompt_tokens": n,
                                       "n_ctx": owner.n_ctx}})
            return
        reply = owner.responder(received)
        received.reply = reply
        if reply is None:
            with owner._changed:
                owner.unanswered.append(received)
            self._error(received.kind, 400, f"stand-in model server: no reply queued for the "
                                            f"{received.stage or 'unknown stage'} (request {received.path})")
            return
        match reply:
            case Status(status=status, body=body, headers=headers):
                if isinstance(body, dict):
                    self._json(status, body, headers)
                elif isinstance(body, str):
                    self._whole(status, body.encode(), "text/plain", headers)
                else:
                    self._error(received.kind, status, f"stand-in server error {status}", headers=headers)
            case MissingModel():
                self._missing(received)
            case _:
                _Stream(self, received).play(reply)


def _invalid(received: Received) -> str:
    """What a real server would refuse in this request (a 400), or ''."""
    body = received.body
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not isinstance(body.get("messages"),
                                                                                               list):
        return "request must be a JSON object with model and messages"
    seen_ids: set[str] = set()
    for message in body["messages"]:
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
            return f"invalid message {message!r}"
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if received.kind == "ollama" and not isinstance(arguments, dict):
                return ("json: cannot unmarshal string into Go struct field ToolCallFunction.messages.tool_calls."
                        "function.arguments of type api.ToolCallFunctionArguments")
            if received.kind == "openai":
                if not isinstance(arguments, str) or call.get("type") != "function" or not call.get("id"):
                    return "tool_calls need an id, type 'function' and arguments as a JSON string"
                seen_ids.add(call["id"])
        if received.kind == "openai" and message["role"] == "tool" and message.get("tool_call_id") not in seen_ids:
            return "messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
    response_format = body.get("response_format")
    if response_format is not None and (not isinstance(response_format, dict)
                                        or response_format.get("type") not in ("json_schema", "text")):
        return "'response_format.type' must be 'json_schema' or 'text'"
    return ""


def _unparsable_arguments(received: Received) -> str | None:
    """The first tool-call arguments in an OpenAI-format history that are not JSON, or None."""
    if received.kind != "openai":
        return None
    for message in received.messages:
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments")
            if not isinstance(arguments, str):
                continue  # the shape check (_invalid) answers that one
            try:
                json.loads(arguments)
            except ValueError:
                return arguments
    return None


class _Stream:
    """One streamed chat answer in the request's format (chunked transfer encoding)."""

    def __init__(self, handler: _Handler, received: Received):
        self.handler = handler
        self.received = received
        self.kind = received.kind
        self.model = received.model
        self.sent = 0  # content pieces sent
        self.sent_chars = 0

    def play(self, reply: Reply) -> None:
        match reply:
            case Text(text=text, chunks=chunks, usage=usage, finish=finish, pace_s=pace, first_s=first):
                self.answer(_split(text, chunks), [], usage, finish=finish, pace=pace, first=first)
            case Json(value=value, chunks=chunks, usage=usage, finish=finish, pace_s=pace, first_s=first):
                self.answer(_split(json.dumps(value), chunks), [], usage, finish=finish, pace=pace, first=first)
            case ToolCallsThenError(calls=calls, message=message):
                self.start()
                self.calls(list(calls))
                if self.kind == "ollama":
                    self.event({"error": message})
                else:
                    self.event({"error": {"code": 500, "message": message, "type": "server_error"}})
                self.write(b"0\r\n\r\n")
            case ToolCalls(calls=calls, text=text, usage=usage):
                self.answer(_split(text, 1) if text else [], list(calls), usage)
            case TextToolCalls(calls=calls, style=style, usage=usage):
                blocks = [json.dumps({"name": n, "arguments": a}) for n, a in calls]
                text = "\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks) if style == "tags" \
                    else "\n".join(blocks)
                self.answer(_split(text, 3), [], usage)
            case Stall(text=text, chunks=chunks, seconds=seconds, headers=headers):
                if not headers:  # silent before the status line: then the whole answer
                    self.silence(seconds)
                    self.answer(_split(text, 3), [], "auto")
                    return
                pieces = _split(text, chunks + 1)
                self.start()
                for piece in pieces[:chunks]:
                    self.content(piece)
                self.silence(seconds)
                self.answer(pieces[chunks:], [], "auto", started=True)
            case Disconnect(text=text, chunks=chunks):
                self.start()
                for piece in _split(text, chunks + 1)[:chunks]:
                    self.content(piece)
                sock = self.handler.connection
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()  # a reset: the stream stops without its last chunk
            case StreamError(message=message, text=text, chunks=chunks):
                self.start()
                for piece in _split(text, chunks + 1)[:chunks]:
                    self.content(piece)
                if self.kind == "ollama":
                    self.event({"error": message})
                else:
                    self.event({"error": {"message": message, "type": "server_error", "code": None}})
                self.write(b"0\r\n\r\n")
            case _:
                raise TypeError(f"not a streamable reply: {reply!r}")

    # the pieces of a stream
    def start(self) -> None:
        handler = self.handler
        try:
            handler.send_response(200)
            ndjson = self.kind == "ollama"
            handler.send_header("Content-Type", "application/x-ndjson" if ndjson else "text/event-stream")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.send_header("Connection", "close")
            handler.end_headers()
        except OSError as exc:
            raise _Left from exc

    def write(self, data: bytes) -> None:
        try:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()
        except OSError as exc:
            raise _Left from exc

    def event(self, value: Any) -> None:
        line = (json.dumps(value) + "\n") if self.kind == "ollama" else f"data: {json.dumps(value)}\n\n"
        data = line.encode()
        self.write(b"%X\r\n%s\r\n" % (len(data), data))

    def content(self, piece: str) -> None:
        self.sent += 1
        self.sent_chars += len(piece)
        if self.kind == "ollama":
            self.event({"model": self.model, "created_at": _now(), "done": False,
                        "message": {"role": "assistant", "content": piece}})
        else:
            self.event(self._openai_chunk({"content": piece}))

    def silence(self, seconds: float) -> None:
        """Say nothing for ``seconds``; raise _Left as soon as the client closes the connection."""
        sock = self.handler.connection
        end = time.monotonic() + seconds
        stop = self.handler.server.owner._stop
        while not stop.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([sock], [], [], min(0.05, left))
            if readable:
                try:
                    data = sock.recv(1, socket.MSG_PEEK)
                except OSError as exc:
                    raise _Left from exc
                if not data:
                    raise _Left
                stop.wait(min(0.05, left))  # unexpected bytes from the client: ignore them
        raise _Left  # the server is closing

    def calls(self, calls: list[tuple[str, Any]]) -> None:
        """Native tool calls: one Ollama chunk; OpenAI deltas (id and name, then the arguments in pieces)."""
        if self.kind == "ollama":
            if calls:
                self.event({"model": self.model, "created_at": _now(), "done": False, "message": {
                    "role": "assistant", "content": "",
                    "tool_calls": [{"function": {"index": i, "name": n, "arguments": a}}
                                   for i, (n, a) in enumerate(calls)]}})
            return
        for i, (name, arguments) in enumerate(calls):
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            self.event(self._openai_chunk({"tool_calls": [{"index": i, "id": f"call_{next(_CALL_IDS)}",
                                                           "type": "function",
                                                           "function": {"name": name, "arguments": ""}}]}))
            for fragment in _split(text, 2) if text else []:
                self.event(self._openai_chunk({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]}))

    def answer(self, pieces: list[str], calls: list[tuple[str, Any]], usage: UsageFigures, *,
               started: bool = False, finish: str = "stop", pace: float = 0.0, first: float = 0.0) -> None:
        if not started:
            self.start()
        if first:
            self.silence(first)
        first_at = time.monotonic()
        for n, piece in enumerate(pieces):
            if pace:
                self.silence(pace)  # ends at once (raises _Left) if the client leaves
            if not n:
                first_at = time.monotonic()
            self.content(piece)
        figures = self._usage(usage, len(calls))
        self.calls(calls)
        prompt_ms, predicted_ms = (first_at - self.received.at) * 1000, (time.monotonic() - first_at) * 1000
        if self.kind == "ollama":
            final: dict[str, Any] = {"model": self.model, "created_at": _now(), "done": True, "done_reason": finish,
                                     "message": {"role": "assistant", "content": ""}, "total_duration": 1}
            if figures is not None:
                final.update(prompt_eval_count=figures[0], eval_count=figures[1],
                             prompt_eval_duration=int(prompt_ms * 1e6), eval_duration=int(predicted_ms * 1e6))
            self.event(final)
        else:
            self.event(self._openai_chunk({}, finish="tool_calls" if calls else finish))
            if figures is not None:
                evaluated = min(figures[0], self.received.reread_tokens)
                self.event({"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0,
                            "model": self.model, "choices": [],
                            "usage": {"prompt_tokens": figures[0], "completion_tokens": figures[1],
                                      "total_tokens": figures[0] + figures[1]},
                            "timings": {"cache_n": figures[0] - evaluated, "prompt_n": evaluated,
                                        "prompt_ms": prompt_ms, "predicted_n": figures[1],
                                        "predicted_ms": predicted_ms}})
            data = b"data: [DONE]\n\n"
            self.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.write(b"0\r\n\r\n")

    def _openai_chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def _usage(self, usage: UsageFigures, calls: int) -> tuple[int, int] | None:
        if usage == "omit":
            return None
        if usage == "auto":
            return self.received.prompt_tokens, max(1, self.handler.server.owner.tokens(self.sent_chars)) + 5 * calls
        return usage


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
