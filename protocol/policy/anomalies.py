"""A model gone off the rails, as acode records it (issue 28 §2): the kinds of anomaly, the
thresholds that say when each is found, what one model turn showed, what was found, and a
session's health.

The detectors themselves are :mod:`actors.stages.execution.anomalies` (the executor's turns) and the
coordinator's verification check (``verify_repeat``); these are the types they share with
the wire and the configuration:

- :class:`AnomalyThresholds`: config ``anomalies:``, stored with a session
  (``SessionSettings.anomalies``); a workspace config may only make them stricter.
- :class:`Observation` (with :class:`CallSeen` and :class:`Invalid`): one model turn, built
  from recorded answers and journaled results only, so a replay sees the same. A step
  record carries the trailing run of failed turns (``StepRecord.streak``), so the error
  streak across steps is the same when a replay skips the steps already finished.
- :class:`Anomaly`: what was found (an ``anomaly_detected`` event's kind, evidence, score).
- :class:`VerifySeen`: one failed verification, kept in the session's snapshot for
  ``verify_repeat``.
- :func:`health`: a session's trouble as one figure, 0-100 (:mod:`protocol.sessions.health` reads it
  from the session's events).

The response to a detection climbs a ladder per kind (and per step, in the executor): a note
to the model, then a fresh window, then a pause ``anomaly`` (exit 25).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Literal, Protocol, get_args

import msgspec

__all__ = ["BASE_SCORE", "KINDS", "RESPONSES", "Anomaly", "AnomalyThresholds", "CallSeen", "Invalid", "Kind",
           "Observation", "Response", "VerifySeen", "health"]

Kind = Literal["repeated_invalid", "repeated_error", "edit_undone", "no_progress", "token_burn", "output_spike",
               "error_streak", "verify_repeat"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Response = Literal["note", "fresh_window", "pause"]
RESPONSES: tuple[Response, ...] = get_args(Response)

#: 20-30 what costs more than it should; 40-50 no way forward found; 60 the model not reading what it
#: is told; 70 work undone
BASE_SCORE: dict[Kind, int] = {"output_spike": 20, "token_burn": 30, "no_progress": 40, "error_streak": 50,
                               "verify_repeat": 50, "repeated_invalid": 60, "repeated_error": 60, "edit_undone": 70}

_Turns = Annotated[int, msgspec.Meta(ge=1, le=1_000)]
_Twice = Annotated[int, msgspec.Meta(ge=2, le=1_000)]
_Times = Annotated[float, msgspec.Meta(ge=1.0, le=1_000.0)]
_Tokens = Annotated[int, msgspec.Meta(ge=0, le=100_000_000)]
_Score = Annotated[int, msgspec.Meta(ge=0, le=100)]


class AnomalyThresholds(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """When each detection fires (config ``anomalies:``); the defaults are quiet on a healthy
    run. Lower is stricter for every one of them."""

    repeated_invalid: _Turns = 3  # the same unusable answer (or correction) this many times in one step
    repeated_error: _Turns = 3  # one tool, the same error, this many times in one step, whatever its arguments
    edits_undone: _Turns = 1  # a file's content back to an earlier hash this many times
    no_progress: _Turns = 6  # turns in a row without new information
    burn_turns: _Twice = 4  # turns in a row of one try without new information, each costing more tokens,
    burn_growth: _Times = 1.5  # ... the last this many times the first (a window grows a little anyway)
    spike_factor: _Times = 4.0  # a turn's output tokens above this many times the median of the turns before,
    spike_floor: _Tokens = 400  # ... and above this many tokens (short turns never spike),
    spike_history: _Turns = 3  # ... with at least this many earlier turns to take the median of
    error_streak: _Turns = 5  # turns in a row, across steps, in which every call failed or none could run
    verify_repeats: _Twice = 2  # verifications failing the same criteria, with changes between each and the next


class CallSeen(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One tool call of a turn, as the detectors see it (``actors.stages.execution.anomalies.call_seen`` builds it)."""

    name: str
    target: str = ""  # the path of a file tool ('' for others)
    args: str = ""  # fingerprint of the arguments, exact
    outcome: Literal["ok", "error", "denied"] = "ok"  # denied: a human or the policy said no (neither)
    code: str = ""  # an error's code, or ``exit N`` of a failed command
    result: str = ""  # fingerprint of the normalised output (ok) or error text (error)
    said: str = ""  # an error: the telling part of its text, for evidence
    sha: str = ""  # write_file/modify_file: sha256 of the file's content after it ('' unknown)
    before: str = ""  # ... and before it ('' unknown, or no file)


class Invalid(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An answer nothing of which could run (``actors.stages.execution.anomalies.invalid_seen`` builds it)."""

    answer: str  # fingerprint of the answer, loosely normalised (whitespace, numbers, case)
    correction: str  # fingerprint of the correction it got, loosely normalised
    said: str = ""  # the correction's head, for evidence


class Observation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One model turn: what the loop knows once the turn's calls have run."""

    step: str  # ``<task>/<step>``: repeats are counted per step, streaks across steps
    attempt: _Turns = 1  # the step's try: a fresh window starts a new one
    turn: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]  # the caller's number for it (Anomaly.turns names these)
    tokens_in: _Tokens = 0  # the prompt's tokens (0: not known)
    tokens_out: _Tokens = 0  # the answer's tokens (0: not known)
    invalid: Invalid | None = None  # the answer got a correction instead of running (then ``calls`` is empty)
    calls: tuple[CallSeen, ...] = ()  # its reads and writes among them (read_file's path; a write's sha after)


class Anomaly(msgspec.Struct, frozen=True, kw_only=True):
    """What was found: an ``anomaly_detected`` event's kind, evidence and score."""

    kind: Kind
    evidence: str  # what was seen, with its values: file, hashes, turns, the error's head
    turns: tuple[int, ...]  # the turns involved, in order; the last is where it fired (attempts: verify_repeat)
    score: _Score
    step: str = ""  # the step of the turn where it fired ('' for verify_repeat)


class VerifySeen(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A failed verification, as ``verify_repeat`` reads it (the session's snapshot keeps the last few)."""

    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)]  # the verifier's visit
    failed: list[str] = []  # the failed criteria's labels
    changed: bool = False  # the workspace changed since the verification before (an executor visit wrote files)
    after: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 0  # the executor visit it followed (0: none)


class _Scored(Protocol):
    @property
    def score(self) -> int: ...


def health(anomalies: Iterable[_Scored], retries: int, budget_fraction_used: float, escalations: int) -> int:
    """A session's health, 0-100: 100 less a fifth of each anomaly's score (at most 20
    each), 5 for each retry (a step's or a stage's), 15 for each escalation, and up to 30
    for the budget (none up to half of it used, 30 at all of it), never below 0. More
    trouble never raises it."""
    penalty = sum(min(max(anomaly.score, 0), 100) // 5 for anomaly in anomalies)
    penalty += 5 * max(retries, 0) + 15 * max(escalations, 0)
    used = 1.0 if math.isnan(budget_fraction_used) else min(max(budget_fraction_used, 0.0), 1.0)
    penalty += int(60 * max(used - 0.5, 0.0))
    return max(0, 100 - penalty)
