"""Stage tests: real actors, or the sandbox's own tool dispatch in process.

A :class:`Stack` (one per test module: starting three processes per test would be slow)
owns broker, persistence and sandbox processes and its acode home. :meth:`Stack.stage`
makes a fresh session (its snapshot committed through persistence), a workspace (its
baseline recorded for the verifier and the reviewer, as the planner would) and a
:class:`StageContext` whose model is the scripted one (or ``provider``, e.g. the stand-in
server), with the requests it is sent
recorded for the test to read. Retry waits are shortened; everything else is what the
stage actor would run.

:class:`LocalTools` is the ``tool(key, name, arguments)`` function the planner's context
preparation takes, served by :class:`~actors.sandbox.dispatch.ToolCall` exactly as the
sandbox actor serves it (confinement, .gitignore, caps, redaction), without the broker
and the journal. It records every call, so tests can check keys and what was read.
"""


from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

from actors.llm.meter import Meter
from actors.llm.provider import ModelRequest
from actors.sandbox.dispatch import ToolCall
from actors.sandbox.tools.terminal import Terminal
from actors.stages.request.context import StageContext
from broker.threads import ThreadClients
from protocol.basics.ids import new_id
from protocol.messages import Commit, GetEvents, RunStage, RunTool
from protocol.plans.plan import TaskPlan, finalize
from protocol.plans.results import ModelAnswer, ToolResult
from protocol.plans.stages import Stage
from protocol.sessions.events import Event
from protocol.sessions.session import ScriptedProvider, SessionSettings, SessionSnapshot
from tests.harness import Harness

FAST_RETRIES = (0.01, 0.02, 0.04)


class Spy:
    """The scripted provider, with every request it answers kept in order."""

    def __init__(self, provider: Any):
        self.provider = provider
        self.name = provider.name
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        self.requests.append(request)
        return self.provider.complete(request, seq=seq, cancel=cancel, meter=meter)  # type: ignore[no-any-return]


class Run:
    """One session's stage: its context, workspace and what the model was asked."""

    def __init__(self, stack: Stack, ctx: StageContext, spy: Spy, workspace: Path):
        self.stack = stack
        self.ctx = ctx
        self.spy = spy
        self.workspace = workspace

    def again(self) -> tuple[StageContext, Spy]:
        """A fresh context of the same session, as a re-dispatched stage (attempt 2) gets."""
        request = self.ctx.request
        ctx = StageContext(msgspec.structs.replace(request, attempt=request.attempt + 1), clients=self.stack.clients,
                           cancel=threading.Event(), log=structlog.get_logger())
        ctx.retry_waits = FAST_RETRIES
        spy = Spy(ctx.model.provider)
        ctx.model.provider = spy
        return ctx, spy

    def events(self) -> list[Event]:
        reply = self.ctx.persistence(GetEvents(session_id=self.ctx.session_id))
        return list(reply.events)


class Stack:
    def __init__(self, home: Path):
        self.harness = Harness(home)
        self.home = home
        self.clients = ThreadClients(self.harness.ctx, self.harness.endpoints.broker, sender="test-stage")

    def start(self, sandbox_module: str | None = None) -> Stack:
        self.harness.start("broker")
        self.harness.start("persistence")
        self.harness.start("sandbox", module=sandbox_module)
        return self

    def stage(self, stage: Stage, responses: list[dict[str, Any]], plan: dict[str, Any] | None, *,
              files: dict[str, str] | None = None, feedback: Any = None, visit: int = 1,
              session_id: str | None = None, workspace: Path | None = None,
              kept_steps: list[str] | None = None, task: str = "the test's task", provider: Any = None,
              **settings: Any) -> Run:
        """``provider``: a model spec to use instead of the scripted one (e.g. the stand-in server's)."""
        session_id = session_id or new_id()
        if workspace is None:
            workspace = Path(tempfile.mkdtemp(prefix="ws-", dir=self.home))
            for name, text in (files or {}).items():
                (workspace / name).parent.mkdir(parents=True, exist_ok=True)
                (workspace / name).write_text(text)
        script = msgspec.json.encode({"version": 1, "responses": {stage: responses}}).decode()
        full = SessionSettings(provider=provider or ScriptedProvider(script_yaml=script,
                                                                     script_name=f"{stage}-{session_id}"), **settings)
        snapshot = SessionSnapshot(id=session_id, task=task[:100], workspace=str(workspace), stage=stage,
                                   settings=full, created_at=time.time(), updated_at=time.time())
        finalized = finalize(msgspec.convert(plan, TaskPlan), version=1) if plan is not None else None
        request = RunStage(session_id=session_id, stage=stage, visit=visit, attempt=1,  # type: ignore[arg-type]
                           task=task, workspace=str(workspace), settings=full, plan=finalized,
                           feedback=feedback, kept_steps=kept_steps or [])
        ctx = StageContext(request, clients=self.clients, cancel=threading.Event(), log=structlog.get_logger())
        ctx.persistence(Commit(session_id=session_id, snapshot=snapshot))
        ctx.retry_waits = FAST_RETRIES
        spy = Spy(ctx.model.provider)
        ctx.model.provider = spy
        if stage in ("verifier", "reviewer"):  # the planner's baseline: these stages diff against it
            recorded = ctx.tool(f"{session_id}:baseline", "baseline_workspace", {})
            assert recorded.ok, recorded
            ctx.tool_calls = 0
        return Run(self, ctx, spy, workspace)

    def close(self) -> None:
        self.clients.close()
        self.harness.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with tempfile.TemporaryDirectory(prefix="acode-st-") as path:
        stack = Stack(Path(path))
        try:
            yield stack.start()
        finally:
            stack.close()


class LocalTools:
    def __init__(self, workspace: Path | str, terminal: Terminal):
        self.workspace = str(workspace)
        self.terminal = terminal
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, key: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((key, tool, dict(arguments)))
        request = RunTool(key=key, session_id="s", workspace=self.workspace, tool=tool, arguments=arguments)
        with ToolCall(request) as call:
            return call.run(self.terminal)

    def paths_read(self) -> list[str]:
        return [arguments["path"] for _, tool, arguments in self.calls if tool == "read_file"]


@pytest.fixture(scope="module")
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    try:
        yield term
    finally:
        term.close()


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
