"""Session events: the append-only log persistence keeps and publishes after commit.

Every event has an id (UUIDv7, made by the sender, so a retried write is idempotent), the
session it belongs to, a session-local sequence number assigned by persistence at
insert (``seq == 0`` in a draft) and a wall-clock time. Names are past tense.
The live stream's topic is the session id. The same stream also carries the stage actors'
ephemeral :class:`~protocol.sessions.progress.ModelProgress` messages, which are not events: never
stored, never replayed, without a ``seq`` (decode the stream with ``codec.STREAM``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from protocol.errors import ErrorInfo
from protocol.plans.results import WorkspaceChanges
from protocol.plans.stages import CycleKind, PauseKind, Stage, StepStatus
from protocol.policy.anomalies import Kind, Response
from protocol.sessions.session import Clarification

__all__ = [
    "SCHEMA_VERSION",
    "AnomalyDetected",
    "ApprovalDecided",
    "BudgetWarning",
    "HookRan",
    "HookStarted",
    "CheckRan",
    "CheckpointTaken",
    "Event",
    "PROGRESS_EVENTS",
    "PauseRequested",
    "PlanRecorded",
    "ReworkChosen",
    "SessionCreated",
    "SessionFinished",
    "SessionPaused",
    "SessionResumed",
    "SettingsChanged",
    "StageFinished",
    "StageRetried",
    "Steered",
    "StepFinished",
    "StepRetried",
    "StepStarted",
    "ToolCalled",
    "Transitioned",
    "TurnAnswered",
    "WorkspaceRestored",
    "is_final",
]

Visit = Annotated[int, msgspec.Meta(ge=1, le=1_000)]


# The major version of the event schema these types make (protocol.schema commits its JSON
# Schema as events-v<N>.json): raised only for a change that is not additive.
SCHEMA_VERSION = 1


class EventBase(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type"):
    schema_version: ClassVar[int] = SCHEMA_VERSION  # the event schema this type is of (not a field: JSON lines add it)
    id: str
    session_id: str
    seq: Annotated[int, msgspec.Meta(ge=0)] = 0
    at: float = 0.0


class SessionCreated(EventBase, frozen=True, tag="session_created", kw_only=True):
    task: str
    workspace: str
    overrode_hold: str = ""  # the unfinished session holding the workspace that --force overrode


class Transitioned(EventBase, frozen=True, tag="transitioned", kw_only=True):
    """The coordinator moved the session: ``source`` → ``target`` (written before dispatch)."""

    source: Stage | Literal["start"]
    target: Stage | Literal["completed"]
    visit: Visit = 1
    reason: str = ""
    cycle_kind: CycleKind | None = None
    cycle: Annotated[int, msgspec.Meta(ge=0, le=1_000)] = 0


class StageRetried(EventBase, frozen=True, tag="stage_retried", kw_only=True):
    stage: Stage
    visit: Visit
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    reason: str


class StageFinished(EventBase, frozen=True, tag="stage_finished", kw_only=True):
    stage: Stage
    visit: Visit
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    ok: bool
    duration_ms: float = 0.0
    summary: str = ""
    error: ErrorInfo | None = None
    # Prompt tokens: acode's estimate (all prompts, the largest one), the stage's budget,
    # and what the server counted (0 when it did not say, or every answer was replayed)
    tokens_est: Annotated[int, msgspec.Meta(ge=0)] = 0
    largest_prompt_est: Annotated[int, msgspec.Meta(ge=0)] = 0
    budget_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    tokens_in: Annotated[int, msgspec.Meta(ge=0)] = 0
    tokens_out: Annotated[int, msgspec.Meta(ge=0)] = 0
    tokens_cached: Annotated[int, msgspec.Meta(ge=0)] = 0  # of tokens_in, served from the server's prompt cache
    # Time the stage waited for its model's answers, summed (a replayed answer counts 0)
    model_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    # The verifier's and the reviewer's: the workspace against the session's baseline
    changes: WorkspaceChanges | None = None
    # The model the stage asked (its provider's kind and the model's name; a scripted
    # model is "scripted"), and how many calls it made, of them answered from the record
    provider: str = ""
    model: str = ""
    model_calls: Annotated[int, msgspec.Meta(ge=0)] = 0
    replayed_model_calls: Annotated[int, msgspec.Meta(ge=0)] = 0


class ReworkChosen(EventBase, frozen=True, tag="rework_chosen", kw_only=True):
    """After a verification: which finished work is kept and what the executor runs again,
    and by which rule (see :class:`protocol.plans.results.Rework`)."""

    visit: Visit
    rule: Literal["passed", "criteria", "files", "all"]
    reason: str = ""
    rerun: list[str] = []
    kept: list[str] = []
    completed_tasks: list[str] = []


class PlanRecorded(EventBase, frozen=True, tag="plan_recorded", kw_only=True):
    version: Annotated[int, msgspec.Meta(ge=1)]
    goal: str
    tasks: int
    steps: int
    status: str = "ready"


class StepStarted(EventBase, frozen=True, tag="step_started", kw_only=True):
    visit: Visit
    task: str
    step: str
    title: str = ""


class ToolCalled(EventBase, frozen=True, tag="tool_called", kw_only=True):
    key: str
    tool: str
    target: str = ""
    ok: bool = True
    summary: str = ""
    outcome: Literal["done", "unknown"] = "done"
    duration_ms: float = 0.0
    risk: str = "read"
    isolation: str = ""
    counted: bool = False  # a call a model asked for: it counts against the session's tool_calls budget


class TurnAnswered(EventBase, frozen=True, tag="turn_answered", kw_only=True):
    """The executor's model answered a turn of a step. ``tool_calls`` counts the calls it
    made (native or written as text); ``correction`` is what went back instead when the
    turn made no call that could run (no call at all, broken JSON, output the server could
    not parse), or the first refusal when every call it made was refused before running (an
    unknown tool, invalid arguments). Token counts and ``finish_reason`` are the server's
    (``estimated``: acode's). ``provider`` and ``model`` name the model asked; the call took
    ``duration_ms``, its first piece of answer arrived after ``first_token_ms`` (0: not
    streamed); ``replayed``: answered from the record (after a crash), taking no model time."""

    visit: Visit
    task: str
    step: str
    turn: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    tool_calls: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 0
    prompt_tokens: Annotated[int, msgspec.Meta(ge=0, le=10**12)] = 0
    completion_tokens: Annotated[int, msgspec.Meta(ge=0, le=10**12)] = 0
    estimated: bool = False
    finish_reason: str = ""
    correction: str = ""
    provider: str = ""
    model: str = ""
    duration_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    first_token_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    replayed: bool = False


class StepFinished(EventBase, frozen=True, tag="step_finished", kw_only=True):
    visit: Visit
    task: str
    step: str
    status: StepStatus  # blocked: not run, a step it depends on failed
    summary: str = ""


class CheckRan(EventBase, frozen=True, tag="check_ran", kw_only=True):
    visit: Visit
    label: str
    command: str
    passed: bool
    exit_code: int | None = None
    evidence: str = ""


class StepRetried(EventBase, frozen=True, tag="step_retried", kw_only=True):
    """A try of a step failed; the next one starts from a fresh window stating why."""

    visit: Visit
    task: str
    step: str
    attempt: Annotated[int, msgspec.Meta(ge=2, le=100)]  # the try about to start
    of: Annotated[int, msgspec.Meta(ge=1, le=100)]  # tries allowed (step_retry_limit)
    code: str = ""
    reason: str = ""


class SessionPaused(EventBase, frozen=True, tag="session_paused", kw_only=True):
    kind: PauseKind
    code: str
    message: str
    exit_code: int
    task: str = ""
    step: str = ""
    fix: str = ""
    command: str = ""  # the exact command that continues the session


class SettingsChanged(EventBase, frozen=True, tag="settings_changed", kw_only=True):
    """A human changed the session's settings (``acode resume --max-turns 20`` ...); used from then on."""

    changes: list[str]  # "max_turns_per_step: 10 -> 20", one per setting
    by: str = "acode resume"


class PauseRequested(EventBase, frozen=True, tag="pause_requested", kw_only=True):
    """``acode pause``: the session stops at its next safe point (then ``session_paused``, kind ``user``)."""

    stage: str = ""  # the stage at work when the user asked


class Steered(EventBase, frozen=True, tag="steered", kw_only=True):
    """``acode steer``: guidance for the stage at work (from its next model turn) and every later stage."""

    text: str
    stage: str = ""


class SessionResumed(EventBase, frozen=True, tag="session_resumed", kw_only=True):
    reason: str = ""
    answers: list[Clarification] = []  # the user's answers to the planner's questions, if any


class ApprovalDecided(EventBase, frozen=True, tag="approval_decided", kw_only=True):
    """A decision on a call that needed approval (the audit record): which call (key, hash,
    tool, target, risk, rule), the decision, why, and who made it (``acode approve``, the
    inline prompt, the non-interactive policy)."""

    key: str
    call_hash: str
    tool: str
    target: str = ""
    risk: str = ""
    rule: str = ""
    decision: Literal["approve", "deny"]
    always: bool = False
    reason: str = ""
    by: str = ""


class SessionFinished(EventBase, frozen=True, tag="session_finished", kw_only=True):
    status: Literal["completed", "failed", "cancelled"]
    exit_code: int
    error: ErrorInfo | None = None
    summary: str = ""
    changes: WorkspaceChanges | None = None  # the session's last comparison with its baseline (None: never made)


class CheckpointTaken(EventBase, frozen=True, tag="checkpoint_taken", kw_only=True):
    """The sandbox recorded the workspace before a call that can change it (``key``: the
    call; ``checkpoint``: its id in the store, what ``acode undo --to`` takes); ``files``:
    files changed since the store's previous checkpoint; ``skipped``: files left out (over
    ``checkpoints.max_file_mb``, or unreadable)."""

    checkpoint: str
    key: str = ""
    tool: str = ""
    target: str = ""
    stage: str = ""
    task: str = ""
    step: str = ""
    took_ms: float = 0.0
    files: int = 0
    skipped: int = 0


class WorkspaceRestored(EventBase, frozen=True, tag="workspace_restored", kw_only=True):
    """``acode undo`` (or ``rewind``) put the workspace back as checkpoint ``to`` had it;
    ``checkpoint``: the one taken just before the restore (undo it with ``--to`` that);
    ``left``: paths someone other than this session changed since, left alone (without
    ``--force``)."""

    to: str
    checkpoint: str = ""
    written: int = 0
    deleted: int = 0
    left: list[str] = []
    forced: bool = False
    by: str = ""


class HookRan(EventBase, frozen=True, tag="hook_ran", kw_only=True):
    """A hook of the user's config ran at ``point`` (protocol.policy.hooks) for one ``occurrence``
    (a tool call's key, a pause's event, a stage's visit...), and answered ``decision``
    (``failed``: why it failed; then ``decision`` is what its ``on_failure`` says). A
    replay reads this record instead of running the hook again."""

    point: str
    hook: str
    occurrence: str = ""
    decision: str = "continue"
    reason: str = ""
    context: str = ""
    failed: str = ""
    exit_code: int | None = None
    duration_ms: float = 0.0
    action: str = ""  # script, webhook, confirm, pause (a confirm's pause is asked on a terminal)


class HookStarted(EventBase, frozen=True, tag="hook_started", kw_only=True):
    """A script or webhook hook is about to run (its intent, made durable first): a replay
    that finds this without the hook's ``hook_ran`` knows it may have run, and does not run
    it again; it records it failed, its outcome unknown."""

    point: str
    hook: str
    occurrence: str = ""


class BudgetWarning(EventBase, frozen=True, tag="budget_warning", kw_only=True):
    """The session has spent ``WARN_AT`` (80%) of one of its limits (protocol.policy.budget):
    ``kind``, what it has ``used`` of ``limit`` (in the limit's unit: tokens, calls,
    minutes). Once per limit value: an extended limit warns again at 80% of the new one."""

    kind: str
    used: float
    limit: float
    stage: str = ""


class AnomalyDetected(EventBase, frozen=True, tag="anomaly_detected", kw_only=True):
    """The model went off the rails (protocol.policy.anomalies): ``kind``, what was seen
    (``evidence``), how bad (``score``, 0-100), where (``stage``; the executor's ``task`` and
    ``step``, and ``turns``: the turns involved, or for ``verify_repeat`` the verifications),
    what acode did about it (``response``: a note to the model, a fresh window for the step,
    a pause ``anomaly``) and the session's ``health`` (0-100) with it, which persistence
    works out from the session's records as it stores the event."""

    kind: Kind
    evidence: str
    score: Annotated[int, msgspec.Meta(ge=0, le=100)]
    response: Response
    stage: Stage = "executor"
    visit: Visit = 1
    task: str = ""
    step: str = ""
    turns: list[Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]] = []
    health: Annotated[int, msgspec.Meta(ge=0, le=100)] = 100


Event = (
    SessionCreated | Transitioned | StageRetried | StageFinished | PlanRecorded | StepStarted
    | ToolCalled | TurnAnswered | StepFinished | CheckRan | SessionPaused | SessionResumed | SessionFinished
    | ReworkChosen | StepRetried | SettingsChanged | PauseRequested | Steered | ApprovalDecided
    | CheckpointTaken | WorkspaceRestored | BudgetWarning | HookRan | AnomalyDetected | HookStarted
)


#: Events that report a stage's progress and decide nothing: no sender acts on their being
#: durable, and a replayed stage writes them again under the same ids. Persistence commits
#: them relaxed, and a stage sends them with its next request (``actors.stages.request.writes``).
PROGRESS_EVENTS = (StepStarted, TurnAnswered, StepRetried)


def is_final(event: Event) -> bool:
    """True for the events after which ``acode run`` stops following a session."""
    return isinstance(event, (SessionFinished, SessionPaused))
