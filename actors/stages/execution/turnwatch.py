"""Whether a step's model stays on the rails: the anomaly rung of the executor's loop (issue 28 §2).

One :class:`TurnWatch` per step (:class:`actors.stages.execution.step.Step` and the file style make
it). After each model turn the loop hands it what the turn did (:meth:`TurnWatch.turn`): the
answer's token counts, the correction it got when nothing of it could run
(:func:`~actors.stages.execution.anomalies.invalid_seen`), each call's outcome
(:func:`~actors.stages.execution.anomalies.call_seen`, :func:`refused_seen`, :func:`control_seen`),
with a write's content hash before it where the step read the file whole. It keeps them, for
every try of the step, as :class:`~protocol.policy.anomalies.Observation`s and asks
:func:`~actors.stages.execution.anomalies.latest` what the turn shows: every kind but the error streak
over the step's turns, the error streak over the executor visit's run of failed turns
(:class:`Streak`, shared by the visit's steps and carried by each step record, so a replay
that skips finished steps goes on from the same run).

Each detection is an ``anomaly_detected`` event (stable id: session, visit, step, try, turn,
kind) and climbs the ladder of its kind in this step (:func:`~actors.stages.execution.anomalies.respond`):
a note that goes to the model with its next turn (the evidence fenced: it quotes tool output),
then a fresh window (the try ends with ACODE-EXEC-013 and the step's next try begins; on the
last try there is none, so it pauses), then a pause: the step is recorded failed with
ACODE-EXEC-011 and :class:`~protocol.errors.AnomalyPause` ends the stage; the session pauses
``anomaly`` (exit 25). A turn that ends the try anyway (step_complete, step_failed, the third
identical call) is kept but not answered, and so is a turn of a try whose every turn so far
made no tool call: that is the server ignoring the tools (ACODE-LLM-015), not a model to note.

Everything here follows from recorded answers and journaled results (never a clock or
whether an answer was replayed), so a replay sends the same notes and ends the same tries.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from typing import NamedTuple

from actors.stages.execution.anomalies import (
    call_seen,
    excerpt,
    failed_turn,
    fingerprint,
    invalid_seen,
    latest,
    note_text,
    respond,
)
from actors.stages.request.context import StageContext
from protocol.basics.ids import stable_id
from protocol.errors import AnomalyPause
from protocol.plans.results import ModelAnswer, ModelToolCall, ToolResult
from protocol.policy.anomalies import Anomaly, CallSeen, Kind, Observation, Response
from protocol.sessions.events import AnomalyDetected, Event

__all__ = ["Streak", "TurnWatch", "Watched", "control_seen", "invalid_text", "pause_error", "refused_seen",
           "unnumbered"]

_NUMBERED = re.compile(r" *(\d+)\t")
_CODE = re.compile(r"\((ACODE-[A-Z]+-\d{3})\)")


def unnumbered(shown: str) -> str | None:
    """A file's text from read_file's numbered lines, or None when ``shown`` is not the
    whole file so numbered (cut, empty, read from an offset, an error's text)."""
    lines = shown.split("\n")
    ends = shown.endswith("\n")
    if ends:
        lines.pop()
    out = []
    for expected, line in enumerate(lines, start=1):
        found = _NUMBERED.match(line)
        if found is None or int(found.group(1)) != expected:
            return None
        out.append(line[found.end():])
    return "\n".join(out) + ("\n" if ends else "")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def refused_seen(call: ModelToolCall, problem: str) -> CallSeen:
    """A call of a turn that could not run (invalid arguments, an unknown tool) beside others that could."""
    code = _CODE.search(problem)
    args = hashlib.sha256(json.dumps(call.arguments, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return CallSeen(name=call.name, args=args, outcome="error", code=code.group(1) if code else "refused",
                    result=fingerprint(problem), said=excerpt(problem))


def control_seen(call: ModelToolCall) -> CallSeen:
    """step_complete or step_failed (the detectors pass over them)."""
    return CallSeen(name=call.name)


def pause_error(label: str, summary: str, session_id: str) -> AnomalyPause:
    """What ends the stage when step ``label`` pauses on an anomaly (``summary``: its record's)."""
    return AnomalyPause(f"step {label}: {summary}; it was sent a note, then given a fresh window. Look at the "
                        f"evidence (`acode show {session_id}`), then `acode resume {session_id}` runs the step afresh")


class Streak:
    """The executor visit's run of failed turns (every call failed, or nothing could run),
    across its steps: the error streak's turns since it last fired or was broken."""

    def __init__(self) -> None:
        self.turns: list[Observation] = []


class Watched(NamedTuple):
    """What a turn's detections ask of the loop: notes for the model's next turn, the try
    ended (``fresh``: the anomaly behind it), or the session paused (``pause``: the step
    records it, then raises :meth:`TurnWatch.pausing`)."""

    notes: list[str]
    fresh: Anomaly | None = None
    pause: Anomaly | None = None


class TurnWatch:
    """One step's turns, all tries, and the responses made so far to each kind of anomaly."""

    def __init__(self, ctx: StageContext, task: str, step: str, streak: Streak, *, tools: bool):
        self.ctx = ctx
        self.task = task
        self.step = step
        self.label = f"{task}/{step}"
        self.streak = streak
        self.tools = tools  # the tool loop (step_failed exists), not the file style
        self.thresholds = ctx.request.settings.anomalies
        self.seen: list[Observation] = []
        self.history: dict[Kind, list[Response]] = {}
        self.before: dict[str, str] = {}  # the current try: path -> sha of the file as the try read it whole
        self.calls: list[CallSeen] = []  # the current turn's, so far

    def start_try(self, files: Sequence[tuple[str, str | None]]) -> None:
        """A new try, which read ``files`` (read_file's numbered text; None: no such file)."""
        self.before = {}
        for path, text in files:
            plain = None if text is None else unnumbered(text)
            if plain is not None:
                self.before[path.removeprefix("./")] = _sha(plain)

    # -- what the turn did -----------------------------------------------------------------

    def ran(self, call: ModelToolCall, result: ToolResult | None, *, before: str | None = None) -> None:
        """A call that ran (``result``) or was denied (None); ``before``: the written file's
        content hash before it, when the caller knows it (else the try's first read of it)."""
        if before is None and result is not None and result.ok and call.name in ("write_file", "modify_file"):
            before = self.before.pop(result.path.removeprefix("./"), "")  # after its first write, the history knows
        self.calls.append(call_seen(call, result, before=before or ""))

    def refused(self, call: ModelToolCall, problem: str) -> None:
        self.calls.append(refused_seen(call, problem))

    def control(self, call: ModelToolCall) -> None:
        self.calls.append(control_seen(call))

    def turn(self, turn: int, attempt: int, limit: int, answer: ModelAnswer, *, invalid: tuple[str, str] | None = None,
             answered: bool = True) -> Watched:
        """The turn is over: keep what it did and answer what it shows. ``invalid``: (the
        answer, the correction it got) when nothing of it could run; ``answered``: False
        when the turn ends the try anyway, or must not be answered (see the module)."""
        seen = Observation(step=self.label, attempt=attempt, turn=turn, tokens_in=answer.usage.prompt_tokens,
                           tokens_out=answer.usage.completion_tokens,
                           invalid=None if invalid is None else invalid_seen(*invalid),
                           calls=() if invalid is not None else tuple(self.calls))
        self.calls = []
        self.seen.append(seen)
        run = self.streak.turns
        run[:] = [*run, seen] if failed_turn(seen) else []
        streak = [a for a in latest(run, self.thresholds) if a.kind == "error_streak"]
        if streak:
            run.clear()  # it fired: its turns are spent
        if not answered:
            return Watched([])
        found = [a for a in latest(self.seen, self.thresholds) if a.kind != "error_streak"] + streak
        return self._answer(found, turn, attempt, limit)

    # -- the ladder ------------------------------------------------------------------------

    def _answer(self, found: list[Anomaly], turn: int, attempt: int, limit: int) -> Watched:
        notes: list[str] = []
        fresh: Anomaly | None = None
        pause: Anomaly | None = None
        request = self.ctx.request
        events: list[Event] = []
        for index, anomaly in enumerate(found):
            history = self.history.setdefault(anomaly.kind, [])
            response = respond(history)
            if response == "fresh_window" and attempt >= limit:
                response = "pause"  # no try left to start afresh
            history.append(response)
            events.append(AnomalyDetected(
                id=stable_id(request.session_id, "anomaly", request.visit, self.label, f"try{attempt}", f"turn{turn}",
                             anomaly.kind, index),
                session_id=request.session_id, at=time.time(), kind=anomaly.kind, evidence=anomaly.evidence[:4_000],
                score=anomaly.score, response=response, visit=request.visit, task=self.task, step=self.step,
                turns=list(anomaly.turns)))
            self.ctx.log.info("anomaly_detected", step=self.label, kind=anomaly.kind, score=anomaly.score,
                              response=response)
            if response == "note":
                notes.append(note_text(anomaly, tools=self.tools, wrap=self.ctx.fence.wrap))
            elif response == "fresh_window":
                fresh = fresh or anomaly
            else:
                pause = pause or anomaly
        if events:
            self.ctx.commit(events)
        return Watched(notes, fresh, pause)

    def pausing(self, anomaly: Anomaly) -> AnomalyPause:
        """What ends the stage on ``anomaly`` (the step records it: :meth:`summary`)."""
        return pause_error(self.label, self.summary(anomaly), self.ctx.request.session_id)

    @staticmethod
    def summary(anomaly: Anomaly) -> str:
        """A step record's summary, and a try's failure, for ``anomaly``."""
        return f"the model went off the rails ({anomaly.kind}, score {anomaly.score}): {anomaly.evidence}"


def invalid_text(answer: ModelAnswer) -> str:
    """An answer as a whole (its text and its calls), for :func:`~actors.stages.execution.anomalies.invalid_seen`."""
    return answer.content + json.dumps([[c.name, c.arguments, c.invalid_arguments] for c in answer.tool_calls],
                                       sort_keys=True, default=str)

