"""Hypothesis strategies for every wire type, each producing values that pass decode-time validation.

Every Struct gets one strategy made by :func:`struct`, which names each field explicitly:
required fields always get a value, optional ones are drawn or left at their default (so
``omit_defaults`` encoding is exercised too). :data:`FIELDS` records which fields each
strategy covers; ``test_codec`` checks it against the Struct so a new field cannot be
forgotten here.
"""

from __future__ import annotations

from typing import Any, get_args

import msgspec
from hypothesis import strategies as st

from protocol import messages as m
from protocol.calls import autonomy as au
from protocol.calls import mcp as mc
from protocol.errors import ErrorInfo
from protocol.plans import plan as pl
from protocol.plans import results as rs
from protocol.plans.stages import ResumeMode
from protocol.policy import anomalies as an
from protocol.policy import budget as bd
from protocol.policy import checkpoints as ck
from protocol.policy import hooks as hk
from protocol.policy import sandbox as sb
from protocol.sessions import events as ev
from protocol.sessions import profiles as pf
from protocol.sessions import session as ss
from protocol.sessions.progress import ModelProgress

__all__ = ["FIELDS", "STRATEGIES", "json_values", "strategy_for"]

#: Struct type → its strategy, and the field names that strategy sets.
STRATEGIES: dict[type, st.SearchStrategy[Any]] = {}
FIELDS: dict[type, frozenset[str]] = {}

INT64 = 2**63 - 1


def struct(cls: type, required: dict[str, st.SearchStrategy[Any]] | None = None,
           /, **optional: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Register and return a strategy building ``cls`` from explicit per-field strategies."""
    required = required or {}
    strategy = st.fixed_dictionaries(required, optional=optional).map(lambda kwargs: cls(**kwargs))
    STRATEGIES[cls] = strategy
    FIELDS[cls] = frozenset(required) | frozenset(optional)
    return strategy


def strategy_for(cls: type) -> st.SearchStrategy[Any]:
    return STRATEGIES[cls]


def _literal(alias: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(get_args(alias))


# --- scalars -----------------------------------------------------------------------------

texts = st.text(max_size=30)
short = st.text(max_size=12)
ids = st.uuids().map(str) | st.text(min_size=1, max_size=128)
label = st.text(min_size=1, max_size=64)
naturals = st.integers(min_value=0, max_value=INT64)
signed = st.integers(min_value=-INT64 - 1, max_value=INT64)
floats = st.floats(allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0, allow_nan=False, allow_infinity=False)
seconds = st.floats(min_value=0, max_value=86_400, exclude_min=True, allow_nan=False)
visits = st.integers(min_value=1, max_value=1_000)
small_counts = st.integers(min_value=0, max_value=1_000)
counts = st.integers(min_value=0, max_value=10**12)
millis = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
exit_codes = st.integers(min_value=0, max_value=255)
stages = _literal(ss.Stage)
cycle_kinds = _literal(ss.CycleKind)
pause_kinds = _literal(ss.PauseKind)
risks = st.sampled_from(["read", "write", "execute", "network", "destructive"])


def _few(strategy: st.SearchStrategy[Any], max_size: int = 3) -> st.SearchStrategy[list[Any]]:
    return st.lists(strategy, max_size=max_size)


#: What an untyped (``Any``) field may hold after a msgpack round trip.
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | floats | short,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(short, children, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(short, json_values, max_size=4)

# --- errors and session ------------------------------------------------------------------

error_infos = struct(ErrorInfo, {"code": st.from_regex(r"ACODE-[A-Z]{2,5}-\d{3}", fullmatch=True),
                                 "message": texts}, retryable=st.booleans())
scripted_providers = struct(ss.ScriptedProvider, {"script_yaml": texts}, script_name=short)
_http_fields = dict(
    stage_models=st.dictionaries(stages, short.filter(bool)), num_ctx=st.integers(512, 2_097_152),
    temperature=st.floats(0, 2), seed=st.none() | st.integers(0, 2**31 - 1), connect_timeout_s=seconds,
    first_token_timeout_s=seconds, idle_timeout_s=seconds, max_retries=st.integers(0, 10),
    backoff_initial_s=st.floats(0, 60), backoff_max_s=st.floats(0, 600), allow_remote=st.booleans(),
    max_tokens=st.none() | st.integers(16, 1_048_576),
    stage_max_tokens=st.dictionaries(stages, st.integers(16, 1_048_576)),
)
ollama_providers = struct(ss.OllamaProvider, {"model": short.filter(bool)}, base_url=short.filter(bool),
                          **_http_fields)
openai_providers = struct(ss.OpenAIProvider, {"model": short.filter(bool)}, base_url=short.filter(bool),
                          api_key_env=short, **_http_fields)
providers = scripted_providers | ollama_providers | openai_providers
dir_names = st.text(min_size=1, max_size=20).filter(lambda name: "/" not in name and "\x00" not in name)
checkpoint_settings = struct(ck.CheckpointSettings, enabled=st.booleans(),
                             max_file_mb=st.floats(0, 100_000, allow_nan=False), skip_dirs=_few(dir_names))
call_sites = struct(ck.CallSite, stage=short, task=short, step=short, counted=st.booleans())
sandbox_policies = struct(
    sb.SandboxPolicy, checkpoints=checkpoint_settings,
    allowed_commands=st.none() | _few(short.filter(bool)), extra_commands=_few(short.filter(bool)),
    allow_inline_code=st.booleans(), shell_commands=_few(texts.filter(bool)),
    require_isolation=st.sampled_from(["process", "landlock", "bubblewrap"]), network=st.booleans(),
    memory_limit_mb=st.integers(0, 1_048_576), file_size_limit_mb=st.integers(0, 1_048_576),
    max_processes=st.integers(8, 100_000), pass_env=_few(short.filter(bool)),
    read_paths=_few(texts.filter(bool)), write_paths=_few(texts.filter(bool)), read_opt=st.booleans(),
    path=st.none() | texts,
)
class_policies = st.none() | st.sampled_from(["auto", "prompt", "deny"])
approvals_blocks = struct(au.Approvals, file_write=class_policies, file_delete=class_policies,
                          terminal_commands=class_policies,
                          non_interactive_policy=st.sampled_from(["auto", "skip", "fail"]))
decisions_ = st.sampled_from(["approve", "deny"])
approval_requests = struct(au.ApprovalRequest, {"key": ids, "call_hash": short, "tool": short, "risk": risks,
                                                "rule": short, "why": texts},
                           arguments=arguments, task=short, step=short, target=texts, diff=texts, argv=_few(short),
                           cwd=short)
approval_decisions = struct(au.ApprovalDecision, {"id": ids, "key": ids, "call_hash": short, "tool": short,
                                                  "risk": risks, "rule": short, "decision": decisions_},
                            always=st.booleans(), reason=texts, by=short, at=floats)
model_profiles = struct(pf.ModelProfile, name=short, edit_style=st.sampled_from(["search_replace", "whole_file"]),
                        tools=_few(short.filter(bool)), compact_tools=st.none() | st.booleans(),
                        temperature=st.none() | st.floats(0, 2), prompt_style=st.sampled_from(["full", "compact"]),
                        step_style=st.sampled_from(["tools", "file"]), review=st.sampled_from(["model", "checks"]))
budget_counts = st.integers(0, 10**12)
budget_minutes = st.floats(0, 10**7)
budgets = struct(bd.Budget, tokens=budget_counts, tool_calls=budget_counts, wall_minutes=budget_minutes,
                 model_minutes=budget_minutes)
spents = struct(bd.Spent, tokens_in=budget_counts, tokens_out=budget_counts, tool_calls=budget_counts,
                model_ms=non_negative, running_s=non_negative)
budget_changes = struct(bd.BudgetChange, {"value": st.floats(0, 10**12)},
                        how=st.sampled_from(["set", "add", "percent"]))
hook_specs = struct(hk.HookSpec, {"action": st.sampled_from(["script", "webhook", "confirm", "pause"])},
                    run=_few(short.filter(bool)), url=short, condition=short,
                    timeout=st.none() | st.floats(0, 3_600, exclude_min=True), message=short,
                    on_failure=st.none() | st.sampled_from(["deny", "allow", "continue"]), name=short)
hook_settings = struct(hk.HookSettings, **{point: _few(hook_specs, 1) for point in hk.POINTS},
                       allow_hosts=_few(short))
hook_decisions = struct(hk.HookDecision, decision=_literal(hk.Decision), reason=short, context=short, failed=short,
                        exit_code=st.none() | st.integers(-255, 255), duration_ms=non_negative)
anomaly_turns = st.integers(1, 1_000)
thresholds = struct(an.AnomalyThresholds, repeated_invalid=anomaly_turns, repeated_error=anomaly_turns,
                    edits_undone=anomaly_turns, no_progress=anomaly_turns, burn_turns=st.integers(2, 1_000),
                    burn_growth=st.floats(1.0, 1_000.0), spike_factor=st.floats(1.0, 1_000.0),
                    spike_floor=st.integers(0, 100_000_000), spike_history=anomaly_turns,
                    error_streak=anomaly_turns, verify_repeats=st.integers(2, 1_000))
calls_seen = struct(an.CallSeen, {"name": short}, target=short, args=short,
                    outcome=st.sampled_from(["ok", "error", "denied"]), code=short, result=short, said=texts,
                    sha=short, before=short)
invalids = struct(an.Invalid, {"answer": short, "correction": short}, said=texts)
observations = struct(an.Observation, {"step": short, "turn": st.integers(0, 1_000_000)}, attempt=anomaly_turns,
                      tokens_in=st.integers(0, 100_000_000), tokens_out=st.integers(0, 100_000_000),
                      invalid=st.none() | invalids, calls=_few(calls_seen).map(tuple))
verifications_seen = struct(an.VerifySeen, {"attempt": visits}, failed=_few(short), changed=st.booleans(),
                            after=small_counts)
settings = struct(
    ss.SessionSettings,
    autonomy=st.integers(0, 3),
    approvals=approvals_blocks,
    approval_mode=st.sampled_from(["wait", "auto", "skip", "fail"]),
    stage_timeouts=st.dictionaries(stages, seconds),
    stage_retry_limit=st.integers(0, 10),
    cycle_limits=st.dictionaries(cycle_kinds, st.integers(0, 10)),
    max_turns_per_step=st.integers(1, 100),
    command_timeout=seconds,
    output_limit_bytes=st.integers(1_024, 10_000_000),
    sandbox=sandbox_policies,
    provider=st.none() | providers,
    verify_commands=_few(texts.filter(bool)),
    planner_context_tokens=st.integers(500, 2_000_000),
    tool_result_tokens=st.integers(100, 1_000_000),
    clarification_timeout_s=st.floats(0, 30 * 86_400),
    step_retry_limit=st.integers(1, 10),
    step_timeout_s=seconds,
    token_budget=st.dictionaries(stages, st.integers(1, 100)),
    max_task_complexity=st.integers(1, 34),
    context_includes=_few(short.filter(bool)),
    context_excludes=_few(short.filter(bool)),
    tool_retry_limit=st.integers(0, 10),
    tool_retry_backoff_s=st.floats(0, 60),
    stage_retry_limits=st.dictionaries(stages, st.integers(0, 10)),
    plan_review=st.booleans(),
    profile=model_profiles,
    budget=budgets,
    hooks=hook_settings,
    anomalies=thresholds,
    mcp_servers=_few(st.deferred(lambda: STRATEGIES[m.McpServerRef])),  # registered below
)
overrides = struct(ss.SettingsOverride, stage_timeouts=st.dictionaries(stages, seconds),
                   step_timeout_s=st.none() | seconds, cycle_limit=st.none() | st.integers(0, 10),
                   max_turns_per_step=st.none() | st.integers(1, 100), provider=st.none() | providers,
                   budget=st.dictionaries(_literal(bd.BudgetKind), budget_changes, max_size=2))
feedback_items = struct(ss.FeedbackItem, {"label": short, "problem": texts}, detail=texts)
feedbacks = struct(ss.Feedback, {"source": _literal(ss.FeedbackSource), "summary": texts}, items=_few(feedback_items),
                   target=st.none() | stages, cycle=small_counts)
clarifications = struct(ss.Clarification, {"label": short, "question": texts, "answer": texts},
                        defaulted=st.booleans(), timed_out=st.booleans())
steering_notes = struct(ss.SteeringNote, {"id": ids, "text": texts.filter(bool)})
pauses = struct(ss.PauseInfo, {"kind": pause_kinds, "code": short, "message": texts}, stage=st.none() | stages,
                task=short, step=short, fix=texts, command=texts, resume=_literal(ResumeMode))
snapshots = struct(
    ss.SessionSnapshot,
    {"id": ids, "task": texts, "workspace": texts},
    status=_literal(ss.SessionStatus),
    stage=st.none() | stages,
    visits=st.dictionaries(stages, small_counts),
    attempt=visits,
    timeouts=small_counts,
    cycles=st.dictionaries(cycle_kinds, small_counts),
    plan_version=small_counts,
    feedback=st.none() | feedbacks,
    clarifications=_few(clarifications),
    last_result=st.none() | st.deferred(lambda: stage_results),
    pause=st.none() | pauses,
    error=st.none() | error_infos,
    exit_code=st.none() | exit_codes,
    created_at=floats,
    updated_at=floats,
    finished_at=st.none() | floats,
    settings=settings,
    kept_steps=_few(short),
    completed_tasks=_few(short),
    history=_few(feedbacks),
    retries=small_counts,
    failure_print=short,
    attempt_floor=small_counts,
    pause_requested_at=floats,
    steering=_few(steering_notes),
    approval=st.none() | approval_requests,
    approvals=_few(approval_decisions),
    changes=st.none() | st.deferred(lambda: workspace_changes),
    running_s=st.floats(0, 10**9),
    verifications=_few(verifications_seen),
    verify_responses=_few(_literal(an.Response)),
)

# --- plan --------------------------------------------------------------------------------

plan_texts = st.text(max_size=40)
checks = struct(pl.Check, {"command": st.text(min_size=1, max_size=40)},
                expect_exit=exit_codes, expect_output=st.none() | plan_texts)
criteria = struct(pl.Criterion, {"label": label, "description": plan_texts}, check=st.none() | checks)
resources = struct(pl.Resources, read=_few(short), write=_few(short), directories=_few(short),
                   commands=_few(short))
plan_steps = struct(
    pl.PlanStep,
    {"label": label, "title": plan_texts, "action": st.sampled_from(pl.ACTIONS)},
    description=plan_texts, expected_output=plan_texts, verification=plan_texts,
    depends_on=_few(label), id=short,
)
plan_tasks = struct(
    pl.PlanTask,
    {"label": label, "title": plan_texts},
    description=plan_texts, complexity=_literal(pl.Complexity), depends_on=_few(label),
    resources=resources, acceptance=_few(criteria, 2), steps=_few(plan_steps),
    id=short, status=st.sampled_from(["pending", "completed"]),
)
questions = struct(pl.Question, {"label": label, "question": plan_texts},
                   options=_few(short), free_text=st.booleans(), default=short)
task_plans = struct(
    pl.TaskPlan,
    {"goal": plan_texts},
    status=st.sampled_from(["ready", "needs_clarification"]), tasks=_few(plan_tasks, 2),
    questions=_few(questions, 2), id=short, version=st.integers(0, 10_000), change_summary=plan_texts,
)

# --- results -----------------------------------------------------------------------------

verdicts = struct(rs.CriterionVerdict, {"label": short, "passed": st.booleans()}, evidence=texts)
verifier_answers = struct(rs.VerifierAnswer, {"passed": st.booleans()}, summary=texts,
                          criteria=_few(verdicts))
review_issues = struct(rs.ReviewIssue, {"problem": texts}, criterion=short, suggestion=texts)
reviewer_answers = struct(rs.ReviewerAnswer,
                          {"decision": st.sampled_from(["approve", "request_changes", "replan"])},
                          summary=texts, issues=_few(review_issues))
file_changes = struct(rs.FileChange, {"status": st.sampled_from(list(rs.CHANGE_STATUS.values())), "path": short},
                      old=short)
workspace_changes: st.SearchStrategy[Any] = struct(rs.WorkspaceChanges, files=_few(file_changes), total=counts,
                                                   at=floats)
tool_results = struct(
    rs.ToolResult,
    {"key": ids, "tool": short, "ok": st.booleans()},
    output=texts, error=st.none() | error_infos, exit_code=st.none() | signed,
    duration_ms=non_negative, outcome=st.sampled_from(["done", "unknown"]), replayed=st.booleans(),
    risk=risks, path=short, isolation=short, changes=st.none() | workspace_changes,
    sha256=st.just("") | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
usages = struct(rs.Usage, prompt_tokens=counts, completion_tokens=counts, estimated=st.booleans(),
                cached_tokens=counts, prompt_n=counts, prompt_ms=millis, completion_ms=millis)
model_tool_calls = struct(rs.ModelToolCall, {"id": short, "name": short}, arguments=arguments,
                          invalid_arguments=texts)
model_answers = struct(rs.ModelAnswer, content=texts, tool_calls=_few(model_tool_calls), usage=usages,
                       finish_reason=st.text(max_size=64), format_error=texts)
step_records = struct(
    rs.StepRecord,
    {"session_id": ids, "visit": visits, "task": short, "step": short,
     "status": st.sampled_from(["completed", "failed", "blocked"])},
    summary=texts, turns=small_counts, tool_calls=counts, files_changed=_few(short), at=floats, code=short,
    streak=_few(observations, 2),
)
execution_reports = struct(rs.ExecutionReport, steps=_few(step_records), files_changed=_few(short),
                           kept=_few(short))
stage_metrics = struct(rs.StageMetrics, duration_ms=non_negative, model_calls=counts,
                       replayed_model_calls=counts, tool_calls=counts, tokens_in=counts, tokens_out=counts,
                       tokens_cached=counts,
                       prompt_tokens_est=counts, largest_prompt_est=counts, budget_tokens=counts,
                       model_ms=non_negative)
rule_names = st.sampled_from(["passed", "criteria", "files", "all"])
reworks = struct(rs.Rework, {"rule": rule_names}, reason=texts, rerun=_few(short), kept=_few(short),
                 completed_tasks=_few(short))
requirements = struct(rs.Requirement, events=_few(ids))
stage_results: st.SearchStrategy[Any] = struct(
    rs.StageResult,
    {"session_id": ids, "stage": stages, "visit": visits, "attempt": visits, "ok": st.booleans()},
    summary=texts, plan=st.none() | task_plans, execution=st.none() | execution_reports,
    verification=st.none() | verifier_answers, review=st.none() | reviewer_answers,
    error=st.none() | error_infos, metrics=stage_metrics, rework=st.none() | reworks,
    approval=st.none() | approval_requests, requires=st.none() | requirements,
    changes=st.none() | workspace_changes,
)

# --- events ------------------------------------------------------------------------------

_event_base = {"id": ids, "session_id": ids}
_event_optional = {"seq": naturals, "at": floats}


def _event(cls: type, required: dict[str, st.SearchStrategy[Any]] | None = None,
           **optional: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return struct(cls, {**_event_base, **(required or {})}, **_event_optional, **optional)


_event(ev.SessionCreated, {"task": texts, "workspace": texts}, overrode_hold=texts)
_event(ev.Transitioned, {"source": st.sampled_from([*ss.STAGES, "start"]),
                         "target": st.sampled_from([*ss.STAGES, "completed"])},
       visit=visits, reason=texts, cycle_kind=st.none() | cycle_kinds, cycle=small_counts)
_event(ev.StageRetried, {"stage": stages, "visit": visits, "attempt": visits, "reason": texts})
_event(ev.StageFinished, {"stage": stages, "visit": visits, "attempt": visits, "ok": st.booleans()},
       duration_ms=floats, summary=texts, error=st.none() | error_infos, tokens_est=naturals,
       largest_prompt_est=naturals, budget_tokens=naturals, tokens_in=naturals, tokens_out=naturals,
       tokens_cached=naturals,
       model_ms=non_negative, changes=st.none() | workspace_changes, provider=short, model=short,
       model_calls=naturals, replayed_model_calls=naturals)
_event(ev.ReworkChosen, {"visit": visits, "rule": rule_names}, reason=texts, rerun=_few(short), kept=_few(short),
       completed_tasks=_few(short))
_event(ev.PlanRecorded, {"version": st.integers(1, INT64), "goal": texts, "tasks": signed, "steps": signed},
       status=short)
_event(ev.StepStarted, {"visit": visits, "task": short, "step": short}, title=texts)
tool_called_events = _event(ev.ToolCalled, {"key": ids, "tool": short}, target=short, ok=st.booleans(), summary=texts,
       outcome=st.sampled_from(["done", "unknown"]), duration_ms=floats, risk=risks, isolation=short,
       counted=st.booleans())
_event(ev.TurnAnswered, {"visit": visits, "task": short, "step": short, "turn": visits},
       tool_calls=small_counts, prompt_tokens=counts, completion_tokens=counts, estimated=st.booleans(),
       finish_reason=short, correction=texts, provider=short, model=short, duration_ms=non_negative,
       first_token_ms=non_negative, replayed=st.booleans())
_event(ev.StepFinished, {"visit": visits, "task": short, "step": short,
                         "status": st.sampled_from(["completed", "failed", "blocked"])}, summary=texts)
_event(ev.CheckRan, {"visit": visits, "label": short, "command": texts, "passed": st.booleans()},
       exit_code=st.none() | signed, evidence=texts)
_event(ev.SessionPaused, {"kind": pause_kinds, "code": short, "message": texts, "exit_code": signed},
       task=short, step=short, fix=texts, command=texts)
_event(ev.StepRetried, {"visit": visits, "task": short, "step": short, "attempt": st.integers(2, 100),
                        "of": st.integers(1, 100)}, code=short, reason=texts)
_event(ev.SettingsChanged, {"changes": _few(texts)}, by=short)
_event(ev.SessionResumed, reason=texts, answers=_few(clarifications))
_event(ev.PauseRequested, stage=short)
_event(ev.Steered, {"text": texts}, stage=short)
_event(ev.ApprovalDecided, {"key": ids, "call_hash": short, "tool": short, "decision": decisions_}, target=texts,
       risk=short, rule=short, always=st.booleans(), reason=texts, by=short)
_event(ev.CheckpointTaken, {"checkpoint": short}, key=ids, tool=short, target=texts, stage=short, task=short,
       step=short, took_ms=non_negative, files=naturals, skipped=naturals)
_event(ev.WorkspaceRestored, {"to": short}, checkpoint=short, written=naturals, deleted=naturals, left=_few(texts),
       forced=st.booleans(), by=short)
_event(ev.HookRan, {"point": short, "hook": short}, occurrence=short, decision=short, reason=texts, context=texts,
       failed=texts, exit_code=st.none() | signed, duration_ms=non_negative, action=short)
_event(ev.HookStarted, {"point": short, "hook": short}, occurrence=short)
_event(ev.BudgetWarning, {"kind": short, "used": floats, "limit": floats}, stage=short)
_event(ev.AnomalyDetected, {"kind": _literal(an.Kind), "evidence": texts, "score": st.integers(0, 100),
                            "response": _literal(an.Response)}, stage=stages, visit=visits, task=short, step=short,
       turns=_few(st.integers(0, 1_000_000)), health=st.integers(0, 100))
_event(ev.SessionFinished, {"status": st.sampled_from(["completed", "failed", "cancelled"]),
                            "exit_code": signed}, error=st.none() | error_infos, summary=texts,
       changes=st.none() | workspace_changes)

events = st.one_of([STRATEGIES[cls] for cls in get_args(ev.Event)])

# --- messages ----------------------------------------------------------------------------

envelopes = struct(
    m.Envelope,
    {"id": ids},
    v=st.integers(0, 255), correlation_id=st.none() | ids, session_id=st.none() | ids,
    trace_id=short, span_id=short, sender=short, epoch=naturals, sent_at_ms=naturals,
    deadline_ms=naturals, attempt=st.integers(1, 1_000_000),
)
struct(m.Error, {"error": error_infos})
struct(m.Ack, detail=texts)

struct(m.SubmitTask, {"session_id": ids, "task": st.text(min_size=1, max_size=40),
                      "workspace": st.text(min_size=1, max_size=40), "settings": settings},
       force=st.booleans())
struct(m.GetStatus)
struct(m.CancelSession, {"session_id": ids}, reason=texts)
struct(m.ResumeSession, {"session_id": ids}, answers=_few(clarifications), overrides=st.none() | overrides)
struct(m.Shutdown, reason=texts)
struct(m.PauseSession, {"session_id": ids})
struct(m.SteerSession, {"session_id": ids, "text": texts.filter(bool)})
struct(m.ApprovePlan, {"session_id": ids})
struct(m.ReplanSession, {"session_id": ids, "feedback": texts.filter(bool)})
struct(m.RewindSession, {"session_id": ids, "checkpoint": short}, task=short, step=short, steering=texts)
struct(m.DecideApproval, {"session_id": ids, "decision": decisions_}, always=st.booleans(), reason=texts, key=short,
       by=short)
actor_statuses = struct(
    m.ActorStatus,
    {"instance": short, "actor": short, "state": _literal(m.ActorState)},
    pid=st.none() | signed, epoch=signed, restarts=signed, started_at=st.none() | floats,
    uptime_s=floats, heartbeat_age_s=st.none() | floats, busy=signed, reason=texts,
    info=st.dictionaries(short, texts, max_size=2),
)
struct(m.StatusReport, {"pid": signed, "home": short, "started_at": floats},
       degraded=st.booleans(), reason=texts, actors=_few(actor_statuses), sessions_active=signed)
struct(m.SessionAccepted, {"session": snapshots})

record_model_answers = struct(m.RecordModelAnswer, {"request_hash": ids, "answer": model_answers},
                              seq=st.integers(-1, INT64), session_id=short, stage=st.none() | stages,
                              model_ms=non_negative)
journaled_reads = struct(m.JournaledRead, {"key": ids, "result": tool_results})
commits = struct(m.Commit, {"session_id": ids}, events=_few(events), snapshot=st.none() | snapshots,
                 plan=st.none() | task_plans, steps=_few(step_records), answers=_few(record_model_answers),
                 reads=_few(journaled_reads), index_for=st.none() | stages,
                 requires=st.none() | requirements)
struct(m.GetReplayIndex, {"session_id": ids, "stage": stages})
struct(m.GetModelAnswers, {"session_id": ids}, stage=st.none() | stages, after_seq=st.integers(-1, INT64),
       limit=st.integers(0, 10_000))
recorded_answers = struct(m.RecordedAnswer, {"stage": stages, "seq": naturals, "answer": model_answers})
struct(m.ModelAnswerList, answers=_few(recorded_answers), last=st.dictionaries(stages, naturals, max_size=2))
replay_indexes = struct(m.ReplayIndex, claims=st.dictionaries(ids, naturals, max_size=3), tool_keys=_few(ids),
                        steps=_few(step_records), spent=spents,
                        hooks=st.dictionaries(ids, hook_decisions, max_size=2), hooks_started=_few(ids))
struct(m.GetSession, {"session_id": ids})
struct(m.ListSessions, statuses=_few(short), limit=st.integers(1, 100_000))
struct(m.GetEvents, {"session_id": ids}, after_seq=naturals, limit=st.integers(1, 100_000))
struct(m.GetPlan, {"session_id": ids}, version=naturals)
struct(m.GetSteps, {"session_id": ids, "visit": st.integers(1, INT64)})
struct(m.BeginToolCall, {"key": ids, "session_id": ids, "tool": short},
       arguments=arguments, risk=risks, pre_image=st.none() | texts)
struct(m.FinishToolCall, {"key": ids, "session_id": ids, "result": tool_results, "event": events,
                          "rerun_safe": st.booleans()}, commit=st.none() | commits)
struct(m.ClaimModelAnswer, {"request_hash": ids, "session_id": ids, "stage": stages},
       answers=_few(record_model_answers), commit=st.none() | commits)
struct(m.Committed, seqs=_few(signed), result=st.none() | tool_results, index=st.none() | replay_indexes)
struct(m.SessionFound, {"session": snapshots}, spent=st.none() | spents)
struct(m.SessionList, sessions=_few(snapshots, 2))
struct(m.EventList, events=_few(events))
struct(m.PlanFound, {"plan": task_plans})
struct(m.StepList, steps=_few(step_records))
struct(m.ToolCallState, {"state": st.sampled_from(["new", "pending", "done"])},
       pre_image=st.none() | texts, result=st.none() | tool_results)
struct(m.ModelAnswerClaim, {"seq": naturals}, answer=st.none() | model_answers)

struct(m.RunStage, {"session_id": ids, "stage": stages, "visit": visits, "attempt": visits,
                    "task": texts, "workspace": texts, "settings": settings},
       plan=st.none() | task_plans, feedback=st.none() | feedbacks, previous=st.none() | stage_results,
       clarifications=_few(clarifications), kept_steps=_few(short), history=_few(feedbacks),
       steering=_few(steering_notes), approvals=_few(approval_decisions), replay=st.none() | replay_indexes,
       running_s=st.floats(0, 10**9))
struct(m.StageDone, {"result": stage_results})

struct(m.RunTool, {"key": ids, "session_id": ids, "workspace": texts, "tool": short},
       arguments=arguments,
       timeout_s=st.floats(min_value=0, max_value=3_600, exclude_min=True, allow_nan=False),
       output_limit_bytes=st.integers(1_024, 10_000_000), policy=sandbox_policies, commit=st.none() | commits,
       approval=short, held=st.booleans(), site=st.none() | call_sites, mcp_hash=short)
struct(m.ToolDone, {"result": tool_results}, event=st.none() | tool_called_events)
struct(m.RestoreWorkspace, {"session_id": ids, "workspace": texts}, to=short, last=st.booleans(),
       force=st.booleans(), apply=st.booleans(), by=st.sampled_from(["undo", "rewind"]), policy=sandbox_policies)
struct(m.Restored, {"target": short}, applied=st.booleans(), write=_few(texts), delete=_few(texts), left=_few(texts),
       kept=_few(texts), checkpoint=short)

hints = st.none() | st.booleans()
mcp_annotations = struct(mc.McpAnnotations, title=st.none() | short, read_only_hint=hints, destructive_hint=hints,
                         idempotent_hint=hints, open_world_hint=hints)
mcp_configs = struct(mc.McpServerConfig, command=short, args=_few(short), env=st.dictionaries(short, texts, max_size=2),
                     pass_env=_few(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)),
                     url=short, enabled_tools=_few(short), disabled_tools=_few(short),
                     timeout_s=st.floats(min_value=0, max_value=3_600, exclude_min=True, allow_nan=False),
                     trusted=st.booleans(), risk=st.dictionaries(short, risks, max_size=2), network=st.booleans(),
                     writes=st.booleans(), enabled=st.booleans())
mcp_tool_defs = struct(mc.McpToolDef, {"server": short, "name": short}, description=texts, input_schema=arguments,
                       annotations=st.none() | mcp_annotations)
mcp_refs = struct(m.McpServerRef, {"name": short, "config": mcp_configs})
struct(m.McpListTools, {"workspace": texts}, session_id=short, servers=_few(mcp_refs))
mcp_tool_infos = struct(m.McpToolInfo, {"name": short, "definition": mcp_tool_defs, "risk": risks, "hash": short},
                        rerun_safe=st.booleans(), pinned=short,
                        state=st.sampled_from(["offered", "changed", "filtered"]),
                        pinned_definition=st.none() | mcp_tool_defs)
mcp_states = struct(m.McpServerState, {"name": short, "transport": st.sampled_from(["stdio", "http"]),
                                       "state": st.sampled_from(["starting", "ready", "restarting", "failed",
                                                                 "stopped"])},
                    tools=small_counts, isolation=short, restarts=small_counts, error=st.none() | error_infos)
struct(m.McpTools, tools=_few(mcp_tool_infos), servers=_few(mcp_states))
struct(m.McpCallTool, {"key": ids, "workspace": texts, "server": mcp_refs, "tool": short}, session_id=short,
       arguments=arguments, hash=short, output_limit_bytes=st.integers(1_024, 10_000_000))
struct(m.McpCalled, {"ok": st.booleans()}, output=texts, error=st.none() | error_infos)
struct(m.McpPin, {"server": short, "tool": short, "hash": short})

struct(m.Heartbeat, {"instance": short, "actor": short, "pid": signed, "epoch": signed,
                     "state": st.sampled_from(["starting", "ready", "stopping"])}, busy=_few(ids),
       info=st.dictionaries(short, texts, max_size=2))
struct(m.Stop, reason=texts)
struct(m.PauseWork, {"request_ids": _few(ids)}, reason=texts)
struct(m.SteerWork, {"request_ids": _few(ids), "note": steering_notes})
struct(ModelProgress, {"session_id": ids, "stage": stages}, visit=visits, call_site=st.text(max_size=200),
       tokens=st.integers(0, 10**9), elapsed_s=st.floats(0, 10**7, allow_nan=False),
       counted_by=st.sampled_from(["chunks", "server"]), done=st.booleans(), attempt=visits)
struct(m.WorkerInfo, {"instance": short}, pid=signed, epoch=naturals, capacity=st.integers(1, 10_000),
       busy=_few(ids))


def struct_types() -> list[type]:
    """Every Struct a strategy is registered for (for the field coverage check)."""
    return [cls for cls in STRATEGIES if issubclass(cls, msgspec.Struct)]
