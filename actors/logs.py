"""structlog, configured once per process: JSON lines when stderr is not a terminal.

Every line carries ``actor``, ``instance`` and ``pid``; handlers bind ``session_id`` and
``trace_id`` per message. Event names are snake_case facts (``actor_restarted``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

__all__ = ["configure", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure(*, actor: str, instance: str, level: str = "info", json: bool | None = None) -> None:
    """Set up structlog for this process and bind the process identity."""
    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = (structlog.processors.JSONRenderer() if json
                     else structlog.dev.ConsoleRenderer(colors=False))
    identity = {"actor": actor, "instance": instance, "pid": os.getpid()}

    def add_identity(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        # Static, not a contextvar: worker threads do not inherit the main thread's context.
        for key, value in identity.items():
            event.setdefault(key, value)
        return event

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_identity,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.clear_contextvars()


def get_logger(**bound: Any) -> Any:
    return structlog.get_logger().bind(**bound)
