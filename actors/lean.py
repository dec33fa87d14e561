"""Keeps an actor process lean: the first import of every actor's ``__main__``.

What a process would map for nothing is kept out: two packages that structlog imports and
acode's actors never use, and OpenSSL's digests where built-in ones do as well:

- ``rich``: ``import structlog`` loads ``structlog.dev``, which imports rich when it is
  installed (typer installs it) to render tracebacks in colour. acode's actors log JSON
  lines, or plain text on a terminal. Marking rich absent before structlog is imported
  makes structlog fall back to its plain traceback formatter and saves some 4 MB of
  resident memory per process and some 40 ms of its start-up.
- ``asyncio``: structlog imports it for its ``a…`` logging methods (``await log.ainfo()``),
  and asyncio imports ``ssl``, which maps OpenSSL: together some 9 MB of resident memory
  per process (5 MB for a process that loads ssl anyway). acode's actors run their own
  poll loop and never await. ``asyncio`` is a :class:`Deferred` stand-in instead: the
  first lookup of any of its attributes (``asyncio.get_running_loop``, ``from asyncio
  import …``, a submodule import) imports the real asyncio, which replaces the stand-in
  in ``sys.modules``, and answers from it. Code that uses asyncio works unchanged; code
  that only imports it costs nothing.
- OpenSSL's digests (``_hashlib``, which maps libcrypto: some 3.3 MB of resident memory):
  ``hashlib`` falls back to Python's built-in SHA-2, SHA-1, MD5 and BLAKE2, which give the
  same digests, about 4 times slower on large inputs (240 against 900 MB/s for SHA-256
  here). The broker, persistence, the coordinator and the stage actors hash short texts
  (a socket directory's name, a model request's key): microseconds either way. The
  sandbox hashes file contents and imports ``hashlib`` before this module, so it keeps
  OpenSSL's. A process that loads ``ssl`` (an HTTP provider) maps libcrypto for TLS
  anyway; its ``hashlib`` stays on the built-in digests, which is as correct.

Only actor processes import this module (``python -m actors.<name>``): a program that imports
acode's modules, the CLI included, keeps rich and asyncio if it wants them.
``tests/actors/test_lean.py`` checks what each actor loads at rest.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from typing import Any

__all__ = ["Deferred"]


class Deferred(types.ModuleType):
    """A stand-in for a module that is imported but maybe never used: the first lookup of
    an attribute it does not have (anything but ``__name__``, ``__doc__``, ``__spec__``,
    ``__loader__``, ``__package__``) imports the real module in its place and returns the
    attribute from it. The stand-in then forwards every lookup to the real module."""

    _lock = threading.RLock()  # re-entrant: the import may itself look something up through a stand-in

    def __getattr__(self, attr: str) -> Any:
        with Deferred._lock:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
        return getattr(real, attr)

    @classmethod
    def install(cls, name: str) -> None:
        """Put a stand-in for ``name`` in ``sys.modules``, unless it is imported already."""
        if name not in sys.modules:
            sys.modules[name] = cls(name)


if "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # ``import rich`` now raises ImportError
Deferred.install("asyncio")
if "_hashlib" not in sys.modules:
    sys.modules["_hashlib"] = None  # type: ignore[assignment]  # hashlib then uses the built-in digests
