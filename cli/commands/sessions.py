"""Sessions: ``acode run`` submits a task and follows it, ``attach`` follows one again,
``sessions`` and ``show`` list and show them, ``cancel`` ends one, ``resume`` continues one;
and what the steering commands share with them: a session id from its prefix, following a
resumed session, a plan with its tasks' real status.

Exit codes of ``run``/``resume``/``answer`` follow seed 000: 0 done, 1 failed, 20 stage
timeout, 21 cycle limit, 22 human required (escalation, model unavailable, invalid plan,
questions, plan review, paused by the user), 23 cancelled; and seed 004's where a step's
outcome paused the session: 30 step failed, 31 turn limit, 32 sandbox violation, 34 step timeout.
"""

from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from cli import approvals, render
from cli.commands.home import Json, home, run_paths
from cli.config import resolve
from cli.connection import Connection
from cli.follow import attach_and_print, follow_and_print, print_json, read_events
from cli.modeltext import ModelText
from cli.progress import session_detail
from cli.render import echo
from cli.settings import provider_spec, session_settings
from cli.show import print_view
from cli.views import step_timings
from protocol.budget import FLAGS, BudgetChange, BudgetKind, Spent, parse_change
from protocol.errors import CliError, ModelError
from protocol.health import session_health
from protocol.ids import new_id
from protocol.messages import (
    CancelSession,
    GetEvents,
    GetPlan,
    GetSession,
    ListSessions,
    Message,
    ResumeSession,
    SubmitTask,
)
from protocol.plan import TaskPlan, with_status
from protocol.script import load_script
from protocol.session import ProviderSpec, ScriptedProvider, SessionSnapshot, SettingsOverride
from protocol.stages import STAGES, Stage
from protocol.task import check_task
from protocol.text import find_bad_text

__all__ = ["PROVIDERS", "attach", "cancel", "follow_resumed", "full_session_id", "real_status", "resume", "run",
           "sessions", "show"]

PROVIDERS = ("ollama", "openai", "scripted")
Verbose = Annotated[bool, typer.Option(
    "--verbose", "-v", help="show the model's text under each turn and stage as the session runs")]


def full_session_id(connection: Connection, given: str) -> str:
    """Accept a full session id or a unique prefix of one."""
    if len(given) >= 36:
        return given
    reply = connection.persistence(ListSessions(limit=100_000))
    matches: list[str] = [s.id for s in reply.sessions if s.id.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CliError(f"no session starts with {given!r}; list them with `acode sessions`", code="ACODE-CLI-002")
    raise CliError(f"{len(matches)} sessions start with {given!r}; give more characters", code="ACODE-CLI-002")


def run(
    task: Annotated[str, typer.Argument(help="what to change, in plain words")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="the project directory")] = Path("."),
    provider: Annotated[str | None, typer.Option("--provider", help="ollama, openai or scripted")] = None,
    model: Annotated[str | None, typer.Option("--model", help="model name, e.g. qwen2.5-coder:7b")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="model server URL")] = None,
    script: Annotated[Path | None, typer.Option("--script", help="scripted model file (YAML)")] = None,
    stage_timeout: Annotated[float | None, typer.Option("--stage-timeout", help="seconds, every stage")] = None,
    cycle_limit: Annotated[int | None, typer.Option("--cycle-limit", help="cycles per kind (0-10)")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="executor turns per step")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="submit and return the session id")] = False,
    json_out: Json = False,
    force: Annotated[bool, typer.Option(
        "--force", help="start although an unfinished session holds the workspace (recorded in the log)")] = False,
    approve_plan: Annotated[bool, typer.Option(
        "--approve-plan", help="pause for your review of the plan before anything runs (acode approve / replan)")]
    = False,
    autonomy: Annotated[int | None, typer.Option(
        "--autonomy", min=0, max=3, help="0 ask before anything but reads, 1 edits run, 2 allowlisted commands "
        "run too (default), 3 everything the sandbox allows runs; fixed for the session")] = None,
    budget_tokens: Annotated[int | None, typer.Option(
        "--budget-tokens", min=0, help="model tokens (in and out) the whole session may use; 0: no limit")] = None,
    budget_tool_calls: Annotated[int | None, typer.Option(
        "--budget-tool-calls", min=0, help="tool calls the models may make; 0: no limit")] = None,
    budget_minutes: Annotated[float | None, typer.Option(
        "--budget-minutes", min=0, help="minutes the session may run (not paused); 0: no limit")] = None,
    budget_model_minutes: Annotated[float | None, typer.Option(
        "--budget-model-minutes", min=0, help="minutes of waiting for the model; 0: no limit")] = None,
    verbose: Verbose = False,
) -> None:
    """Submit a task and follow it through every stage to a final state.

    A call the session's autonomy level does not allow pauses it ``awaiting_approval``: on a
    terminal ``acode run`` asks inline; off one, ``approvals.non_interactive_policy`` decides;
    with ``--detach`` the session waits for ``acode approve``/``acode deny``."""
    _check_verbose(verbose, json_out)
    root = workspace.expanduser().resolve()
    if not root.is_dir():
        raise CliError(f"workspace {str(workspace)!r} is not a directory; create it or pass --workspace DIR")
    bad = find_bad_text(str(root))
    if bad is not None:  # a path's bytes that are not UTF-8 arrive as lone surrogates, which no message carries
        raise CliError(f"workspace {str(root)!r} is not a UTF-8 path (the byte \\x{ord(bad.char) & 0xff:02x} at "
                       f"character {bad.offset}); rename the directory to a UTF-8 name")
    if provider is not None and provider not in PROVIDERS:
        raise ModelError(f"provider {provider!r} is not available; available: {', '.join(PROVIDERS)}",
                         code="ACODE-LLM-001")
    check_task(task)
    flags: dict[str, Any] = {"model.provider": provider, "model.script": str(script.resolve()) if script else None,
                             "model.model": model, "model.base_url": base_url,
                             "orchestration.cycle_limit": cycle_limit, "executor.max_turns_per_step": max_turns,
                             "autonomy": autonomy, "budget.tokens": budget_tokens,
                             "budget.tool_calls": budget_tool_calls, "budget.wall_minutes": budget_minutes,
                             "budget.model_minutes": budget_model_minutes}
    for stage in STAGES:
        flags[f"orchestration.{stage}_timeout"] = stage_timeout
    paths = run_paths()
    if paths.home.resolve().is_relative_to(root):
        echo(f"acode: warning: the workspace {root} contains acode's home {paths.home}; the model's file tools "
                   "refuse it (ACODE-SBX-013) and commands see it masked, but a narrower workspace (-w) is safer",
                   err=True)
    settings = session_settings(resolve(home=paths.home, workspace=root, flags=flags), home=paths.home)
    if approve_plan:
        settings = msgspec.structs.replace(settings, plan_review=True)
    # who decides a prompt, fixed now: a human (the inline prompt, or `acode approve` after --detach), else the policy
    mode = "wait" if detach or approvals.interactive() else settings.approvals.non_interactive_policy
    settings = msgspec.structs.replace(settings, approval_mode=mode)
    if settings.provider is None:
        raise ModelError("no model configured; pass --provider ollama --model NAME (or --provider scripted "
                         "--script FILE), or set model: in .agent/config.yml (README 'Models')",
                         code="ACODE-LLM-001")
    with Connection(paths.home) as connection:
        connection.require_running()
        session_id = new_id()
        connection.coordinator(SubmitTask(session_id=session_id, task=task, workspace=str(root),
                                          settings=settings, force=force), timeout=30.0)
        if detach:
            echo(session_id)
            return
        model_text = ModelText(connection, session_id, fresh=True) if verbose else None
        session = follow_and_print(connection, session_id, json_out=json_out, model_text=model_text)
        if mode == "wait":
            session = approvals.prompt_loop(connection, session, json_out=json_out, model_text=model_text)
    raise typer.Exit(session.exit_code or 0)


def attach(
    session_id: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    replay: Annotated[int, typer.Option("--replay", min=0, help="progress lines of the past shown first")] = 20,
    json_out: Json = False,
    verbose: Verbose = False,
) -> None:
    """Follow a running or paused session again: its recent progress, then live (any number of terminals)."""
    _check_verbose(verbose, json_out)
    with Connection(home()) as connection:
        connection.require_running()
        session_id = full_session_id(connection, session_id)
        model_text = ModelText(connection, session_id) if verbose else None  # what is recorded now is the past
        session = attach_and_print(connection, session_id, replay=replay, json_out=json_out, model_text=model_text)
        if approvals.interactive() and session.settings.approval_mode == "wait":  # a call waits: ask here too
            session = approvals.prompt_loop(connection, session, json_out=json_out, model_text=model_text)
    raise typer.Exit(session.exit_code or 0)


def sessions(
    json_out: Json = False,
    status_filter: Annotated[list[str] | None, typer.Option("--status", help="only these statuses")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
) -> None:
    """List sessions, newest first."""
    with Connection(home()) as connection:
        reply = connection.persistence(ListSessions(statuses=status_filter or [], limit=limit))
    if json_out:
        print_json(reply.sessions)
    else:
        echo(render.sessions_table(reply.sessions))


def show(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    json_out: Json = False,
    stage: Annotated[str | None, typer.Option(
        "--stage", help="every visit of this stage: planner, executor, verifier or reviewer")] = None,
    cycle: Annotated[int | None, typer.Option(
        "--cycle", help="what happened in cycle N (0: the first pass, up to the first cycle)")] = None,
    answers: Annotated[bool, typer.Option(
        "--answers", help="the model's recorded answers in full (with --stage: that stage's)")] = False,
) -> None:
    """One session: state, budget use, health, every transition with timing, each step's time, files changed."""
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        found = connection.persistence(GetSession(session_id=session_id))
        snapshot = found.session
        spent = found.spent or Spent(running_s=snapshot.running_s)
        events = read_events(connection, session_id)
        if stage is not None or cycle is not None or answers:
            print_view(connection, session_id, events, stage=stage, cycle=cycle, answers=answers, json_out=json_out)
            return
        plan = None
        if snapshot.plan_version:
            plan = real_status(connection, snapshot, connection.persistence(GetPlan(session_id=session_id)).plan)
    if json_out:
        print_json({"session": snapshot, "plan": plan, "events": events,
                    "budget": {"limits": snapshot.settings.budget, "spent": spent},
                    "health": session_health(events, snapshot.settings.budget, spent),
                    "steps": step_timings(events)})
    else:
        echo(session_detail(snapshot, events, spent))


def cancel(session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")]) -> None:
    """Cancel a running or paused session (exit code 23 for its `acode run`)."""
    with Connection(home()) as connection:
        reply = connection.coordinator(CancelSession(session_id=full_session_id(connection, session)))
    echo(f"session {reply.session.id} {reply.session.status}")


def resume(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    stage_timeout: Annotated[float | None, typer.Option("--stage-timeout", help="seconds, every stage")] = None,
    planner_timeout: Annotated[float | None, typer.Option("--planner-timeout", help="seconds")] = None,
    executor_timeout: Annotated[float | None, typer.Option("--executor-timeout", help="seconds")] = None,
    verifier_timeout: Annotated[float | None, typer.Option("--verifier-timeout", help="seconds")] = None,
    reviewer_timeout: Annotated[float | None, typer.Option("--reviewer-timeout", help="seconds")] = None,
    step_timeout: Annotated[float | None, typer.Option("--step-timeout", help="seconds, one try of a step")] = None,
    cycle_limit: Annotated[int | None, typer.Option("--cycle-limit", help="cycles per kind (0-10)")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="executor turns per step (1-100)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="another model from now on")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="ollama, openai or scripted")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="another model server URL")] = None,
    script: Annotated[Path | None, typer.Option("--script", help="scripted model file (--provider scripted)")] = None,
    budget_tokens: Annotated[str | None, typer.Option(
        "--budget-tokens", help="the session's token limit: N, or more of it: +N, +N%")] = None,
    budget_tool_calls: Annotated[str | None, typer.Option(
        "--budget-tool-calls", help="its tool-call limit: N, +N or +N%")] = None,
    budget_minutes: Annotated[str | None, typer.Option(
        "--budget-minutes", help="its running-time limit in minutes: N, +N or +N%")] = None,
    budget_model_minutes: Annotated[str | None, typer.Option(
        "--budget-model-minutes", help="its model-time limit in minutes: N, +N or +N%")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
    verbose: Verbose = False,
) -> None:
    """Continue a paused or failed session from where it stopped, and follow it.

    Finished steps stay finished; what stopped it gets a fresh round. The options change
    the session's settings from now on (recorded as an event): only a human raises a limit.
    """
    _check_verbose(verbose, json_out)
    timeouts: dict[Stage, float | None] = {"planner": planner_timeout, "executor": executor_timeout,
                                           "verifier": verifier_timeout, "reviewer": reviewer_timeout}
    given = {"--stage-timeout": stage_timeout, "--step-timeout": step_timeout,
             **{f"--{s}-timeout": t for s, t in timeouts.items()}}
    for flag, value in given.items():
        if value is not None and not 0 < value <= 86_400:
            raise CliError(f"{flag} {value:g} is out of range; give seconds above 0, at most 86400")
    if cycle_limit is not None and not 0 <= cycle_limit <= 10:
        raise CliError(f"--cycle-limit {cycle_limit} is out of range; give 0 to 10 cycles per kind")
    if max_turns is not None and not 1 <= max_turns <= 100:
        raise CliError(f"--max-turns {max_turns} is out of range; give 1 to 100 turns per step")
    if provider is not None and provider not in PROVIDERS:
        raise ModelError(f"provider {provider!r} is not available; available: {', '.join(PROVIDERS)}",
                         code="ACODE-LLM-001")
    budget = _budget_changes({"tokens": budget_tokens, "tool_calls": budget_tool_calls,
                              "wall_minutes": budget_minutes, "model_minutes": budget_model_minutes})
    with Connection(home()) as connection:
        session_id = full_session_id(connection, session)
        snapshot: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        spec = None
        if provider or model or base_url or script:
            spec = _provider_override(snapshot, provider=provider, model=model, base_url=base_url, script=script)
        stages: dict[Stage, float] = dict.fromkeys(STAGES, stage_timeout) if stage_timeout else {}
        stages.update({s: t for s, t in timeouts.items() if t is not None})
        overrides = SettingsOverride(
            stage_timeouts=stages,
            step_timeout_s=step_timeout, cycle_limit=cycle_limit, max_turns_per_step=max_turns, provider=spec,
            budget=budget)
        body = ResumeSession(session_id=session_id, overrides=None if overrides.is_empty() else overrides)
        follow_resumed(connection, session_id, body, detach=detach, json_out=json_out, verbose=verbose)


def _check_verbose(verbose: bool, json_out: bool) -> None:
    if verbose and json_out:
        raise CliError("--verbose shows the model's text on the terminal, and --json prints the session's events "
                       "only; drop one of them (`acode show SESSION --answers --json` gives the answers as JSON)",
                       code="ACODE-CLI-003")


def _budget_changes(given: dict[BudgetKind, str | None]) -> dict[BudgetKind, BudgetChange]:
    """``--budget-…`` of ``acode resume``: each a new limit, ``+N`` or ``+N%`` (ACODE-CLI-003 otherwise)."""
    changes: dict[BudgetKind, BudgetChange] = {}
    for kind, text in given.items():
        if text is None:
            continue
        try:
            changes[kind] = parse_change(text)
        except ValueError as exc:
            raise CliError(f"{FLAGS[kind]} {exc}", code="ACODE-CLI-003") from exc
    return changes


def _provider_override(snapshot: SessionSnapshot, *, provider: str | None, model: str | None, base_url: str | None,
                       script: Path | None) -> ProviderSpec:
    """The session's model with ``--provider/--model/--base-url/--script`` applied: the same
    kind keeps its other settings; another kind is resolved from the configuration."""
    current = snapshot.settings.provider
    kind = provider or (current.__struct_config__.tag if current is not None else None)
    if kind == "scripted":
        if model or base_url:
            raise CliError("--model and --base-url are for the ollama and openai providers; the scripted one "
                           "takes --script FILE")
        if script is None:
            if isinstance(current, ScriptedProvider):
                return current
            raise CliError("--provider scripted needs --script FILE")
        text = script.read_text(errors="surrogateescape")  # bytes that are not UTF-8: load_script says so
        load_script(text, name=str(script))  # a bad file is refused here, before the session goes on
        return ScriptedProvider(script_yaml=text, script_name=str(script.resolve()))
    if script is not None:
        raise CliError("--script is for --provider scripted")
    if current is not None and not isinstance(current, ScriptedProvider) and kind == current.__struct_config__.tag:
        from actors.llm.locality import check_base_url

        changed = msgspec.structs.replace(current, **{k: v for k, v in (("model", model), ("base_url", base_url))
                                                       if v is not None})
        check_base_url(changed.base_url, allow_remote=changed.allow_remote)
        return changed
    flags = {"model.provider": kind, "model.model": model, "model.base_url": base_url}
    spec = provider_spec(resolve(home=run_paths().home, workspace=Path(snapshot.workspace), flags=flags))
    if spec is None:
        raise ModelError("no model given; pass --provider ollama --model NAME", code="ACODE-LLM-001")
    return spec


def follow_resumed(connection: Connection, session_id: str, body: Message, *, detach: bool,
                    json_out: bool, done: str = "resumed", verbose: bool = False) -> None:
    before = connection.persistence(GetEvents(session_id=session_id)).events
    model_text = ModelText(connection, session_id) if verbose and not detach else None  # before it goes on
    connection.coordinator(body)
    if detach:
        echo(f"session {session_id} {done}")
        return
    # the events before count too: the files changed and the per-stage figures are the session's
    snapshot = follow_and_print(connection, session_id, json_out=json_out, after_seq=before[-1].seq if before else 0,
                                earlier=before, model_text=model_text)
    if approvals.interactive() and snapshot.settings.approval_mode == "wait":
        snapshot = approvals.prompt_loop(connection, snapshot, json_out=json_out, model_text=model_text)
    raise typer.Exit(snapshot.exit_code or 0)


def real_status(connection: Connection, snapshot: SessionSnapshot, plan: TaskPlan) -> TaskPlan:
    """``plan`` with each task's status as the session has it now: a plan version is stored
    as the planner made it; the session's verifications complete its tasks. For the current
    version that is the session's ``completed_tasks``; for an older one, the tasks the next
    version carried over as completed (same id)."""
    if plan.version >= snapshot.plan_version:
        return with_status(plan, snapshot.completed_tasks)
    after = connection.persistence(GetPlan(session_id=snapshot.id, version=plan.version + 1)).plan
    carried = {t.id for t in after.tasks if t.status == "completed"}
    return with_status(plan, [t.label for t in plan.tasks if t.id in carried or t.status == "completed"])
