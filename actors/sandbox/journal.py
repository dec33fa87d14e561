"""The idempotency journal: every tool call is recorded in persistence before and after it runs.

For each call, under a per-key lock (two requests with one key in this process run one
after the other, the second then finds the first's result)::

    pre_image  write tools: sha256 of the target's bytes now, or "absent"
    begin      BeginToolCall(key, …, risk, pre_image) → ToolCallState
                 done     answer the journaled result, replayed=True; nothing runs
                 new      run the tool
                 pending  an earlier run was interrupted after its intent: see below
    finish     FinishToolCall(key, result, ToolCalled event); only then the reply

A call that runs with side effects (``new`` or ``pending``) runs between two checkpoints
of the workspace (:mod:`actors.sandbox.checkpointing`); the one before it is the call's
``checkpoint_taken`` event, journaled with its result in the same transaction. A call
answered from the journal (``done``) takes none: it does not run.

A call without side effects (read_file, list_directory, search_code, search_code_terms,
diff_workspace) or the session's baseline (its first record stands, a second call moves
nothing): :attr:`ToolCall.rerun_safe`, skips ``begin``. The intent exists to tell, after a
crash, whether a side effect may have happened; such a call is run again in any case (see
the table), so writing it would cost a durable write and a round trip and decide nothing.
Such a call is journaled one of two ways:

- **by the stage** (``RunTool.held``, what a stage does when its replay index says nothing
  is journaled under the key): it runs, nothing is written here, and the answer carries
  the call's ``tool_called`` event; the stage writes the result and the event with its
  next write (``Commit.reads``), so nothing that depends on the result becomes durable or
  happens without it. No round trip to persistence at all;
- **here** (a replayed stage, or a key journaled before): it runs, then ``finish`` journals
  its result; if a result was journaled first under its key, persistence keeps that one,
  appends no second event and answers it (``Committed.result``), and so does the sandbox,
  ``replayed=True``: a replayed stage gets the bytes it got before. What the stage held back
  (``RunTool.commit``: its progress events, reads and the model's last answer) rides on this
  ``finish``, in the same transaction, before the call's own event.

Either way the result is committed without waiting for the disk (lost to a power cut, the
call is just run again; any crash of a process keeps it). For a call with side effects what
the stage held back is sent on its own before ``begin``.

``pending`` (the sandbox died, or persistence failed, between begin and finish):

=================================  ==================================================
read_file, list_directory,         run again (no side effect, or an idempotent one;
search_code, create_directory,     a session's first baseline stands, so a second
baseline_workspace, diff_workspace baseline_workspace moves nothing)
write_file                         file already holds the new content → done, no write;
                                   file still matches the recorded pre-image → run;
                                   otherwise → outcome unknown
modify_file                        file matches the pre-image → run; else unknown
run_terminal                       never rerun → outcome unknown
an MCP tool (``mcp__S__T``)        rerun-safe (trusted read-only or idempotent,
                                   :func:`protocol.calls.mcp.rerun_safe`) → run again;
                                   any other → outcome unknown (ACODE-MCP-011)
=================================  ==================================================

An MCP call with side effects is journaled like a command: intent, checkpoint, call,
result; only a trusted read-only one skips the intent (:attr:`ToolCall.rerun_safe`).

"Outcome unknown" is a result (ok=False, outcome="unknown", ACODE-SBX-008) that tells the
model to look at the workspace before retrying. A failure to reach persistence is not a
result: it raises, the worker answers an Error, and the caller retries with the same key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, assert_never

import msgspec

from actors.sandbox.checkpointing import Checkpointing
from actors.sandbox.dispatch import ToolCall
from actors.sandbox.mcpcalls import McpCalls
from actors.sandbox.tools import files
from actors.sandbox.tools.baseline import Baselines
from actors.sandbox.tools.output import Outcome
from actors.sandbox.tools.terminal import Terminal
from protocol.basics.ids import new_id
from protocol.calls.tools import (
    BaselineWorkspace,
    CreateDirectory,
    DiffWorkspace,
    ListDirectory,
    ModifyFile,
    ReadFile,
    RunTerminal,
    SearchCode,
    SearchCodeTerms,
    StepComplete,
    StepFailed,
    WriteFile,
)
from protocol.errors import ErrorInfo, ProtocolError, SandboxError
from protocol.messages import (
    Ack,
    BeginToolCall,
    Commit,
    Committed,
    FinishToolCall,
    Message,
    RunTool,
    ToolCallState,
)
from protocol.plans.results import ToolResult
from protocol.sessions.events import CheckpointTaken, ToolCalled

__all__ = ["Journal", "Send"]

Send = Callable[[Message], Any]  # one request to persistence → its reply (raises on failure)
_SUMMARY_CHARS = 160


class _KeyLocks:
    """A lock per idempotency key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._lock:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


def _summary(result: ToolResult) -> str:
    if result.error is not None:
        text = result.error.message
    elif result.exit_code is not None:
        # A command's last wordy line says most ("FAILED (failures=1)", "OK"), not a ruler.
        wordy = [line for line in result.output.splitlines() if any(c.isalnum() for c in line)]
        text = f"exit {result.exit_code}" + (f": {wordy[-1].strip()}" if wordy else "")
    else:
        text = next((line for line in result.output.splitlines() if line.strip()), "")
    text = text.strip().splitlines()[0] if text.strip() else ("ok" if result.ok else "failed")
    return text if len(text) <= _SUMMARY_CHARS else text[:_SUMMARY_CHARS] + "…"


class Journal:
    """Runs tool calls exactly as the journal in persistence allows (see the module docstring)."""

    def __init__(self, send: Send, terminal: Terminal, *, log: Any = None, baselines: Baselines | None = None,
                 hidden: tuple[str, ...] = (), checkpoints: Checkpointing | None = None, mcp: McpCalls | None = None):
        self._send = send
        self._mcp = mcp  # MCP tools' calls (actors.sandbox.mcpcalls)
        self._checkpoints = checkpoints
        self._hidden = hidden  # acode's home: no file tool reaches it
        self._terminal = terminal
        self._baselines = baselines
        self._log = log
        self._keys = _KeyLocks()

    def run(self, request: RunTool) -> ToolResult:
        return self.run_call(request)[0]

    def run_call(self, request: RunTool) -> tuple[ToolResult, ToolCalled | None]:
        """The call's result, and for a call without side effects the stage journals itself
        (``RunTool.held``) its event: nothing was written (see the module)."""
        with self._keys.hold(request.key), ToolCall(request, hidden=self._hidden, mcp=self._mcp) as call:
            if call.rerun_safe:
                if request.held:
                    result = call.run(self._terminal, self._baselines)
                    return result, self._event(call, result)
                return self._run_read(call), None
            if request.commit is not None:  # what the stage held back is durable before a side effect
                self._send(request.commit)
            state = self._begin(call)
            match state.state:
                case "done":
                    if state.result is None:
                        raise ProtocolError(f"persistence says tool call {request.key} is done but sent no "
                                            "result; check the persistence actor", code="ACODE-PROTO-002")
                    return msgspec.structs.replace(state.result, replayed=True), None
                case "new":
                    taken, result = self._checkpointed(call, lambda: call.run(self._terminal, self._baselines))
                case "pending":
                    taken, result = self._checkpointed(call, lambda: self._resume(call, state.pre_image))
                case _:
                    assert_never(state.state)
            self._finish(call, result, taken)
            return result, None

    def _checkpointed(self, call: ToolCall, run: Callable[[], ToolResult]) -> tuple[list[CheckpointTaken],
                                                                                      ToolResult]:
        """``run`` between the checkpoints before and after it (:mod:`actors.sandbox.checkpointing`);
        a checkpoint that cannot be taken is the call's result instead: it does not run."""
        if self._checkpoints is None or call.refusal is not None:
            return [], run()
        try:
            taken = self._checkpoints.before(call)
        except SandboxError as exc:
            return [], call.result(Outcome(error=exc.info()))
        result = run()
        if taken:
            self._checkpoints.after(call)
        return taken, result

    def _run_read(self, call: ToolCall) -> ToolResult:
        """A call without side effects: run it, then journal its result; if a result was
        journaled first (a replayed stage), answer that one, as ``done`` would have."""
        result = call.run(self._terminal, self._baselines)
        first = self._finish(call, result)
        return result if first is None else msgspec.structs.replace(first, replayed=True)

    def _begin(self, call: ToolCall) -> ToolCallState:
        request = call.request
        reply = self._send(BeginToolCall(key=request.key, session_id=request.session_id, tool=request.tool,
                                         arguments=request.arguments, risk=call.risk,
                                         pre_image=call.image()))
        if not isinstance(reply, ToolCallState):
            raise ProtocolError(f"persistence answered begin_tool_call with {type(reply).__name__}, expected "
                                "tool_call_state; run the same acode version everywhere", code="ACODE-PROTO-005")
        return reply

    def _finish(self, call: ToolCall, result: ToolResult, taken: list[CheckpointTaken] | None = None
                ) -> ToolResult | None:
        """Journal ``result`` (after ``taken``, the checkpoints before the call, in the same
        transaction); return the result journaled before under the same key, if any."""
        request = call.request
        event = self._event(call, result)
        carried = request.commit if call.rerun_safe else None  # sent before the call otherwise
        if taken:
            carried = Commit(session_id=request.session_id, events=list(taken))
        reply = self._send(FinishToolCall(key=request.key, session_id=request.session_id, result=result,
                                          event=event, rerun_safe=call.rerun_safe, commit=carried))
        if not isinstance(reply, (Committed, Ack)):
            raise ProtocolError(f"persistence answered finish_tool_call with {type(reply).__name__}, expected "
                                "committed; run the same acode version everywhere", code="ACODE-PROTO-005")
        return reply.result if isinstance(reply, Committed) else None

    @staticmethod
    def _event(call: ToolCall, result: ToolResult) -> ToolCalled:
        request = call.request
        return ToolCalled(id=new_id(), session_id=request.session_id, at=time.time(), key=request.key,
                          tool=request.tool, target=call.target, ok=result.ok, summary=_summary(result),
                          outcome=result.outcome, duration_ms=result.duration_ms, risk=result.risk,
                          isolation=result.isolation, counted=request.site is not None and request.site.counted)

    def _resume(self, call: ToolCall, recorded: str | None) -> ToolResult:
        """Decide what to do with a call whose earlier run was interrupted."""
        if self._log is not None:
            self._log.warning("tool_call_resumed", key=call.request.key, tool=call.request.tool)
        if call.mcp is not None:  # an MCP call has no pre-image: only a rerun-safe tool runs again
            return call.run(self._terminal, self._baselines) if call.mcp.rerun_safe else self._unknown(call, None, None)
        match call.args:
            case ReadFile() | ListDirectory() | SearchCode() | SearchCodeTerms() | CreateDirectory() | StepComplete() \
                    | StepFailed() | BaselineWorkspace() | DiffWorkspace() | None:
                return call.run(self._terminal, self._baselines)
            case WriteFile(content=content, path=path):
                current = call.image()
                if current is not None and current == files.content_digest(content):
                    assert call.workspace is not None
                    rel = call.workspace.relative(path)
                    data = content.encode("utf-8", "surrogatepass")
                    return call.result(Outcome(output=f"wrote {len(data)} bytes to {rel} (already written before "
                                                      "an interruption; not written again)", path=rel,
                                               sha256=files.written_digest(data)))
                if current == recorded:
                    return call.run(self._terminal, self._baselines)
                return self._unknown(call, recorded, current)
            case ModifyFile():
                current = call.image()
                if current == recorded:
                    return call.run(self._terminal, self._baselines)
                return self._unknown(call, recorded, current)
            case RunTerminal():
                return self._unknown(call, None, None)
            case _:
                assert_never(call.args)

    def _unknown(self, call: ToolCall, recorded: str | None, current: str | None) -> ToolResult:
        request = call.request
        if call.mcp is not None:
            message = (f"{request.tool} {call.target!r} was interrupted before its result was recorded (the sandbox "
                       "died during the call); it may or may not have taken effect and is not run again; check its "
                       "effect before calling it again")
            if self._log is not None:
                self._log.warning("tool_outcome_unknown", key=request.key, tool=request.tool)
            result = call.result(Outcome(error=ErrorInfo(code="ACODE-MCP-011", message=message)))
            return msgspec.structs.replace(result, outcome="unknown")
        if isinstance(call.args, RunTerminal):
            before = "a command has no pre-image"
        elif recorded == files.ABSENT:
            before = f"the file did not exist before; now {current or 'unreadable'}"
        else:
            before = f"pre-image sha256 {recorded or 'unknown'}, now {current or 'unreadable'}"
        message = (f"{request.tool} {call.target!r} was interrupted before its result was recorded; it may or "
                   f"may not have taken effect ({before}); check the workspace before retrying")
        if self._log is not None:
            self._log.warning("tool_outcome_unknown", key=request.key, tool=request.tool)
        result = call.result(Outcome(error=ErrorInfo(code="ACODE-SBX-008", message=message)))
        return msgspec.structs.replace(result, outcome="unknown")
