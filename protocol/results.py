"""What stages, tools and models answer: the contracts later issues and users rely on.

- :class:`VerifierAnswer` and :class:`ReviewerAnswer` are the JSON the verifier's and the
  reviewer's models return (and what those stages report).
- :class:`ToolResult` is what the sandbox returns for one tool call.
- :class:`ModelAnswer` is one recorded model answer (text and/or tool calls).
- :class:`StageResult` is what a stage actor returns to the coordinator.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from protocol.errors import ErrorInfo
from protocol.plan import TaskPlan
from protocol.stages import Stage, StepStatus
from protocol.tools import Risk

__all__ = [
    "CriterionVerdict",
    "ExecutionReport",
    "ModelAnswer",
    "ModelToolCall",
    "ReviewIssue",
    "ReviewerAnswer",
    "StageMetrics",
    "StageResult",
    "StepRecord",
    "ToolResult",
    "Usage",
    "VerifierAnswer",
]

Count = Annotated[int, msgspec.Meta(ge=0, le=10**12)]


class _Wire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class CriterionVerdict(_Wire, frozen=True, kw_only=True):
    label: str
    passed: bool
    evidence: str = ""


class VerifierAnswer(_Wire, frozen=True, kw_only=True):
    passed: bool
    summary: str = ""
    criteria: list[CriterionVerdict] = []


class ReviewIssue(_Wire, frozen=True, kw_only=True):
    criterion: str = ""
    problem: str
    suggestion: str = ""


class ReviewerAnswer(_Wire, frozen=True, kw_only=True):
    decision: Literal["approve", "replan"]
    summary: str = ""
    issues: list[ReviewIssue] = []


class ToolResult(_Wire, frozen=True, kw_only=True):
    """One tool call's outcome. ``outcome == "unknown"`` means an earlier run of the same
    call was interrupted after its intent was journaled: check the workspace, do not
    blindly repeat it."""

    key: str
    tool: str
    ok: bool
    output: str = ""
    error: ErrorInfo | None = None
    exit_code: int | None = None
    duration_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    outcome: Literal["done", "unknown"] = "done"
    replayed: bool = False
    risk: Risk = "read"
    path: str = ""
    isolation: str = ""  # run_terminal: the isolation the command ran under (see actors/sandbox/isolation.py)


class Usage(_Wire, frozen=True, kw_only=True):
    prompt_tokens: Count = 0
    completion_tokens: Count = 0


class ModelToolCall(_Wire, frozen=True, kw_only=True):
    """One tool call of a model. ``invalid_arguments`` holds the raw text when the model's
    arguments were not a JSON object (``arguments`` is then empty); the executor sends the
    model a correction instead of running the call."""

    id: str
    name: str
    arguments: dict[str, Any] = {}
    invalid_arguments: str = ""


class ModelAnswer(_Wire, frozen=True, kw_only=True):
    content: str = ""
    tool_calls: list[ModelToolCall] = []
    usage: Usage = Usage()


class StepRecord(_Wire, frozen=True, kw_only=True):
    """A finished step of one executor visit: the executor skips it when it resumes.
    ``blocked``: not run, because a step it depends on failed. ``code`` is a failed step's
    error code (ACODE-EXEC-003 when it ran out of turns)."""

    session_id: str
    visit: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    task: str
    step: str
    status: StepStatus
    summary: str = ""
    turns: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 0
    tool_calls: Count = 0
    files_changed: list[str] = []
    at: float = 0.0
    code: str = ""


class ExecutionReport(_Wire, frozen=True, kw_only=True):
    steps: list[StepRecord] = []
    files_changed: list[str] = []


class StageMetrics(_Wire, frozen=True, kw_only=True):
    duration_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    model_calls: Count = 0
    replayed_model_calls: Count = 0
    tool_calls: Count = 0
    tokens_in: Count = 0
    tokens_out: Count = 0


class StageResult(_Wire, frozen=True, kw_only=True):
    """A stage's answer to ``RunStage``; ``(session_id, stage, visit, attempt)`` fences it."""

    session_id: str
    stage: Stage
    visit: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    ok: bool
    summary: str = ""
    plan: TaskPlan | None = None
    execution: ExecutionReport | None = None
    verification: VerifierAnswer | None = None
    review: ReviewerAnswer | None = None
    error: ErrorInfo | None = None
    metrics: StageMetrics = StageMetrics()
