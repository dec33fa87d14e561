"""The ``acode`` command: thin typer commands over the actors' protocol.

Commands parse arguments, send one message (or follow a session), and render the answer;
nothing here holds state the actors need. Errors print one line with their code, never a
traceback. Exit codes of ``run``/``resume``/``answer`` follow seed 000: 0 done, 1 failed,
20 stage timeout, 21 cycle limit, 22 human required (escalation, model unavailable,
invalid plan, questions, plan review, paused by the user), 23 cancelled; and seed
004's where a step's outcome paused the session: 30 step failed, 31 turn limit, 32 sandbox violation, 34 step timeout.
"""

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import typer

from actors import private
from actors.paths import RunPaths
from cli import approvals, daemon, render
from cli.config import provider_spec, resolve, session_settings, up_options
from cli.connection import Connection, coordinator_pid
from cli.follow import attach_and_print, follow_and_print, print_json, read_events
from cli.render import echo
from protocol.autonomy import ApprovalRequest
from protocol.errors import AcodeError, CliError, ModelError
from protocol.events import StepStarted
from protocol.ids import new_id
from protocol.messages import (
    CancelSession,
    DecideApproval,
    GetEvents,
    GetPlan,
    GetSession,
    GetStatus,
    ListSessions,
    Message,
    PauseSession,
    ReplanSession,
    ResumeSession,
    SteerSession,
    SubmitTask,
)
from protocol.plan import TaskPlan, with_status
from protocol.printable import printable
from protocol.script import load_script
from protocol.session import (
    MAX_STEERING_CHARS,
    Clarification,
    ProviderSpec,
    ScriptedProvider,
    SessionSnapshot,
    SettingsOverride,
)
from protocol.stages import STAGES, Stage
from protocol.task import check_task
from protocol.text import find_bad_text

__all__ = ["app", "main"]

app = typer.Typer(name="acode", help="Local-first agentic coding: plan, execute, verify, review.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  rich_markup_mode=None)  # plain help: rich costs ~90 ms of start-up per command
_state: dict[str, Any] = {"home": None}
PROVIDERS = ("ollama", "openai", "scripted")

Home = Annotated[Path | None, typer.Option("--home", help="acode home (default $ACODE_HOME or ~/.acode)",
                                              show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="machine-readable JSON output")]


@app.callback()
def _root(home: Home = None) -> None:
    _state["home"] = home


def _paths() -> RunPaths:
    return RunPaths.for_home(_state["home"])


# -- lifecycle --------------------------------------------------------------------------------


@app.command()
def up(
    detach: Annotated[bool, typer.Option("--detach", "-d", help="run in the background; return when ready")] = False,
    workers: Annotated[list[str] | None, typer.Option(
        "--workers", help="instances per stage, e.g. --workers executor=3 (repeatable)")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")] = "info",
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for readiness (--detach)")] = 60.0,
) -> None:
    """Start the coordinator, broker, persistence, sandbox and the four stage actors."""
    paths = _paths()
    flags: dict[str, Any] = {}
    for item in workers or []:
        stage, sep, count = item.partition("=")
        if not sep or stage not in STAGES or not count.isdigit():
            raise CliError(f"--workers {item!r} is not STAGE=COUNT with STAGE one of {', '.join(STAGES)}")
        flags[f"workers.{stage}"] = int(count)
    for changed in paths.prepare():  # a home an older acode (or a hand) made looser: one line per path
        echo(f"acode up: made private: {changed}", err=True)
    config = resolve(home=paths.home, flags=flags)
    options, interval, liveness = up_options(config)
    spec = daemon.coordinator_spec(paths, options, heartbeat_interval=interval, liveness=liveness,
                                   log_level=log_level)
    if not detach:
        pid = coordinator_pid(paths)
        if pid is not None:
            raise CliError(f"acode is already running for {paths.home} (coordinator pid {pid})",
                           code="ACODE-CLI-001")
        echo(f"acode up: home {paths.home}; Ctrl-C or `acode down` stops it", err=True)
        raise typer.Exit(daemon.run_foreground(spec))
    report, started = daemon.start_detached(spec, timeout=timeout)
    if report.degraded:
        echo(render.status_table(report))
        raise CliError(f"acode is running DEGRADED: {report.reason}; fix the cause, then `acode down` and "
                       "`acode up` (sessions that need the failed actor are paused)", code="ACODE-SUP-001")
    echo(("acode is up" if started else "acode was already running") +
         f": coordinator pid {report.pid}, {len(report.actors)} actors ready, home {paths.home}")


@app.command()
def down(timeout: Annotated[float, typer.Option("--timeout", help="seconds per escalation step")] = 30.0) -> None:
    """Stop every actor (ask, then SIGTERM, then SIGKILL); no process remains."""
    paths = _paths()
    pid = daemon.stop(paths, timeout=timeout)
    echo(f"acode stopped (coordinator pid {pid})" if pid else f"acode was not running for {paths.home}")


@app.command()
def status(
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="whose sandbox paths to show")] = Path("."),
    json_out: Json = False,
) -> None:
    """Every actor (pid, state, epoch, restarts, uptime, last heartbeat), the sandbox's
    isolation, what commands read and the workspace's configured read and write paths,
    then the sessions running or paused, with their stage and step."""
    from cli.doctor import configured_paths

    with Connection(_state["home"]) as connection:
        report = connection.coordinator(GetStatus())
        if json_out:
            print_json(report)
            return
        active = connection.persistence(ListSessions(statuses=["running", "paused"], limit=1_000)).sessions
        where = {s.id: _where(connection, s) for s in active}
    echo(render.status_table(report))
    echo(configured_paths(_paths(), workspace.expanduser().resolve()))
    if active:
        echo("")
        echo(render.active_sessions(active, where))

def _where(connection: Connection, session: SessionSnapshot) -> str:
    """Where a session stands: ``executor T2/S3, step 5 of 9``, ``verifier (visit 2)``, ``paused (user)``."""
    if session.status == "paused":
        kind = session.pause.kind if session.pause else "?"
        return f"paused ({kind}) in {session.stage or '-'}"
    pausing = " (pausing: it stops at its next safe point)" if session.pause_requested_at else ""
    where = f"{session.stage}" + (f" (visit {session.visit})" if session.visit > 1 else "")
    if session.stage != "executor" or not session.plan_version:
        return where + pausing
    started = [e for e in read_events(connection, session.id) if isinstance(e, StepStarted)]
    if not started:
        return where + pausing
    last = started[-1]
    plan: TaskPlan = connection.persistence(GetPlan(session_id=session.id, version=session.plan_version)).plan
    order = [(task.label, step.label) for task in plan.tasks for step in task.steps]
    number = order.index((last.task, last.step)) + 1 if (last.task, last.step) in order else 0
    return f"executor {last.task}/{last.step}" + (f", step {number} of {len(order)}" if number else "") + pausing


# -- sessions ---------------------------------------------------------------------------------


def _session_id(connection: Connection, given: str) -> str:
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


@app.command()
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
) -> None:
    """Submit a task and follow it through every stage to a final state.

    A call the session's autonomy level does not allow pauses it ``awaiting_approval``: on a
    terminal ``acode run`` asks inline; off one, ``approvals.non_interactive_policy`` decides;
    with ``--detach`` the session waits for ``acode approve``/``acode deny``."""
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
                             "autonomy": autonomy}
    for stage in STAGES:
        flags[f"orchestration.{stage}_timeout"] = stage_timeout
    paths = _paths()
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
        session = follow_and_print(connection, session_id, json_out=json_out)
        if mode == "wait":
            session = approvals.prompt_loop(connection, session, json_out=json_out)
    raise typer.Exit(session.exit_code or 0)


@app.command()
def attach(
    session_id: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    replay: Annotated[int, typer.Option("--replay", min=0, help="progress lines of the past shown first")] = 20,
    json_out: Json = False,
) -> None:
    """Follow a running or paused session again: its recent progress, then live (any number of terminals)."""
    with Connection(_state["home"]) as connection:
        connection.require_running()
        session = attach_and_print(connection, _session_id(connection, session_id), replay=replay, json_out=json_out)
        if approvals.interactive() and session.settings.approval_mode == "wait":  # a call waits: ask here too
            session = approvals.prompt_loop(connection, session, json_out=json_out)
    raise typer.Exit(session.exit_code or 0)


@app.command()
def sessions(
    json_out: Json = False,
    status_filter: Annotated[list[str] | None, typer.Option("--status", help="only these statuses")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
) -> None:
    """List sessions, newest first."""
    with Connection(_state["home"]) as connection:
        reply = connection.persistence(ListSessions(statuses=status_filter or [], limit=limit))
    if json_out:
        print_json(reply.sessions)
    else:
        echo(render.sessions_table(reply.sessions))


@app.command()
def show(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    json_out: Json = False,
) -> None:
    """One session: state, every transition with timing, files changed."""
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        snapshot = connection.persistence(GetSession(session_id=session_id)).session
        events = connection.persistence(GetEvents(session_id=session_id)).events
        plan = None
        if snapshot.plan_version:
            plan = _real_status(connection, snapshot, connection.persistence(GetPlan(session_id=session_id)).plan)
    if json_out:
        print_json({"session": snapshot, "plan": plan, "events": events})
    else:
        echo(render.session_detail(snapshot, events))


@app.command()
def cancel(session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")]) -> None:
    """Cancel a running or paused session (exit code 23 for its `acode run`)."""
    with Connection(_state["home"]) as connection:
        reply = connection.coordinator(CancelSession(session_id=_session_id(connection, session)))
    echo(f"session {reply.session.id} {reply.session.status}")


@app.command()
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
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Continue a paused or failed session from where it stopped, and follow it.

    Finished steps stay finished; what stopped it gets a fresh round. The options change
    the session's settings from now on (recorded as an event): only a human raises a limit.
    """
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
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        snapshot: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        spec = None
        if provider or model or base_url or script:
            spec = _provider_override(snapshot, provider=provider, model=model, base_url=base_url, script=script)
        stages: dict[Stage, float] = dict.fromkeys(STAGES, stage_timeout) if stage_timeout else {}
        stages.update({s: t for s, t in timeouts.items() if t is not None})
        overrides = SettingsOverride(
            stage_timeouts=stages,
            step_timeout_s=step_timeout, cycle_limit=cycle_limit, max_turns_per_step=max_turns, provider=spec)
        body = ResumeSession(session_id=session_id, overrides=None if overrides.is_empty() else overrides)
        _follow_resumed(connection, session_id, body, detach=detach, json_out=json_out)


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
    spec = provider_spec(resolve(home=_paths().home, workspace=Path(snapshot.workspace), flags=flags))
    if spec is None:
        raise ModelError("no model given; pass --provider ollama --model NAME", code="ACODE-LLM-001")
    return spec


def _follow_resumed(connection: Connection, session_id: str, body: Message, *, detach: bool,
                    json_out: bool, done: str = "resumed") -> None:
    before = connection.persistence(GetEvents(session_id=session_id)).events
    connection.coordinator(body)
    if detach:
        echo(f"session {session_id} {done}")
        return
    # the events before count too: the files changed and the per-stage figures are the session's
    snapshot = follow_and_print(connection, session_id, json_out=json_out, after_seq=before[-1].seq if before else 0,
                                earlier=before)
    if approvals.interactive() and snapshot.settings.approval_mode == "wait":
        snapshot = approvals.prompt_loop(connection, snapshot, json_out=json_out)
    raise typer.Exit(snapshot.exit_code or 0)


# -- a human's hand on a session: pause, steer, plan review ---------------------------------


def _text_arg(text: str, what: str) -> str:
    """Steering or feedback text as given: not blank, at most MAX_STEERING_CHARS (ACODE-CLI-009)."""
    if not text.strip():
        raise CliError(f"the {what} is empty; say in a sentence what the session should do differently",
                       code="ACODE-CLI-009")
    if len(text) > MAX_STEERING_CHARS:
        raise CliError(f"the {what} is {len(text):,} characters; at most {MAX_STEERING_CHARS:,} are taken: say it "
                       "shorter", code="ACODE-CLI-009")
    return text


@app.command()
def pause(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="wait until the session has stopped")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for it to stop", min=0)] = 600.0,
) -> None:
    """Pause a running session at its next safe point: before its next tool call or model
    turn, or before the next stage (a model answer in flight is recorded first, so nothing
    is paid twice). `acode resume` continues it, at least 1 s later; a second pause changes nothing."""
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        before: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        snapshot: SessionSnapshot = connection.coordinator(PauseSession(session_id=session_id)).session
        if before.status == "paused":
            kind = before.pause.kind if before.pause else "?"
            echo(f"session {session_id} is paused already ({kind}); `acode resume {session_id}` continues it")
            return
        if before.pause_requested_at:
            echo(f"session {session_id} is pausing already: it stops at its next safe point")
        else:
            echo(f"pausing session {session_id}: it stops at its next safe point")
        deadline = time.monotonic() + timeout
        while wait and snapshot.status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            snapshot = connection.persistence(GetSession(session_id=session_id)).session
    if snapshot.status == "paused":
        kind = snapshot.pause.kind if snapshot.pause else "?"
        echo(f"session {session_id} paused ({kind}) in {snapshot.stage or '-'}; `acode resume {session_id}` "
             "continues it")
    elif snapshot.status != "running":
        echo(f"session {session_id} is {snapshot.status}")
    elif wait:
        echo(f"session {session_id} has not reached a safe point in {timeout:g}s (a model answer may still be "
             "coming); it stops there: `acode status` shows it")


@app.command()
def steer(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    text: Annotated[str, typer.Argument(help="guidance, e.g. \"keep the public API unchanged\"")],
) -> None:
    """Guide a running (or paused) session: the stage at work reads the text from its next
    model turn on, and so does every later stage; the model sees it fenced as untrusted text."""
    text = _text_arg(text, "steering text")
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        snapshot: SessionSnapshot = connection.coordinator(SteerSession(session_id=session_id, text=text)).session
    where = f"the {snapshot.stage} reads it at its next model turn" if snapshot.status == "running" and \
        snapshot.stage else "the next stage reads it"
    echo(f"steered session {session_id}: {where}, and every later stage too")


def _decide(session: str, decision: Literal["approve", "deny"], *, always: bool = False, reason: str = "",
            detach: bool, json_out: bool) -> None:
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        snapshot: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        body = approvals.decision_for(snapshot, decision, always=always, reason=reason, by=f"acode {decision}")
        if isinstance(body, DecideApproval) and snapshot.approval is not None:
            echo("\n".join(render.request_lines(snapshot.approval)))
            if always:
                _confirm_always(snapshot.approval)
        _follow_resumed(connection, session_id, body, detach=detach, json_out=json_out,
                        done="approved" if decision == "approve" else "denied")


def _confirm_always(request: ApprovalRequest) -> None:
    """Show what ``--always`` grants in full; on a terminal, ask before granting it."""
    echo("\n".join(render.always_lines(request)))
    if not approvals.interactive():
        echo("not a terminal: approving with this rule as --always asked")
        return
    echo("approve with this rule? [y/N]: ", nl=False)
    if sys.stdin.readline().strip().lower()[:1] != "y":
        raise CliError("nothing approved: the --always rule was not confirmed; `acode approve SESSION` approves "
                       "this call alone", code="ACODE-CLI-004")


@app.command()
def approve(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    always: Annotated[bool, typer.Option(
        "--always", help="also approve later calls with the same rule in this session: the same program, "
        "subcommand, option names and risk class (shown in full, confirmed on a terminal)")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Approve what a paused session waits for, and follow it on: the call it shows
    (``awaiting_approval``), or the plan under review (``plan_review``, `acode run --approve-plan`)."""
    _decide(session, "approve", always=always, detach=detach, json_out=json_out)


@app.command()
def deny(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    reason: Annotated[str, typer.Option("--reason", help="why; the model is told")] = "denied by the user",
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Deny the call a paused session waits for: the model is told "the user denied this: REASON"."""
    _decide(session, "deny", reason=reason, detach=detach, json_out=json_out)


@app.command()
def replan(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    feedback: Annotated[str, typer.Argument(help="what to change in the plan, in plain words")],
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Send a plan under review back to the planner with your feedback; the next version is shown again."""
    feedback = _text_arg(feedback, "feedback")
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        _follow_resumed(connection, session_id, ReplanSession(session_id=session_id, feedback=feedback),
                        detach=detach, json_out=json_out)


def _chosen(question: Any, given: str) -> str:
    """An answer as typed: an option's number picks that option; other text is free text."""
    text = given.strip()
    if text.isdigit() and question.options:
        number = int(text)
        if not 1 <= number <= len(question.options):
            raise CliError(f"{question.label} has options 1 to {len(question.options)}, not {number}",
                           code="ACODE-CLI-005")
        return str(question.options[number - 1])
    if not text:
        raise CliError(f"the answer to {question.label} is empty; give an option number or some text",
                       code="ACODE-CLI-005")
    if question.options and not question.free_text and text not in question.options:
        numbered = "; ".join(f"{n}) {o}" for n, o in enumerate(question.options, 1))
        raise CliError(f"{question.label} takes one of its options ({numbered}), not {text!r}",
                       code="ACODE-CLI-005")
    return text


def collect_answers(plan: TaskPlan, given: list[str], *, defaults: bool, ask: Any = None) -> list[Clarification]:
    """Answers for every question of ``plan``: ``LABEL=answer`` pairs first, then each
    remaining one from ``ask(question)`` (a prompt) or, with ``defaults``, its default."""
    by_label = {q.label: q for q in plan.questions}
    answers: dict[str, Clarification] = {}
    for item in given:
        label, sep, text = item.partition("=")
        label = label.strip()
        if not sep:
            raise CliError(f"--answer {item!r} is not LABEL=ANSWER (e.g. Q1=2 or Q1='use pytest')",
                           code="ACODE-CLI-005")
        question = by_label.get(label)
        if question is None:
            raise CliError(f"the plan has no question {label!r}; its questions are {', '.join(by_label)}",
                           code="ACODE-CLI-005")
        answers[label] = Clarification(label=label, question=question.question, answer=_chosen(question, text))
    for question in plan.questions:
        if question.label in answers:
            continue
        if defaults:
            from actors.coordinator.orchestrator import default_answers

            answers[question.label] = next(a for a in default_answers(plan, timed_out=False)
                                           if a.label == question.label)
        elif ask is not None:
            answers[question.label] = Clarification(label=question.label, question=question.question,
                                                    answer=_chosen(question, ask(question)))
        else:
            raise CliError(f"no answer for {question.label} ({question.question}); pass --answer "
                           f"{question.label}=… or --defaults", code="ACODE-CLI-005")
    return [answers[q.label] for q in plan.questions]


@app.command()
def answer(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    answers: Annotated[list[str] | None, typer.Option("--answer", "-a", help="LABEL=ANSWER; an option's "
                                                      "number picks it (repeat for each question)")] = None,
    defaults: Annotated[bool, typer.Option("--defaults", help="use each unanswered question's default")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="do not follow the session")] = False,
    json_out: Json = False,
) -> None:
    """Answer the planner's questions of a paused session, and follow it on."""
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        snapshot: SessionSnapshot = connection.persistence(GetSession(session_id=session_id)).session
        if snapshot.pause is None or snapshot.pause.kind != "needs_input":
            state = f"paused for {snapshot.pause.kind}" if snapshot.pause else snapshot.status
            raise CliError(f"session {session_id} is {state}, not waiting for answers; see `acode show "
                           f"{session_id[:8]}`", code="ACODE-CLI-004")
        plan: TaskPlan = connection.persistence(GetPlan(session_id=session_id, version=snapshot.plan_version)).plan
        interactive = not answers and not defaults
        if interactive:
            echo("\n".join(render.question_lines(plan)))

        def ask(question: Any) -> str:
            default = question.default or (question.options[0] if question.options else None)
            shown = f" [{printable(default, lines=False)}]" if default else ""  # the model's words, escaped
            try:
                return str(typer.prompt(f"{printable(question.label, lines=False)}{shown}", default=default,
                                        show_default=False))
            except typer.Abort:
                raise CliError(f"no answer for {question.label}; pass --answer {question.label}=… or --defaults",
                               code="ACODE-CLI-005") from None

        chosen = collect_answers(plan, answers or [], defaults=defaults, ask=ask if interactive else None)
        _follow_resumed(connection, session_id, ResumeSession(session_id=session_id, answers=chosen),
                        detach=detach, json_out=json_out)


def _real_status(connection: Connection, snapshot: SessionSnapshot, plan: TaskPlan) -> TaskPlan:
    """``plan`` with each task's status as the session has it now: a plan version is stored
    as the planner made it; the session's verifications complete its tasks. For the current
    version that is the session's ``completed_tasks``; for an older one, the tasks the next
    version carried over as completed (same id)."""
    if plan.version >= snapshot.plan_version:
        return with_status(plan, snapshot.completed_tasks)
    after = connection.persistence(GetPlan(session_id=snapshot.id, version=plan.version + 1)).plan
    carried = {t.id for t in after.tasks if t.status == "completed"}
    return with_status(plan, [t.label for t in plan.tasks if t.id in carried or t.status == "completed"])


plan_app = typer.Typer(help="The plans of a session (every version is kept).", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(plan_app, name="plan")


@plan_app.command("show")
def plan_show(
    session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    version: Annotated[int, typer.Option("--version", "-v", help="plan version (default: the latest)", min=0)] = 0,
    json_out: Json = False,
) -> None:
    """Show a session's plan: tasks, steps, acceptance criteria, questions, changes."""
    with Connection(_state["home"]) as connection:
        session_id = _session_id(connection, session)
        plan = connection.persistence(GetPlan(session_id=session_id, version=version)).plan
        plan = _real_status(connection, connection.persistence(GetSession(session_id=session_id)).session, plan)
    if json_out:
        print_json(plan)
    else:
        echo(render.plan_detail(plan, session_id))


@app.command()
def doctor(
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="the project directory")] = Path("."),
    json_out: Json = False,
) -> None:
    """Check the model server, the model, the sandbox and the actors; one line each."""
    from cli.doctor import diagnose, render_checks

    checks = diagnose(_paths(), workspace.expanduser().resolve())
    if json_out:
        print_json(checks)
    else:
        echo(render_checks(checks))
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)


@app.command()
def trust(
    directory: Annotated[Path, typer.Argument(help="the workspace whose .agent/config.yml you trust")] = Path("."),
    list_: Annotated[bool, typer.Option("--list", help="list the trusted files and whether each is unchanged")]
    = False,
    revoke: Annotated[bool, typer.Option("--revoke", help="stop trusting DIR's file")] = False,
) -> None:
    """Trust DIR/.agent/config.yml as it is now: its settings may then loosen yours (README 'Configuration')."""
    from cli import trust as trusting
    from cli.config import decode_file

    home = _paths().home
    store = trusting.load_store(home)
    if list_:
        for name, sha in sorted(store.files.items()):
            try:
                state = "trusted" if trusting.digest(Path(name).read_bytes()) == sha else "changed: untrusted"
            except OSError:
                state = "missing"
            echo(f"{name}  {state}")
        if not store.files:
            echo(f"no workspace config is trusted (store {home / trusting.STORE_NAME})")
        return
    root = directory.expanduser()
    if not root.is_dir():
        raise CliError(f"{str(directory)!r} is not a directory; pass the workspace directory", code="ACODE-CLI-003")
    path = trusting.config_file(root)
    if revoke:
        if str(path) not in store.files:
            raise CliError(f"{path} is not trusted; `acode trust --list` shows what is", code="ACODE-CLI-003")
        trusting.save_store(home, trusting.TrustStore(files={k: v for k, v in store.files.items() if k != str(path)}))
        echo(f"no longer trusted: {path}; its loosening settings are ignored again")
        return
    user = resolve(home=home, notices=[])  # the user's own layers: file, environment
    try:
        text = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise CliError(f"{path} does not exist; there is nothing to trust in {root.resolve()}",
                       code="ACODE-CLI-003") from None
    granted = trusting.grants(user, decode_file(path, text, []))  # an invalid file is refused, not trusted
    trusting.save_store(home, trusting.TrustStore(files={**store.files, str(path): trusting.digest(text)}))
    echo(f"trusted: {path} (sha256 {trusting.digest(text)[:16]}…); a change to the file untrusts it")
    for key, value, base in granted:
        echo(f"  grants {key}: {value} (yours: {base})")
    if not granted:
        echo("  it grants nothing beyond your own settings")


@app.command()
def logs(
    instance: Annotated[str | None, typer.Argument(help="actor instance, e.g. executor")] = None,
    lines: Annotated[int, typer.Option("--lines", "-n")] = 40,
) -> None:
    """Show an actor's log tail (or list the log files)."""
    paths = _paths()
    if instance is None:
        names = sorted(p.stem for p in paths.logs.glob("*.log")) if paths.logs.exists() else []
        echo(f"logs in {paths.logs}: {', '.join(names) if names else 'none yet'}")
        return
    path = paths.log_file(instance)
    if not path.exists():
        raise CliError(f"no log for {instance!r} in {paths.logs}; `acode logs` lists them")
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 256 * lines))
        text = handle.read().decode(errors="replace").splitlines()[-lines:]
    echo("\n".join(text))


@app.command()
def demo(
    keep_running: Annotated[bool, typer.Option("--keep-running", help="leave the actors up afterwards")] = False,
) -> None:
    """Run the shipped example end to end (starts and stops acode if it was not running)."""
    from cli.demo import run_demo

    raise typer.Exit(run_demo(_paths(), keep_running=keep_running))


def main() -> None:
    private.enter()  # acode's own files are private to the user (actors.private)
    try:
        app(prog_name="acode")
    except AcodeError as exc:
        echo(f"acode: {exc}", err=True)
        raise SystemExit(1) from None
    except msgspec.ValidationError as exc:  # pragma: no cover - every input is validated above
        echo(f"acode: invalid input: {exc} (ACODE-CLI-003)", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
