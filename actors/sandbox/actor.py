"""The sandbox actor: serves ``sandbox`` through the broker, four tool calls at a time.

Each request is a :class:`~protocol.messages.RunTool`; the answer is a
:class:`~protocol.messages.ToolDone` whose :class:`~protocol.results.ToolResult` says what
happened, failures the model must see included (see :mod:`actors.sandbox.dispatch`).
Calls run on the worker's thread pool and go through the journal
(:mod:`actors.sandbox.journal`), which talks to ``persistence`` with a client per thread.

At stop: the worker stops taking requests, running commands are killed with their
process groups, and idle persistence clients are closed, so the context can terminate.
"""

from __future__ import annotations

from typing import Any, assert_never

from actors._base import Actor
from actors.paths import RunPaths
from actors.sandbox.baseline import Baselines
from actors.sandbox.journal import Journal
from actors.sandbox.terminal import Terminal
from broker.threads import ThreadClients
from broker.worker import Request, Worker
from protocol import codec
from protocol.messages import Message, RunTool, ToolDone

__all__ = ["PERSISTENCE_TIMEOUT_S", "SandboxActor"]

PERSISTENCE_TIMEOUT_S = 30.0
CAPACITY = 4


class SandboxActor(Actor):
    actor = "sandbox"

    def on_start(self) -> None:
        assert self.ctx is not None
        self.worker: Worker | None = None
        self.terminal = Terminal(subreaper=True)
        paths = RunPaths.for_home(self.spec.home)
        self.terminal.hide(str(paths.home), str(paths.sock_dir))
        self.log.info("sandbox_isolation", isolation=self.terminal.isolation.describe(),
                      level=self.terminal.isolation.level)
        self.clients = ThreadClients(self.ctx, self.spec.endpoints.broker, sender=self.spec.instance,
                                     epoch=self.spec.epoch, log=self.log)
        self.journal = Journal(self._persistence, self.terminal, log=self.log,
                               baselines=Baselines(paths.baselines))
        self.worker = Worker(self, "sandbox", self.handle, capacity=CAPACITY, threads=CAPACITY)
        self.worker.start()

    def on_stop(self) -> None:
        worker: Worker | None = getattr(self, "worker", None)
        if worker is not None:
            worker.close()
            killed = self.terminal.kill_all()
            if killed:
                self.log.warning("commands_killed_at_stop", count=killed, reason=self._stop_reason)
            self.terminal.close()
            self.clients.close()

    def info(self) -> dict[str, str]:
        terminal: Terminal | None = getattr(self, "terminal", None)
        return {"isolation": terminal.isolation.describe()} if terminal is not None else {}

    def busy(self) -> list[str]:
        worker: Worker | None = getattr(self, "worker", None)
        return worker.busy() if worker is not None else []

    def handle(self, request: Request) -> Message:
        """Run one RunTool (on a pool thread); a body that does not decode is ACODE-PROTO-002."""
        body = codec.SANDBOX_REQUEST.decode(request.body)
        match body:
            case RunTool():
                log = self.log.bind(session_id=body.session_id, trace_id=request.envelope.trace_id,
                                    key=body.key, tool=body.tool)
                log.debug("tool_call_received", request_id=request.id)
                result = self.journal.run(body)
                if body.tool == "run_terminal":
                    swept = self.terminal.sweep()
                    if swept:
                        log.warning("orphans_killed", count=swept)
                log.info("tool_call_answered", ok=result.ok, outcome=result.outcome, replayed=result.replayed,
                         duration_ms=round(result.duration_ms, 3),
                         error=result.error.code if result.error else None)
                return ToolDone(result=result)
            case _:
                assert_never(body)

    def _persistence(self, body: Message) -> Any:
        return self.clients.call("persistence", body, timeout=PERSISTENCE_TIMEOUT_S,
                                 decoder=codec.PERSISTENCE_REPLY)
