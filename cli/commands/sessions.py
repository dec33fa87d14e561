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
from typing import Annotated

import typer

from acode.client import Client
from acode.events import typed
from acode.stream import read_events
from cli import approvals, render
from cli.commands.home import Json, Verbose, home, run_paths
from cli.follow import attach_and_print, follow_and_print, print_json
from cli.modeltext import ModelText
from cli.progress import session_detail
from cli.render import echo
from cli.show import print_view
from cli.views import step_timings
from protocol.errors import CliError
from protocol.messages import Message, ResumeSession

__all__ = ["attach", "cancel", "check_verbose", "follow_resumed", "resume", "run", "sessions", "show"]


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
    check_verbose(verbose, json_out)
    paths = run_paths()
    root = workspace.expanduser().resolve()
    if not root.is_dir():
        raise CliError(f"workspace {str(workspace)!r} is not a directory; create it or pass --workspace DIR")
    if paths.home.resolve().is_relative_to(root):
        echo(f"acode: warning: the workspace {root} contains acode's home {paths.home}; the model's file tools "
             "refuse it (ACODE-SBX-013) and commands see it masked, but a narrower workspace (-w) is safer", err=True)
    # who decides a prompt, fixed now: a human (the inline prompt, or `acode approve` after --detach), else the policy
    wait = detach or approvals.interactive()
    with Client(paths.home) as client:
        session_id = client.submit(
            task, root, approvals="wait" if wait else "policy", force=force, approve_plan=approve_plan,
            provider=provider, model=model, base_url=base_url, script=script, stage_timeout=stage_timeout,
            cycle_limit=cycle_limit, max_turns=max_turns, autonomy=autonomy, budget_tokens=budget_tokens,
            budget_tool_calls=budget_tool_calls, budget_minutes=budget_minutes,
            budget_model_minutes=budget_model_minutes).id
        if detach:
            echo(session_id)
            return
        model_text = ModelText(client.connection, session_id, fresh=True) if verbose else None
        session = follow_and_print(client, session_id, json_out=json_out, model_text=model_text)
        if wait:
            session = approvals.prompt_loop(client, session, json_out=json_out, model_text=model_text)
    raise typer.Exit(session.exit_code or 0)


def attach(
    session_id: Annotated[str, typer.Argument(help="session id (or a unique prefix)")],
    replay: Annotated[int, typer.Option("--replay", min=0, help="progress lines of the past shown first")] = 20,
    json_out: Json = False,
    verbose: Verbose = False,
) -> None:
    """Follow a running or paused session again: its recent progress, then live (any number of terminals)."""
    check_verbose(verbose, json_out)
    with Client(home()) as client:
        client.connection.require_running()
        session_id = client.session_id(session_id)
        model_text = ModelText(client.connection, session_id) if verbose else None  # what is recorded now is the past
        session = attach_and_print(client, session_id, replay=replay, json_out=json_out, model_text=model_text)
        if approvals.interactive() and session.settings.approval_mode == "wait":  # a call waits: ask here too
            session = approvals.prompt_loop(client, session, json_out=json_out, model_text=model_text)
    raise typer.Exit(session.exit_code or 0)


def sessions(
    json_out: Json = False,
    status_filter: Annotated[list[str] | None, typer.Option("--status", help="only these statuses")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
) -> None:
    """List sessions, newest first."""
    with Client(home()) as client:
        found = client.sessions(status_filter, limit=limit)
    if json_out:
        print_json(found)
    else:
        echo(render.sessions_table(found))


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
    with Client(home()) as client:
        if stage is not None or cycle is not None or answers:
            session_id = client.session_id(session)
            events = typed(read_events(client.connection, session_id))
            print_view(client.connection, session_id, events, stage=stage, cycle=cycle, answers=answers,
                       json_out=json_out)
            return
        view = client.show(session)
    if json_out:
        print_json({**{f: getattr(view, f) for f in view.__struct_fields__}, "steps": step_timings(typed(view.events))})
    else:
        echo(session_detail(view.session, typed(view.events), view.budget.spent))


def cancel(session: Annotated[str, typer.Argument(help="session id (or a unique prefix)")]) -> None:
    """Cancel a running or paused session (exit code 23 for its `acode run`)."""
    with Client(home()) as client:
        cancelled = client.cancel(session)
    echo(f"session {cancelled.id} {cancelled.status}")


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
    check_verbose(verbose, json_out)
    with Client(home()) as client:
        session_id = client.session_id(session)
        overrides = client.overrides(
            session_id, stage_timeout=stage_timeout, planner_timeout=planner_timeout,
            executor_timeout=executor_timeout, verifier_timeout=verifier_timeout, reviewer_timeout=reviewer_timeout,
            step_timeout=step_timeout, cycle_limit=cycle_limit, max_turns=max_turns, provider=provider, model=model,
            base_url=base_url, script=script, budget_tokens=budget_tokens, budget_tool_calls=budget_tool_calls,
            budget_minutes=budget_minutes, budget_model_minutes=budget_model_minutes)
        body = ResumeSession(session_id=session_id, overrides=None if overrides.is_empty() else overrides)
        follow_resumed(client, session_id, body, detach=detach, json_out=json_out, verbose=verbose)


def check_verbose(verbose: bool, json_out: bool) -> None:
    if verbose and json_out:
        raise CliError("--verbose shows the model's text on the terminal, and --json prints the session's events "
                       "only; drop one of them (`acode show SESSION --answers --json` gives the answers as JSON)",
                       code="ACODE-CLI-003")


def follow_resumed(client: Client, session_id: str, body: Message, *, detach: bool,
                   json_out: bool, done: str = "resumed", verbose: bool = False) -> None:
    before = read_events(client.connection, session_id)
    model_text = ModelText(client.connection, session_id) if verbose and not detach else None  # before it goes on
    client.send(body)
    if detach:
        echo(f"session {session_id} {done}")
        return
    # the events before count too: the files changed and the per-stage figures are the session's
    snapshot = follow_and_print(client, session_id, json_out=json_out, after_seq=before[-1].seq if before else 0,
                                earlier=before, model_text=model_text)
    if approvals.interactive() and snapshot.settings.approval_mode == "wait":
        snapshot = approvals.prompt_loop(client, snapshot, json_out=json_out, model_text=model_text)
    raise typer.Exit(snapshot.exit_code or 0)
