"""One step of the executor: its tries, each a loop of turns with the model (seed 004).

A try begins from a fresh window with what the step's first message shows of the workspace
(:mod:`actors.stages.execution.stepview`), then runs its loop: the tool loop
(:class:`actors.stages.execution.toolloop.ToolLoopStep`) or, under a profile whose step style is
``file``, a step that changes one file answered as that whole file
(:class:`actors.stages.execution.filestep.FileStyleStep`, which extends the tool loop and keeps it for
any other step). This module holds what every loop shares: the tries, the asking of the
model, the turns and their anomalies, and the step's record. The stage around it is
:mod:`actors.stages.execution.executor`.

- Every model answer is a turn, whatever it holds.
- Each turn is an event (``turn_answered``: the calls made, the correction sent instead,
  or the first refusal when no call of the turn could run, the server's token counts),
  which ``acode run`` shows.
- Anomalies (issue 28 §2): after each turn :mod:`actors.stages.execution.turnwatch` looks at what the
  step's turns did (the same error again, an edit undone, turns without progress, ...); a
  finding is an ``anomaly_detected`` event and climbs its kind's ladder: a note with the
  next turn, then the try ends (ACODE-EXEC-013) for a fresh window, then the step is
  recorded failed (ACODE-EXEC-011) and the session pauses ``anomaly``.
- The step ladder (seed 000 FR-035, seed 004 FR-016/061): a try of a step fails on
  ``step_failed``, on running out of turns (ACODE-EXEC-003), past
  ``step_timeout_s`` (ACODE-EXEC-006: checked before each turn; a turn's deadline fits a
  normal call at the model's measured pace, and a model answer still coming at it is
  abandoned, its HTTP request closed, unless tokens are still flowing or its prompt is
  still within its measured processing time, up to 4× the setting:
  :mod:`actors.stages.request.callwatch`), or when the model
  makes the same tool call with the same arguments, or sends the same invalid answer,
  three times in a row (ACODE-EXEC-008,
  the third is not run), or when an answer runs on to the token limit (ACODE-LLM-012: a
  small model looping; the session paused on it before). A failed try is followed by another, up to
  ``step_retry_limit`` tries, each from a fresh window that states what failed and why
  (a ``step_retried`` event says so too); the workspace keeps what earlier tries wrote.
  A step out of tries is ``failed`` and aborts its task: the steps that depend on it
  (directly or through their task's dependencies) are recorded as ``blocked``,
  independent steps still run, and the stage then fails with the first failed step's
  code; the coordinator pauses the session (exit 30, 31, 32 or 34).
- A revisited executor (a human resumed the session, or the coordinator retried the
  stage) keeps the steps the failed visit completed (the coordinator adds them to
  ``kept_steps``), and the failed step gets a fresh round of tries whose first window
  says how the last round ended.
- A model failure (the server down, the model missing) is not the step's: it fails the
  stage at once with the model's own error, the interrupted step named in the report and
  not recorded, so it runs again when the session is resumed.

Budget: the chat fits the executor's share of the model's context
(:func:`context_budget`); the tool loop fails the stage with ACODE-ORCH-005 when a step's
own message does not fit beside the system prompt and the tool definitions.
"""

from __future__ import annotations

import hashlib
import time
from typing import NamedTuple

import msgspec

from actors.llm.provider import ModelRequest
from actors.llm.recorded import DeadlinePassed
from actors.stages.calls.mcptools import McpOffer
from actors.stages.calls.pipeline import CallPipeline
from actors.stages.execution.conversation import Conversation
from actors.stages.execution.stepview import gather
from actors.stages.execution.turnwatch import Streak, TurnWatch, Watched
from actors.stages.prompting.budget import CHARS_PER_TOKEN, stage_budget
from actors.stages.request.callwatch import turn_deadline
from actors.stages.request.context import StageContext
from protocol.basics.ids import stable_id
from protocol.errors import ModelError
from protocol.plans.plan import PlanStep, PlanTask
from protocol.plans.results import ModelAnswer, StepRecord
from protocol.plans.stages import StepStatus
from protocol.policy.anomalies import Anomaly, Observation
from protocol.sessions.events import StepFinished, StepRetried, TurnAnswered
from protocol.sessions.profiles import offered_tools, tool_surface
from protocol.sessions.session import SessionSettings, model_of

__all__ = ["REPEATS", "Outcome", "Project", "Step", "context_budget", "raise_step_timeout", "record_step",
           "retry_note", "step_timed_out"]

_TURNS_TO_FIT = 5  # the turns a step_timeout_seconds suggested after ACODE-EXEC-006 leaves room for
_STAGE_MARGIN = 5.0  # seconds: a turn's deadline is stretched no closer than this to the stage's timeout
REPEATS = 3  # the same call with the same arguments this many times in a row fails the try


class Outcome(NamedTuple):
    """How one try of a step ended."""

    status: StepStatus  # completed or failed
    summary: str
    code: str = ""


def context_budget(settings: SessionSettings) -> int:
    """Characters of chat the executor sends: its token budget (its share of the model's
    window, :func:`actors.stages.prompting.budget.stage_budget`) less the tool definitions (the
    session's: :func:`protocol.sessions.profiles.tool_surface`)."""
    return max(stage_budget(settings, "executor") * CHARS_PER_TOKEN - _tools_chars(settings), 0)


def _tools_chars(settings: SessionSettings) -> int:
    return len(msgspec.json.encode(tool_surface(settings)))


class Project:
    """What the steps of one executor visit share: the workspace's AGENTS.md (None: not read
    yet), the run of failed turns across steps (the error streak: :mod:`actors.stages.execution.turnwatch`)
    and the session's MCP tools (:mod:`actors.stages.calls.mcptools`)."""

    def __init__(self) -> None:
        self.instructions: str | None = None
        self.streak = Streak()
        self.mcp: McpOffer | None = None  # the session's MCP tools, listed before each turn of every step


class Step:
    """One step's tries, each a loop: the conversation, what it wrote, how many calls it made.
    A subclass is the loop (:meth:`_loop`)."""

    conversation: Conversation  # the try's: its loop begins it
    attempt: int  # the try under way

    def __init__(self, ctx: StageContext, task: PlanTask, step: PlanStep, wrote_before: bool,
                 earlier_failure: StepRecord | None = None, shared: Project | None = None):
        self.ctx = ctx
        self.project = shared or Project()
        self.task = task
        self.step = step
        self.wrote_before = wrote_before
        self.earlier_failure = earlier_failure
        self.files: list[str] = []
        self.wrote = False
        self.calls = 0
        self.turns = 0
        request = ctx.request
        settings = request.settings
        self.tools = tool_surface(settings)  # the model's profile and context decide (protocol.sessions.profiles)
        self.offered = offered_tools(settings.profile)  # what the prompts name; every known tool still runs
        self.compact = settings.profile.prompt_style == "compact"
        # whole-file edits: the prompt asks for a file as a path line and a fenced block (toolcalls.file_blocks)
        self.file_blocks = settings.profile.edit_style == "whole_file" and "write_file" in self.offered
        self.budget = context_budget(settings)
        self.result_limit = min(settings.tool_result_tokens * 4, self.budget // 2)
        self.base = _base_key(request.session_id, request.visit, task, step)
        if self.project.mcp is None:  # one per visit: a server's unavailability is told once
            self.project.mcp = McpOffer(ctx)
        self.mcp = self.project.mcp  # the session's MCP tools, listed before each turn (no servers: nothing asked)
        self.pipeline = CallPipeline(ctx, self.mcp)
        self.denied = False  # a call of the current try was denied (by a human or the approvals policy)
        self.instructions = ""  # the AGENTS.md nearest to the step's file (read with the step's context)
        self.slowest_check_ms = 0.0  # the file style (actors.stages.execution.filestep): its checks' slowest run so far
        self.watch = TurnWatch(ctx, task.label, step.label, self.project.streak, tools=True)  # anomalies

    def run(self) -> StepRecord:
        """Try the step up to ``step_retry_limit`` times; record how it ended."""
        request = self.ctx.request
        limit = request.settings.step_retry_limit
        failure: Outcome | None = None
        for attempt in range(1, limit + 1):
            if failure is not None:
                self.ctx.commit([StepRetried(
                    id=stable_id(request.session_id, "executor", request.visit, self.task.label, self.step.label,
                                 f"try{attempt}"),
                    session_id=request.session_id, visit=request.visit, task=self.task.label, step=self.step.label,
                    attempt=attempt, of=limit, code=failure.code, reason=failure.summary[:2_000])])
            outcome = self._try(attempt, limit, failure)
            if outcome.status == "completed":
                return self._finish("completed", outcome.summary)
            self.ctx.log.info("step_try_failed", task=self.task.label, step=self.step.label, attempt=attempt,
                              of=limit, code=outcome.code)
            failure = outcome
        assert failure is not None
        tried = f" (tried {limit} times)" if limit > 1 else ""
        return self._finish("failed", failure.summary + tried, code=failure.code)

    def _try(self, attempt: int, limit: int, failure: Outcome | None) -> Outcome:
        """One try from a fresh window; the first keeps the call sites and keys of a single try."""
        key = self.base if attempt == 1 else f"{self.base}:k{attempt}"
        site = f"{self.task.label}/{self.step.label}" + ("" if attempt == 1 else f"/try{attempt}")
        seen = gather(self.ctx, self.task, self.step, key, self.project.instructions, budget=self.budget,
                      result_limit=self.result_limit)
        self.project.instructions, self.instructions = seen.project, seen.instructions
        return self._loop(key, site, seen.listing, seen.files, attempt, limit, failure)

    def _loop(self, key: str, site: str, listing: str, files: list[tuple[str, str | None]], attempt: int,
              limit: int, failure: Outcome | None) -> Outcome:
        """One try's loop, after its context was gathered (:mod:`actors.stages.execution.stepview`): the
        tool loop (:class:`actors.stages.execution.toolloop.ToolLoopStep`) or the file style's."""
        raise NotImplementedError

    def _heed(self, watched: Watched) -> Outcome | None:
        """Answer what the turn's anomalies ask (:mod:`actors.stages.execution.turnwatch`): the notes
        go to the model with its next turn; a fresh window ends the try (ACODE-EXEC-013);
        a pause records the step failed (ACODE-EXEC-011) and ends the stage."""
        if watched.pause is not None:
            self._pause(watched.pause)
        if watched.fresh is not None:
            return Outcome("failed", f"{TurnWatch.summary(watched.fresh)} (ACODE-EXEC-013)", code="ACODE-EXEC-013")
        for note in watched.notes:
            self.conversation.reply_user(note)
        return None

    def _pause(self, anomaly: Anomaly) -> None:
        """Record the step failed on ``anomaly`` (a replay pauses at it again; a revisit's
        next round is told why), then end the stage: the session pauses ``anomaly``."""
        self._finish("failed", TurnWatch.summary(anomaly), code="ACODE-EXEC-011")
        raise self.watch.pausing(anomaly)

    def _temperature(self) -> float:
        return float(getattr(self.ctx.request.settings.provider, "temperature", 0.0))

    def _ask(self, request: ModelRequest, started: float, timeout: float) -> ModelAnswer | None:
        """The model's answer, or None when the step's time ran out while it was answering
        (the call is abandoned: an HTTP request is closed). A cancelled stage still raises.
        The deadline fits a normal call at the model's measured pace, and spares a call still
        at work, within a limit (:func:`actors.stages.request.callwatch.turn_deadline`)."""
        stage_end = self.ctx.started + self.ctx.request.settings.stage_timeouts.get("executor", 300.0) - _STAGE_MARGIN
        deadline, limit = turn_deadline(started, timeout, time.monotonic(), self.ctx.model.expected_s(request),
                                        ceiling=stage_end)
        try:
            return self.ctx.model.complete(request, deadline=deadline, limit=limit)
        except DeadlinePassed:
            return None

    def _asked(self, request: ModelRequest, started: float, timeout: float, turn: int) -> ModelAnswer | Outcome | None:
        """:meth:`_ask`, with an answer that ran on to the token limit as the end of the try
        (ACODE-LLM-012): a small model looping (a line repeated, a whole file twice) is not
        worth correcting in the same window, nor worth a pause; the next try starts from a
        fresh one that says so (seen on Qwen2.5-Coder-1.5B: the session paused on it)."""
        try:
            return self._ask(request, started, timeout)
        except ModelError as exc:
            if exc.code != "ACODE-LLM-012":
                raise
            return Outcome("failed", f"turn {turn}'s answer ran on to the token limit without ending "
                                     "(ACODE-LLM-012); answer with what the step asks and nothing around it",
                           code="ACODE-LLM-012")

    def _turn(self, turn: int, answer: ModelAnswer, calls: int, correction: str) -> None:
        """The turn as an event (``acode run`` shows each one)."""
        request = self.ctx.request
        task, step = self.task.label, self.step.label
        usage = answer.usage
        provider, model = model_of(request.settings.provider, "executor")
        timing = self.ctx.model.last_call
        self.ctx.commit([TurnAnswered(
            id=stable_id(request.session_id, "executor", request.visit, task, step,
                         f"turn{turn}" if self.attempt == 1 else f"try{self.attempt}/turn{turn}"),
            session_id=request.session_id, at=time.time(), visit=request.visit, task=task, step=step, turn=turn,
            tool_calls=calls, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            estimated=usage.estimated, finish_reason=answer.finish_reason, correction=correction[:500],
            provider=provider, model=model, duration_ms=timing.duration_ms, first_token_ms=timing.first_token_ms,
            replayed=timing.replayed)])

    def _finish(self, status: StepStatus, summary: str, *, code: str = "") -> StepRecord:
        return record_step(self.ctx, self.task, self.step, status, summary, self.turns, self.calls, self.files, code,
                           streak=self.project.streak.turns)


def step_timed_out(timeout: float, started: float, turn: int, turns: int) -> Outcome:
    """The failed try of a step past ``step_timeout_s`` before its turn ``turn`` (of
    ``turns``), begun at ``started`` (monotonic), with what to raise (ACODE-EXEC-006)."""
    elapsed = time.monotonic() - started
    return Outcome("failed", f"the step took more than {timeout:g}s ({elapsed:.1f}s, turn {turn}) (ACODE-EXEC-006); "
                              + raise_step_timeout(timeout, elapsed, turn - 1, turns), code="ACODE-EXEC-006")


def raise_step_timeout(timeout: float, elapsed: float, done: int, turns: int) -> str:
    """What to raise after ACODE-EXEC-006: when whole turns were answered, a value that fits
    a few more at the pace they took (at least twice the setting, rounded up to 10 s)."""
    if not done:
        return "raise step_timeout_seconds"
    per_turn = elapsed / done
    needed = -(-max(2 * timeout, per_turn * min(turns, _TURNS_TO_FIT)) // 10) * 10
    return (f"its turns took {per_turn:.0f}s each at this model's pace: raise step_timeout_seconds to "
            f"{needed:g} or more (executor.step_timeout_seconds, or acode resume --step-timeout {needed:g})")


def retry_note(attempt: int, limit: int, failure: Outcome | None, earlier: StepRecord | None, *,
               tools: bool = True) -> str:
    """What the model of a later try (or of a new round) is told about the failure before it
    (``tools``: the tool loop, where step_failed may end the step)."""
    if failure is not None:
        give_up = "; call step_failed with the reason if the step cannot be done" if tools else ""
        return (f"\n\nThis is try {attempt} of {limit} of this step, in a fresh conversation. Try {attempt - 1} "
                f"failed: {failure.summary}. The workspace keeps what earlier tries wrote. Do not repeat what "
                f"failed: take another approach{give_up}.")
    if earlier is not None:
        return (f"\n\nAn earlier round of this step failed: {earlier.summary}. Take another approach; the "
                "workspace keeps what was written.")
    return ""


def _base_key(session_id: str, visit: int, task: PlanTask, step: PlanStep) -> str:
    """``<session>:e<visit>:<task>/<step>``; long labels are hashed so keys stay short."""
    where = f"{task.label}/{step.label}"
    if len(where) > 40:
        where = hashlib.sha256(where.encode()).hexdigest()[:24]
    return f"{session_id}:e{visit}:{where}"


def record_step(ctx: StageContext, task: PlanTask, step: PlanStep, status: StepStatus, summary: str, turns: int,
                calls: int, files: list[str], code: str = "", *, streak: list[Observation] | None = None) -> StepRecord:
    """The step's record (``streak``: the visit's run of failed turns as it ended, which a
    replay that skips the step goes on from)."""
    request = ctx.request
    record = StepRecord(session_id=request.session_id, visit=request.visit, task=task.label, step=step.label,
                        status=status, summary=summary, turns=turns, tool_calls=calls,
                        files_changed=files, at=time.time(), code=code, streak=list(streak or []))
    ctx.commit([StepFinished(id=stable_id(request.session_id, "executor", request.visit, task.label, step.label,
                                          "finished"),
                             session_id=request.session_id, at=record.at, visit=request.visit, task=task.label,
                             step=step.label, status=status, summary=summary)],
               step=record, wait=False)  # the next step's turn overlaps its round trip
    return record
