"""Every message body on the wire, one tagged union per service and direction.

Commands are imperative (``SubmitTask``, ``RunStage``); replies are nouns. Every reply
union includes :class:`Error`. Bodies travel behind an :class:`Envelope` (see
``protocol.transport.frames``); the envelope carries ids, tracing, sender, epoch and deadline.

Services and their unions:

====================  ==========================  ===========================
service               requests                    replies
====================  ==========================  ===========================
``coordinator``       :data:`CoordinatorRequest`  :data:`CoordinatorReply`
``persistence``       :data:`PersistenceRequest`  :data:`PersistenceReply`
``planner`` …         :class:`RunStage`           :data:`StageReply`
``sandbox``           :data:`SandboxRequest`      :data:`SandboxReply`
``mcp``               :data:`McpRequest`          :data:`McpReply`
supervision channel   :data:`SupervisorUp`        :data:`SupervisorDown`
====================  ==========================  ===========================

Size: the wire's catalogue, nearly fifty Structs of a few lines each, grouped by service in
the table's order below the Envelope, Error and Ack they all share; one module is the one
place a reader (and every actor) looks up any body on the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from protocol.calls.autonomy import ApprovalDecision
from protocol.calls.mcp import McpServerRef as McpServerRef  # re-exported: it was defined here first
from protocol.calls.mcp import McpToolDef
from protocol.calls.tools import Risk
from protocol.errors import ErrorInfo
from protocol.plans.plan import TaskPlan
from protocol.plans.results import ModelAnswer, Requirement, StageResult, StepRecord, ToolResult
from protocol.plans.stages import Stage
from protocol.policy.budget import Spent
from protocol.policy.checkpoints import CallSite
from protocol.policy.hooks import HookDecision
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.events import Event, ToolCalled
from protocol.sessions.session import (
    MAX_STEERING_CHARS,
    Clarification,
    Feedback,
    SessionSettings,
    SessionSnapshot,
    SettingsOverride,
    SteeringNote,
)

PROTOCOL_VERSION = 1

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
Limit = Annotated[int, msgspec.Meta(ge=1, le=100_000)]


class Envelope(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Routing and tracing header of every request and reply.

    ``deadline_ms`` is absolute Unix time in milliseconds (0: none); receivers convert it
    to their own monotonic clock on arrival.
    """

    v: Annotated[int, msgspec.Meta(ge=0, le=255)] = PROTOCOL_VERSION
    id: Id
    correlation_id: Id | None = None
    session_id: Id | None = None
    trace_id: str = ""
    span_id: str = ""
    sender: str = ""
    epoch: Annotated[int, msgspec.Meta(ge=0)] = 0
    sent_at_ms: Annotated[int, msgspec.Meta(ge=0)] = 0
    deadline_ms: Annotated[int, msgspec.Meta(ge=0)] = 0
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type"):
    """Base of every tagged body."""


# --- replies shared by every service ---------------------------------------------------


class Error(Message, frozen=True, tag="error", kw_only=True):
    error: ErrorInfo


class Ack(Message, frozen=True, tag="ack", kw_only=True):
    detail: str = ""


# --- coordinator -------------------------------------------------------------------------


class SubmitTask(Message, frozen=True, tag="submit_task", kw_only=True):
    """Start a session; ``session_id`` is chosen by the client so a resend is idempotent."""

    session_id: Id
    task: Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)]
    workspace: Annotated[str, msgspec.Meta(min_length=1, max_length=4_096)]
    settings: SessionSettings
    force: bool = False  # start although an unfinished session holds the workspace (recorded)


class GetStatus(Message, frozen=True, tag="get_status", kw_only=True):
    pass


class CancelSession(Message, frozen=True, tag="cancel_session", kw_only=True):
    session_id: Id
    reason: str = "cancelled by the user"


class ResumeSession(Message, frozen=True, tag="resume_session", kw_only=True):
    session_id: Id
    answers: list[Clarification] = []  # for a session paused on the planner's questions
    overrides: SettingsOverride | None = None  # persisted as a settings_changed event, used from then on


class PauseSession(Message, frozen=True, tag="pause_session", kw_only=True):
    """``acode pause``: stop at the next safe point (a repeated pause changes nothing)."""

    session_id: Id


class SteerSession(Message, frozen=True, tag="steer_session", kw_only=True):
    """``acode steer``: guidance for the stage at work and every later stage (fenced as untrusted)."""

    session_id: Id
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STEERING_CHARS)]


class ApprovePlan(Message, frozen=True, tag="approve_plan", kw_only=True):
    """``acode approve`` of a session paused ``plan_review``: execute the plan."""

    session_id: Id


class ReplanSession(Message, frozen=True, tag="replan_session", kw_only=True):
    """``acode replan``: send a plan under review back to the planner with the user's feedback."""

    session_id: Id
    feedback: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STEERING_CHARS)]
class RewindSession(Message, frozen=True, tag="rewind_session", kw_only=True):
    """``acode rewind``: the workspace is back at ``checkpoint`` (the sandbox restored it);
    the session goes on from step ``task``/``step`` of its plan (from its first step when
    they are empty): the steps before it are kept, it and every later one are run again,
    with ``steering`` (if given) for every later stage."""

    session_id: Id
    checkpoint: Annotated[str, msgspec.Meta(max_length=64)]
    task: Annotated[str, msgspec.Meta(max_length=64)] = ""
    step: Annotated[str, msgspec.Meta(max_length=64)] = ""
    steering: Annotated[str, msgspec.Meta(max_length=MAX_STEERING_CHARS)] = ""


class DecideApproval(Message, frozen=True, tag="decide_approval", kw_only=True):
    """A human's decision on the call a session waits on (``acode approve``/``acode deny``, or
    the inline prompt). ``key``, when given, is the call the human was shown: a session that
    now waits on another call refuses the decision (ACODE-CLI-004)."""

    session_id: Id
    decision: Literal["approve", "deny"]
    always: bool = False  # approve later calls of the same rule in this session too
    reason: Annotated[str, msgspec.Meta(max_length=2_000)] = ""
    key: str = ""
    by: Annotated[str, msgspec.Meta(max_length=100)] = "acode approve"


class Shutdown(Message, frozen=True, tag="shutdown", kw_only=True):
    reason: str = "acode down"


ActorState = Literal["starting", "ready", "backoff", "failed", "stopping", "stopped"]


class ActorStatus(Message, frozen=True, tag="actor_status", kw_only=True):
    instance: str
    actor: str
    state: ActorState
    pid: int | None = None
    epoch: int = 0
    restarts: int = 0
    started_at: float | None = None
    uptime_s: float = 0.0
    heartbeat_age_s: float | None = None
    busy: int = 0
    reason: str = ""
    info: dict[str, str] = {}  # what the actor reports of itself, e.g. the sandbox's isolation


class StatusReport(Message, frozen=True, tag="status_report", kw_only=True):
    pid: int
    home: str
    started_at: float
    degraded: bool = False
    reason: str = ""
    actors: list[ActorStatus] = []
    sessions_active: int = 0


class SessionAccepted(Message, frozen=True, tag="session_accepted", kw_only=True):
    session: SessionSnapshot


CoordinatorRequest = (SubmitTask | GetStatus | CancelSession | ResumeSession | Shutdown | PauseSession | SteerSession
                      | ApprovePlan | ReplanSession | DecideApproval | RewindSession)
CoordinatorReply = SessionAccepted | StatusReport | Ack | Error


# --- persistence -------------------------------------------------------------------------


class Commit(Message, frozen=True, tag="commit", kw_only=True):
    """Append events and update a session in one transaction (idempotent by event id).

    ``snapshot`` creates the session row when it does not exist yet. ``answers``: model
    answers recorded in the same transaction (a stage sends its last answer with its next
    write instead of on its own, see ``actors.llm.recorded``); one whose claim is not found
    is dropped (it is a cache), it never fails the commit.
    """

    session_id: Id
    events: list[Event] = []
    snapshot: SessionSnapshot | None = None
    plan: TaskPlan | None = None
    steps: list[StepRecord] = []  # several when a stage's writes behind were merged (see actors.stages.request.writes)
    answers: list[RecordModelAnswer] = []
    reads: list[JournaledRead] = []
    index_for: Stage | None = None  # also answer this stage's replay index, read after the write
    requires: Requirement | None = None  # refused (ACODE-STORE-004, retryable) until these are durable


class JournaledRead(Message, frozen=True, tag="journaled_read", kw_only=True):
    """The result of a call without side effects that the stage journals itself (it ran
    with ``RunTool.held``): written under ``key`` with its :class:`Commit`, the call's
    ``tool_called`` event in the commit's ``events``. A key that already has a result keeps
    the first one (a replay reads that)."""

    key: Id
    result: ToolResult


class GetReplayIndex(Message, frozen=True, tag="get_replay_index", kw_only=True):
    """What a stage attempt must replay rather than do again (``actors.llm.recorded``,
    ``actors.stages.request.writes``): the model requests claimed in its stage and the tool calls
    journaled in its session."""

    session_id: Id
    stage: Stage


class ReplayIndex(Message, frozen=True, tag="replay_index", kw_only=True):
    """``claims``: request hash → its place in the stage's sequence, for every model request
    of ``(session, stage)`` claimed so far (answered or not); ``tool_keys``: the keys of the
    session's journaled tool calls; ``steps``: the session's step records, every visit, in
    the order they were first written (the executor skips what its visit finished)."""

    claims: dict[str, int] = {}
    tool_keys: list[str] = []
    steps: list[StepRecord] = []
    spent: Spent = Spent()  # what the session's records say it spent (protocol.policy.budget; running_s: 0)
    hooks: dict[str, HookDecision] = {}  # the session's hook_ran records by event id: a replay reads, not runs
    hooks_started: list[str] = []  # the ids of its hook_started records (intents): see actors.hooks.run_point


class GetSession(Message, frozen=True, tag="get_session", kw_only=True):
    session_id: Id


class ListSessions(Message, frozen=True, tag="list_sessions", kw_only=True):
    statuses: list[str] = []
    limit: Limit = 100


class GetEvents(Message, frozen=True, tag="get_events", kw_only=True):
    session_id: Id
    after_seq: Annotated[int, msgspec.Meta(ge=0)] = 0
    limit: Limit = 10_000


class GetPlan(Message, frozen=True, tag="get_plan", kw_only=True):
    session_id: Id
    version: Annotated[int, msgspec.Meta(ge=0)] = 0  # 0: the latest


class GetSteps(Message, frozen=True, tag="get_steps", kw_only=True):
    session_id: Id
    visit: Annotated[int, msgspec.Meta(ge=1)]


class BeginToolCall(Message, frozen=True, tag="begin_tool_call", kw_only=True):
    """Journal a tool call's intent, or learn what an earlier call with this key did."""

    key: Id
    session_id: Id
    tool: str
    arguments: dict[str, Any] = {}
    risk: Risk = "read"
    pre_image: str | None = None


class FinishToolCall(Message, frozen=True, tag="finish_tool_call", kw_only=True):
    """Journal a tool call's result and append its ``tool_called`` event.

    ``rerun_safe``: the call has no side effects (a read, a listing, a search), so persistence
    may commit it without waiting for the disk (``synchronous = normal``): it survives a crash
    of any process; a power cut can lose it only with everything committed after it, and the
    call is then simply run again."""

    key: Id
    session_id: Id
    result: ToolResult
    event: Event
    rerun_safe: bool = False
    commit: Commit | None = None  # RunTool.commit, written first in the same transaction


class ClaimModelAnswer(Message, frozen=True, tag="claim_model_answer", kw_only=True):
    """Find the recorded answer for a request hash, or reserve its place in the stage's
    sequence (the scripted model serves the response at that place). ``answers``: earlier
    answers recorded first, in the same transaction (as :class:`Commit`'s); ``commit``: the
    stage's held progress events (see :class:`RunTool`), written first too."""

    request_hash: Id
    session_id: Id
    stage: Stage
    answers: list[RecordModelAnswer] = []
    commit: Commit | None = None


class RecordModelAnswer(Message, frozen=True, tag="record_model_answer", kw_only=True):
    """An answer to record under its request hash. With ``seq`` (and ``session_id``,
    ``stage``), the answer to a request the stage placed itself in its stage's sequence,
    without a claim first (it knew every claim from :class:`ReplayIndex`): the claim is
    written with it, unless that place or hash is taken (then it is dropped: a cache)."""

    request_hash: Id
    answer: ModelAnswer
    seq: int = -1
    session_id: str = ""
    stage: Stage | None = None
    model_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # how long the model took: the session's model_minutes


class Committed(Message, frozen=True, tag="committed", kw_only=True):
    """What a write did: the seq of each event. Answering a FinishToolCall whose key already
    had a result, ``result`` is that first result (the new one was not kept, and its event
    was not appended): the caller answers with it."""

    seqs: list[int] = []
    result: ToolResult | None = None
    index: ReplayIndex | None = None  # the replay index Commit.index_for asked for


class SessionFound(Message, frozen=True, tag="session_found", kw_only=True):
    session: SessionSnapshot
    spent: Spent | None = None  # what the session spent against its budget (protocol.policy.budget)


class SessionList(Message, frozen=True, tag="session_list", kw_only=True):
    sessions: list[SessionSnapshot] = []


class EventList(Message, frozen=True, tag="event_list", kw_only=True):
    events: list[Event] = []


class PlanFound(Message, frozen=True, tag="plan_found", kw_only=True):
    plan: TaskPlan


class StepList(Message, frozen=True, tag="step_list", kw_only=True):
    steps: list[StepRecord] = []


class ToolCallState(Message, frozen=True, tag="tool_call_state", kw_only=True):
    """``new``: intent journaled now, run it. ``pending``: journaled earlier without a result.
    ``done``: ``result`` is the journaled result. ``pre_image`` is the one recorded first."""

    state: Literal["new", "pending", "done"]
    pre_image: str | None = None
    result: ToolResult | None = None


class GetModelAnswers(Message, frozen=True, tag="get_model_answers", kw_only=True):
    """The answers recorded for a session's model requests (``acode run --verbose``, ``acode
    show --answers``): of ``stage`` (every stage when None), with a place after
    ``after_seq``, at most ``limit`` (0: none, only :attr:`ModelAnswerList.last`). One
    stage's come in their places' order; every stage's, in the order they were claimed."""

    session_id: Id
    stage: Stage | None = None
    after_seq: Annotated[int, msgspec.Meta(ge=-1)] = -1
    limit: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 100


class RecordedAnswer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One recorded answer: its stage, its place in the stage's sequence, the answer (redacted as stored)."""

    stage: Stage
    seq: Annotated[int, msgspec.Meta(ge=0)]
    answer: ModelAnswer


class ModelAnswerList(Message, frozen=True, tag="model_answer_list", kw_only=True):
    """``last``: each stage's highest place with an answer recorded (a stage with none is absent)."""

    answers: list[RecordedAnswer] = []
    last: dict[Stage, int] = {}


class ModelAnswerClaim(Message, frozen=True, tag="model_answer_claim", kw_only=True):
    seq: Annotated[int, msgspec.Meta(ge=0)]
    answer: ModelAnswer | None = None


PersistenceRequest = (
    Commit | GetSession | ListSessions | GetEvents | GetPlan | GetSteps | BeginToolCall
    | FinishToolCall | ClaimModelAnswer | RecordModelAnswer | GetReplayIndex | GetModelAnswers
)
PersistenceReply = (
    Committed | SessionFound | SessionList | EventList | PlanFound | StepList | ToolCallState
    | ModelAnswerClaim | ReplayIndex | ModelAnswerList | Ack | Error
)


# --- stages ------------------------------------------------------------------------------


class RunStage(Message, frozen=True, tag="run_stage", kw_only=True):
    """Do one stage of one session; ``(session_id, stage, visit, attempt)`` fences the answer."""

    session_id: Id
    stage: Stage
    visit: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)]
    task: str
    workspace: str
    settings: SessionSettings
    plan: TaskPlan | None = None
    feedback: Feedback | None = None
    previous: StageResult | None = None  # what the stage before this one answered
    clarifications: list[Clarification] = []  # the user's answers to the planner's questions
    kept_steps: list[str] = []  # executor: ``task/step`` labels finished earlier and not to run again
    history: list[Feedback] = []  # reviewer: earlier cycles' feedback and re-plan summaries
    steering: list[SteeringNote] = []  # the user's ``acode steer`` guidance so far (every stage)
    approvals: list[ApprovalDecision] = []  # executor: the session's decisions on calls (protocol.calls.autonomy)
    replay: ReplayIndex | None = None  # what the attempt replays, read with the transition's commit
    running_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0  # how long the session had run when dispatched


class StageDone(Message, frozen=True, tag="stage_done", kw_only=True):
    result: StageResult


StageReply = StageDone | Error


# --- sandbox -----------------------------------------------------------------------------


class RunTool(Message, frozen=True, tag="run_tool", kw_only=True):
    """Run one tool call in ``workspace``; ``key`` makes it idempotent.

    ``commit``: what the stage held back for its next request (progress events, the model's
    last answer): the sandbox writes it in the transaction that journals a call without side
    effects (``FinishToolCall.commit``), and before anything else for any other call.

    ``held``: the stage journals the result of a call without side effects itself, with its
    next write (it knows nothing is journaled under ``key`` yet): the sandbox runs it, writes
    nothing, and answers the call's event with its result (``ToolDone.event``). A call with
    side effects ignores it: it is journaled before and after it runs, as always."""

    key: Id
    session_id: Id
    workspace: str
    tool: str
    arguments: dict[str, Any] = {}
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3_600)] = 120.0
    output_limit_bytes: Annotated[int, msgspec.Meta(ge=1_024, le=10_000_000)] = 64_000
    policy: SandboxPolicy = SandboxPolicy()
    commit: Commit | None = None
    approval: str = ""  # the id of the ApprovalDecision that approves this call (prompt-class calls)
    held: bool = False
    site: CallSite | None = None  # where the call comes from: labels the checkpoint taken before it
    # an MCP tool's call (``mcp__S__T``): the hash of the definition it was offered and approved
    # with (protocol.calls.mcp.definition_hash); the sandbox and the mcp actor hold the call to it
    mcp_hash: str = ""


class RestoreWorkspace(Message, frozen=True, tag="restore_workspace", kw_only=True):
    """``acode undo``: put ``workspace`` back as one of the session's checkpoints had it.

    The target: ``to`` (a checkpoint id or a unique prefix of one), else with ``last`` the
    checkpoint before the session's last call, else the one taken when the session began.
    ``apply`` false only plans (nothing changes: what ``acode undo`` shows before it asks).
    Paths someone other than the session changed since the target are left alone unless
    ``force``. ``by``: who asked (``undo`` or ``rewind``), for the event."""

    session_id: Id
    workspace: str
    to: Annotated[str, msgspec.Meta(max_length=64)] = ""
    last: bool = False
    force: bool = False
    apply: bool = False
    by: Literal["undo", "rewind"] = "undo"
    policy: SandboxPolicy = SandboxPolicy()


class Restored(Message, frozen=True, tag="restored", kw_only=True):
    """What a restore changed (or, not ``applied``, would change): workspace-relative paths.
    ``left``: changed since by someone other than the session, left alone; ``kept``: could
    not be changed because of what was left alone; ``checkpoint``: the one taken just before
    the restore (an undo of the undo goes back to it)."""

    target: str
    applied: bool = False
    write: list[str] = []
    delete: list[str] = []
    left: list[str] = []
    kept: list[str] = []
    checkpoint: str = ""


class ToolDone(Message, frozen=True, tag="tool_done", kw_only=True):
    """``event``: for a call without side effects run with ``RunTool.held``, its
    ``tool_called`` event, which the stage journals with the result (nothing was written)."""

    result: ToolResult
    event: ToolCalled | None = None


SandboxRequest = RunTool | RestoreWorkspace
SandboxReply = ToolDone | Restored | Error


# --- mcp (the actor that talks to the user's MCP servers: protocol.calls.mcp) --------------------


class McpListTools(Message, frozen=True, tag="mcp_list_tools", kw_only=True):
    """The tools of ``servers`` for a session in ``workspace``: starts the servers not yet
    running (a dead one is restarted, with backoff, and listed again)."""

    session_id: str = ""
    workspace: str
    servers: list[McpServerRef] = []


class McpToolInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One listed tool: ``name`` is what the model sees (``mcp__SERVER__TOOL``); ``hash``
    the definition's (protocol.calls.mcp.definition_hash), ``pinned`` the approved one ("" none).
    ``state``: ``offered``; ``changed`` (pinned to another definition: not offered until a
    human approves the new one); ``filtered`` (the user's enabled/disabled lists)."""

    name: str
    definition: McpToolDef
    risk: Risk
    rerun_safe: bool = False
    hash: str
    pinned: str = ""
    state: Literal["offered", "changed", "filtered"] = "offered"
    # the definition that was approved (``pinned``), when the pins keep it: what ``acode mcp
    # approve`` shows the change against (None: only its hash is known)
    pinned_definition: McpToolDef | None = None


class McpServerState(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A server as the actor sees it (``acode doctor`` prints one line each)."""

    name: str
    transport: Literal["stdio", "http"]
    state: Literal["starting", "ready", "restarting", "failed", "stopped"]
    tools: int = 0
    isolation: str = ""
    restarts: int = 0
    error: ErrorInfo | None = None


class McpTools(Message, frozen=True, tag="mcp_tools", kw_only=True):
    tools: list[McpToolInfo] = []
    servers: list[McpServerState] = []


class McpCallTool(Message, frozen=True, tag="mcp_call_tool", kw_only=True):
    """Call one tool once: never re-sent by the actor; ``hash`` is the definition the call
    was approved against (a server now listing another definition refuses it, ACODE-MCP-004)."""

    key: Id
    session_id: str = ""
    workspace: str
    server: McpServerRef
    tool: str
    arguments: dict[str, Any] = {}
    hash: str = ""
    output_limit_bytes: Annotated[int, msgspec.Meta(ge=1_024, le=10_000_000)] = 64_000


class McpCalled(Message, frozen=True, tag="mcp_called", kw_only=True):
    """The call's outcome: ``output`` is the tool's content as text (capped); ``ok`` false
    with ``error`` for a failure acode names (a dead server: the call is not re-run)."""

    ok: bool
    output: str = ""
    error: ErrorInfo | None = None


class McpPin(Message, frozen=True, tag="mcp_pin", kw_only=True):
    """A human approves the definition ``hash`` of ``server``'s ``tool`` (``acode mcp approve``)."""

    server: str
    tool: str
    hash: str


McpRequest = McpListTools | McpCallTool | McpPin
McpReply = McpTools | McpCalled | Ack | Error


# --- supervision channel (child <-> coordinator, not through the broker) -----------------


class Heartbeat(Message, frozen=True, tag="heartbeat", kw_only=True):
    instance: str
    actor: str
    pid: int
    epoch: int
    state: Literal["starting", "ready", "stopping"]
    busy: list[str] = []  # ids of the requests this instance is working on
    info: dict[str, str] = {}  # facts for `acode status` (Actor.info)


class Stop(Message, frozen=True, tag="stop", kw_only=True):
    reason: str = ""


class CancelWork(Message, frozen=True, tag="cancel_work", kw_only=True):
    """The coordinator abandoned these requests (a timeout, a cancel, a lost answer): stop
    working on them. The stage actor sets the attempt's cancel event, which closes an HTTP
    request to a model server; any answer still produced is dropped by fencing."""

    request_ids: list[Id]
    reason: str = ""


class PauseWork(Message, frozen=True, tag="pause_work", kw_only=True):
    """The user paused the session of these requests: stop at the next safe point (before
    the next tool call or model turn) with an ACODE-ORCH-010 result. The request is durable
    in the session first; this message only makes the stop come sooner."""

    request_ids: list[Id]
    reason: str = ""


class SteerWork(Message, frozen=True, tag="steer_work", kw_only=True):
    """The user steered the session of these requests: add ``note`` from the next model turn on."""

    request_ids: list[Id]
    note: SteeringNote


SupervisorUp = Heartbeat
SupervisorDown = Stop | CancelWork | PauseWork | SteerWork


# --- broker control ----------------------------------------------------------------------


class WorkerInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Sent with READY: who the worker is and how many requests it takes at once."""

    instance: str
    pid: int = 0
    epoch: Annotated[int, msgspec.Meta(ge=0)] = 0
    capacity: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 1
    busy: list[str] = []
