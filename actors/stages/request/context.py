"""What a stage function works with: its request, the model, persistence and the sandbox.

One :class:`StageContext` per ``RunStage`` request, on the stage actor's worker thread. It
is the one object a stage holds, and it does little itself: it makes the request's three
rooms, wires them to each other once, and hands each call of a stage to its room:

- :mod:`actors.stages.request.writes` (:class:`~actors.stages.request.writes.StageWrites`), the
  conversation with persistence: :meth:`commit`, :meth:`flush`, :meth:`persistence`,
  :meth:`replay_index`; what the stage holds back for its next write, and the step
  records written behind;
- :mod:`actors.stages.request.model` (:class:`~actors.stages.request.model.StageModel`), the model and its
  record: :attr:`model` (the :class:`~actors.llm.recorded.RecordedModel`), :meth:`ask`,
  :meth:`chat`; the user's pause and steering reach the model there;
- :mod:`actors.stages.request.sandboxcalls` (:class:`~actors.stages.request.sandboxcalls.SandboxCalls`),
  the tool-call path: :meth:`tool`, :meth:`tools`, :meth:`tool_retrying`, :meth:`diff`.

The rooms call one another directly (the model's answers ride on the writes; a tool call
waits for them, or carries them), never back through this object; it builds the stage's
:meth:`result`, the only thing that reads all three.

Every call goes through the broker with the thread's own client (``ThreadClients``); each
resends until its deadline, so a restarted persistence or sandbox only delays a stage.
:meth:`StageContext.tool` and :meth:`StageContext.commit` may be called from several
threads at once (the verifier runs independent checks in parallel): each thread gets its
own broker client. A thread that is about to end calls :meth:`StageContext.release_thread`
so its socket does not outlive it. The model is asked from the stage's own thread only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage
from actors.stages.prompting.budget import stage_budget
from actors.stages.prompting.untrusted import Fence
from actors.stages.request.control import WorkControl
from actors.stages.request.model import StageModel, make_provider
from actors.stages.request.sandboxcalls import TOOL_RETRY_WAITS, McpOutcomeUnknown, ProtectedChanged, SandboxCalls
from actors.stages.request.spending import Spending
from actors.stages.request.writes import StageWrites
from broker.threads import ThreadClients
from protocol.messages import Message, ReplayIndex, RunStage
from protocol.plans.results import ModelAnswer, StageMetrics, StageResult, StepRecord, ToolResult, WorkspaceChanges
from protocol.policy.checkpoints import CallSite
from protocol.sessions.events import Event

__all__ = ["TOOL_RETRY_WAITS", "McpOutcomeUnknown", "ProtectedChanged", "StageContext", "make_provider"]

T = TypeVar("T")


class StageContext:
    def __init__(self, request: RunStage, *, clients: ThreadClients, cancel: threading.Event, log: Any,
                 control: WorkControl | None = None, watch: Callable[[Meter], None] | None = None,
                 writer: ThreadPoolExecutor | None = None):
        """``writer``: the one-thread pool that sends the writes behind (``commit(wait=False)``),
        the stage actor's, kept across its requests with its thread's broker client; without
        it the context makes its own at the first such write and lets it go at :meth:`close`.
        ``watch``: gets each live model call's meter (the stage actor publishes its progress)."""
        self.request = request
        self.control = control or WorkControl(request.steering)
        self.cancel = cancel
        self.log = log
        self.started = time.monotonic()
        # True in the stage actor: the result does not wait for the stage's last writes but
        # names them (StageResult.requires), and the coordinator's transition waits for them
        self.result_behind = False
        self.fence = Fence()  # one nonce per dispatch; see actors.stages.prompting.untrusted
        self.budget_tokens = stage_budget(request.settings, request.stage)  # a stage may lower it (the planner)
        self.writes = StageWrites(request, clients=clients, log=log, writer=writer)
        # the session's budget (actors.stages.request.spending): checked before live model calls
        # and the models' tool calls
        self.spending = Spending(request, index=self.writes.replay_index, commit=self.writes.commit,
                                 flush=self.writes.flush)
        self._model = StageModel(request, self.writes, clients=clients, control=self.control, fence=self.fence,
                                 cancel=cancel, log=log, watch=watch, spend=self.spending)
        self.model = self._model.recorded
        self.writes.answers = self.model.take_pending  # the model's pending answers ride on every write
        self.sandbox = SandboxCalls(request, self.writes, clients=clients, control=self.control, cancel=cancel,
                                    log=log)

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def clients(self) -> ThreadClients:
        """The broker clients persistence and the sandbox are called with (a test may swap
        them, to count the requests)."""
        return self.writes.clients

    @clients.setter
    def clients(self, clients: ThreadClients) -> None:
        self.writes.clients = self.sandbox.clients = clients

    @property
    def tool_calls(self) -> int:
        """Tool calls made so far (the stage's metrics)."""
        return self.sandbox.tool_calls

    @tool_calls.setter
    def tool_calls(self, count: int) -> None:
        self.sandbox.tool_calls = count

    @property
    def retry_waits(self) -> tuple[float, ...]:
        """The waits before each retry of a transient tool failure (:meth:`tool_retrying`)."""
        return self.sandbox.retry_waits

    @retry_waits.setter
    def retry_waits(self, waits: tuple[float, ...]) -> None:
        self.sandbox.retry_waits = waits

    # -- persistence (actors.stages.request.writes) ------------------------------------------------------

    def commit(self, events: list[Event], step: StepRecord | None = None, *, wait: bool = True) -> None:
        """Append ``events`` (and ``step``) with what the stage held back first, durable when
        this returns; progress events alone are held back; ``wait=False``: sent behind
        (:meth:`StageWrites.commit <actors.stages.request.writes.StageWrites.commit>`)."""
        self.writes.commit(events, step, wait=wait)

    def flush(self) -> None:
        """Write what the stage held back now, and wait until it and the write behind are durable."""
        self.writes.flush()

    def persistence(self, body: Message) -> Any:
        """One request to persistence, carrying what the stage held back, or preceded by it."""
        return self.writes.persistence(body)

    def replay_index(self) -> ReplayIndex:
        """What this attempt replays: the claims of its stage, the session's journaled tool
        keys, its step records
        (:meth:`StageWrites.replay_index <actors.stages.request.writes.StageWrites.replay_index>`)."""
        return self.writes.replay_index()

    # -- the model (actors.stages.request.model) -----------------------------------------------------

    def ask(self, type_: type[T], *, call_site: str, system: str, user: str, corrections: int = 2) -> T:
        """Ask the model for a structured answer and validate it, correcting an invalid one
        at most ``corrections`` times (:meth:`StageModel.ask <actors.stages.request.model.StageModel.ask>`)."""
        return self._model.ask(type_, call_site=call_site, system=system, user=user, corrections=corrections)

    def chat(self, type_: type[object], *, call_site: str, messages: list[ChatMessage]) -> ModelAnswer:
        """One model call with a whole conversation, asking for ``type_``'s JSON schema."""
        return self._model.chat(type_, call_site=call_site, messages=messages)

    # -- the sandbox (actors.stages.request.sandboxcalls) --------------------------------------------

    def tool(self, key: str, tool: str, arguments: dict[str, Any], *, timeout_s: float | None = None,
             approval: str = "") -> ToolResult:
        """Run one tool call in the sandbox (idempotent by ``key``); ``approval``: the id of
        the decision that approves a prompt-class call. Raises :class:`ProtectedChanged`."""
        return self.sandbox.tool(key, tool, arguments, timeout_s=timeout_s, approval=approval)

    def tools(self, calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[ToolResult]:
        """Run several reads at once (``(key, tool, arguments)`` each, none depending on another)."""
        return self.sandbox.tools(calls)

    def tool_retrying(self, key: str, tool: str, arguments: dict[str, Any], *,
                      timeout_s: float | None = None, approval: str = "", site: CallSite | None = None,
                      mcp_hash: str = "") -> ToolResult:
        """:meth:`tool`, retrying a transient failure after each of :attr:`retry_waits`
        (``site``: the task and step, for the checkpoint before the call; ``mcp_hash``: an MCP
        tool's definition as offered)."""
        return self.sandbox.tool_retrying(key, tool, arguments, timeout_s=timeout_s, approval=approval, site=site,
                                          mcp_hash=mcp_hash)

    def diff(self, purpose: str) -> tuple[str, WorkspaceChanges | None]:
        """The workspace's diff since the session began and its changed files; ACODE-ORCH-012
        when it cannot be computed."""
        return self.sandbox.diff(purpose)

    # -- the stage's end -----------------------------------------------------------------------

    def release_thread(self) -> None:
        """Close the calling thread's broker client (a helper thread calls it before it ends)."""
        self.clients.release()

    def result(self, *, ok: bool, summary: str, **fields: Any) -> StageResult:
        """The stage's result; the model's pending answer is recorded first (the coordinator
        acts on the result, so a replay must find every answer it followed). With
        :attr:`result_behind` what the stage holds is sent behind instead and the result
        names every write not yet known durable (``requires``): the coordinator's
        transition is refused until they are stored, so it still acts only on what is
        durable, one round trip sooner."""
        if self.result_behind:
            fields["requires"] = self.writes.flush_behind()
        else:
            self.writes.flush()
        request = self.request
        model = self.model
        metrics = StageMetrics(duration_ms=(time.monotonic() - self.started) * 1000,
                               model_calls=model.calls, replayed_model_calls=model.replayed,
                               tool_calls=self.sandbox.tool_calls, tokens_in=model.tokens_in,
                               tokens_out=model.tokens_out, tokens_cached=model.tokens_cached,
                               prompt_tokens_est=model.prompt_tokens_est,
                               largest_prompt_est=model.largest_prompt_est,
                               budget_tokens=self.budget_tokens, model_ms=model.model_ms)
        return StageResult(session_id=request.session_id, stage=request.stage, visit=request.visit,
                           attempt=request.attempt, ok=ok, summary=summary, metrics=metrics, **fields)

    def close(self) -> None:
        """The stage has ended: stop watching model calls (the result flushed what was held)
        and, if the writer thread is the context's own, let it go once a write still behind
        (a stage that failed) is done (the actor's stays, for its next request)."""
        self._model.close()
        self.writes.close()
