"""One try of a step as the tool loop with the model (seed 004).

Each step is an agentic loop: the model sees the step and answers with tool calls; each
call runs in the sandbox and its result goes back to the model; the loop ends with
``step_complete`` or ``step_failed``, or fails after ``max_turns_per_step`` turns
(ACODE-EXEC-003). :class:`ToolLoopStep` is the :class:`actors.stages.execution.step.Step` whose
tries are this loop; the tries, the asking of the model, the turn events and the anomalies
are the base's.

- Calls: the answer's native tool calls, or else the calls it wrote as text
  (:func:`actors.llm.toolcalls.from_text`; small local models often do). A call that
  cannot run (invalid JSON, an unknown tool, bad arguments) is answered with a short
  correction, as a tool message or, for a call without an id, a user message, and costs
  the turn it took (FR-029/030). Broken JSON in a recognised call is repaired first
  (:mod:`actors.llm.repair`: only into a valid call of a known tool), and the result of a
  repaired call begins with a note saying so.
- The same invalid answer (an attempted call that could not run) twice in a row gets,
  instead of the same correction again, the exact call to send for the tool and path it
  tried (:func:`actors.llm.toolcalls.example_call`); the repeated turn leaves the window
  and the rest of the try asks at temperature 0 (when the session's is higher). A third
  time fails the try (ACODE-EXEC-008). All of it follows from the conversation alone, so
  a replay sends the same requests.
- Tools (:mod:`protocol.sessions.profiles`): the model is offered its profile's tools, and the
  system prompt's rules, the step's action and the corrections name only those (a small
  model calls what it reads about): without modify_file (``whole_file`` edits) a file is
  changed by writing it whole with write_file, and the compact prompt style has shorter
  rules. A known tool that was not offered still runs when the model calls it (modify_file
  under the small profile): it is what the model meant, and it is sandboxed, gated and
  approved exactly as an offered one; refusing it would cost a turn to say the same.
- File blocks (whole-file edits): the prompt asks for a file as its path on a line and then
  its content fenced (:func:`actors.llm.toolcalls.file_blocks`); such a block is a write_file
  call, run as any other, whose result begins with a note saying the block was written and
  to call step_complete when the step is done. A repeated invalid write, a step_complete
  pushed back and a code block without a path line (never written: it may be an
  explanation) are each answered with that form.
- Results of native calls go back as tool messages, those of calls written as text in
  one user message (a server that did not parse the call would not accept tool messages
  for it).
- Premature completion (FR-080/081): a ``step_complete`` in a step whose action changes
  files (write_file, modify_file, create_directory, generate_code) when nothing was
  written, in this step now or in an earlier visit, is refused once with a message
  saying so; the second one is accepted, and so is one in the last turn.
- Context (FR-017..021): the system prompt carries the AGENTS.md nearest to the step's
  file; the step's message holds the step, its task's acceptance criteria, what the try
  gathered of the workspace (:mod:`actors.stages.execution.stepview`: a listing, the files the step
  names; fenced) and, on a cycle back, the verifier's feedback. No example in a prompt names
  a real-looking path (a model copies it): placeholders are in angle brackets. The model
  sees a sliding window of the step's turns within a budget
  (:mod:`actors.stages.execution.conversation`); a tool result is cut to ``tool_result_tokens`` (at
  4 characters a token, and to half the window at most) with a note of what was cut.
  Untrusted text is fenced.
- Bad text: a call whose arguments hold text with no UTF-8 form (a lone UTF-16 surrogate
  from an escape like ``"\\udcff"``) is refused like any invalid arguments (ACODE-EXEC-007,
  naming the argument and the character offset); the answer itself was made storable
  before it was recorded (:func:`actors.llm.toolcalls.storable_answer`), so a replay
  refuses it the same way and the step goes on.
- MCP tools (issue 30, :mod:`actors.stages.calls.mcptools`): a session with MCP servers lists
  their tools before each turn and offers them beside its own (``mcp__SERVER__TOOL``, the
  description fenced as untrusted); a call of one passes the same pipeline, its class
  from its definition and the session's stored server configuration; a server that is
  unavailable is left out of the turn, and the model told once.
- Tools the server ignores (issue 15): a step whose every turn makes no tool call fails
  with ACODE-LLM-015 and the fix, at its turn limit, or after :data:`_SILENT_TURNS` turns
  when the server's prompt counts show it left the tool definitions out
  (:func:`tools_left_out`); only turns the server answered now count for that early
  stop, so a step resumed after the server was fixed asks it again. Output the server
  could not parse (``format_error``) is answered with a correction naming its complaint.
- Every sandbox call goes through the per-call pipeline (:mod:`actors.stages.calls.pipeline`:
  budget, autonomy, anomaly, checkpoint, execute, budget update). A call the session's
  autonomy level or ``approvals:`` denies is answered to the model (``the user denied
  this: ...``) and the step goes on; a ``step_failed`` after such a denial fails the step
  with ACODE-EXEC-005 (exit 33). A call that waits for a human ends the stage like a model
  failure (the step not recorded), carrying the call; the coordinator pauses the session
  ``awaiting_approval`` and, once decided, retries the attempt, which replays to it. A
  command that changed a protected path (ACODE-SBX-021, restored by the sandbox) ends the
  stage the same way, and the session pauses with that code.
- Failures: a transient tool failure is retried after 1, 2 and 4 s
  (:meth:`StageContext.tool_retrying`), then its error goes to the model like any other.

Budget: the chat fits the executor's share of the model's context
(:func:`actors.stages.execution.step.context_budget`); a step whose own message does not fit beside
the system prompt and the tool definitions fails the stage with ACODE-ORCH-005.

Under a profile whose step style is ``file`` a step that changes one file is answered
as that whole file instead (:mod:`actors.stages.execution.filestep`, whose ``FileStyleStep``
extends :class:`ToolLoopStep`).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import msgspec

from actors.llm import tokens, toolcalls
from actors.llm.provider import ModelRequest
from actors.stages.calls.mcptools import is_mcp, step_words
from actors.stages.execution.conversation import Conversation
from actors.stages.execution.step import REPEATS, Outcome, Step, retry_note, step_timed_out
from actors.stages.execution.stepview import step_paths
from actors.stages.execution.turnwatch import invalid_text
from actors.stages.prompting import prompts
from actors.stages.prompting.budget import CHARS_PER_TOKEN, estimate, too_large
from actors.stages.request.context import McpOutcomeUnknown
from protocol.calls.tools import CONTROL_TOOLS, TOOL_ARGS, StepComplete, StepFailed, decode_args
from protocol.errors import ModelError
from protocol.plans.results import ModelAnswer, ModelToolCall, Usage

__all__ = ["ToolLoopStep", "tools_left_out"]

_TOOL_NAMES = frozenset(TOOL_ARGS)
_WRITES = frozenset({"write_file", "modify_file", "create_directory"})
_CHANGING_ACTIONS = frozenset({"write_file", "modify_file", "create_directory", "generate_code"})
_CONTENT_WRITES = frozenset({"write_file", "modify_file"})
_SILENT_TURNS = 2  # turns without a call (one correction between them) before tools the server dropped fail the step
_DROPPED_SHARE = 0.6  # a prompt count below this share of the request's own estimate: the tools were left out


def tools_left_out(request: ModelRequest, usage: Usage) -> bool:
    """Did the server leave the tools out of the prompt? Its exact count is far below the
    request's own estimate, tool definitions included, at 4 characters a token (a real
    tokenizer needs more tokens than that for code and JSON, not fewer)."""
    if usage.estimated or not usage.prompt_tokens or not request.tools:
        return False
    return usage.prompt_tokens < _DROPPED_SHARE * tokens.estimate(tokens.request_chars(request), tokens.UNCALIBRATED)


class ToolLoopStep(Step):
    """A :class:`~actors.stages.execution.step.Step` whose tries are the tool loop: each turn's calls
    run through the pipeline until the model calls ``step_complete`` or ``step_failed``."""

    def _loop(self, key: str, site: str, listing: str, files: list[tuple[str, str | None]], attempt: int,
              limit: int, failure: Outcome | None) -> Outcome:
        """One try's loop, after its context was gathered: the tool loop."""
        request = self.ctx.request
        assert request.plan is not None
        system = prompts.executor_system(self.ctx.fence, self.offered, compact=self.compact,
                                         file_blocks=self.file_blocks, path=self._write_path()) + self.instructions
        bare = prompts.render_step(request.plan, self.task, self.step, None, fence=self.ctx.fence,
                                   offered=self.offered)
        if len(system) + len(bare) > self.budget:  # not even the step itself fits beside the tools
            tools = -(-len(msgspec.json.encode(self.tools)) // CHARS_PER_TOKEN)
            raise too_large(request.settings, "executor", estimate(system + bare) + tools,
                            f"the system prompt, the tool definitions and step {self.task.label}/{self.step.label}")
        text = prompts.render_step(request.plan, self.task, self.step, request.feedback,
                                   files=files, fence=self.ctx.fence, listing=listing, offered=self.offered)
        told = self.mcp.refresh()  # the step's message names the MCP tools (listed again before each turn)
        named = self.mcp.named(step_words(request.task, self.task, self.step))
        text += (f"\n\n{named}" if named else "") + retry_note(
            attempt, limit, failure, self.earlier_failure)
        self.conversation = Conversation(system, text)
        for note in told:
            self.conversation.tell(note)
        self.watch.start_try(files)
        self.attempt = attempt
        self.pushed_back = False
        self.denied = False
        self.last_call: tuple[str, str] | None = None
        self.repeats = 0
        self.last_invalid = ""  # the last turn's answer, when nothing of it could run
        self.invalid_repeats = 0
        self.lower_temperature = False  # after a repeated invalid answer, for the rest of the try
        self.mcp_called: set[str] = set()  # the MCP tools this try has called (a write waits for those the step names)
        turns = request.settings.max_turns_per_step
        timeout = request.settings.step_timeout_s
        started = time.monotonic()
        silent = 0  # turns so far without any attempt at a tool call
        live_silent = 0  # of those, the ones the server answered now (not replayed from the record)
        dropped = False  # a live turn's prompt count showed the server left the tools out
        for turn in range(1, turns + 1):
            elapsed = time.monotonic() - started
            answer = None
            for note in self.mcp.refresh():  # a server unavailable: said once, the turn goes on without it
                self.conversation.tell(note)
            model_request = ModelRequest(
                stage="executor", call_site=f"{site}/turn{turn}", nonce=self.ctx.fence.nonce,
                messages=self.conversation.messages(max(self.budget - self.mcp.chars, 0)),
                tools=self.tools + self.mcp.definitions,
                temperature=0.0 if self.lower_temperature and self._temperature() > 0 else None)
            replayed = self.ctx.model.replayed
            if elapsed <= timeout:
                self.turns += 1
                asked = self._asked(model_request, started, timeout, turn)
                if isinstance(asked, Outcome):
                    return asked
                answer = asked
            if answer is None:
                return step_timed_out(timeout, started, turn, turns)
            live = self.ctx.model.replayed == replayed
            native = bool(answer.tool_calls)
            self.conversation.answer(answer.content, answer.tool_calls)
            calls, repaired, blocks = _calls_of(answer, file_blocks=self.file_blocks, also=self.mcp.names())
            correction = ""
            if isinstance(calls, toolcalls.ParseProblem):
                correction = f"error: {calls.message}"
                self.conversation.note("a tool call that was not valid JSON")
            elif not calls and answer.format_error:
                correction = prompts.render_format_error(answer.format_error)
                self.conversation.note("a tool call the server could not read")
            elif not calls:
                correction = prompts.render_unnamed_block(self._write_path()) \
                    if self.file_blocks and toolcalls.unnamed_code(answer.content) else prompts.NO_TOOL_CALL
                self.conversation.note("no tool call")
                silent += 1
                if live:  # after a resume, recorded silent turns say nothing about the server as it is now
                    live_silent += 1
                    dropped = dropped or tools_left_out(model_request, answer.usage)
            if not isinstance(calls, toolcalls.ParseProblem):  # run_command "mcp__x__y(...)": the MCP call meant
                calls = [self.mcp.meant(c) or c for c in calls]
            problems = [] if isinstance(calls, toolcalls.ParseProblem) else [
                self.mcp.check(c) if is_mcp(c.name) else toolcalls.check(c) or self._tool_first(c) for c in calls]
            refused = f"error: {problems[0]}" if problems and all(problems) else ""  # no call of the turn can run
            # an attempted call that could not run (an answer without any call is not counted)
            attempted = isinstance(calls, toolcalls.ParseProblem) or bool(refused or not calls and answer.format_error)
            again = self._same_invalid(answer, invalid=attempted)
            said = correction or refused  # what the answer got instead of running (before a repeat's example)
            if again >= REPEATS:
                self._turn(turn, answer, len(problems), said)
                self.watch.turn(self.turns, attempt, limit, answer, invalid=(invalid_text(answer), said),
                                answered=False)
                return Outcome("failed", f"the model sent the same invalid answer {REPEATS} times in a row "
                                          f"({said[7:200]}) (ACODE-EXEC-008)", code="ACODE-EXEC-008")
            repeated = ""
            if again == 2:  # a correction that did not help once is not sent again: show the call to make
                self.conversation.hide_previous()
                repeated = prompts.render_repeated(correction or refused, *self._example(answer, calls),
                                                   file_blocks=self.file_blocks)
                self.lower_temperature = True
                if correction:
                    correction = repeated
            self._turn(turn, answer, len(problems), correction or repeated or refused)
            if correction:
                if silent == turn and (turn == turns or (dropped and live_silent >= _SILENT_TURNS)):
                    raise self._ignored(turn, dropped)
                self.conversation.reply_user(correction)
                # a try whose every turn made no call is the server ignoring the tools (LLM-015), not a model to note
                ended = self._heed(self.watch.turn(self.turns, attempt, limit, answer, answered=silent != turn,
                                                   invalid=(invalid_text(answer), said)))
                if ended is not None:
                    return ended
                continue
            assert not isinstance(calls, toolcalls.ParseProblem)
            for index, (call, problem) in enumerate(zip(calls, problems, strict=True)):
                outcome = self._call(key, turn, index, call, problem, native=native, last_turn=turn == turns,
                                     repaired=index in repaired, block=index in blocks)
                if outcome is not None:
                    self.watch.turn(self.turns, attempt, limit, answer, answered=False)
                    return outcome
            if repeated:  # after each refused call's own answer (a tool message per native call)
                self.conversation.reply_user(repeated)
            ended = self._heed(self.watch.turn(self.turns, attempt, limit, answer,
                                               invalid=(invalid_text(answer), refused) if refused else None))
            if ended is not None:
                return ended
        return Outcome("failed", f"no step_complete after {turns} turns (ACODE-EXEC-003); split the step, or "
                                  "raise max_turns_per_step", code="ACODE-EXEC-003")

    def _ignored(self, turns: int, dropped: bool) -> ModelError:
        where = f"step {self.task.label}/{self.step.label}"
        if dropped:
            why = ("the server counted far fewer prompt tokens than the request's messages and tool definitions "
                   "take, so it left the tools out of the prompt (llama-server does that without a word when the "
                   "chat template has no tool support)")
        else:
            why = ("the server may have left the tools out of the prompt (llama-server does that without a word "
                   "when the chat template has no tool support), or the model does not call tools")
        return ModelError(
            f"the model made no tool call in {turns} turn(s) of {where}: {why}; start llama-server with --jinja and "
            "a chat template that supports tools (`acode doctor` tries a tool call), or use a model that calls "
            "tools", code="ACODE-LLM-015")

    def _reply(self, call: ModelToolCall, text: str, *, native: bool) -> None:
        if native and call.id:
            self.conversation.reply_tool(call.id, call.name, text)
        else:
            self.conversation.reply_user(f"Result of your {call.name} call{f' {call.id}' if call.id else ''}:\n{text}")

    def _tool_first(self, call: ModelToolCall) -> str | None:
        """Why a content write cannot run yet: the step names an offered MCP tool in full
        (``mcp__notes__lookup``) that this try has not called. On the real 1.5B model, a step
        titled "Use the mcp__notes__lookup tool to look up the word 'acode'" was answered with
        answer.txt written from nothing, the same file three turns running (ACODE-EXEC-008)."""
        if call.name not in _CONTENT_WRITES:
            return None
        waiting = sorted(self.mcp.required(self.task, self.step) - self.mcp_called)
        if not waiting:
            return None
        path = str(call.arguments.get("path", "the file"))[:200]
        return (f"not written: the step says to use {', '.join(waiting)}, which you have not called; call "
                f"{waiting[0]} first, then write {path} with what it returns (ACODE-MCP-017)")

    def _call(self, key: str, turn: int, index: int, call: ModelToolCall, problem: str | None, *, native: bool,
              last_turn: bool, repaired: bool = False, block: bool = False) -> Outcome | None:
        """Run ``call``, or answer ``problem`` (:func:`actors.llm.toolcalls.check`'s) to the model."""
        if problem is not None:
            self._reply(call, f"error: {problem}", native=native)
            self.conversation.note(f"{call.name[:40]} refused: invalid call")
            self.watch.refused(call, problem)
            return None
        if is_mcp(call.name):
            self.mcp_called.add(call.name)  # whatever its outcome: the model has tried the tool
        if call.name in CONTROL_TOOLS:
            self.watch.control(call)
            control = decode_args(call.name, call.arguments)
            if isinstance(control, StepFailed):  # after a denial: it could not go on without that call (exit 33)
                return Outcome("failed", control.reason, code="ACODE-EXEC-005" if self.denied else "ACODE-EXEC-001")
            assert isinstance(control, StepComplete)  # CONTROL_TOOLS names these two
            summary = control.summary
            needs_write = self.step.action in _CHANGING_ACTIONS and not (self.wrote or self.wrote_before)
            if needs_write and not self.pushed_back and not last_turn:
                self.pushed_back = True
                self._reply(call, prompts.render_pushback(self.step, self.offered, file_blocks=self.file_blocks),
                            native=native)
                self.conversation.note("step_complete refused: nothing written yet")
                return None
            return Outcome("completed", summary)
        same = (call.name, json.dumps(call.arguments, sort_keys=True, default=str))
        self.repeats = self.repeats + 1 if same == self.last_call else 1
        self.last_call = same
        if self.repeats >= REPEATS:
            return Outcome("failed", f"the model called {call.name} {_target(call.arguments)!r} with the same "
                                      f"arguments {REPEATS} times in a row (ACODE-EXEC-008)", code="ACODE-EXEC-008")
        try:
            passed = self.pipeline.run(f"{key}:t{turn}:c{index}", call, task=self.task.label, step=self.step.label)
        except McpOutcomeUnknown as exc:  # recorded: a replay pauses here again, a revisit's round is told why
            self._finish("failed", exc.message, code=exc.code)
            raise
        self.watch.ran(call, passed.result)
        if passed.result is None:  # the autonomy step denied it: the model is told, the step goes on
            self.denied = True
            self._reply(call, passed.denied, native=native)
            self.conversation.note(f"{call.name} {_target(call.arguments)} -> denied")
            return None
        result = passed.result
        self.calls += 1
        if result.ok and call.name in _WRITES:
            self.wrote = True
            if result.path and call.name != "create_directory" and result.path not in self.files:
                self.files.append(result.path)  # files only: a directory is no changed file
        shown = prompts.render_tool_result(result, self.ctx.fence, self.result_limit)
        if block:
            shown = prompts.render_from_block(call, result) + shown
        self._reply(call, prompts.render_repaired(call) + shown if repaired else shown, native=native)
        self.conversation.note(f"{call.name} {_target(call.arguments)} -> "
                               f"{'ok' if result.ok else (result.error.code if result.error else 'failed')}")
        return None

    def _same_invalid(self, answer: ModelAnswer, *, invalid: bool) -> int:
        """How many turns in a row have sent this same invalid answer (0: it is not invalid)."""
        if not invalid:
            self.last_invalid, self.invalid_repeats = "", 0
            return 0
        same = answer.content + json.dumps([[c.name, c.arguments, c.invalid_arguments] for c in answer.tool_calls],
                                           sort_keys=True, default=str)
        self.invalid_repeats = self.invalid_repeats + 1 if same == self.last_invalid else 1
        self.last_invalid = same
        return self.invalid_repeats

    def _example(self, answer: ModelAnswer, calls: list[ModelToolCall] | toolcalls.ParseProblem) -> tuple[str, str]:
        """(tool, path) of the call a repeated invalid answer tried: its own, else the step's
        (write_file for modify_file when the profile does not offer it)."""
        tried = calls[0] if isinstance(calls, list) and calls else (answer.tool_calls[0] if answer.tool_calls else None)
        text = answer.content if tried is None else f"{tried.invalid_arguments} {json.dumps(tried.arguments)}"
        name = tried.name if tried is not None and tried.name in TOOL_ARGS else _named(answer.content)
        path = str(tried.arguments.get("path", "")) if tried is not None else ""
        path = path or _written_path(text) or next(iter(step_paths(self.task, self.step)), "")
        name = name or _TOOL_OF_ACTION.get(self.step.action, "write_file")
        if name not in self.offered and name == "modify_file" and "write_file" in self.offered:
            name = "write_file"  # whole-file edits: the example is the call this profile offers
        return name, path

    def _write_path(self) -> str:
        """The one file the step's task writes, or '' (none, or several)."""
        write = self.task.resources.write
        return write[0] if len(write) == 1 else ""


def _calls_of(answer: ModelAnswer, *, file_blocks: bool = False, also: frozenset[str] = frozenset()) -> tuple[
        list[ModelToolCall] | toolcalls.ParseProblem, frozenset[int], frozenset[int]]:
    """The answer's calls (native ones, else those written as text, with ``file_blocks``
    its file blocks as write_file calls), broken JSON repaired where it can be
    (:mod:`actors.llm.repair`), the indexes of the repaired ones and of the file blocks.
    ``also``: more tool names a call written as text may name (the MCP tools offered)."""
    if answer.tool_calls:
        calls = [toolcalls.repair_native(call) or call for call in answer.tool_calls]
        return calls, frozenset(i for i, (new, old) in enumerate(zip(calls, answer.tool_calls, strict=True))
                                if new is not old), frozenset()
    parsed = toolcalls.parse(answer.content, _TOOL_NAMES | also, blocks=file_blocks)
    if parsed.problem is not None:
        return parsed.problem, frozenset(), frozenset()
    return (parsed.calls, frozenset(i for i, call in enumerate(parsed.calls) if call.id in parsed.repaired),
            frozenset(i for i, call in enumerate(parsed.calls) if call.id in parsed.from_blocks))


_TOOL_OF_ACTION = {"read_file": "read_file", "write_file": "write_file", "modify_file": "modify_file",
                   "create_directory": "create_directory", "run_command": "run_terminal",
                   "analyze_code": "read_file", "generate_code": "write_file"}
_NAMED = re.compile(r'["\']?(?:name|tool|tool_name)["\']?\s*:\s*["\']([A-Za-z_]+)')
_WRITTEN_PATH = re.compile(r'["\']path["\']\s*:\s*["\']([^"\'\n]{1,200})["\']')


def _named(text: str) -> str:
    """The known tool an answer that is not valid JSON tried to call, or ''."""
    found = _NAMED.search(text)
    return found.group(1) if found is not None and found.group(1) in TOOL_ARGS else ""


def _written_path(text: str) -> str:
    found = _WRITTEN_PATH.search(text)
    return found.group(1) if found is not None else ""


def _target(arguments: dict[str, Any]) -> str:
    value = arguments.get("path") or arguments.get("command") or arguments.get("query") or ""
    text = str(value)
    return text if len(text) <= 60 else text[:60] + "…"
