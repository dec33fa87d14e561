"""The escalation ladder's top rungs: what a failed stage means for the session (no I/O).

A stage that fails after its own retries (a step's tries in the executor, the planner's
corrections, the provider's retries of a transient HTTP error) reaches the coordinator as
an error code. :data:`RULES` is the ONE table that maps a code to the session's pause:
its kind, the exit code ``acode run`` ends with, and whether a stage retry (the stage
entered again, afresh) can help. A code not in the table pauses as ``escalation``, exit 22.
Only :data:`UNRECOVERABLE` codes end a session as ``failed``.

Also here, because the machine and its tests share them: the fix line a model error
carries (:func:`fix_of`), the exact command that continues a pause (:func:`command`), the
fingerprint of a verify failure that loop detection compares (:func:`fingerprint`), and the
``verify_repeat`` anomaly's part of it: the last :data:`VERIFY_KEPT` failed verifications a
snapshot keeps (:func:`verifications`: the failed criteria, and whether the executor visit
before wrote files), the detection at the latest (:func:`repeated`) and the note it adds to
the executor's feedback (:func:`noted`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import msgspec

from actors.stages.execution.anomalies import ADVICE, verify_repeat
from protocol.basics import volatile
from protocol.plans.stages import PauseKind, ResumeMode, Stage
from protocol.policy.anomalies import Anomaly, AnomalyThresholds, VerifySeen
from protocol.sessions.session import Feedback, FeedbackItem, SessionSnapshot

__all__ = ["DEFAULT_RULE", "FIX_LINES", "RULES", "UNRECOVERABLE", "VERIFY_KEPT", "Rule", "command", "fingerprint",
           "fix_of", "normalise", "noted", "repeated", "rule_for", "verifications"]

VERIFY_KEPT = 8  # failed verifications a snapshot keeps for the verify_repeat anomaly


@dataclass(frozen=True)
class Rule:
    kind: PauseKind
    exit_code: int = 22
    stage_retry: bool = False  # the same stage, entered afresh, may well succeed
    resume: ResumeMode = "revisit"  # how `acode resume` goes on (see protocol.plans.stages.ResumeMode)


_UNAVAILABLE = Rule("model_unavailable", resume="retry")  # what was recorded is replayed, the rest asked anew
_ANSWER = Rule("escalation", stage_retry=True)  # a model answer that could not be used: ask again afresh
_INVALID_PLAN = Rule("invalid_plan")

RULES: dict[str, Rule] = {
    # the model server: unreachable, model missing, misconfigured (fix it, then resume)
    "ACODE-LLM-005": _UNAVAILABLE,
    "ACODE-LLM-006": _UNAVAILABLE,
    "ACODE-LLM-014": _UNAVAILABLE,  # permanent server configuration error (e.g. llama.cpp without --jinja)
    "ACODE-LLM-015": _UNAVAILABLE,  # the server ignores tools
    # the model's answers
    "ACODE-LLM-003": _ANSWER,  # an answer that did not decode, after the corrections
    "ACODE-LLM-007": Rule("escalation"),  # the server refused the request (a 4xx): the same request fails again
    "ACODE-LLM-008": _ANSWER,  # timed out after the provider's retries
    "ACODE-LLM-010": _ANSWER,  # an answer that could not be read
    "ACODE-LLM-012": Rule("escalation"),  # answer cut at the token limit: raise it or use a larger model
    "ACODE-LLM-013": Rule("escalation"),  # the prompt exceeds the model's context
    "ACODE-ORCH-005": Rule("escalation"),  # a prompt cannot fit its stage's token budget: raise num_ctx, resume
    # the planner's plan
    "ACODE-PLAN-003": _INVALID_PLAN,
    "ACODE-PLAN-004": _INVALID_PLAN,
    "ACODE-PLAN-005": _INVALID_PLAN,
    # a step's outcome (seed 004's exit codes; each step already had its tries)
    "ACODE-EXEC-001": Rule("escalation", 30),
    "ACODE-EXEC-002": Rule("escalation", 30),
    "ACODE-EXEC-007": Rule("escalation", 30),
    "ACODE-EXEC-008": Rule("escalation", 30),
    "ACODE-EXEC-013": Rule("escalation", 30),  # a try ended on an anomaly (the last try pauses instead: EXEC-011)
    "ACODE-EXEC-003": Rule("escalation", 31),
    "ACODE-EXEC-004": Rule("escalation", 32),
    "ACODE-EXEC-006": Rule("escalation", 34),
    "ACODE-EXEC-005": Rule("escalation", 33),  # the step could not go on without a call the user denied
    # the workspace's changes cannot be computed against the baseline (.git gone or replaced, the
    # baseline unreadable): never verified or reviewed blind; fix it, then the stage runs afresh
    "ACODE-ORCH-012": Rule("escalation", resume="revisit"),
    # a command changed git's config or hooks, .agent or acode's config (restored): a human looks first
    "ACODE-SBX-021": Rule("escalation", 32),
    # a session budget is spent (protocol.policy.budget): `acode resume --budget-…` extends it, and the stage replays
    # up to the call that would have crossed the limit and makes it
    "ACODE-ORCH-013": Rule("budget_exhausted", 24, resume="retry"),
    # a hook of the user's (protocol.policy.hooks): paused the session; restarted the stage (afresh, within its
    # retry limit); an abort (ACODE-ORCH-015) ends the session as cancelled (machine._escalate)
    "ACODE-ORCH-014": Rule("hook", 22, resume="retry"),
    "ACODE-ORCH-016": Rule("escalation", stage_retry=True),
    # the model went off the rails past a note and a fresh window (protocol.policy.anomalies): a human looks at the
    # evidence; resumed, the executor runs the step afresh (its earlier round's record says what happened)
    "ACODE-EXEC-011": Rule("anomaly", 25, resume="revisit"),
}
FIX_LINES = ("ACODE-LLM-", "ACODE-ORCH-012")  # codes whose message ends with the fix (see fix_of)
DEFAULT_RULE = Rule("escalation")
UNRECOVERABLE: frozenset[str] = frozenset({"ACODE-ORCH-009"})  # the workspace is gone


def rule_for(code: str) -> Rule:
    return RULES.get(code, DEFAULT_RULE)


def fix_of(message: str) -> str:
    """The fix a model error's message ends with (``...; start it with `ollama serve`, ...``)."""
    head, sep, tail = message.rpartition("; ")
    return tail.strip() if sep and head else ""


def command(session_id: str, kind: PauseKind, *, stage: Stage | None = None, code: str = "",
            timeout_s: float = 0.0, max_turns: int = 0, step_timeout_s: float = 0.0, message: str = "") -> str:
    """The exact command that continues a pause. Where a limit stopped the session it
    suggests a higher one; the human decides (the orchestrator never raises a limit)."""
    resume = f"acode resume {session_id}"
    if kind == "budget_exhausted":  # the spent limits, as the stage named them: half as much again each
        flags = dict.fromkeys(re.findall(r"--budget-[a-z-]+", message))
        return " ".join([resume, *(f"{flag} +50%" for flag in flags)])
    if kind == "needs_input":
        return f"acode answer {session_id}"
    if kind == "plan_review":
        return f"acode approve {session_id}"  # or `acode replan SESSION "feedback"` (the pause's message says so)
    if kind == "awaiting_approval":
        return f"acode approve {session_id}"
    if kind == "actor_failed":
        return "acode down && acode up --detach"  # the session resumes by itself
    if kind == "stage_timeout" and stage is not None and timeout_s:
        return f"{resume} --{stage}-timeout {timeout_s * 2:g}"
    if code == "ACODE-EXEC-003" and max_turns:
        return f"{resume} --max-turns {max_turns * 2}"
    if code == "ACODE-EXEC-006" and step_timeout_s:
        return f"{resume} --step-timeout {step_timeout_s * 2:g}"
    return resume


def normalise(text: str) -> str:
    """``text`` without timestamps, temp-dir paths, durations, addresses and pids, spaces collapsed."""
    return volatile.normalise(text)


def fingerprint(failures: list[tuple[str, str]]) -> str:
    """A verify failure's fingerprint: its failing criteria and their normalised evidence."""
    text = "\n".join(f"{label}\x00{normalise(evidence)}" for label, evidence in sorted(failures))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def verifications(snap: SessionSnapshot, visit: int, failed: list[str]) -> list[VerifySeen]:
    """The snapshot's last failed verifications with this one (verifier ``visit``, its
    ``failed`` criteria): changed when the executor visit before it wrote files and no
    earlier one in the list followed that visit."""
    last = snap.last_result
    after = last.visit if last is not None and last.stage == "executor" else 0
    wrote = bool(after) and last is not None and last.execution is not None and any(
        r.files_changed for r in last.execution.steps if r.visit == after)
    before = snap.verifications[-1] if snap.verifications else None
    seen = VerifySeen(attempt=visit, failed=failed, changed=wrote and (before is None or before.after != after),
                      after=after)
    return [*snap.verifications, seen][-VERIFY_KEPT:]


def repeated(kept: list[VerifySeen], visit: int, thresholds: AnomalyThresholds) -> Anomaly | None:
    """The ``verify_repeat`` anomaly that fires at verification ``visit`` (the last of ``kept``), or None."""
    found = verify_repeat([(v.attempt, v.failed, v.changed) for v in kept], thresholds)
    return found[-1] if found and found[-1].turns[-1] == visit else None


def noted(feedback: Feedback, anomaly: Anomaly) -> Feedback:
    """The executor's ``feedback`` with the note on ``anomaly`` (its evidence fenced as an item's detail is)."""
    note = FeedbackItem(label="anomaly", problem=f"acode noticed {anomaly.kind}: {ADVICE[anomaly.kind]}",
                        detail=anomaly.evidence)
    return msgspec.structs.replace(feedback, items=[*feedback.items, note])
