"""The sandbox actor: serves ``sandbox`` through the broker, four tool calls at a time.

Each request is a :class:`~protocol.messages.RunTool`; it passes the approval gate
(:mod:`actors.sandbox.gate`: a call that needs a human's approval runs only with a
matching durable record), then the answer is a
:class:`~protocol.messages.ToolDone` whose :class:`~protocol.plans.results.ToolResult` says what
happened, failures the model must see included (see :mod:`actors.sandbox.dispatch`).
Calls run on the worker's thread pool and go through the journal
(:mod:`actors.sandbox.journal`), which talks to ``persistence`` with a client per thread;
a small ``read_file`` the stage journals itself (``RunTool.held``) is answered at once on the
loop thread instead (:meth:`SandboxActor.quick`: nothing to wait for, two thread hand-offs
saved).

At start the isolation is chosen (:func:`actors.sandbox.confinement.isolation.choose`): the strongest
this machine offers, unless forced. Forcing is a hook for operators and tests, e.g. to run
every command under Landlock with the subreaper on a machine that has bubblewrap:

- options (``spec.options``, unknown keys refused): ``isolation`` (``auto``, ``process``,
  ``landlock``, ``bubblewrap``) and ``tree`` (``auto``, ``pidns``, ``subreaper``);
- or, where an option is not given, the environment: ``ACODE_SANDBOX_ISOLATION`` and
  ``ACODE_SANDBOX_TREE`` (the coordinator's children inherit it from ``acode up``).

A forced level the machine cannot give fails the start with ACODE-SBX-015, so a drill
never passes by running under something weaker than it asked for.

Each call's ``tool_call_answered`` line is written right after its reply is sent
(:meth:`broker.worker.Worker.after_reply`), not before: the requester does not wait for the log.

At stop: the worker stops taking requests, running commands are killed with their
process groups, and idle persistence clients are closed, so the context can terminate.
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, assert_never

import msgspec

from actors._base import Actor
from actors.paths import RunPaths
from actors.sandbox.checkpointing import Checkpointing
from actors.sandbox.confinement import visible
from actors.sandbox.confinement.isolation import FORCE_ENV, READS_NOT_CONFINED, Isolation, choose, command_env
from actors.sandbox.gate import ApprovalGate, refused
from actors.sandbox.journal import Journal
from actors.sandbox.mcpcalls import LIST_TIMEOUT_S, McpCalls, stored_servers
from actors.sandbox.tools.baseline import Baselines
from actors.sandbox.tools.terminal import Terminal, command_policy_of
from broker.threads import ThreadClients
from broker.worker import Request, Worker
from protocol import codec
from protocol.errors import ConfigError
from protocol.messages import (
    McpCalled,
    McpCallTool,
    McpListTools,
    McpTools,
    Message,
    RestoreWorkspace,
    RunTool,
    ToolDone,
)
from protocol.policy.sandbox import SandboxPolicy
from protocol.transport.spec import ActorSpec

__all__ = ["PERSISTENCE_TIMEOUT_S", "SandboxActor", "SandboxOptions", "describe_view", "isolation_of"]

PERSISTENCE_TIMEOUT_S = 30.0
CAPACITY = 4
QUICK_BYTES = 256 * 1024  # a held read_file of a file this size or less runs on the loop thread
MCP_NO_RESEND_S = 86_400.0  # an MCP call is sent once: no resend within any call's deadline


class SandboxOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The sandbox's own options; ``None``: not given, the environment decides (else ``auto``)."""

    isolation: Literal["auto", "process", "landlock", "bubblewrap"] | None = None
    tree: Literal["auto", "pidns", "subreaper"] | None = None


def describe_view(terminal: Terminal, policy: SandboxPolicy | None = None) -> str:
    """What a command may read, in one line (``acode status``'s ``sandbox reads``): the
    default allowlist's view on this sandbox's PATH, or ``policy``'s."""
    policy = policy or SandboxPolicy()
    if terminal.isolation.level == "process":
        return "everything this user can read (process level: " + READS_NOT_CONFINED.split(": ", 1)[1] + ")"
    path = command_env(Path(tempfile.gettempdir()))["PATH"]
    view = terminal.view(policy, path, command_policy_of(policy).allow)
    return visible.summary(view, read_opt=policy.read_opt)


def isolation_of(spec: ActorSpec, environ: Mapping[str, str] = os.environ) -> tuple[Isolation, str]:
    """The isolation ``spec``'s options (then ``environ``) force, or the strongest; and who
    forced it ("" when nothing was)."""
    raw = dict(spec.options)
    sources: dict[str, str] = {}
    for name, variable in FORCE_ENV.items():
        if raw.get(name) is not None:
            sources[name] = f"sandbox option {name}={raw[name]}"
        elif environ.get(variable, "").strip():
            raw[name] = environ[variable].strip()
            sources[name] = f"{variable}={raw[name]}"
    try:
        options = msgspec.convert(raw, SandboxOptions)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"sandbox isolation settings {raw!r} rejected: {exc}; isolation is auto, process, "
                          f"landlock or bubblewrap ({FORCE_ENV['isolation']}), tree is auto, pidns or subreaper "
                          f"({FORCE_ENV['tree']})", code="ACODE-CFG-001") from exc
    origin = ", ".join(how for name, how in sources.items() if getattr(options, name) != "auto")
    return choose(options.isolation or "auto", options.tree or "auto", origin=f"by {origin}"), origin


class SandboxActor(Actor):
    actor = "sandbox"

    def on_start(self) -> None:
        assert self.ctx is not None
        self.worker: Worker | None = None
        isolation, self.forced = isolation_of(self.spec)
        self.terminal = Terminal(isolation, subreaper=True)
        paths = RunPaths.for_home(self.spec.home)
        self.terminal.hide(str(paths.home), str(paths.sock_dir))
        self.sees = describe_view(self.terminal)
        self.log.info("sandbox_isolation", isolation=self.terminal.isolation.describe(),
                      level=self.terminal.isolation.level, mode=self.terminal.isolation.mode,
                      forced=self.forced or None, sees=self.sees)
        self.clients = ThreadClients(self.ctx, self.spec.endpoints.broker, sender=self.spec.instance,
                                     epoch=self.spec.epoch, log=self.log)
        hidden = (str(paths.home), str(paths.sock_dir))
        self.checkpoints = Checkpointing(str(paths.checkpoints), self._persistence, hidden=hidden,
                                         log=self.log)
        for workspace in self.checkpoints.resume():  # a restore a kill interrupted completes first
            self.log.warning("restore_completed_at_start", workspace=workspace)
        # MCP calls go to the mcp service once each: their clients never resend (actors.sandbox.mcpcalls)
        self.mcp_clients = ThreadClients(self.ctx, self.spec.endpoints.broker, sender=self.spec.instance,
                                         epoch=self.spec.epoch, log=self.log, resend_interval=MCP_NO_RESEND_S)
        self.mcp = McpCalls(stored_servers(self._persistence), self._mcp_list, self._mcp_call,
                            definitions=paths.mcp_definitions)
        self.journal = Journal(self._persistence, self.terminal, log=self.log, baselines=Baselines(paths.baselines),
                               hidden=hidden, checkpoints=self.checkpoints, mcp=self.mcp)
        self.gate = ApprovalGate(self._persistence, mcp=self.mcp)
        # learns each session's policy while the planner's calls run (ApprovalGate.learn)
        self._learner = ThreadPoolExecutor(1, thread_name_prefix="sandbox-gate")
        self._learning: set[str] = set()  # sessions sent to it (loop thread only)
        self.worker = Worker(self, "sandbox", self.handle, capacity=CAPACITY, threads=CAPACITY, quick=self.quick)
        self.worker.start()

    def on_stop(self) -> None:
        worker: Worker | None = getattr(self, "worker", None)
        if worker is not None:
            worker.close()
            self._learner.shutdown(wait=False, cancel_futures=True)
            killed = self.terminal.kill_all()
            if killed:
                self.log.warning("commands_killed_at_stop", count=killed, reason=self._stop_reason)
            self.terminal.close()
            self.clients.close()
            self.mcp_clients.close()

    def info(self) -> dict[str, str]:
        terminal: Terminal | None = getattr(self, "terminal", None)
        if terminal is None:
            return {}
        forced = f" (forced by {self.forced})" if self.forced else ""
        return {"isolation": terminal.isolation.describe() + forced, "reads": self.sees}

    def busy(self) -> list[str]:
        worker: Worker | None = getattr(self, "worker", None)
        return worker.busy() if worker is not None else []

    def quick(self, request: Request) -> Message | None:
        """Answer a small read the stage journals itself (``RunTool.held``: nothing to wait
        for) at once on the loop thread, saving the pool's thread hand-offs; None for
        anything else, which goes to the pool. Small: a file of at most :data:`QUICK_BYTES`
        (its size only decides where it runs; the read is confined as any other)."""
        body = codec.SANDBOX_REQUEST.decode(request.body)
        if not isinstance(body, RunTool):
            return None  # a restore: on the pool
        known = self.gate.knows(body.session_id)
        if not known and self.gate.exempt(request.envelope.sender):
            self._learn(body.session_id)
        if not (body.held and body.tool == "read_file" and isinstance(body.arguments.get("path"), str)):
            return None
        if not known:
            return None  # the gate would ask persistence: never wait on the loop thread
        try:
            found = os.stat(os.path.join(body.workspace, body.arguments["path"]))
        except (OSError, ValueError):
            return None  # the pool's run reports what is wrong
        if not stat.S_ISREG(found.st_mode) or found.st_size > QUICK_BYTES:
            return None  # a FIFO, a device, a large file: on the pool, where a wait blocks nothing else
        return self.serve(request, body)

    def _learn(self, session_id: str) -> None:
        """Have the gate learn the session's policy in the background, once: a call that
        passes without it (the planner's) says a session whose gated calls come soon."""
        if session_id in self._learning:
            return
        if len(self._learning) >= 4_096:
            self._learning.clear()
        self._learning.add(session_id)
        self._learner.submit(self.gate.learn, session_id)

    def handle(self, request: Request) -> Message:
        """Run one RunTool (on a pool thread); a body that does not decode is ACODE-PROTO-002."""
        return self.serve(request, codec.SANDBOX_REQUEST.decode(request.body))

    def serve(self, request: Request, body: RunTool | RestoreWorkspace) -> Message:
        match body:
            case RestoreWorkspace():
                log = self.log.bind(session_id=body.session_id, trace_id=request.envelope.trace_id)
                restored = self.checkpoints.restore(body)
                log.info("workspace_restored" if restored.applied else "restore_planned", to=restored.target,
                         written=len(restored.write), deleted=len(restored.delete), left=len(restored.left))
                return restored
            case RunTool():
                log = self.log.bind(session_id=body.session_id, trace_id=request.envelope.trace_id,
                                    key=body.key, tool=body.tool)
                log.debug("tool_call_received", request_id=request.id)
                refusal = self.gate.check(body, request.envelope.sender)
                if refusal is not None:
                    log.warning("tool_call_refused_by_gate", code=refusal.code, sender=request.envelope.sender)
                    return ToolDone(result=refused(body, refusal))
                result, event = self.journal.run_call(body)
                if body.tool == "run_terminal":
                    swept = self.terminal.sweep()
                    if swept:
                        log.warning("orphans_killed", count=swept)
                self._after_reply(request, functools.partial(
                    log.info, "tool_call_answered", ok=result.ok, outcome=result.outcome, replayed=result.replayed,
                    duration_ms=round(result.duration_ms, 3), error=result.error.code if result.error else None))
                return ToolDone(result=result, event=event)
            case _:
                assert_never(body)

    def _after_reply(self, request: Request, write: Callable[[], None]) -> None:
        """Write a line once ``request``'s reply is sent (at once without a worker)."""
        worker: Worker | None = getattr(self, "worker", None)
        if worker is None:
            write()
        else:
            worker.after_reply(request, write)

    def _mcp_list(self, body: McpListTools) -> McpTools:
        reply: McpTools = self.clients.call("mcp", body, timeout=LIST_TIMEOUT_S, decoder=codec.MCP_REPLY)
        return reply

    def _mcp_call(self, body: McpCallTool, timeout: float) -> McpCalled:
        reply: McpCalled = self.mcp_clients.call("mcp", body, timeout=timeout, decoder=codec.MCP_REPLY,
                                                 retry_on_lost=False)
        return reply

    def _persistence(self, body: Message) -> Any:
        return self.clients.call("persistence", body, timeout=PERSISTENCE_TIMEOUT_S,
                                 decoder=codec.PERSISTENCE_REPLY)
