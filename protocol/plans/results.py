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

from protocol.calls.autonomy import ApprovalRequest
from protocol.calls.tools import Risk
from protocol.errors import ErrorInfo
from protocol.plans.plan import TaskPlan
from protocol.plans.stages import Stage, StepStatus
from protocol.policy.anomalies import Observation

__all__ = [
    "CHANGE_STATUS",
    "CriterionVerdict",
    "ExecutionReport",
    "FileChange",
    "ModelAnswer",
    "ModelToolCall",
    "ReviewIssue",
    "Requirement",
    "ReviewerAnswer",
    "Rework",
    "StageMetrics",
    "StageResult",
    "StepRecord",
    "ToolResult",
    "Usage",
    "VerifierAnswer",
    "WorkspaceChanges",
]

Count = Annotated[int, msgspec.Meta(ge=0, le=10**12)]
Millis = Annotated[float, msgspec.Meta(ge=0, le=10**12)]


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
    """The reviewer's decision: ``approve`` ends the session; ``request_changes`` sends its
    issues to the executor (the approach is right, details are not); ``replan`` sends them
    to the planner (the approach is wrong)."""

    decision: Literal["approve", "request_changes", "replan"]
    summary: str = ""
    issues: list[ReviewIssue] = []


ChangeStatus = Literal["added", "modified", "deleted", "renamed", "type changed"]
#: git's ``--name-status`` letters, as the diff's header shows them, and what each says
CHANGE_STATUS: dict[str, ChangeStatus] = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed",
                                          "T": "type changed"}


class FileChange(_Wire, frozen=True, kw_only=True):
    """One file (or symlink) changed since the session's baseline: ``modified`` covers
    content and mode; ``renamed`` has the ``old`` path; ``type changed`` is a file that
    became a symlink or back. Directories are never listed, only the files in them."""

    status: ChangeStatus
    path: str
    old: str = ""


class WorkspaceChanges(_Wire, frozen=True, kw_only=True):
    """What changed in the workspace since the session's baseline, whatever changed it (the
    file tools, commands, the user): the ``diff_workspace`` header as data. ``files`` holds
    the first :data:`actors.sandbox.tools.baseline.MAX_LISTED`, ``total`` counts them all; ``at``
    is when the workspace was compared (wall clock)."""

    files: list[FileChange] = []
    total: Count = 0
    at: float = 0.0


class ToolResult(_Wire, frozen=True, kw_only=True):
    """One tool call's outcome. ``outcome == "unknown"`` means an earlier run of the same
    call was interrupted after its intent was journaled: check the workspace, do not
    blindly repeat it. ``sha256``: a successful content write's (see the field)."""

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
    isolation: str = ""  # run_terminal: the isolation the command ran under (actors/sandbox/confinement/isolation.py)
    changes: WorkspaceChanges | None = None  # diff_workspace: the changed files, as data
    # write_file, modify_file (ok): sha256 hex of the text written, as read_file would show
    # the file whole (CRLF as LF: actors.sandbox.tools.files.written_digest); '' for other
    # tools and in results journaled before it existed. The executor's edit_undone check.
    sha256: Annotated[str, msgspec.Meta(pattern="^(|[0-9a-f]{64})$")] = ""


class Usage(_Wire, frozen=True, kw_only=True):
    """Token counts of one model call; ``estimated`` when the server gave none and acode
    counted characters instead (then the figures are rough, never calibration data).

    What the server says of its own work, when it says it (0 otherwise): ``cached_tokens``
    of the prompt served from its prompt cache rather than evaluated (llama.cpp's
    ``timings.cache_n`` or ``usage.prompt_tokens_details.cached_tokens``), and the time it
    spent on the prompt (``prompt_ms``, for ``prompt_n`` tokens evaluated) and on the answer
    (``completion_ms``, for ``completion_tokens``): llama.cpp's ``timings``, Ollama's
    ``prompt_eval_duration``/``eval_duration``. acode's timeouts follow these speeds
    (:mod:`actors.llm.pace`)."""

    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    estimated: bool = False
    cached_tokens: Count = 0
    prompt_n: Count = 0  # prompt tokens the server evaluated (timed by prompt_ms)
    prompt_ms: Millis = 0.0
    completion_ms: Millis = 0.0


class ModelToolCall(_Wire, frozen=True, kw_only=True):
    """One tool call of a model. ``invalid_arguments`` holds the raw text when the model's
    arguments were not a JSON object, or JSON text of them, each lone UTF-16 surrogate
    escaped, when they held one (:func:`actors.llm.toolcalls.storable`); ``arguments`` is
    then empty, and the executor sends the model a correction instead of running the call."""

    id: str
    name: str
    arguments: dict[str, Any] = {}
    invalid_arguments: str = ""


class ModelAnswer(_Wire, frozen=True, kw_only=True):
    """``finish_reason`` is the server's (``stop``, ``tool_calls``, ``length``…; ``""`` when
    it gave none). ``format_error`` is the server's complaint when it could not parse the
    model's output (llama.cpp's chat parser); the executor corrects the model with it."""

    content: str = ""
    tool_calls: list[ModelToolCall] = []
    usage: Usage = Usage()
    finish_reason: Annotated[str, msgspec.Meta(max_length=64)] = ""
    format_error: Annotated[str, msgspec.Meta(max_length=2_000)] = ""


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
    # The executor visit's run of failed turns when the step ended (protocol.policy.anomalies: the
    # error streak across steps), so a replay that skips this step goes on counting it.
    streak: list[Observation] = []


class ExecutionReport(_Wire, frozen=True, kw_only=True):
    """Every step of the plan: run in this visit, or ``kept`` (``task/step`` labels: the
    steps of completed tasks and those the last verification kept) from an earlier visit,
    whose record is included as it was written then (when there is one)."""

    steps: list[StepRecord] = []
    files_changed: list[str] = []
    kept: list[str] = []


class Rework(_Wire, frozen=True, kw_only=True):
    """What a verification keeps and what the next executor visit runs again.

    ``rule`` says how the steps to run again were chosen: ``passed`` (nothing failed),
    ``criteria`` (the steps of the tasks whose criteria failed, plus their dependents),
    ``files`` (a failure no task owns, e.g. the test suite: the steps that changed a file
    its output names, plus their dependents), ``all`` (a failure nothing could be
    attributed to). ``rerun`` and ``kept`` are ``task/step`` labels; ``completed_tasks``
    are the tasks whose every step is kept and whose criteria passed.
    """

    rule: Literal["passed", "criteria", "files", "all"]
    reason: str = ""
    rerun: list[str] = []
    kept: list[str] = []
    completed_tasks: list[str] = []


class StageMetrics(_Wire, frozen=True, kw_only=True):
    duration_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    model_calls: Count = 0
    replayed_model_calls: Count = 0
    tool_calls: Count = 0
    tokens_in: Count = 0  # as the server counted them (0 when it did not say)
    tokens_out: Count = 0
    tokens_cached: Count = 0  # of tokens_in, served from the server's prompt cache (0 when it did not say)
    # acode's own estimate (4 characters a token) of every prompt sent, the largest one,
    # and the stage's prompt budget (its share of the model's context)
    prompt_tokens_est: Count = 0
    largest_prompt_est: Count = 0
    budget_tokens: Count = 0
    model_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # waiting for the model's answers (replays: 0)


class Requirement(_Wire, frozen=True, kw_only=True):
    """Records a commit depends on: events of a stage's last writes, sent behind its
    result (``actors.stages.request.writes``; each of those writes has an event, and is one
    transaction, so its events stored mean its answers and reads are too). A commit that
    carries one is refused (ACODE-STORE-004, retryable) until each event is stored, so the
    coordinator acts on a result only once what the stage followed is durable."""

    events: list[str] = []


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
    rework: Rework | None = None  # the verifier's: what the next executor visit runs again
    approval: ApprovalRequest | None = None  # executor, verifier: a call that waits for a human's decision
    requires: Requirement | None = None  # the stage's writes still on their way: the transition waits for them
    changes: WorkspaceChanges | None = None  # verifier, reviewer: the workspace against the baseline, as they saw it
