"""The ``mcp`` actor: serves ``mcp`` through the broker, the only acode process that imports
the MCP SDK.

It keeps no configuration of its own: each request names its servers with their whole
configuration (:class:`~protocol.messages.McpServerRef`, from the session's settings).

- :class:`~protocol.messages.McpListTools` → :class:`~protocol.messages.McpTools`
  (servers started at first, restarted when dead: :mod:`actors.mcp.server`);
- :class:`~protocol.messages.McpCallTool` → :class:`~protocol.messages.McpCalled`, at most
  once: its request id is recorded right before the call is sent (:mod:`actors.mcp.begun`),
  so a resend after this actor was killed mid-call is answered ACODE-MCP-007, never re-run;
- :class:`~protocol.messages.McpPin` → ``Ack``: a human approved a changed definition
  (:mod:`actors.mcp.pins`).

Requests run on the worker's pool (:data:`CAPACITY` at a time); each hands its work to the
asyncio thread that owns every SDK session (:mod:`actors.mcp.runtime`). At stop the servers
are stopped (stdin closed, then their process groups killed), and any still alive die with
this process (the launcher's ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, assert_never

from actors._base import Actor
from actors.mcp import confined
from actors.mcp.begun import Begun
from actors.mcp.pins import Pins
from actors.mcp.runtime import Runtime
from actors.paths import RunPaths
from broker.worker import Request, Worker
from protocol import codec
from protocol.errors import ErrorInfo
from protocol.messages import Ack, McpCalled, McpCallTool, McpListTools, McpPin, Message

if TYPE_CHECKING:
    from actors.mcp.hub import Hub
    from actors.sandbox.confinement.isolation import Isolation

__all__ = ["CAPACITY", "LIST_TIMEOUT_S", "McpActor"]

CAPACITY = 16
LIST_TIMEOUT_S = 90.0  # a listing that starts servers waits up to START_TIMEOUT_S for each, together
CALL_MARGIN_S = 35.0  # beyond the server's timeout_s: a start first, then the call


class McpActor(Actor):
    actor = "mcp"

    def on_start(self) -> None:
        self.worker: Worker | None = None
        self.paths = RunPaths.for_home(self.spec.home)
        swept = confined.sweep_scratch()
        if swept:
            self.log.warning("mcp_scratch_swept", count=swept)
        self.pins = Pins(self.paths.mcp_pins)
        self.begun = Begun(self.paths.mcp_calls)
        self.runtime = Runtime(self._make_hub)
        self.runtime.start()
        self.worker = Worker(self, "mcp", self.handle, capacity=CAPACITY, threads=CAPACITY)
        self.worker.start()

    def _make_hub(self) -> Hub:
        from actors.mcp.hub import Hub  # the SDK: imported at the first request, on the asyncio thread

        hidden = (str(self.paths.home), str(self.paths.sock_dir))
        return Hub(self.pins, isolation=self._isolation, hidden=hidden, log_dir=self.paths.logs, log=self.log)

    @functools.cache  # noqa: B019 - one actor per process; detected once, at the first stdio server
    def _isolation(self) -> Isolation:
        isolation = confined.detect()
        self.log.info("mcp_isolation", level=isolation.level, describe=isolation.describe())
        return isolation

    def on_stop(self) -> None:
        worker: Worker | None = getattr(self, "worker", None)
        if worker is not None:
            worker.close()
            self.runtime.close()
            self.begun.close()

    def busy(self) -> list[str]:
        worker: Worker | None = getattr(self, "worker", None)
        return worker.busy() if worker is not None else []

    def info(self) -> dict[str, str]:
        runtime: Runtime | None = getattr(self, "runtime", None)
        return {"servers": runtime.summary()} if runtime is not None else {}

    def handle(self, request: Request) -> Message:
        """One request, on a pool thread; a body that does not decode is ACODE-PROTO-002."""
        body = codec.MCP_REQUEST.decode(request.body)
        match body:
            case McpListTools():
                tools = self.runtime.run(lambda hub: hub.list(body), LIST_TIMEOUT_S)
                self.log.debug("mcp_tools_listed", servers=len(tools.servers), tools=len(tools.tools))
                return tools
            case McpCallTool():
                log = self.log.bind(server=body.server.name, tool=body.tool, key=body.key)
                if self.begun.seen(request.id):
                    log.warning("mcp_call_not_rerun", request_id=request.id)
                    return McpCalled(ok=False, error=ErrorInfo(code="ACODE-MCP-007", message=(
                        f"the mcp actor restarted while the call to {body.tool} of server {body.server.name} was in "
                        "flight; it was not re-run (its effects, if any, are unknown)")))
                sending = functools.partial(self.begun.begin, request.id)  # recorded right before it is sent
                called = self.runtime.run(lambda hub: hub.call(body, sending),
                                          body.server.config.timeout_s + CALL_MARGIN_S)
                log.info("mcp_tool_called", ok=called.ok, error=called.error.code if called.error else None)
                return called
            case McpPin():
                self.pins.set(body.server, body.tool, body.hash)
                self.log.info("mcp_tool_pinned", server=body.server, tool=body.tool, hash=body.hash[:12])
                return Ack(detail=f"{body.server} {body.tool} pinned to {body.hash[:12]}")
            case _:
                assert_never(body)
