"""The asyncio twin of :class:`acode.Client`: the same methods, awaited.

A ZeroMQ socket belongs to one thread, so :class:`AsyncClient` keeps a
:class:`~acode.Client` on a thread of its own and runs every call there, one at a time; an
event stream gets a thread and a client of its own, so a program can approve or pause
while it streams. Nothing blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from acode.client import Client
from acode.events import AnyEvent

__all__ = ["AsyncClient", "AsyncSession"]

# the Client methods an AsyncClient awaits (events has its own thread)
_CALLS = frozenset({"session_id", "wait", "session", "sessions", "status", "spent", "plan", "show", "approve", "deny",
                    "pause", "resume", "steer", "answer", "replan", "cancel", "checkpoints", "undo", "rewind"})
_PER_SESSION = _CALLS - {"session_id", "sessions", "status"}


class AsyncSession:
    """A handle on one session of an :class:`AsyncClient`; its methods are awaited."""

    def __init__(self, client: AsyncClient, session_id: str):
        self.client = client
        self.id = session_id

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    def events(self, after_seq: int = 0, *, follow: bool = True) -> AsyncIterator[AnyEvent]:
        return self.client.events(self.id, after_seq, follow=follow)

    async def snapshot(self) -> Any:
        return await self.client.session(self.id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in _PER_SESSION:
            raise AttributeError(name)
        method = getattr(self.client, name)
        return lambda *args, **kwargs: method(self.id, *args, **kwargs)


class AsyncClient:
    """:class:`acode.Client`'s methods as coroutines (``home``, ``reconnect_s``: as there)."""

    def __init__(self, home: str | Path | None = None, *, reconnect_s: float = 120.0):
        self._home = home
        self._reconnect_s = reconnect_s
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="acode-client")
        self._client: Client | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._run(self._client.close)
        self._thread.shutdown(wait=True)

    async def _run(self, call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, call)

    def _sync(self) -> Client:
        if self._client is None:  # made on the client's thread, used only there
            self._client = Client(self._home, reconnect_s=self._reconnect_s)
        return self._client

    async def submit(self, task: str, workspace: str | Path = ".", **settings: Any) -> AsyncSession:
        """:meth:`acode.Client.submit`, awaited."""
        session = await self._run(lambda: self._sync().submit(task, workspace, **settings))
        return AsyncSession(self, session.id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in _CALLS:
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._run(lambda: getattr(self._sync(), name)(*args, **kwargs))

        return call

    async def events(self, session: str, after_seq: int = 0, *, follow: bool = True) -> AsyncIterator[AnyEvent]:
        """:meth:`acode.Client.events` as an async iterator, on a thread and a client of its own."""
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="acode-events") as thread:
            own: Client = await loop.run_in_executor(thread, lambda: Client(self._home, reconnect_s=self._reconnect_s))
            stream = own.events(session, after_seq, follow=follow)
            try:
                while (event := await loop.run_in_executor(thread, next, stream, None)) is not None:
                    yield event
            finally:
                await loop.run_in_executor(thread, _close, stream, own)


def _close(stream: Any, client: Client) -> None:
    stream.close()  # a generator: its follow closes its socket
    client.close()
