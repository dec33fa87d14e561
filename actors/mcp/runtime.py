"""The ``mcp`` actor's asyncio loop: one thread owns it and every SDK session on it.

The actor's own loop (:mod:`actors._base`) and the broker worker are not asyncio; the
SDK is (anyio on asyncio). So one thread runs an asyncio loop for the actor's whole life,
and the worker's pool threads hand it coroutines (:meth:`Runtime.run`:
``run_coroutine_threadsafe`` and a bounded wait). Calls to several servers, and several
calls to one server, run concurrently on it.

The SDK is imported on that thread when the first request needs it
(:meth:`Runtime.hub`): an actor asked for nothing (no server configured) maps none of it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, TypeVar

from protocol.errors import McpError

if TYPE_CHECKING:
    from actors.mcp.hub import Hub

__all__ = ["Runtime"]

T = TypeVar("T")


class Runtime:
    """An asyncio loop on a thread of its own; ``close()`` twice is harmless."""

    def __init__(self, make_hub: Callable[[], Hub]):
        self._make_hub = make_hub
        self._hub: Hub | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name="mcp-asyncio", daemon=True)
        self._closed = False

    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def hub(self) -> Hub:
        """The servers (made, and the SDK imported, on the loop's thread at first use)."""
        if self._hub is None:
            self._hub = self._make_hub()
        return self._hub

    def summary(self) -> str:
        """The servers' states in a few words (``acode status``), from any thread."""
        return self._hub.summary if self._hub is not None else "none started (the MCP SDK not loaded yet)"

    def run(self, work: Callable[[Hub], Coroutine[Any, Any, T]], timeout: float) -> T:
        """Run ``work(hub)`` on the loop, from any other thread; wait at most ``timeout`` s."""
        if self._loop is None or self._closed:
            raise McpError("the mcp actor is stopping; ask again once it is back", code="ACODE-MCP-001",
                           retryable=True)

        async def job() -> T:
            return await work(self.hub())

        future = asyncio.run_coroutine_threadsafe(job(), self._loop)
        try:
            return future.result(timeout)
        except FutureTimeout as exc:
            future.cancel()
            raise McpError(f"the mcp actor did not finish the request within {timeout:g}s", code="ACODE-MCP-003") \
                from exc

    def close(self, timeout: float = 3.5) -> None:
        """Stop every server, then the loop."""
        if self._closed or self._loop is None:
            return
        if self._hub is not None:
            hub = self._hub
            future = asyncio.run_coroutine_threadsafe(hub.close(), self._loop)
            try:
                future.result(timeout)
            except Exception:  # noqa: BLE001 - stopping: whatever is left dies with the process
                future.cancel()
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
