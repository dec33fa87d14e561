"""The vocabulary of the pipeline: stage names, cycle kinds, session statuses, pause kinds."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CYCLE_KINDS",
    "STAGES",
    "TERMINAL",
    "CycleKind",
    "PauseKind",
    "ResumeMode",
    "SessionStatus",
    "Stage",
    "StepStatus",
]

Stage = Literal["planner", "executor", "verifier", "reviewer"]
STAGES: tuple[Stage, ...] = ("planner", "executor", "verifier", "reviewer")
CycleKind = Literal["verify", "review"]  # verifier -> executor, reviewer -> planner
CYCLE_KINDS: tuple[CycleKind, ...] = ("verify", "review")
SessionStatus = Literal["running", "paused", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
StepStatus = Literal["completed", "failed", "blocked"]  # blocked: not run, a step it depends on failed
PauseKind = Literal["cycle_limit", "stage_timeout", "needs_input", "actor_failed", "escalation",
                    "model_unavailable", "invalid_plan", "plan_review", "user", "awaiting_approval",
                    "budget_exhausted", "hook", "anomaly"]
# How a paused session continues when a human resumes it (see actors.coordinator.human.resume):
# retry the same attempt's work (what was recorded is replayed), revisit the stage afresh (the
# executor keeps the steps it completed), make the cycle transition the pause stopped, or plan
# again with the user's answers.
ResumeMode = Literal["retry", "revisit", "cycle", "answers"]
