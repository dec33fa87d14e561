"""structlog, configured once per process: JSON lines when stderr is not a terminal.

Every line carries ``actor``, ``instance`` and ``pid``; handlers bind ``session_id`` and
``trace_id`` per message (:class:`broker.worker.Worker` binds them while a handler runs).
A line that names a session carries that session's trace id (:func:`add_trace_id`), however
it named it, so ``acode logs --session`` finds every line of a session in every actor's log
by one of the two. Event names are snake_case facts (``actor_restarted``).

No line drives a terminal it is shown on: on a terminal every string value has its control
and bidi characters escaped (:func:`printable_values`); a JSON line has them all as ``\\u``
escapes, C1 and bidi included (:func:`protocol.basics.printable.json_printable`).

Secrets never reach the renderer: :func:`redact_secrets` runs after ``format_exc_info`` (so
tracebacks are covered) and redacts every value with :func:`protocol.basics.redact.default_redactor`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import msgspec
import structlog
from structlog.typing import EventDict

from protocol.basics.printable import json_printable, printable
from protocol.basics.redact import Redactor, default_redactor
from protocol.basics.tracing import trace_id

__all__ = ["add_trace_id", "configure", "get_logger", "printable_values", "redact_secrets", "render_json"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure(*, actor: str, instance: str, level: str = "info", json: bool | None = None) -> None:
    """Set up structlog for this process and bind the process identity."""
    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = render_json if json else structlog.dev.ConsoleRenderer(colors=False)
    identity = {"actor": actor, "instance": instance, "pid": os.getpid()}

    def add_identity(logger: Any, method: str, event: EventDict) -> EventDict:
        # Static, not a contextvar: worker threads do not inherit the main thread's context.
        for key, value in identity.items():
            event.setdefault(key, value)
        return event

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_id,
            add_identity,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_secrets,
            *([] if json else [printable_values]),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        # One write(2) per line (print() makes two: the text, then the newline).
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.clear_contextvars()


def add_trace_id(logger: Any, method: str, event: EventDict) -> EventDict:
    """A structlog processor: a line with a ``session_id`` gets that session's ``trace_id``
    (:func:`protocol.basics.tracing.trace_id`), also when it was bound for another request's."""
    session_id = event.get("session_id")
    if session_id and isinstance(session_id, str):
        event["trace_id"] = trace_id(session_id)
    return event


def redact_secrets(logger: Any, method: str, event: EventDict) -> EventDict:
    """A structlog processor: ``event`` with the secrets in its values redacted.

    Strings, containers and Structs are redacted string by string; another object, which
    the renderer shows by its ``repr``, becomes its redacted ``repr`` if that differs.
    """
    redactor = default_redactor()
    if all(isinstance(value, _SCALARS) for value in event.values()):
        plain = [value for value in event.values() if isinstance(value, str)]
        # The common line: strings and numbers. One scan of its strings joined decides
        # (no marker, word or known value holds a NUL, so none spans two of them).
        if redactor.clean("\0".join(plain).encode("utf-8", "surrogatepass")):
            return event
    return {key: _clean(redactor, value) for key, value in event.items()}


def printable_values(logger: Any, method: str, event: EventDict) -> EventDict:
    """A structlog processor for a terminal: each string value with its control and bidi
    characters escaped (:func:`protocol.basics.printable.printable`), as the CLI shows text, so a
    model's words in a line cannot drive the terminal."""
    return {key: printable(value) if isinstance(value, str) else value for key, value in event.items()}


_SCALARS = (str, bool, int, float, type(None))
_json_renderer = structlog.processors.JSONRenderer()
_encode_json = msgspec.json.Encoder().encode


def render_json(logger: Any, method: str, event: EventDict) -> str:
    """A structlog renderer: the line as one JSON object (DEL, C1 and bidi controls escaped
    as well as C0). A line of strings and numbers (all
    but a few) is encoded by msgspec, ten times faster than ``json.dumps``; any other value
    goes through structlog's JSONRenderer, which shows an object by its ``repr``."""
    if all(isinstance(value, _SCALARS) for value in event.values()):
        try:
            return json_printable(_encode_json(event).decode())
        except (TypeError, ValueError, msgspec.EncodeError):
            pass  # a str subclass msgspec refuses, a key that is not a str: as before
    return json_printable(str(_json_renderer(logger, method, event)))


def _clean(redactor: Redactor, value: Any) -> Any:
    if isinstance(value, (str, msgspec.Struct)):
        return redactor.redact_value(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_clean(redactor, item) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {_clean(redactor, key): _clean(redactor, item) for key, item in value.items()}
    text = repr(value)
    redacted = redactor.redact(text)
    return value if redacted is text else redacted


def get_logger(**bound: Any) -> Any:
    return structlog.get_logger().bind(**bound)
