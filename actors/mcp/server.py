"""One MCP server instance and its SDK client session (the only module that imports ``mcp``,
with :mod:`actors.mcp.hub`; both run on the actor's asyncio thread).

A :class:`Server` is a stdio server for one (name, configuration, workspace), or an HTTP
server for one (name, configuration). Its life::

    stopped ──start()──▶ starting ──initialized, tools listed──▶ ready
                            │                                     │ the process exits, the
                            ▼ start failed                        ▼ transport breaks
                          failed ◀──── start() after backoff ── restarting

The session lives in one task (:meth:`Server._run`): the SDK's transports and session are
anyio context managers, entered and left in that task. A relay between the transport and
the session notices the end of the server's output (its process exited, the stream broke),
so a dead server is known at once, not at its next call. A dead server is started again
after a jittered exponential backoff (:func:`backoff`), in the background for the first
:data:`BACKGROUND_RESTARTS` attempts in a row and at the next listing or call after that;
a listing waits for a start in progress (:meth:`Server.ensure`), so tools come back before
the next model turn.

A call goes to the server once. A call the server's death interrupts fails with
ACODE-MCP-002 ("not re-run"); one past ``timeout_s`` with ACODE-MCP-003 (the SDK tells the
server it was cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import mcp_types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from actors.mcp import confined, listing
from actors.sandbox.confinement.isolation import Isolation
from protocol.calls.mcp import McpServerConfig, McpToolDef
from protocol.errors import ErrorInfo, McpError

__all__ = ["BACKGROUND_RESTARTS", "START_TIMEOUT_S", "Server", "backoff"]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 2.5  # the SDK closes stdin, waits 2 s, then kills the group; the actor stops within 5 s
STABLE_AFTER_S = 60.0  # a server that lived this long starts its backoff over
BACKOFF_INITIAL_S = 0.2
BACKOFF_MAX_S = 30.0
BACKGROUND_RESTARTS = 5
_CLIENT = mcp_types.Implementation(name="acode", version="1")

State = Literal["starting", "ready", "restarting", "failed", "stopped"]


def backoff(failures: int, *, rng: Callable[[float, float], float] = random.uniform) -> float:
    """Seconds before start number ``failures`` + 1 after ``failures`` exits in a row."""
    return float(min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** max(0, failures - 1)) * rng(0.75, 1.25))


class Server:
    """One server instance; every method runs on the actor's asyncio loop."""

    def __init__(self, name: str, config: McpServerConfig, workspace: str, *, isolation: Callable[[], Isolation],
                 hidden: tuple[str, ...], log_dir: Path, log: Any):
        self.name = name
        self.config = config
        self.workspace = workspace
        self.state: State = "stopped"
        self.tools: dict[str, McpToolDef] = {}
        self.isolation = "" if config.transport == "stdio" else "none: an HTTP server acode does not run"
        self.restarts = 0
        self.error: ErrorInfo | None = None
        self._isolation = isolation
        self._hidden = hidden
        self._log_dir = log_dir
        self._log = log.bind(server=name, transport=config.transport)
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()  # set when a start ends (ready or not)
        self._stop = asyncio.Event()
        self._failures = 0
        self._next_start = 0.0
        self._restart_timer: asyncio.TimerHandle | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    # -- life ----------------------------------------------------------------------------

    async def ensure(self, wait: float = START_TIMEOUT_S) -> bool:
        """Ready, starting the server when it is not running and its backoff ends within
        ``wait`` seconds; whether it is ready now."""
        if self.state == "ready":
            return True
        task = self._task
        if task is not None and not task.done() and self.state != "starting":
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):  # a dead session's teardown
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S * 2)
        if self._task is None or self._task.done():
            delay = self._next_start - time.monotonic()
            if delay > wait:
                return False
            if delay > 0:
                await asyncio.sleep(delay)
            if self._task is None or self._task.done():
                self._start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), START_TIMEOUT_S)
        return self.ready

    def _start(self) -> None:
        if self._restart_timer is not None:
            self._restart_timer.cancel()
            self._restart_timer = None
        if self.state != "stopped" or self._task is not None:
            self.restarts += 1
        self.state = "starting"
        self._settled = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.name}")

    async def stop(self) -> None:
        """Stop the server (its process and session) and keep it stopped."""
        self._stop.set()
        if self._restart_timer is not None:
            self._restart_timer.cancel()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S)
            except TimeoutError:
                task.cancel()
        self.state = "stopped"

    async def _run(self) -> None:
        started = time.monotonic()
        became_ready = False
        scratch: Path | None = None
        closed = anyio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.config.transport == "stdio":
                    isolation = await asyncio.to_thread(self._isolation)
                    launch = confined.launch(self.name, self.config, self.workspace, isolation, hidden=self._hidden)
                    scratch = launch.scratch
                    self.isolation = launch.isolation
                    errlog = stack.enter_context(self._errlog())
                    params = StdioServerParameters(command=launch.command, args=launch.args, env=launch.env,
                                                   cwd=launch.cwd)
                    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                else:
                    read, write = await stack.enter_async_context(streamable_http_client(self.config.url))
                relay_in, relay_out = anyio.create_memory_object_stream[Any](0)
                group = await stack.enter_async_context(anyio.create_task_group())
                group.start_soon(_relay, read, relay_in, closed)
                session = await stack.enter_async_context(ClientSession(relay_out, write, client_info=_CLIENT))
                with anyio.fail_after(START_TIMEOUT_S):
                    await session.initialize()
                    self.tools = await self._list(session)
                self._session = session
                self.state, self.error, became_ready = "ready", None, True
                self._settled.set()
                self._log.info("mcp_server_ready", tools=len(self.tools), isolation=self.isolation,
                               restarts=self.restarts, startup_ms=round((time.monotonic() - started) * 1000, 1))
                stopping = asyncio.get_running_loop().create_task(self._stop.wait())
                ended = asyncio.get_running_loop().create_task(closed.wait())
                try:
                    await asyncio.wait({stopping, ended}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopping.cancel()
                    ended.cancel()
                self._session = None  # from now on nothing is sent to it, and a listing waits for the next one
                self.state = "stopped" if self._stop.is_set() else "restarting"
                group.cancel_scope.cancel()
        except Exception as exc:  # noqa: BLE001 - any failure of the server is its state, reported
            self._failed(exc, became_ready)
        finally:
            self._session = None
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            self._after(started, became_ready)
            self._settled.set()

    def _failed(self, exc: BaseException, became_ready: bool) -> None:
        exc = _leaf(exc)
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if isinstance(exc, McpError):
            self.error = exc.info()
            return
        tail = self._log_tail()
        if self.config.transport == "stdio":
            check = "check its mcp.servers entry (command, args, env) and that it runs by hand"
        else:
            check = f"check that the server is running and serves MCP at {self.config.url}"
        self.error = ErrorInfo(code="ACODE-MCP-001", message=(
            f"MCP server {self.name} {'failed' if became_ready else 'could not be started'} ({what})"
            + (f"; the end of its log {self._log_path()}: {tail}" if tail else "") + f"; {check}"))

    def _after(self, started: float, became_ready: bool) -> None:
        """The session ended: stopped for good, or to be started again after a backoff."""
        if self._stop.is_set():
            self.state = "stopped"
            return
        now = time.monotonic()
        self._failures = 1 if became_ready and now - started >= STABLE_AFTER_S else self._failures + 1
        delay = backoff(self._failures)
        self._next_start = now + delay
        if became_ready:
            self.state = "restarting"
            if self.error is None:
                self.error = ErrorInfo(code="ACODE-MCP-001", message=(
                    f"MCP server {self.name} exited; restarting it in {delay:.1f}s"
                    + (f" (its log: {self._log_path()})" if self.config.transport == "stdio" else "")))
        else:
            self.state = "failed"
        self._log.warning("mcp_server_down", state=self.state, failures=self._failures, restart_in_s=round(delay, 2),
                          error=self.error.message if self.error else None)
        if self._failures <= BACKGROUND_RESTARTS:
            self._restart_timer = asyncio.get_running_loop().call_later(delay, self._restart)

    def _restart(self) -> None:
        self._restart_timer = None
        if not self._stop.is_set() and (self._task is None or self._task.done()):
            self._start()

    def _log_path(self) -> Path:
        return self._log_dir / f"mcp-{self.name}.log"

    def _errlog(self) -> TextIO:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        return open(self._log_path(), "a", buffering=1)  # noqa: SIM115 - closed by the exit stack

    def _log_tail(self) -> str:
        if self.config.transport != "stdio":
            return ""
        try:
            with open(self._log_path(), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 600))
                lines = [line for line in handle.read().decode(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-3:])[-400:]

    # -- tools ---------------------------------------------------------------------------

    async def _list(self, session: ClientSession) -> dict[str, McpToolDef]:
        tools: dict[str, McpToolDef] = {}
        cursor: str | None = None
        for _ in range(100):  # pages
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.list_tools(params=params)
            for tool in result.tools:
                tools[tool.name] = listing.definition(self.name, tool)
            cursor = result.next_cursor
            if not cursor:
                break
        return tools

    async def refresh(self) -> None:
        """List the tools again (a definition may have changed); a server that does not
        answer is treated as dead: its session ends and the next :meth:`ensure` starts it."""
        session = self._session
        if session is None:
            return
        try:
            with anyio.fail_after(min(self.config.timeout_s, START_TIMEOUT_S)):
                self.tools = await self._list(session)
        except Exception as exc:  # noqa: BLE001 - a failed listing ends the session; ensure() starts another
            self._log.warning("mcp_list_failed", error=f"{type(exc).__name__}: {exc}")
            await self._end_session()

    async def _end_session(self) -> None:
        """Close a session that failed (the run task sees it as the transport's end)."""
        task = self._task
        if task is None or task.done():
            return
        self.state = "restarting"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S)

    async def call(self, tool: str, arguments: dict[str, Any], limit: int,
                   sending: Callable[[], object] = lambda: None) -> tuple[bool, str, ErrorInfo | None]:
        """``(ok, output, error)`` of one call, sent once (``sending`` runs, on a thread, just before)."""
        if self._session is None:
            raise McpError(f"MCP server {self.name} is not running ({self.state}); the call was not sent",
                           code="ACODE-MCP-001")
        await asyncio.to_thread(sending)
        session = self._session
        if session is None:
            return False, "", self._died(tool)  # it died while the call was being recorded: not sent, but begun
        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=self.config.timeout_s)
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                return False, "", ErrorInfo(code="ACODE-MCP-003", message=(
                    f"MCP tool {tool} of server {self.name} did not answer within {self.config.timeout_s:g}s; the "
                    "server was told to cancel it and it was not re-run; raise timeout_s in its mcp.servers entry if "
                    "it needs longer"))
            if exc.code == mcp_types.CONNECTION_CLOSED or self._session is not session:
                self._lost(session)
                return False, "", self._died(tool)
            # a protocol error the server answered (invalid arguments, say): the model reads it and may correct it
            return False, f"MCP server {self.name} refused the call to {tool}: {exc.error.message} (JSON-RPC " \
                          f"{exc.code})", None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self._log.warning("mcp_call_transport_failed", tool=tool, error=f"{type(exc).__name__}: {exc}")
            await self._end_session()
            return False, "", self._died(tool)
        except Exception as exc:  # noqa: BLE001 - an answer the SDK could not use (a result off its schema, say)
            self._log.warning("mcp_call_answer_unusable", tool=tool, error=f"{type(exc).__name__}: {exc}")
            return False, "", ErrorInfo(code="ACODE-MCP-001", message=(
                f"MCP server {self.name} answered the call to {tool}, but the answer could not be used "
                f"({type(exc).__name__}: {exc}); the call was not re-run"))
        output = listing.text(list(result.content), result.structured_content, limit)
        if result.is_error:
            return False, output, None
        return True, output, None

    def _lost(self, session: ClientSession) -> None:
        """``session`` is gone (its transport closed under a call): a listing from now on waits for
        the next one, even before the run task has noticed."""
        if self._session is session:
            self._session = None
            if not self._stop.is_set():
                self.state = "restarting"

    def _died(self, tool: str) -> ErrorInfo:
        return ErrorInfo(code="ACODE-MCP-002", message=(
            f"MCP server {self.name} exited during the call to {tool}; it was not re-run (its effects, if any, are "
            "unknown); the server is restarted and its tools listed again before the next turn"
            + (f"; its log: {self._log_path()}" if self.config.transport == "stdio" else "")))


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside task groups' exception groups: what actually went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _relay(source: Any, sink: Any, closed: anyio.Event) -> None:
    """Pass the transport's messages to the session; set ``closed`` when they end."""
    try:
        async with sink:
            async for item in source:
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        closed.set()
