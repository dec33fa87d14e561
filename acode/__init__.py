"""acode from Python: submit a task, follow its events, decide what it asks, resume it.

::

    import acode

    with acode.Client() as client:                      # the acode home of `acode up`
        session = client.submit("add a --verbose flag", "path/to/project")
        kinds = [type(event).__name__ for event in session.events()]  # typed, in order, each once
        final = session.wait()                          # completed, failed, cancelled or paused

:class:`Client` is what the ``acode`` command itself is built on; :class:`AsyncClient`
is its asyncio twin (README "Using acode
from Python"). Errors are :class:`AcodeError` and its subclasses, each with a stable
``code`` (``ACODE-…``). Every event is a type of :mod:`protocol.sessions.events` (its JSON Schema is
``protocol/schema/events-v1.json``); an event this version does not know arrives as a
:class:`GenericEvent`.
"""

from typing import TYPE_CHECKING, Any

from acode.client import Client, Session, SessionView
from acode.events import AnyEvent, GenericEvent, kind
from protocol.errors import AcodeError, CliError, ModelError, NotRunning, RequestTimeout
from protocol.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from acode.aio import AsyncClient, AsyncSession

__all__ = ["SCHEMA_VERSION", "AcodeError", "AnyEvent", "AsyncClient", "AsyncSession", "CliError", "Client",
           "GenericEvent", "ModelError", "NotRunning", "RequestTimeout", "Session", "SessionView", "kind"]


def __getattr__(name: str) -> Any:
    """The asyncio twin is imported when first named: asyncio costs every ``acode`` command
    start-up time it has no use for."""
    if name in ("AsyncClient", "AsyncSession"):
        from acode import aio

        return getattr(aio, name)
    raise AttributeError(f"module 'acode' has no attribute {name!r}")
