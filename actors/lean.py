"""Keeps an actor process lean: the first import of every actor's ``__main__``.

``import structlog`` loads ``structlog.dev``, which imports rich when it is installed (typer
installs it) to render tracebacks in colour. acode's actors log JSON lines, or plain text on
a terminal, and never use it. Marking rich absent before structlog is imported makes
structlog fall back to its plain traceback formatter and saves some 4 MB of resident memory
per process (about 30 MB for the actor set) and some 40 ms of its start-up.

Only actor processes import this module (``python -m actors.<name>``): a program that imports
acode's modules, the CLI included, keeps rich if it wants it.
"""

from __future__ import annotations

import sys

__all__: list[str] = []

if "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # ``import rich`` now raises ImportError
