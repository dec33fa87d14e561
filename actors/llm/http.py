"""What the HTTP model providers share: one watched, retried, streamed POST per model call.

:meth:`HttpModel.complete` makes a call in four parts:

- the base URL must be local (:mod:`actors.llm.locality`) unless the spec sets
  ``allow_remote``; the connected peer is checked again when the connection opens;
- the exchange runs on a helper thread while the calling thread watches the stage's
  ``cancel`` event, the deadline for the first byte of the answer and the idle gap between
  two chunks (:mod:`actors.llm.exchange`). When one fires, the connection's socket is shut
  down: the helper wakes at once and the server sees the client leave;
- transient failures (connection refused or reset, 429, 5xx, timeouts, a stream cut
  short) are retried with exponential backoff and full jitter, honouring a 429's
  ``Retry-After``; anything else fails at once with the server's own message;
- every request carries an answer cap (:meth:`~protocol.sessions.session.OllamaProvider.max_tokens_for`
  the stage), never more than the context left after the prompt, estimated with the
  characters a token the server's last count showed for the model
  (:class:`actors.llm.tokens.Calibration`); a warning when the prompt may not fit
  ``num_ctx``. The server's usage figures win when it reports them;
- what the server says is sorted (:mod:`actors.llm.server_errors`): an answer cut at the cap
  (``finish_reason``/``done_reason`` ``length``) is ACODE-LLM-012, a prompt over the
  context ACODE-LLM-013, a known configuration error ACODE-LLM-014 (llama-server without
  ``--jinja``), a known request error ACODE-LLM-016. None of them is retried: the same
  request would get the same answer.

While the answer streams, the call's :class:`~actors.llm.meter.Meter` counts its pieces
(each subclass's :meth:`read_stream` moves it); a retried attempt restarts the count.

Time follows the model's measured speed (:mod:`actors.llm.pace`, from the server's own
``timings`` when it reports them): once a model has been measured, the wait for the first
byte is at least the prompt's estimated processing time (never past :data:`STRETCH` times
``first_token_timeout_s``); the meter carries that estimate (before a measurement,
``first_token_timeout_s``) and the stream's stall gap, for a stage deadline that would cut
the call (:mod:`actors.stages.request.callwatch`); :meth:`HttpModel.expected_s` tells a stage how
long a normal call takes.

Connections are never reused (the watcher learns each new connection's socket when it
opens): a local connection costs a fraction of a millisecond, a model answer seconds.

Subclasses own a wire format: :meth:`request_body`, :meth:`read_stream` and
:meth:`missing_model`. They raise :class:`Transient` for failures worth retrying.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, TypeVar

import httpx
import msgspec
import structlog

from actors.llm import tokens
from actors.llm.exchange import Exchange, Interrupted, run_watched
from actors.llm.locality import check_base_url
from actors.llm.meter import Meter
from actors.llm.pace import Pace
from actors.llm.provider import ModelRequest
from actors.llm.server_errors import classify, is_format_error
from protocol.basics.text import escape, has_bad_text, scrub
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer, ModelToolCall, Usage
from protocol.sessions.session import OllamaProvider, OpenAIProvider

__all__ = ["HttpModel", "Transient", "decode_chunk", "estimate_tokens", "parse_arguments", "retry_after_seconds"]

T = TypeVar("T")

_log = structlog.get_logger()
_ERROR_BODY_LIMIT = 64 * 1024
MIN_ANSWER_TOKENS = 256  # the cap never goes below this, even when the prompt (estimated) fills the context
STRETCH = 4.0  # a timeout stretched to the model's measured pace goes at most this many times its setting
STALL_S = 15.0  # past a stage's deadline, a stream silent this long (or half idle_timeout_s) has stopped

class Transient(Exception):
    """A failure worth retrying. When the retries run out, ``what`` (what happened) and
    ``fix`` (what to do) become a ModelError with ``code``."""

    def __init__(self, what: str, *, code: str, fix: str = "", retry_after: float | None = None):
        super().__init__(what)
        self.what = what
        self.code = code
        self.fix = fix
        self.retry_after = retry_after

    def error(self, attempts: int) -> ModelError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return ModelError(f"{self.what}{tries}" + (f"; {self.fix}" if self.fix else ""), code=self.code)


def estimate_tokens(request: ModelRequest, chars_per_token: float = tokens.UNCALIBRATED) -> int:
    """The request's tokens at ``chars_per_token``, over the messages, tool calls, tools and schema."""
    return tokens.estimate(tokens.request_chars(request), chars_per_token)


def parse_arguments(call_id: str, name: str, raw: Any) -> ModelToolCall:
    """A tool call from a model's arguments: an object, or JSON text of one. Anything else is
    kept as text in ``invalid_arguments`` for the executor to correct the model with."""
    if isinstance(raw, dict):
        return ModelToolCall(id=call_id, name=name, arguments=raw)
    text = raw if isinstance(raw, str) else msgspec.json.encode(raw).decode()
    if not text.strip():
        return ModelToolCall(id=call_id, name=name)
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):  # a lone surrogate: escaped (refused) or raw
        value = None
    if isinstance(value, dict):
        return ModelToolCall(id=call_id, name=name, arguments=value)
    return ModelToolCall(id=call_id, name=name, invalid_arguments=text)


def decode_chunk(data: str, decode: Callable[[str], T], type_: type[T]) -> T:
    """One chunk of a streamed answer, by ``decode`` (msgspec's, for ``type_``). msgspec
    refuses JSON holding a lone UTF-16 surrogate escape (``"\\udcff"``), which a model's
    text may carry: such a chunk is read by the ``json`` module instead, its text scrubbed
    (U+FFFD) and its tool arguments kept with the surrogate escaped, so the answer goes on
    and the executor refuses that call with a tool error (:mod:`actors.llm.toolcalls`).
    Anything else malformed raises msgspec's error."""
    try:
        return decode(data)
    except msgspec.DecodeError:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            value = None
        if not has_bad_text(value):
            raise
    return msgspec.convert(_lenient(value), type_)


def _lenient(value: Any) -> Any:
    """A decoded chunk with every lone surrogate scrubbed, but in tool arguments: those
    become (or stay) JSON text with the surrogate escaped."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_lenient(item) for item in value]
    if isinstance(value, dict):
        return {scrub(key) if isinstance(key, str) else key: _arguments(item) if key == "arguments" else _lenient(item)
                for key, item in value.items()}
    return value


def _arguments(value: Any) -> Any:
    if isinstance(value, str):  # JSON text, or a fragment of it
        return escape(value)
    if has_bad_text(value):  # an object (Ollama): as JSON text, which parse_arguments keeps
        return escape(json.dumps(value, ensure_ascii=False))
    return value


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """A ``Retry-After`` header as seconds from now: delta-seconds or an HTTP-date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a byte stream (NDJSON and SSE are both line-based)."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            yield line.rstrip(b"\r").decode("utf-8", errors="replace")
    if buffer:
        yield buffer.rstrip(b"\r").decode("utf-8", errors="replace")


class HttpModel:
    """A model served over HTTP; subclasses speak one wire format."""

    name: ClassVar[str]
    label: ClassVar[str]  # "Ollama", "the OpenAI-compatible server"
    chat_path: ClassVar[str]
    start_hint: ClassVar[str]  # what to do when the server is not running

    def __init__(self, spec: OllamaProvider | OpenAIProvider, *, rng: random.Random | None = None):
        self.spec = spec
        self.base_url = spec.base_url.rstrip("/")
        self._rng = rng or random.Random()
        self.calibration = tokens.Calibration()
        self.pace = Pace()
        safety = max(STRETCH * spec.first_token_timeout_s, spec.idle_timeout_s) + 5  # the watcher fires first
        self._client = httpx.Client(
            timeout=httpx.Timeout(safety, connect=spec.connect_timeout_s, pool=spec.connect_timeout_s),
            limits=httpx.Limits(max_keepalive_connections=0),
            trust_env=False,  # an HTTP(S)_PROXY variable must not route prompts off the machine
            # Loading the CA bundle costs 50-200 ms; a plain-http base_url never uses TLS (no
            # redirects are followed), so only an https one gets a verifying context.
            verify=self.base_url.startswith("https:"),
            headers={"Accept-Encoding": "identity"})

    def close(self) -> None:
        self._client.close()

    # -- the wire format (subclasses) ------------------------------------------------------

    def request_body(self, request: ModelRequest, model: str, max_tokens: int) -> dict[str, Any]:
        raise NotImplementedError

    def read_stream(self, lines: Iterator[str], model: str, meter: Meter | None = None) -> ModelAnswer:
        """The answer out of the stream's lines; ``meter`` counts its pieces as they come."""
        raise NotImplementedError

    def missing_model(self, status: int, message: str, model: str) -> ModelError | None:
        """The error for "this model is not on the server", if the status and message say so."""
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        return {}

    def list_models(self, *, timeout: float = 5.0) -> list[str]:
        """The models the server offers (for ``acode doctor``)."""
        raise NotImplementedError

    def stream_error(self, error: object, model: str, status: int) -> Exception:
        """What an error chunk in the middle of a stream means: the model is missing (as
        the server says it with ``status``), else a transient failure worth a retry."""
        raw = msgspec.json.encode({"error": error}).decode()
        message = self.error_message(raw)
        missing = self.missing_model(status, message, model)
        if missing is not None:
            return missing
        permanent = classify(raw, where=f"{self.label} at {self.base_url}", model=model, said=message)
        if permanent is not None:
            return permanent
        return Transient(f"{self.label} at {self.base_url} failed in the middle of {model}'s answer: {message}",
                         code="ACODE-LLM-007", fix="check the server's log")

    def interrupted(self, error: object, model: str, status: int, *, content: str, calls: list[ModelToolCall],
                    usage: Usage) -> ModelAnswer:
        """What an error chunk in the middle of a stream leaves. Complete tool calls streamed
        before it are kept (llama.cpp may fail on what the model wrote after a valid call);
        when the server could not parse the model's output, the partial answer comes back
        with the complaint in ``format_error``, for the stage to correct the model (the same
        request would get the same output). Anything else raises :meth:`stream_error`."""
        raw = msgspec.json.encode({"error": error}).decode()
        complete = [c for c in calls if c.name and not c.invalid_arguments]
        log = _log.bind(provider=self.name, model=model)
        if complete:
            log.warning("stream_error_after_tool_calls", kept=len(complete), error=self.error_message(raw))
            return ModelAnswer(content=content, tool_calls=complete, usage=usage, finish_reason="tool_calls")
        if is_format_error(raw):
            message = self.error_message(raw)
            log.warning("model_output_unparsed", error=message)
            return ModelAnswer(content=content, tool_calls=calls, usage=usage, finish_reason="error",
                               format_error=message[:2_000])
        raise self.stream_error(error, model, status)

    def error_message(self, text: str) -> str:
        """The server's own message out of an error body (JSON ``error`` field or plain text)."""
        try:
            body = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return text.strip()[:500]
        error = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(error, dict):
            error = error.get("message", error)
        return (error if isinstance(error, str) else msgspec.json.encode(error).decode())[:500]

    # -- one model call ----------------------------------------------------------------------

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        spec = self.spec
        meter = meter or Meter(call_site=request.call_site)
        model = spec.model_for(request.stage)
        check_base_url(spec.base_url, allow_remote=spec.allow_remote)
        log = _log.bind(provider=self.name, model=model, stage=request.stage, call_site=request.call_site)
        chars = tokens.request_chars(request, schema=False)
        ratio = self.calibration.ratio(model)
        estimate = tokens.estimate(chars, ratio)
        if estimate > spec.num_ctx:
            log.warning("prompt_may_exceed_context", estimated_tokens=estimate, num_ctx=spec.num_ctx)
        cap = self.max_tokens(request, estimate)
        body = msgspec.json.encode(self.request_body(request, model, cap))
        meter.expect_first_s = self.pace.first_token_s(model, estimate) or spec.first_token_timeout_s
        meter.stall_s = min(spec.idle_timeout_s / 2, STALL_S)
        started = time.monotonic()
        answer, attempts = self._with_retries(lambda: self._attempt(body, model, request, cancel, meter), cancel,
                                              request, model, log)
        usage = answer.usage
        self.calibration.observe(model, chars, usage)
        speeds = self.pace.observe(model, usage, meter)
        if not usage.prompt_tokens or not usage.completion_tokens:
            answer_chars = len(answer.content) + len(msgspec.json.encode(answer.tool_calls)) * bool(answer.tool_calls)
            answer = msgspec.structs.replace(answer, usage=Usage(
                prompt_tokens=usage.prompt_tokens or estimate,
                completion_tokens=usage.completion_tokens or tokens.estimate(answer_chars, ratio), estimated=True))
        log.info("model_answered", attempts=attempts, duration_ms=round((time.monotonic() - started) * 1000, 1),
                 prompt_tokens=answer.usage.prompt_tokens, completion_tokens=answer.usage.completion_tokens,
                 cached_tokens=usage.cached_tokens, tool_calls=len(answer.tool_calls),
                 finish_reason=answer.finish_reason, max_tokens=cap, chars_per_token=round(ratio, 2),
                 prompt_tps=round(speeds.prompt_tps, 1), answer_tps=round(speeds.answer_tps, 2))
        if answer.finish_reason == "length":
            raise self._cut(request, model, answer, cap)
        return answer

    def expected_s(self, request: ModelRequest) -> float | None:
        """How long a normal call with ``request`` takes at the model's measured speeds:
        its prompt, and an answer as long as its cap (:meth:`Pace.call_s`); None until the
        model has been measured."""
        model = self.spec.model_for(request.stage)
        estimate = tokens.estimate(tokens.request_chars(request, schema=False), self.calibration.ratio(model))
        return self.pace.call_s(model, estimate, self.max_tokens(request, estimate))

    def first_token_s(self, meter: Meter) -> float:
        """The wait for the answer's first byte: ``first_token_timeout_s``, or the prompt's
        estimated processing time (``meter.expect_first_s``) when that is longer (at most
        :data:`STRETCH` times it)."""
        configured = self.spec.first_token_timeout_s
        return max(configured, min(meter.expect_first_s, STRETCH * configured))

    def max_tokens(self, request: ModelRequest, estimate: int) -> int:
        """The answer's cap: the request's or the stage's, within the context the prompt leaves."""
        cap = request.max_tokens or self.spec.max_tokens_for(request.stage)
        return max(min(MIN_ANSWER_TOKENS, cap), min(cap, self.spec.num_ctx - estimate))

    def _cut(self, request: ModelRequest, model: str, answer: ModelAnswer, cap: int) -> ModelError:
        stage = request.stage
        return ModelError(
            f"{model}'s answer to the {stage} was cut at the token limit after {answer.usage.completion_tokens} "
            f"tokens (max_tokens {cap}, num_ctx {self.spec.num_ctx}); a cut answer is not worth correcting: raise "
            f"model.stage_max_tokens.{stage} (or model.max_tokens) and the context (model.num_ctx, llama-server "
            "--ctx-size), or use a stronger model that answers more briefly", code="ACODE-LLM-012")

    def _with_retries(self, attempt: Callable[[], ModelAnswer], cancel: threading.Event, request: ModelRequest,
                      model: str, log: Any) -> tuple[ModelAnswer, int]:
        spec = self.spec
        tries = spec.max_retries + 1
        for n in range(1, tries + 1):
            if cancel.is_set():
                raise self._cancelled(request, model)
            try:
                return attempt(), n
            except Transient as failure:
                if n == tries:
                    raise failure.error(n) from failure
                if failure.retry_after is not None and failure.retry_after > spec.backoff_max_s:
                    raise ModelError(f"{failure.what}; the server asks to wait {failure.retry_after:.0f}s, longer "
                                     f"than backoff_max_s ({spec.backoff_max_s:g}s); try again later or raise "
                                     "backoff_max_s", code=failure.code) from failure
                delay = (failure.retry_after if failure.retry_after is not None
                         else self._rng.uniform(0, min(spec.backoff_max_s, spec.backoff_initial_s * 2 ** (n - 1))))
                log.warning("model_call_retry", attempt=n, of=tries, delay_s=round(delay, 3), code=failure.code,
                            reason=failure.what)
                if cancel.wait(delay):
                    raise self._cancelled(request, model) from failure
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _cancelled(self, request: ModelRequest, model: str) -> ModelError:
        return ModelError(f"the {request.stage} stage was cancelled while {model} was answering; the request to "
                          f"{self.base_url} was closed", code="ACODE-LLM-011")

    def _attempt(self, body: bytes, model: str, request: ModelRequest, cancel: threading.Event,
                 meter: Meter) -> ModelAnswer:
        spec = self.spec
        meter.restart()
        first_token_s = self.first_token_s(meter)
        try:
            return run_watched(lambda exchange: self._exchange(exchange, body, model, meter), cancel=cancel,
                               first_token_s=first_token_s, idle_s=spec.idle_timeout_s,
                               allow_remote=spec.allow_remote, name=f"acode-{self.name}-http")
        except Interrupted as stopped:
            if stopped.reason == "cancelled":
                raise self._cancelled(request, model) from None
            if stopped.reason == "idle":
                raise Transient(f"{self.label} at {self.base_url} went silent for more than "
                                f"{spec.idle_timeout_s:g}s in the middle of {model}'s answer",
                                code="ACODE-LLM-008", fix="raise idle_timeout_s if the model is just slow") from None
            raise Transient(f"{model} on {self.label} at {self.base_url} sent no answer within "
                            f"{round(first_token_s, 1):g}s", code="ACODE-LLM-008",
                            fix="raise first_token_timeout_s (a large model may need minutes to load) "
                                "or use a smaller model") from None

    def _exchange(self, exchange: Exchange, body: bytes, model: str, meter: Meter) -> ModelAnswer:
        """The helper thread's part: send the request and read the answer (translating httpx errors)."""
        url = self.base_url + self.chat_path
        try:
            request = self._client.build_request(
                "POST", url, content=body, headers={"Content-Type": "application/json", **self.headers()},
                extensions={"trace": exchange.trace})
            response = self._client.send(request, stream=True)
            exchange.answered = True
            try:
                chunks = exchange.watch(response.iter_bytes(), meter.hear)
                if response.status_code >= 400:
                    raise self._status_error(response, _read_capped(chunks), model)
                return self.read_stream(lines(chunks), model, meter)
            finally:
                response.close()
        except httpx.HTTPError as exc:
            if exchange.abort == "remote":
                raise self._remote(exchange) from exc
            raise self._transport_error(exc, exchange) from exc

    def _remote(self, exchange: Exchange) -> ModelError:
        return ModelError(f"base_url {self.spec.base_url!r} connected to {exchange.peer}, which is not this machine "
                          "or a private network; acode sends prompts off the machine only when the provider sets "
                          "allow_remote: true", code="ACODE-LLM-009")

    def _transport_error(self, exc: httpx.HTTPError, exchange: Exchange) -> Transient:
        where = f"{self.label} at {self.base_url}"
        if isinstance(exc, httpx.ConnectTimeout):
            return Transient(f"{where} did not accept a connection within {self.spec.connect_timeout_s:g}s",
                             code="ACODE-LLM-005", fix=self.start_hint)
        if isinstance(exc, httpx.ConnectError):
            return Transient(f"{where} is unreachable ({exc})", code="ACODE-LLM-005", fix=self.start_hint)
        if isinstance(exc, httpx.TimeoutException):
            return Transient(f"{where} timed out ({type(exc).__name__})", code="ACODE-LLM-008",
                             fix="raise first_token_timeout_s or idle_timeout_s")
        if exchange.started or exchange.answered:
            return Transient(f"{where} cut its answer short ({exc})", code="ACODE-LLM-010",
                             fix="check the server's log")
        return Transient(f"{where} closed the connection without answering ({exc})", code="ACODE-LLM-005",
                         fix="check the server's log")

    def _status_error(self, response: httpx.Response, text: str, model: str) -> Exception:
        status = response.status_code
        message = self.error_message(text)
        missing = self.missing_model(status, message, model)
        if missing is not None:
            return missing
        permanent = classify(text, where=f"{self.label} at {self.base_url}", model=model, said=message)
        if permanent is not None:
            return permanent
        what = f"{self.label} at {self.base_url} answered HTTP {status}" + (f": {message}" if message else "")
        if status == 429:
            return Transient(what, code="ACODE-LLM-007", fix="the server is busy; try again later",
                             retry_after=retry_after_seconds(response.headers.get("retry-after")))
        if status >= 500:
            return Transient(what, code="ACODE-LLM-007", fix="check the server's log")
        if status in (401, 403):
            fix = ("set api_key_env to the environment variable holding the server's key"
                   if isinstance(self.spec, OpenAIProvider) else "check the server's access settings")
            return ModelError(f"{what}; {fix}", code="ACODE-LLM-007")
        if status == 404:
            return ModelError(f"{what}; check base_url ({self.spec.base_url})", code="ACODE-LLM-007")
        return ModelError(f"{what}; the request was refused, retrying would not help", code="ACODE-LLM-007")

    # -- small synchronous calls (acode doctor) -------------------------------------------------

    def fetch_json(self, method: str, path: str, body: Any = None, *, timeout: float = 5.0, root: bool = False) -> Any:
        """One short JSON call without retries; ModelError ACODE-LLM-005/006/007/010 on failure.
        ``root``: ``path`` is on the server's root, not under the base URL's ``/v1``."""
        check_base_url(self.spec.base_url, allow_remote=self.spec.allow_remote)
        url = (self.base_url.removesuffix("/v1") if root else self.base_url) + path
        exchange = Exchange(first_token_s=timeout, idle_s=timeout, allow_remote=self.spec.allow_remote)
        try:
            response = self._client.request(
                method, url, content=None if body is None else msgspec.json.encode(body),
                headers={"Content-Type": "application/json", **self.headers()}, timeout=httpx.Timeout(timeout),
                extensions={"trace": exchange.trace})  # only for its check of the connected peer
        except httpx.HTTPError as exc:
            if exchange.abort == "remote":
                raise self._remote(exchange) from exc
            if isinstance(exc, httpx.TimeoutException):
                raise ModelError(f"{self.label} at {self.base_url} did not answer {method} {path} within "
                                 f"{timeout:g}s", code="ACODE-LLM-008") from exc
            raise ModelError(f"{self.label} at {self.base_url} is unreachable ({exc}); {self.start_hint}",
                             code="ACODE-LLM-005") from exc
        if response.status_code >= 400:
            message = self.error_message(response.text)
            missing = self.missing_model(response.status_code, message, str((body or {}).get("model", "")))
            if missing is not None:
                raise missing
            raise ModelError(f"{self.label} at {self.base_url} answered {method} {path} with HTTP "
                             f"{response.status_code}: {message}", code="ACODE-LLM-007")
        try:
            return msgspec.json.decode(response.content)
        except msgspec.DecodeError as exc:
            raise ModelError(f"{self.label} at {self.base_url} answered {method} {path} with something that is "
                             f"not JSON: {response.text[:120]!r}", code="ACODE-LLM-010") from exc


def _read_capped(chunks: Iterable[bytes]) -> str:
    data = b""
    for chunk in chunks:
        data += chunk
        if len(data) >= _ERROR_BODY_LIMIT:
            break
    return data.decode("utf-8", errors="replace")
