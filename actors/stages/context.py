"""What a stage function works with: its request, the model, persistence and the sandbox.

One :class:`StageContext` per ``RunStage`` request, on the stage actor's worker thread.
Every call goes through the broker with the thread's own client (``ThreadClients``); each
resends until its deadline, so a restarted persistence or sandbox only delays a stage.

:meth:`StageContext.tool` and :meth:`StageContext.commit` may be called from several
threads at once (the verifier runs independent checks in parallel): each thread gets its
own broker client, and the counters are updated under a lock. A thread that is about to
end calls :meth:`StageContext.release_thread` so its socket does not outlive it. The model
is asked from the stage's own thread only.

**What a stage holds back.** Progress events (``protocol.events.PROGRESS_EVENTS``: a step
started, a turn answered, a step retried; committed without a step record), the model's
answers (see :mod:`actors.llm.recorded`) and the results of reads with their
``tool_called`` events are not sent on their own: the stage's next write carries them,
first in its transaction, in the order they came: the next :meth:`commit` (merged), a
model claim (``ClaimModelAnswer.commit``, only when replaying), or a read journaled by the
sandbox (``RunTool.commit``). Before a tool call with side effects, any other request, or
the stage's result, :meth:`flush` writes them and waits; a model call that runs
:data:`~actors.stages.callwatch.FLUSH_AFTER` seconds gets them written meanwhile (the call
watch), so followers see a step's reads while the model thinks. So nothing that depends on
what was held happens or becomes durable without it; a stage killed while holding them
loses only them, and its replay writes them again (same event ids) or asks the model again.

**A step's record is written behind.** ``commit(..., wait=False)`` (the executor's step
records) hands the commit to a writer thread and returns at once, so the next steps'
model turns and reads overlap its round trip. Every other one is held instead, as the
progress events are, and goes with the next step's write: half the commits, and half the
work they make persistence, the broker and this process do while the next reads run on
two cores (about 3 % of a W1 session). A slow model call still gets it written after
:data:`~actors.stages.callwatch.FLUSH_AFTER` (the call watch). The writer sends one
commit at a time, in the order they were made; those made while one is on its way wait
as one commit, merged (at most :data:`BEHIND_STEPS` step records; the next then waits),
so the steps go at the pace of their reads, not of the commits: at most
:data:`BEHIND_STEPS` records queued and one held are unsent. Each is still durable
before anything depends on it: every other write, a tool call with side effects, a
journaled read and the stage's result first wait for all of them (:meth:`_settle`). A
stage killed meanwhile is where it would be had it died just before sending them (the
later steps' held reads wrote nothing): its replay runs those steps again, their reads
again, and asks the model again for what it answered in them. If a write fails, its
error is raised by every later write of the stage, so nothing made after it is written
and the stage ends with that error, as it would have at the commit itself.

**A result does not wait for the stage's last writes** (in the stage actor:
:attr:`StageContext.result_behind`). What the stage still holds is sent behind, and the
result names the events of every write not yet known durable
(``StageResult.requires``); the coordinator's transition carries them
(``Commit.requires``) and persistence holds it until they are stored (committing it with
them; after ``PARK_S`` it refuses it, ACODE-STORE-004, retryable, and the coordinator asks
again), so the coordinator still acts only on a result whose answers are durable, and
a crash of the coordinator meanwhile still finds them (no model call is asked twice),
one round trip sooner. A held write with no event (a model answer alone) cannot be named
so; then the result waits for it as before. If a named write never lands (the stage
actor died before it left), the coordinator counts the attempt as lost after
``REQUIRED_WAIT_S`` and dispatches it again.

**A turn is one round trip.** The attempt's replay index (:meth:`replay_index`: the claims
of its stage, the session's journaled tool keys, its step records) comes with the dispatch
(``RunStage.replay``, read with the transition's commit) or is asked for once. A model
request not among the claims is placed by :class:`~actors.llm.recorded.RecordedModel`
itself, without a claim round trip; a read (:data:`protocol.tools.RERUN_SAFE_TOOLS`) under a
key not journaled runs ``held`` (the sandbox writes nothing and answers its event; the stage
journals it with its next write, ``Commit.reads``). A key journaled, or held and not yet
written, goes through the sandbox's journal, which answers the first result, so a replay
reads the bytes the stage read.

Transient tool failures (a result whose error is ``retryable``) are retried by
:meth:`StageContext.tool_retrying` ``tool_retry_limit`` times, after ``tool_retry_backoff_s``
doubling each time (by default :data:`TOOL_RETRY_WAITS`: 1 s, 2 s, 4 s; seed 004
FR-064/065), each retry under its own key (``<key>:retry1`` …): the sandbox's journal
answers a repeated key with the result it recorded, and the suffixes are deterministic so
a resumed stage replays the same sequence.

A command that changed a protected path (the sandbox restored it and failed the call with
ACODE-SBX-021) raises :class:`ProtectedChanged` from :meth:`StageContext.tool`: the stage
ends with that code and the coordinator pauses the session (``escalation``), whichever
stage ran the command; a replay that meets the journaled result pauses again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar, assert_never

import msgspec

from actors.llm.meter import Meter
from actors.llm.provider import ChatMessage, ModelRequest, Provider
from actors.llm.recorded import RecordedModel
from actors.llm.scripted import ScriptedModel
from actors.stages.answers import parse_answer, schema_of
from actors.stages.budget import stage_budget
from actors.stages.callwatch import CallWatch
from actors.stages.control import WorkControl, with_guidance
from actors.stages.corrections import correction
from actors.stages.untrusted import Fence
from broker.threads import ThreadClients
from protocol import codec
from protocol.errors import AcodeError, ModelError, OrchestrationError, SandboxError, with_code
from protocol.events import PROGRESS_EVENTS, Event
from protocol.messages import (
    ClaimModelAnswer,
    Commit,
    GetReplayIndex,
    JournaledRead,
    Message,
    RecordModelAnswer,
    ReplayIndex,
    RunStage,
    RunTool,
    ToolDone,
)
from protocol.results import (
    ModelAnswer,
    Requirement,
    StageMetrics,
    StageResult,
    StepRecord,
    ToolResult,
    WorkspaceChanges,
)
from protocol.session import OllamaProvider, OpenAIProvider, ProviderSpec, ScriptedProvider
from protocol.tools import RERUN_SAFE_TOOLS

__all__ = ["TOOL_RETRY_WAITS", "ProtectedChanged", "StageContext", "make_provider"]


class ProtectedChanged(SandboxError):
    """A command changed a protected path (git's config or hooks, ``.agent``, acode's
    config; the sandbox restored it): the stage stops here and the session pauses."""

    default_code = "ACODE-SBX-021"


def _unless_protected_changed(result: ToolResult) -> ToolResult:
    if result.error is not None and result.error.code == ProtectedChanged.default_code:
        raise ProtectedChanged(result.error.message)
    return result

T = TypeVar("T")
TOOL_RETRY_WAITS: tuple[float, ...] = (1.0, 2.0, 4.0)
PERSISTENCE_TIMEOUT = 120.0  # a restarting persistence delays a stage; it does not fail it
BEHIND_STEPS = 3  # step records a write behind gathers at most while the one before it is on its way
_providers: dict[bytes, Provider] = {}
_providers_lock = threading.Lock()


def _merged(first: Commit, then: Commit) -> Commit:
    """Two writes behind as one, ``first``'s records before ``then``'s (both carry only
    events, step records, answers and reads: see :meth:`StageContext.commit`)."""
    return msgspec.structs.replace(first, events=[*first.events, *then.events], steps=[*first.steps, *then.steps],
                                   answers=[*first.answers, *then.answers], reads=[*first.reads, *then.reads])


def make_provider(spec: ProviderSpec | None) -> Provider:
    """The session's model, made once per process for each distinct spec and cached
    (scripted files are parsed once; an HTTP provider keeps its client)."""
    if spec is None:
        raise ModelError("this session has no model configured; run it with --provider scripted "
                         "--script FILE", code="ACODE-LLM-001")
    key = codec.encode(spec)  # tagged by kind, so equal fields of two kinds never collide
    with _providers_lock:
        provider = _providers.get(key)
        if provider is None:
            provider = _new_provider(spec)
            if len(_providers) > 32:
                _providers.clear()  # an HTTP provider keeps no connection open; dropping it is enough
            _providers[key] = provider
    return provider


def _new_provider(spec: ProviderSpec) -> Provider:
    match spec:
        case ScriptedProvider(script_yaml=text, script_name=name):
            return ScriptedModel.from_yaml(text, source=name or "<script>")
        # The HTTP providers are imported when one is used: they load httpx (and ssl), some
        # 4 MB of resident memory in each stage actor that a scripted model never needs.
        case OllamaProvider():
            from actors.llm.ollama import OllamaModel

            return OllamaModel(spec)
        case OpenAIProvider():
            from actors.llm.openai import OpenAICompatibleModel

            return OpenAICompatibleModel(spec)
        case _:
            assert_never(spec)


class StageContext:
    def __init__(self, request: RunStage, *, clients: ThreadClients, cancel: threading.Event, log: Any,
                 control: WorkControl | None = None, watch: Callable[[Meter], None] | None = None,
                 writer: ThreadPoolExecutor | None = None):
        """``writer``: the one-thread pool that sends the writes behind (``commit(wait=False)``),
        the stage actor's, kept across its requests with its thread's broker client; without
        it the context makes its own at the first such write and lets it go at :meth:`close`."""
        self.request = request
        self.control = control or WorkControl(request.steering)
        self.clients = clients
        self.cancel = cancel
        self.log = log
        self.started = time.monotonic()
        self.tool_calls = 0
        settings = request.settings
        self.retry_waits = tuple(settings.tool_retry_backoff_s * 2**n  # tests shorten them
                                 for n in range(settings.tool_retry_limit))
        self._lock = threading.Lock()
        self._held: list[Event] = []  # progress events for the next request (see the module)
        self._reads: list[JournaledRead] = []  # results of reads the stage journals itself, with _held
        self._held_steps: list[StepRecord] = []  # a step record held with _held: every other one (commit)
        self._send_lock = threading.RLock()  # what is held goes out in the order it was taken
        self._index: ReplayIndex | None = request.replay  # else fetched at the first model call or read
        self._journaled: set[str] = set(request.replay.tool_keys if request.replay else ())  # or held to be
        self.watch = CallWatch(self.flush, on_exit=clients.release, log=log)
        self._behind: Future[Any] | None = None  # the last write sent behind (commit(wait=False))
        self._queued: Commit | None = None  # written behind, not sent yet: later ones merge into it
        self._queue_lock = threading.Lock()  # _queued, between this thread and the writer's
        self._failure: BaseException | None = None  # a write behind that failed: every later one raises it
        self._unsettled: list[str] = []  # event ids of the writes behind, until they are known durable
        self._eventless = False  # a write behind without an event: the result must wait for it
        # True in the stage actor: the result does not wait for the stage's last writes but
        # names them (StageResult.requires), and the coordinator's transition waits for them
        self.result_behind = False
        self._writer = writer  # its thread; else made at the first such write, and this context's
        self._own_writer = writer is None
        self.fence = Fence()  # one nonce per dispatch; see actors.stages.untrusted
        self.budget_tokens = stage_budget(request.settings, request.stage)  # a stage may lower it (the planner)
        self.model = RecordedModel(make_provider(request.settings.provider), self.persistence,
                                   session_id=request.session_id, visit=request.visit, cancel=cancel,
                                   before=lambda r: self._safe_point(f"model call {r.call_site}"),
                                   amend=self._steered, claims=lambda: self.replay_index().claims,
                                   calls=self.watch,
                                   watch=watch)  # the stage actor publishes each call's progress

    def replay_index(self) -> ReplayIndex:
        """What this attempt replays: read with the transition's commit and carried by the
        dispatch (``RunStage.replay``), else asked once, at the first model call or read. The
        model requests claimed in this stage (``RecordedModel`` places a new one itself,
        without a claim round trip), the session's journaled tool calls (a read under another
        key runs ``held``: the stage journals its result with its next write) and its steps."""
        with self._lock:
            index = self._index
        if index is None:
            index = self.persistence(GetReplayIndex(session_id=self.session_id, stage=self.request.stage))
            assert isinstance(index, ReplayIndex)
            with self._lock:
                if self._index is None:
                    self._index = index
                    self._journaled.update(index.tool_keys)
                index = self._index
        return index

    def close(self) -> None:
        """The stage has ended: stop watching calls (the result flushed what was held) and,
        if the writer thread is this context's own, let it go once a write still behind (a
        stage that failed) is done (the actor's stays, for its next request)."""
        self.watch.close()
        if self._writer is not None and self._own_writer:
            self._writer.submit(self.clients.release)
            self._writer.shutdown(wait=False)

    @property
    def session_id(self) -> str:
        return self.request.session_id

    def _safe_point(self, where: str) -> None:
        """Stop here if the user paused the session (WorkPaused), after writing what the
        stage held back: the answer in flight when the pause came is recorded, so the
        resumed session replays it and pays for nothing twice, whoever catches the stop."""
        if self.control.paused:
            self.flush()
        self.control.safe_point(where)

    def _steered(self, request: ModelRequest) -> ModelRequest:
        """``request`` as the model gets it: with the user's steering so far (fenced), if any."""
        guidance = self.control.guidance(self.fence)
        if not guidance:
            return request
        return msgspec.structs.replace(request, messages=with_guidance(request.messages, guidance))

    def persistence(self, body: Message) -> Any:
        """One request to persistence, carrying what the stage held back (see the module):
        a model claim carries it, anything else is preceded by it."""
        if isinstance(body, ClaimModelAnswer):
            with self._send_lock:
                body = msgspec.structs.replace(body, commit=self._take_held(with_answers=False))
                return self._call_persistence(body)
        if not isinstance(body, Commit | RecordModelAnswer | GetReplayIndex):  # the index depends on nothing held
            self.flush()
        return self._call_persistence(body)

    def _call_persistence(self, body: Message) -> Any:
        """One request to persistence, after the write behind (if any) is durable."""
        self._settle()
        return self._send_persistence(body)

    def _send_persistence(self, body: Message) -> Any:
        return self.clients.call("persistence", body, timeout=PERSISTENCE_TIMEOUT,
                                 decoder=codec.PERSISTENCE_REPLY, session_id=self.session_id)

    def _settle(self) -> None:
        """Wait until the writes sent behind are durable; raise their error if one failed
        (every time: after a failed write the stage writes nothing more)."""
        with self._send_lock:
            behind = self._behind
            if behind is not None:
                behind.result()  # the writer sends in order: the last one done, all are
                self._behind = None
                self._unsettled, self._eventless = [], False

    def _write_behind(self, body: Commit) -> None:
        """Send ``body`` from the writer thread, after the writes before it. While one is
        on its way, the next waits, and later ones merge into it (while they hold at most
        :data:`BEHIND_STEPS` step records; past that, this waits for the writes before it):
        a commit per round trip, whatever the pace of the steps."""
        with self._queue_lock:
            queued = self._queued
            if queued is not None and len(queued.steps) + len(body.steps) <= BEHIND_STEPS:
                self._queued = _merged(queued, body)
                self._note(body)
                return
        if queued is not None:
            self._settle()
        self._note(body)
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix=f"{self.request.stage}-writer")
        with self._queue_lock:
            self._queued = body
        self._behind = self._writer.submit(self._send_queued)

    def _note(self, body: Commit) -> None:
        """Remember what ``body``, sent behind, holds, until it is known durable."""
        self._unsettled.extend(event.id for event in body.events)
        self._eventless = self._eventless or not body.events

    def _send_queued(self) -> None:
        """On the writer thread: send what is queued (the write behind and whatever merged
        into it), unless a write before it failed."""
        with self._queue_lock:
            body, self._queued = self._queued, None
        if self._failure is not None:
            raise self._failure
        assert body is not None, "one send is submitted per queued write"
        try:
            self._send_persistence(body)
        except BaseException as exc:
            self._failure = exc
            self.log.warning("stage_write_failed", error=str(exc))
            raise

    def commit(self, events: list[Event], step: StepRecord | None = None, *, wait: bool = True) -> None:
        """Append ``events`` (and ``step``), with what the stage held back first, in one
        transaction, durable when this returns; progress events alone are held back instead
        and written with the stage's next request (see the module). ``wait=False``: sent
        behind, durable before the stage's next write or side effect (see the module)."""
        if step is None and events and all(isinstance(event, PROGRESS_EVENTS) for event in events):
            with self._lock:
                self._held.extend(events)
            return
        if not wait and step is not None:
            with self._lock:
                if not self._held_steps:  # every other step's record goes with the next one's (see the module)
                    self._held.extend(events)
                    self._held_steps.append(step)
                    return
        with self._send_lock:
            if wait:
                self._settle()
            held = self._take_held()
            if held is not None:
                events = [*held.events, *events]
            body = Commit(session_id=self.session_id, events=events,
                          steps=[*(held.steps if held is not None else []), *([step] if step is not None else [])],
                          answers=held.answers if held is not None else [],
                          reads=held.reads if held is not None else [])
            if wait:
                self._send_persistence(body)
                return
            self._write_behind(body)

    def flush(self) -> None:
        """Write what the stage held back now, and wait until it and the write behind are
        durable (from any thread: the call watch flushes during a long model call)."""
        with self._send_lock:
            self._settle()
            held = self._take_held()
            if held is not None:
                self._send_persistence(held)

    def _flush_behind(self) -> Requirement | None:
        """Send what the stage holds behind its other writes, without waiting, and return
        the events of every write not known durable (None: all of them are). A write with
        no event cannot be named so: then this waits, as :meth:`flush` does. A write that
        failed raises here, as :meth:`flush` would."""
        with self._send_lock:
            if self._failure is not None:
                raise self._failure
            held = self._take_held()
            if self._eventless or (held is not None and not held.events):  # a write it cannot name
                self._settle()
                if held is not None:
                    self._send_persistence(held)
                return None
            if held is not None:
                self._write_behind(held)
            behind = self._behind
            if behind is None or (behind.done() and behind.exception() is None and self._queued is None):
                return None  # every write is durable already
            return Requirement(events=list(self._unsettled))

    def _take_held(self, *, with_answers: bool = True) -> Commit | None:
        """The held events and (``with_answers``) the model's pending answer as one Commit,
        now the caller's to send; None when nothing is held. A claim leaves the answer to
        the model's own claim (``ClaimModelAnswer.answers``)."""
        with self._lock:
            events, self._held = self._held, []
            reads, self._reads = self._reads, []
            steps, self._held_steps = self._held_steps, []
        answers = self.model.take_pending() if with_answers else []
        if not events and not answers and not reads:
            return None
        return Commit(session_id=self.session_id, events=events, answers=answers, reads=reads, steps=steps)

    def tool(self, key: str, tool: str, arguments: dict[str, Any], *, timeout_s: float | None = None,
             approval: str = "") -> ToolResult:
        """Run one tool call in the sandbox (idempotent by ``key``); ``approval``: the id of
        the decision that approves a prompt-class call (the sandbox checks it)."""
        self._safe_point(f"tool call {tool}")
        settings = self.request.settings
        timeout_s = timeout_s or settings.command_timeout
        with self._lock:
            self.tool_calls += 1
        call = RunTool(key=key, session_id=self.session_id, workspace=self.request.workspace, tool=tool,
                       arguments=arguments, timeout_s=timeout_s, output_limit_bytes=settings.output_limit_bytes,
                       policy=settings.sandbox, approval=approval)
        if tool not in RERUN_SAFE_TOOLS:
            self.flush()  # a side effect may follow what was held: durable first
            return _unless_protected_changed(self._run_tool(call))
        self.replay_index()
        with self._lock:
            replay = key in self._journaled
        if not replay:  # the stage journals the result itself, with its next write
            done = self._run_tool_reply(msgspec.structs.replace(call, held=True))
            if done.event is not None:
                with self._lock:
                    self._held.append(done.event)
                    self._reads.append(JournaledRead(key=key, result=done.result))
                    self._journaled.add(key)
            return done.result
        with self._send_lock:  # journaled (a replay reads the first result), with what was held first
            self._settle()
            return self._run_tool(msgspec.structs.replace(call, commit=self._take_held()))

    def tools(self, calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[ToolResult]:
        """Run several reads at once (``(key, tool, arguments)`` each, none depending on
        another): the sandbox works on them side by side, so they cost about one round
        trip instead of one each. They are journaled as :meth:`tool` would, in the order
        given. A call that is not a read, or that a replay finds journaled, makes them run
        one after another through :meth:`tool` instead (the same results, one at a time)."""
        if any(tool not in RERUN_SAFE_TOOLS for _, tool, _ in calls) or len(calls) < 2:
            return [self.tool(key, tool, arguments) for key, tool, arguments in calls]
        self.replay_index()
        with self._lock:
            replayed = any(key in self._journaled for key, _, _ in calls)
        if replayed:
            return [self.tool(key, tool, arguments) for key, tool, arguments in calls]
        self._safe_point(f"tool calls {', '.join(tool for _, tool, _ in calls)}")
        with self._lock:
            self.tool_calls += len(calls)
        settings = self.request.settings
        sent = [RunTool(key=key, session_id=self.session_id, workspace=self.request.workspace, tool=tool,
                        arguments=arguments, timeout_s=settings.command_timeout,
                        output_limit_bytes=settings.output_limit_bytes, policy=settings.sandbox, held=True)
                for key, tool, arguments in calls]
        outcomes = self.clients.call_all("sandbox", sent, timeout=settings.command_timeout + PERSISTENCE_TIMEOUT,
                                         decoder=codec.SANDBOX_REPLY, session_id=self.session_id)
        results: list[ToolResult] = []
        with self._lock:  # held in the order given, whatever order the answers came in
            for (key, _, _), outcome in zip(calls, outcomes, strict=True):
                if isinstance(outcome, AcodeError):
                    raise outcome  # as :meth:`tool` raises it; the reads before it stay held
                assert isinstance(outcome, ToolDone), "an Error reply arrives as an AcodeError"
                if outcome.event is not None:
                    self._held.append(outcome.event)
                    self._reads.append(JournaledRead(key=key, result=outcome.result))
                    self._journaled.add(key)
                results.append(outcome.result)
        return results

    def _run_tool(self, call: RunTool) -> ToolResult:
        return self._run_tool_reply(call).result

    def _run_tool_reply(self, call: RunTool) -> ToolDone:
        reply = self.clients.call("sandbox", call, timeout=call.timeout_s + PERSISTENCE_TIMEOUT,
                                  decoder=codec.SANDBOX_REPLY, session_id=self.session_id)
        assert isinstance(reply, ToolDone), "Client.call raises the Error a sandbox answers"
        return reply

    def tool_retrying(self, key: str, tool: str, arguments: dict[str, Any], *,
                      timeout_s: float | None = None, approval: str = "") -> ToolResult:
        """:meth:`tool`, retrying a transient failure after each of :attr:`retry_waits`.

        Returns the first result that is not a transient failure, or the last one. A
        cancelled stage stops waiting and returns what it has.
        """
        result = self.tool(key, tool, arguments, timeout_s=timeout_s, approval=approval)
        for attempt, wait in enumerate(self.retry_waits, start=1):
            if result.error is None or not result.error.retryable:
                break
            self.log.warning("tool_retry_scheduled", key=key, tool=tool, retry=attempt, wait_s=wait,
                             code=result.error.code)
            if self.cancel.wait(wait):
                break
            result = self.tool(f"{key}:retry{attempt}", tool, arguments, timeout_s=timeout_s, approval=approval)
        return result

    def release_thread(self) -> None:
        """Close the calling thread's broker client (a helper thread calls it before it ends)."""
        self.clients.release()

    def diff(self, purpose: str) -> tuple[str, WorkspaceChanges | None]:
        """The workspace's diff since the session began (the sandbox's ``diff_workspace``
        against the planner's baseline) and its list of changed files (None in a result
        journaled before the list was kept). ``purpose`` keeps the verifier's and the
        reviewer's keys apart; the visit makes each visit's diff fresh.

        A diff that cannot be computed (no baseline, an unreadable one, ``.git`` gone or
        replaced, git failing) raises ACODE-ORCH-012: nothing can then be verified or
        reviewed, so the session pauses (its fix is the message's last part)."""
        request = self.request
        result = self.tool(f"{request.session_id}:{purpose}{request.visit}:diff", "diff_workspace", {})
        if result.ok:
            return result.output, result.changes
        why = with_code(result.error.message, result.error.code) if result.error else result.output
        short = request.session_id[:8]
        raise OrchestrationError(
            f"the workspace's changes since the session's baseline cannot be computed: {why}; so the work can be "
            f"neither verified nor reviewed, and the session cannot complete; put back what is missing (a moved or "
            f"replaced .git, the baseline in acode's home), then `acode resume {short}` compares again, or "
            f"`acode cancel {short}` ends the session", code="ACODE-ORCH-012")

    def ask(self, type_: type[T], *, call_site: str, system: str, user: str, corrections: int = 2) -> T:
        """Ask the model for a structured answer (a verdict, a review) and validate it. An
        answer that does not decode goes back to the model with the problem, at most
        ``corrections`` times (call sites ``<call_site>/retry<n>``, so a replay finds them),
        before ModelError ACODE-LLM-003."""
        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        site = call_site
        for attempt in range(corrections + 1):
            answer = self.chat(type_, call_site=site, messages=messages)
            try:
                return parse_answer(answer.content, type_, stage=self.request.stage)
            except ModelError as exc:
                if attempt == corrections:
                    raise
                self.log.info("answer_corrected", call_site=site, problem=exc.message[:300])
                messages = correction(messages, answer, f"That answer was refused: {exc.message}. Answer again "
                                      "with one JSON object of the shape asked for.",
                                      settings=self.request.settings, stage=self.request.stage)
                site = f"{call_site}/retry{attempt + 1}"
        raise AssertionError("unreachable")

    def chat(self, type_: type[object], *, call_site: str, messages: list[ChatMessage]) -> ModelAnswer:
        """One model call with a whole conversation (e.g. a correction after an invalid
        answer), asking for ``type_``'s JSON schema; the caller parses the raw answer."""
        return self.model.complete(ModelRequest(
            stage=self.request.stage, call_site=call_site, json_schema=schema_of(type_), nonce=self.fence.nonce,
            messages=messages))

    def result(self, *, ok: bool, summary: str, **fields: Any) -> StageResult:
        """The stage's result; the model's pending answer is recorded first (the coordinator
        acts on the result, so a replay must find every answer it followed). With
        :attr:`result_behind` what the stage holds is sent behind instead and the result
        names every write not yet known durable (``requires``): the coordinator's
        transition is refused until they are stored, so it still acts only on what is
        durable, one round trip sooner."""
        if self.result_behind:
            fields["requires"] = self._flush_behind()
        else:
            self.flush()
        request = self.request
        metrics = StageMetrics(duration_ms=(time.monotonic() - self.started) * 1000,
                               model_calls=self.model.calls, replayed_model_calls=self.model.replayed,
                               tool_calls=self.tool_calls, tokens_in=self.model.tokens_in,
                               tokens_out=self.model.tokens_out, tokens_cached=self.model.tokens_cached,
                               prompt_tokens_est=self.model.prompt_tokens_est,
                               largest_prompt_est=self.model.largest_prompt_est,
                               budget_tokens=self.budget_tokens, model_ms=self.model.model_ms)
        return StageResult(session_id=request.session_id, stage=request.stage, visit=request.visit,
                           attempt=request.attempt, ok=ok, summary=summary, metrics=metrics, **fields)
