#!/usr/bin/env python3
"""acode benchmarks: one JSON object with every figure of the performance issue.

Every group is selectable (``--only w1,cli,...``; all by default) and reports the load
average (``os.getloadavg()``) before and after it, and its figures beside a floor or a peer
measured in the same run, so a noisy machine shows as noise and not as a regression.

Groups (each against a private acode home; everything started is stopped):

- ``w1``: the workload "plan, then 10 steps each doing one read_file of a small file, then
  verify, then review" with a zero-delay scripted model; ``session_s.server_p50`` is one
  session's first event to its last (as stored), ``client_p50`` submit to the final event as
  `acode run` sees it. The peer, LangGraph with its SQLite checkpointer doing the same steps
  in one process (``scripts/langgraph_peer.py``, extra ``bench``), runs in the same run, one
  of its sessions after each of acode's (alternated, so a drift of the machine's speed meets
  both alike); ``ratio`` is acode over LangGraph (target ≤ 1.0). ``transition_ms``: stage transition
  latency, answer in to the next dispatch, durable commit included (coordinator log), over
  the timed sessions (``p50``/``p99``, target p99 ≤ 5 ms), and over every session the actor
  set ran in the run, warm-ups and the memory group's included (``*_all_sessions``).
- ``memory``: RSS, PSS and USS of every actor process at rest, after warm-up sessions, after
  ``--sessions`` more and once they have ended; growth per session; what each third-party
  import adds to a fresh interpreter's RSS, and the floor of an actor process (Python,
  ZeroMQ, msgspec, structlog) before any of acode's code. acode's bytecode is written first.
- ``concurrency``: W1 sessions submitted at once from one client (``--levels``, up to 50),
  with 1 and 2 executors: all complete, none lost or duplicated (events checked), throughput,
  p50/p99 latency, cost per session against one session alone, where throughput saturates.
- ``eventlog``: 10,000 events appended through persistence (one event per commit, 16 commits
  in flight, then one at a time), none lost (seqs 1..N), ms per event per thousand.
- ``cli``: wall time of ``acode --help``, ``acode status`` and ``acode run --detach``, p50, with
  the floor ``python -c pass`` and ``python -c "import cli.app"`` beside them (target 150 ms).
- ``tool``: a ``read_file`` of 1 KB as the executor sends it (``RunTool.held``: a round trip
  to the sandbox; the stage journals the result with its next write), p50/p99, and the same
  read journaled by the sandbox through persistence before it answers (a replay's read),
  beside the floor of a broker round trip to the coordinator (``GetStatus``).
- ``turn``: the executor loop's own cost per turn (the model's answer to the next request,
  a 1 KB ``read_file`` each turn), the real executor code in this process against the running
  actors, and each request it made (``requests_ms``: count, per turn, p50, by service and
  message type); with ``--profile`` the functions where that time goes (cProfile, this process).
- ``terminal``: ``true`` through run_terminal under each isolation level this machine offers; for
  bubblewrap and Landlock also with the read boundary off (``*_unconfined_reads``) and what the
  boundary adds (``*_read_boundary_added_p50``); in a git repository, and also without the
  protected paths (``*_unprotected``: no read-only binds, no compare-and-restore) and what
  they add (``*_protected_paths_added_p50``), and the record and compare alone
  (``protected_paths_record_and_compare_p50``).
- ``context``: the planner's context preparation over a generated 2,000-file workspace.
- ``reread``: the prompt tokens a server with a prompt cache must read again on each
  executor turn of a 20-turn step whose history exceeds the window (num_ctx 32768, a 2.4 KB
  tool result a turn), as the stand-in model server (``tests/modelserver.py``) sees it: the
  tokens after the common prefix with the previous request, at 4 characters a token.
  ``before``: the old window, which dropped the oldest turn every turn (``keep=1.0``);
  ``after``: the window trimmed in large steps. ``--reread-only`` is ``--only reread``.

Usage: ``.venv/bin/python scripts/bench.py [--only GROUPS] [--sessions N] [--levels 1,10,50]
[--synchronous full|normal] [--profile] [--reread-only] ...`` (``--help`` lists every option).
The JSON alone goes to stdout; log lines of actors run in this process go to stderr.
"""

from __future__ import annotations

import argparse
import compileall
import cProfile
import functools
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import psutil
import structlog
import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import langgraph_peer  # noqa: E402 - beside this file: the W1 peer (LangGraph is loaded when one is made)

from actors.llm.meter import Meter  # noqa: E402
from actors.llm.provider import ModelRequest  # noqa: E402
from actors.paths import RunPaths  # noqa: E402
from actors.sandbox.confinement.confine import Workspace  # noqa: E402
from actors.sandbox.confinement.isolation import Isolation, command_env, detect  # noqa: E402
from actors.sandbox.dispatch import ToolCall  # noqa: E402
from actors.sandbox.tools.terminal import Terminal  # noqa: E402
from actors.stages import executor, gather, prompts  # noqa: E402
from actors.stages.context import StageContext  # noqa: E402
from actors.stages.untrusted import Fence  # noqa: E402
from broker.threads import ThreadClients  # noqa: E402
from cli import daemon  # noqa: E402
from cli.config import resolve  # noqa: E402
from cli.connection import Connection  # noqa: E402
from cli.follow import follow  # noqa: E402
from cli.settings import session_settings, up_options  # noqa: E402
from protocol import codec  # noqa: E402
from protocol.events import ToolCalled, Transitioned  # noqa: E402
from protocol.ids import new_id  # noqa: E402
from protocol.messages import (  # noqa: E402
    Commit,
    GetEvents,
    GetStatus,
    ListSessions,
    Message,
    RunStage,
    RunTool,
    SubmitTask,
    ToolDone,
)
from protocol.plan import MAX_STEPS, PlanTask, TaskPlan, finalize  # noqa: E402
from protocol.results import ModelAnswer, ModelToolCall, ToolResult  # noqa: E402
from protocol.session import ScriptedProvider, SessionSettings, SessionSnapshot  # noqa: E402
from protocol.tools import RunTerminal  # noqa: E402

GROUPS = ("w1", "memory", "concurrency", "eventlog", "cli", "tool", "turn", "terminal", "context", "reread")
STEPS = 10


def _script() -> str:
    steps = [{"label": f"S{i}", "title": f"read f{i}.txt", "action": "read_file"} for i in range(1, STEPS + 1)]
    plan = {"goal": "read ten files", "status": "ready", "tasks": [{
        "label": "T1", "title": "read", "complexity": 3, "steps": steps,
        "acceptance": [{"label": "A1", "description": "nothing broke"}]}]}
    executor = []
    for i in range(1, STEPS + 1):
        executor.append({"tool_calls": [{"name": "read_file", "arguments": {"path": f"f{i}.txt"}}]})
        executor.append({"tool_calls": [{"name": "step_complete", "arguments": {"summary": f"read f{i}.txt"}}]})
    responses = {
        "planner": [{"json": plan}],
        "executor": executor,
        "verifier": [{"json": {"passed": True, "summary": "ok",
                               "criteria": [{"label": "A1", "passed": True, "evidence": "fine"}]}}],
        "reviewer": [{"json": {"decision": "approve", "summary": "ok", "issues": []}}],
    }
    return json.dumps({"version": 1, "responses": responses})


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _tool_dispatch(connection: Connection, session_id: str, workspace: Path, calls: int = 300, *,
                   held: bool = True) -> list[float]:
    """Round trips of a 1 KB read_file: ``held`` as the executor makes them (the stage journals
    the result with its next write), else journaled by the sandbox before it answers (a
    replayed stage's read, or a read under a key journaled before)."""
    (workspace / "one-kb.txt").write_text("x" * 1023 + "\n")
    times = []
    for _ in range(calls):
        request = RunTool(key=new_id(), session_id=session_id, workspace=str(workspace), tool="read_file",
                          arguments={"path": "one-kb.txt"}, held=held)
        t0 = time.perf_counter()
        reply = connection.client.call("sandbox", request, timeout=15, decoder=codec.SANDBOX_REPLY)
        times.append((time.perf_counter() - t0) * 1000)
        assert isinstance(reply, ToolDone) and reply.result.ok, reply
    return times


TURNS_PER_STEP = 20


class _InstantModel:
    """Answers at once: a read_file each turn, step_complete at the step's last turn; notes
    when each answer left and when the next request arrived."""

    name = "instant"

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._answered: tuple[str, float] | None = None

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        now = time.perf_counter()
        step, turn = request.call_site.rsplit("/turn", 1)
        if self._answered is not None and self._answered[0] == step:
            self.gaps.append((now - self._answered[1]) * 1000)
        if int(turn) >= TURNS_PER_STEP:
            call = ModelToolCall(id=f"c{seq}", name="step_complete", arguments={"summary": "read enough"})
        else:
            call = ModelToolCall(id=f"c{seq}", name="read_file", arguments={"path": f"f{int(turn) % 10 + 1}.txt"})
        self._answered = (step, time.perf_counter())
        return ModelAnswer(tool_calls=[call])


class _TimedClients(ThreadClients):
    """ThreadClients that note how long each request took, by service and message type."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.times: dict[str, list[float]] = {}

    def call(self, service: str, body: Message, **options: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return super().call(service, body, **options)
        finally:
            self.times.setdefault(f"{service}:{type(body).__name__}", []).append((time.perf_counter() - t0) * 1000)


def _executor_turns(paths: RunPaths, workspace: Path, turns: int, profile: cProfile.Profile | None = None,
                    requests: dict[str, list[float]] | None = None) -> list[float]:
    """The executor's own cost per turn (the ``turn`` group), under ``profile`` if given."""
    steps = min(MAX_STEPS, max(1, turns // (TURNS_PER_STEP - 1)))  # a plan holds at most MAX_STEPS
    for i in range(1, 11):
        (workspace / f"f{i}.txt").write_text("x" * 1023 + "\n")
    draft = TaskPlan(goal="read files many times", tasks=[msgspec.convert({
        "label": "T1", "title": "read", "steps": [{"label": f"S{i}", "title": "read", "action": "read_file"}
                                                   for i in range(1, steps + 1)]}, PlanTask)])
    settings = SessionSettings(provider=ScriptedProvider(script_yaml="version: 1\n"), max_turns_per_step=TURNS_PER_STEP)
    session_id = new_id()
    request = RunStage(session_id=session_id, stage="executor", visit=1, attempt=1, task="bench",
                       workspace=str(workspace), settings=settings, plan=finalize(draft, version=1))
    context = zmq.Context()
    clients = _TimedClients(context, paths.endpoints().broker, sender="bench-executor")
    try:
        ctx = StageContext(request, clients=clients, cancel=threading.Event(), log=structlog.get_logger())
        ctx.persistence(Commit(session_id=session_id, snapshot=SessionSnapshot(
            id=session_id, task="bench", workspace=str(workspace), stage="executor", settings=settings,
            created_at=time.time(), updated_at=time.time())))
        model = _InstantModel()
        ctx.model.provider = model
        if profile is not None:
            profile.enable()
        try:
            result = executor.run(ctx)
        finally:
            if profile is not None:
                profile.disable()
            ctx.close()
        assert result.ok, result.summary
    finally:
        clients.close()
        context.term()
    if requests is not None:
        requests.update(clients.times)
    return model.gaps


def _run_terminal(calls: int) -> dict[str, object]:
    """``true`` through run_terminal under each isolation this machine offers, and the
    cost of each over process-level isolation (plain ``subprocess.run`` for reference).
    Each level that confines reads is timed twice: with the read boundary (what acode
    runs) and with the whole root readable (``unconfined_reads``, the figure before the
    boundary); ``read_boundary_added_p50`` is the difference. ``view_first_ms`` is the
    one-time cost of resolving the toolchains of the default allowlist on this PATH."""
    full = detect()
    variants: dict[str, tuple[Isolation, bool]] = {
        "process_subreaper": (Isolation(level="process", pidns=False, pids=full.pids), True)}
    if full.pidns:
        variants["process_pidns"] = (Isolation(level="process", pidns=True, pids=full.pids), True)
    landlock = detect(bubblewrap=False)
    if full.pidns:
        variants["process_pidns_unprotected"] = (Isolation(level="process", pidns=True, pids=full.pids), True)
    if landlock.level == "landlock":
        variants["landlock"] = (landlock, True)
        variants["landlock_unconfined_reads"] = (landlock, False)
        variants["landlock_unprotected"] = (landlock, True)
    if full.level == "bubblewrap":
        variants["bubblewrap"] = (full, True)
        variants["bubblewrap_unconfined_reads"] = (full, False)
        variants["bubblewrap_unprotected"] = (full, True)
    out: dict[str, object] = {"offered": full.describe()}
    timings: dict[str, dict[str, float]] = {}
    from actors.sandbox.confinement import visible
    from actors.sandbox.confinement.policy import DEFAULT_ALLOW

    visible._cached.cache_clear()
    t0 = time.perf_counter()
    view = visible.view(DEFAULT_ALLOW, command_env(Path(tempfile.gettempdir()))["PATH"])
    out["view_first_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    out["view_paths"] = len(view.read)
    with tempfile.TemporaryDirectory(prefix="acode-bench-ws-") as root:
        subprocess.run(["git", "init", "-q", root], check=True)  # a real .git: config, hooks (samples), info
        base = []
        for _ in range(calls):
            t0 = time.perf_counter()
            subprocess.run(["true"], check=True)
            base.append((time.perf_counter() - t0) * 1000)
        out["plain_subprocess_p50"] = _percentile(base, 0.5)
        from actors.sandbox.confinement import sealed, tripwire

        checks = []
        for _ in range(calls):  # the record and compare alone, in this process (no command between)
            t0 = time.perf_counter()
            tripwire.Tripwire(sealed.find(root)).check()
            checks.append((time.perf_counter() - t0) * 1000)
        out["protected_paths_record_and_compare_p50"] = _percentile(checks, 0.5)
        with Workspace(root) as ws:
            terminals = {name: Terminal(isolation, read_boundary=boundary, protect=not name.endswith("_unprotected"))
                         for name, (isolation, boundary) in variants.items()}
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(calls):  # interleaved, so a load spike hits every variant alike
                for name, terminal in terminals.items():
                    t0 = time.perf_counter()
                    outcome = terminal.run(ws, RunTerminal(command="true"), timeout_s=30, max_bytes=1024)
                    times[name].append((time.perf_counter() - t0) * 1000)
                    assert outcome.exit_code == 0, outcome
            for name, terminal in terminals.items():
                terminal.close()
                out[name] = timings[name] = {"p50": _percentile(times[name], 0.5),
                                             "p99": _percentile(times[name], 0.99)}
    reference = timings.get("process_pidns") or timings["process_subreaper"]
    if "bubblewrap" in timings:
        out["bubblewrap_added_p50"] = round(timings["bubblewrap"]["p50"] - reference["p50"], 3)
    for level in ("bubblewrap", "landlock"):
        if level in timings:
            out[f"{level}_read_boundary_added_p50"] = round(
                timings[level]["p50"] - timings[f"{level}_unconfined_reads"]["p50"], 3)
    for name in ("bubblewrap", "landlock", "process_pidns"):
        if f"{name}_unprotected" in timings:
            out[f"{name}_protected_paths_added_p50"] = round(
                timings[name]["p50"] - timings[f"{name}_unprotected"]["p50"], 3)
    return out


CONTEXT_FILES = 2_000
CONTEXT_TASK = ("Make fetch_orders in src/orders/client.py retry a 503 answer up to 3 times, like "
                "OrderCache.refresh does, and add a test for it")


def _context_workspace(root: Path) -> int:
    """A project of :data:`CONTEXT_FILES` files, 400 of them in ignored directories."""
    (root / ".gitignore").write_text("node_modules/\nbuild/\n*.log\n")
    (root / "README.md").write_text("# shop\n\nOrders, payments and a web front end.\n" + "More text.\n" * 40)
    (root / "pyproject.toml").write_text('[project]\nname = "shop"\nversion = "1.0"\n')
    (root / "package.json").write_text('{"name": "shop-web", "scripts": {"test": "vitest"}}\n')
    (root / "Makefile").write_text("test:\n\tpython -m pytest -q\n")
    count = 4
    packages = ["orders", "payments", "users", "catalog", "shipping", "reports", "auth", "search"]
    while count < 1_200:
        pkg = packages[count % len(packages)]
        path = root / "src" / pkg / f"module_{count}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def {pkg}_helper_{count}_{i}(value):\n    return value + {i}\n\n" for i in range(12))
        if count % 97 == 0:
            body += "def call_fetch_orders():\n    return fetch_orders(retries=1)\n"
        path.write_text(f'"""{pkg} module {count}."""\n\n{body}')
        count += 1
    client = root / "src" / "orders" / "client.py"
    client.write_text("import time\n\n\ndef fetch_orders(session, retries=0):\n    answer = session.get('/orders')\n"
                      "    return answer.json()\n\n\nclass OrderCache:\n    def refresh(self):\n        pass\n")
    while count < 1_600:
        kind = count % 3
        folder = ["web/src/components", "services/api", "docs"][kind]
        name = [f"Widget{count}.tsx", f"handler_{count}.go", f"page-{count}.md"][kind]
        path = root / folder / f"group{count % 10}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"// generated file {count}\n" * 30)
        count += 1
    while count < CONTEXT_FILES:
        folder = "node_modules" if count % 4 else "build"
        path = root / folder / f"pkg{count % 25}" / f"index{count}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("module.exports = function fetch_orders() {};\n")
        count += 1
    return count


def _context_prep(runs: int) -> dict[str, object]:
    """The planner's context preparation over a generated 2,000-file workspace."""
    with tempfile.TemporaryDirectory(prefix="acode-bench-ctx-") as root:
        files = _context_workspace(Path(root))
        terminal = Terminal()

        def tool(key: str, name: str, arguments: dict[str, object]) -> ToolResult:
            with ToolCall(RunTool(key=key, session_id="bench", workspace=root, tool=name,
                                  arguments=arguments)) as call:
                return call.run(terminal)

        # as the planner reckons it: the session's budget less its system prompt
        system = f"{prompts.PLANNER}\n\n{Fence().preamble()}"
        budget = SessionSettings().planner_context_tokens - gather.estimate_tokens(system)
        times, prepared = [], None
        try:
            for run in range(runs + 1):
                t0 = time.perf_counter()
                prepared = gather.prepare(tool, task=CONTEXT_TASK, fence=Fence(), key_prefix=f"bench:p{run}",
                                          budget_tokens=budget)
                if run:  # the first run warms the page cache
                    times.append((time.perf_counter() - t0) * 1000)
        finally:
            terminal.close()
    assert prepared is not None
    return {"p50": _percentile(times, 0.5), "p99": _percentile(times, 0.99), "runs": runs, "files": files,
            "budget_tokens": budget, "prompt_tokens": prepared.tokens, "tool_calls": prepared.tool_calls,
            "sections": len(prepared.sections), "omitted": len(prepared.omitted)}




def _prompt_reread(keep: float, turns: int = 20) -> dict[str, object]:
    from actors.llm.openai import OpenAICompatibleModel
    from actors.stages.conversation import Conversation
    from protocol.profiles import tool_surface
    from protocol.session import OpenAIProvider
    from tests.modelserver import ModelServer, Text

    spec = OpenAIProvider(model="test-model", base_url="http://127.0.0.1:1/v1", num_ctx=32_768)
    budget = executor.context_budget(SessionSettings(provider=spec))
    fence = Fence()
    conversation = Conversation(prompts.executor_system(fence), "Step T1/S1: read the modules and fix the bug.\n"
                                + "context line\n" * 80, keep=keep)
    with ModelServer() as server:
        model = OpenAICompatibleModel(msgspec.structs.replace(spec, base_url=server.openai_url))
        try:
            for turn in range(1, turns + 1):
                server.queue(Text("ok"))
                model.complete(ModelRequest(stage="executor", call_site=f"turn{turn}", nonce=fence.nonce,
                                            messages=conversation.messages(budget),
                                            tools=tool_surface(SessionSettings(provider=spec))),
                               seq=turn, cancel=threading.Event())
                call = ModelToolCall(id=f"call_{turn}", name="read_file", arguments={"path": f"src/m{turn}.py"})
                conversation.answer("", [call])
                conversation.reply_tool(call.id, "read_file", f"{turn}\tdef f{turn}():\n" + "    x = 1\n" * 240)
        finally:
            model.close()
        reread = [r.reread_tokens for r in server.chats][1:]  # the first request is all new
        prompts_ = [r.prompt_tokens for r in server.chats][1:]
    return {"per_turn_mean": round(statistics.mean(reread)), "per_turn_max": max(reread), "total": sum(reread),
            "prompt_tokens_mean": round(statistics.mean(prompts_)), "turns": turns}


# -- the actor set ------------------------------------------------------------------------------


class _Acode:
    """A running actor set in a private home, and W1 sessions submitted to it."""

    def __init__(self, tmp: Path, *, synchronous: str, executors: int = 1, name: str = "home"):
        self.tmp = tmp
        self.home = tmp / name
        self.paths = RunPaths(self.home)
        flags = {"workers.executor": executors} if executors > 1 else {}
        config = resolve(home=self.home, env={"ACODE_STORAGE__SYNCHRONOUS": synchronous}, flags=flags)
        options, interval, liveness = up_options(config)
        spec = daemon.coordinator_spec(self.paths, options, heartbeat_interval=interval, liveness=liveness)
        started = time.monotonic()
        self.report, _ = daemon.start_detached(spec)
        self.up_s = time.monotonic() - started
        self.script = tmp / "w1.yaml"
        self.script.write_text(_script())
        self.connection = Connection(self.home)

    def stop(self) -> None:
        self.connection.close()
        daemon.stop(self.paths)

    def workspace(self) -> Path:
        workspace = Path(tempfile.mkdtemp(dir=self.tmp, prefix="ws-"))
        for i in range(1, STEPS + 1):
            (workspace / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        return workspace

    def submit(self, workspace: Path | None = None) -> str:
        workspace = workspace or self.workspace()
        settings = session_settings(resolve(home=self.home, workspace=workspace, env={}, flags={
            "model.provider": "scripted", "model.script": str(self.script)}))
        session_id = new_id()
        self.connection.coordinator(SubmitTask(session_id=session_id, task="read ten files",
                                               workspace=str(workspace), settings=settings), timeout=30)
        return session_id

    def w1(self) -> tuple[float, float]:
        """One W1 session: (submit to the final event as a follower sees it, first event to last as stored)."""
        t0 = time.perf_counter()
        session_id = self.submit()
        final = follow(self.connection, session_id, lambda event: None)
        client = time.perf_counter() - t0
        assert final.status == "completed", final
        events = self.connection.persistence(GetEvents(session_id=session_id)).events
        return client, events[-1].at - events[0].at

    def processes(self) -> list[psutil.Process]:
        root = psutil.Process(self.report.pid)
        return [root, *root.children(recursive=True)]

    def transitions_ms(self) -> list[float]:
        out = []
        for line in self.paths.log_file("coordinator").read_text().splitlines():
            if '"stage_dispatched"' in line:
                out.append(json.loads(line)["transition_ms"])
        return out


def _name(process: psutil.Process) -> str:
    """An actor process's instance name (from its spec), or its command."""
    try:
        cmdline = process.cmdline()
    except psutil.Error:
        return "?"
    if "--spec" in cmdline:
        try:
            return str(json.loads(cmdline[cmdline.index("--spec") + 1]).get("instance", "?"))
        except (ValueError, IndexError):
            pass
    return os.path.basename(cmdline[0]) if cmdline else "?"


def _memory(processes: list[psutil.Process]) -> dict[str, Any]:
    per: dict[str, dict[str, float]] = {}
    totals = {"rss": 0, "pss": 0, "uss": 0}
    for process in processes:
        try:
            info = process.memory_full_info()
        except psutil.Error:
            continue
        figures = {"rss": info.rss, "pss": getattr(info, "pss", 0), "uss": info.uss}
        for key, value in figures.items():
            totals[key] += value
        per[_name(process)] = {k: round(v / 2**20, 1) for k, v in figures.items()}
    return {"total_mb": {k: round(v / 2**20, 1) for k, v in totals.items()}, "processes": len(per),
            "per_process_mb": per}


# -- groups -------------------------------------------------------------------------------------


def group_w1(acode: _Acode, args: argparse.Namespace) -> dict[str, Any]:
    """acode's W1 sessions, each followed by one of LangGraph's peer (``langgraph_peer.Peer``)
    when the extra is installed: alternated, so a drift of the machine's speed (±10 % within
    minutes on a shared virtual machine) meets both alike instead of skewing the ratio."""
    peer: Any = None
    peer_note = ""
    if not args.no_peer:
        try:
            peer = langgraph_peer.Peer()
        except ImportError as exc:
            peer_note = f"not measured: {exc}; pip install -e .[bench]"
    try:
        acode.w1()  # warm-up: imports, caches and the first session's tables
        if peer is not None:
            peer.session()
        client, server, peer_s = [], [], []
        before = len(acode.transitions_ms())
        for _ in range(args.sessions):
            c, s = acode.w1()
            client.append(c)
            server.append(s)
            if peer is not None:
                peer_s.append(peer.session())
        out: dict[str, Any] = {"session_s": {
            "server_p50": round(statistics.median(server), 4), "server_min": round(min(server), 4),
            "server_max": round(max(server), 4), "client_p50": round(statistics.median(client), 4),
            "sessions": args.sessions, "workload": f"plan, {STEPS} steps of one read_file each, verify, review"}}
        timed = acode.transitions_ms()[before:]  # these sessions' (run_groups adds every session's)
        out["transition_ms"] = {"p50": _percentile(timed, 0.5), "p99": _percentile(timed, 0.99), "count": len(timed),
                                "target_p99": 5.0}
        if peer is not None:
            out["peer_langgraph_s"] = {**peer.summary(peer_s), "alternated": True}
            out["ratio"] = round(out["session_s"]["server_p50"] / out["peer_langgraph_s"]["p50"], 2)
            out["target_ratio"] = 1.0
        elif peer_note:
            out["peer"] = peer_note
        return out
    finally:
        if peer is not None:
            peer.close()


# What one import adds to a fresh interpreter's RSS, each alone after plain Python (its own
# dependencies included, so the figures overlap), and what every actor process holds before
# any of acode's code: Python, ZeroMQ, msgspec and structlog as actors.lean leaves it.
_IMPORTS = {"zmq": "import zmq", "msgspec": "import msgspec", "structlog (lean)": "import actors.lean, structlog",
            "structlog (plain)": "import structlog", "asyncio": "import asyncio", "ssl": "import ssl",
            "_hashlib (OpenSSL digests)": "import _hashlib", "yaml": "import yaml", "regex": "import regex",
            "pathspec": "import pathspec", "httpx": "import httpx", "psutil": "import psutil",
            "sqlite3": "import sqlite3", "typer": "import typer"}
_FLOOR = "import actors.lean, zmq, msgspec, structlog; zmq.Context().socket(zmq.DEALER)"


def _import_rss_mb(code: str) -> float:
    probe = f"{code}\nimport re\nprint(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read())[1])"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


def _import_costs() -> dict[str, Any]:
    python = _import_rss_mb("pass")
    added = {name: round(_import_rss_mb(code) - python, 1) for name, code in _IMPORTS.items()}
    return {"python_mb": round(python, 1), "added_mb": added, "actor_floor_mb": round(_import_rss_mb(_FLOOR), 1),
            "actor_floor": "Python, ZeroMQ (a context and a socket), msgspec, structlog as actors.lean leaves it"}


def group_memory(acode: _Acode, args: argparse.Namespace) -> dict[str, Any]:
    at_rest = _memory(acode.processes())
    for _ in range(3):
        acode.w1()
    warm = _memory(acode.processes())
    for _ in range(args.sessions):
        acode.w1()
    after = _memory(acode.processes())
    time.sleep(1.0)  # the sessions have ended; let the actors go idle
    ended = _memory(acode.processes())
    per_session = {k: round((after["total_mb"][k] - warm["total_mb"][k]) / args.sessions, 3)
                   for k in ("rss", "pss", "uss")}
    after_end = {k: round(ended["total_mb"][k] - after["total_mb"][k], 1) for k in ("rss", "pss", "uss")}
    return {"at_rest": at_rest, "after_warm_up_total_mb": warm["total_mb"], "after_sessions": after,
            "after_end_total_mb": ended["total_mb"], "sessions": args.sessions,
            "growth_per_session_mb": per_session, "change_after_end_mb": after_end,
            "imports": _import_costs(),
            "targets": {"total_rss_mb": 200, "growth_per_session_mb": 0.5}}


def _concurrent(acode: _Acode, level: int) -> dict[str, Any]:
    workspaces = [acode.workspace() for _ in range(level)]
    cpu_before = _cpu(acode.processes())
    t0 = time.time()
    ids = [acode.submit(ws) for ws in workspaces]
    submitted = time.time() - t0
    wanted = set(ids)
    deadline = time.monotonic() + 60 + 5 * level
    snapshots: dict[str, SessionSnapshot] = {}
    while time.monotonic() < deadline:
        listed = acode.connection.persistence(ListSessions(limit=level)).sessions  # the newest: these
        snapshots = {s.id: s for s in listed if s.id in wanted}
        if len(snapshots) == level and all(s.status in ("completed", "failed") or s.pause
                                           for s in snapshots.values()):
            break
        time.sleep(0.05)
    cpu_after = _cpu(acode.processes())
    busy = {name: round(cpu_after[name] - cpu_before.get(name, 0.0), 2) for name in cpu_after}
    statuses = [s.status for s in snapshots.values()]
    problems = []
    for session_id in ids:
        events = acode.connection.persistence(GetEvents(session_id=session_id)).events
        reads = [e for e in events if isinstance(e, ToolCalled) and e.tool == "read_file"]
        if [e.seq for e in events] != list(range(1, len(events) + 1)) or len({e.id for e in events}) != len(events):
            problems.append(f"{session_id}: event seqs not 1..N or an event twice")
        if len(reads) != STEPS or len({e.key for e in reads}) != STEPS:
            problems.append(f"{session_id}: {len(reads)} read_file calls, expected {STEPS}")
        if len([e for e in events if isinstance(e, Transitioned) and e.target == "completed"]) != 1:
            problems.append(f"{session_id}: not completed exactly once")
    finished = [s for s in snapshots.values() if s.finished_at]
    latencies = [s.finished_at - s.created_at for s in finished if s.finished_at]
    span = (max(s.finished_at or 0 for s in finished) - t0) if finished else float("nan")
    return {"sessions": level, "completed": statuses.count("completed"), "lost": level - len(snapshots),
            "problems": problems[:5], "submit_s": round(submitted, 3), "wall_s": round(span, 3),
            "throughput_per_s": round(level / span, 2) if finished else 0.0,
            "latency_s": {"p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99)} if latencies else {},
            "cost_per_session_s": round(span / level, 4) if finished else None,
            "cpu_s_per_process": dict(sorted(busy.items(), key=lambda item: -item[1]))}


def _cpu(processes: list[psutil.Process]) -> dict[str, float]:
    """CPU seconds (user + system) each actor has used so far, by instance name."""
    out: dict[str, float] = {}
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        name = _name(process)
        out[name] = out.get(name, 0.0) + times.user + times.system
    return out


def group_concurrency(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"levels": args.levels}
    for executors in (1, 2):
        acode = _Acode(tmp, synchronous=args.synchronous, executors=executors, name=f"home-x{executors}")
        try:
            acode.w1()  # warm-up
            runs = [_concurrent(acode, level) for level in args.levels]
        finally:
            acode.stop()
        alone = runs[0]["cost_per_session_s"] if args.levels[0] == 1 else None
        for run in runs:
            if alone and run["cost_per_session_s"]:
                run["cost_vs_alone"] = round(run["cost_per_session_s"] / alone, 2)
        best = max(runs, key=lambda r: r["throughput_per_s"])
        out[f"executors_{executors}"] = {"runs": runs, "saturates_at": best["sessions"],
                                         "peak_throughput_per_s": best["throughput_per_s"]}
    out["target_cost_vs_alone_at_50"] = 1.5
    return out


def group_eventlog(acode: _Acode, args: argparse.Namespace) -> dict[str, Any]:
    from protocol.events import Transitioned as Ev

    client = acode.connection.client
    out: dict[str, Any] = {}
    for window, total in ((16, args.events), (1, max(1_000, args.events // 5))):
        session_id = new_id()
        acode.connection.persistence(Commit(session_id=session_id, snapshot=SessionSnapshot(
            id=session_id, task="bench", workspace="/", created_at=time.time(), updated_at=time.time())))
        answered: list[float] = []
        errors: list[Any] = []
        sent = 0
        t0 = time.perf_counter()
        def on_reply(reply: Any, error: Exception | None, errors: list[Any] = errors,
                     answered: list[float] = answered) -> None:
            if error is not None:
                errors.append(error)
            else:
                answered.append(time.perf_counter())

        while len(answered) + len(errors) < total:
            while sent < total and sent - len(answered) - len(errors) < window:
                event = Ev(id=new_id(), session_id=session_id, source="executor", target="verifier")
                client.send("persistence", Commit(session_id=session_id, events=[event]), timeout=60,
                            decoder=codec.PERSISTENCE_REPLY, on_reply=on_reply)
                sent += 1
            if client.socket.poll(50):
                client.on_readable()
            client.tick()
        stored = []
        after = 0
        while True:
            batch = acode.connection.persistence(GetEvents(session_id=session_id, after_seq=after, limit=5_000)).events
            if not batch:
                break
            stored += batch
            after = batch[-1].seq
        marks = [t0, *sorted(answered)]
        per_thousand = [round((marks[min(i + 1_000, len(marks) - 1)] - marks[i]), 4)
                        for i in range(0, len(marks) - 1, 1_000)]
        out[f"window_{window}"] = {
            "events": total, "errors": len(errors), "stored": len(stored),
            "none_lost": [e.seq for e in stored] == list(range(1, total + 1)),
            "ms_per_event": round((marks[-1] - t0) * 1000 / total, 4),
            "ms_per_event_first_thousand": round(per_thousand[0], 4),
            "ms_per_event_last_thousand": round(per_thousand[-1], 4),
            "last_over_first": round(per_thousand[-1] / per_thousand[0], 2)}
    return out


def _wall(command: list[str], runs: int, between: Callable[[str], None] | None = None) -> dict[str, float]:
    """Wall and CPU time (user + system, which the machine's load disturbs less) of ``command``,
    after one untimed run; bytecode is written (this sandbox sets PYTHONDONTWRITEBYTECODE,
    which a user's shell does not: every import would compile its source each time)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    wall, cpu = [], []
    for n in range(runs + 1):
        t0 = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = (time.perf_counter() - t0) * 1000
        out = process.stdout.read().decode() if process.stdout else ""
        err = process.stderr.read().decode() if process.stderr else ""
        process.returncode = os.waitstatus_to_exitcode(status)
        process.communicate()
        assert process.returncode == 0, (command, err)
        if n:
            wall.append(elapsed)
            cpu.append((usage.ru_utime + usage.ru_stime) * 1000)
        if between is not None:
            between(out.strip())
    return {"p50": _percentile(wall, 0.5), "min": round(min(wall), 1), "cpu_p50": _percentile(cpu, 0.5)}


def group_cli(acode: _Acode, args: argparse.Namespace) -> dict[str, Any]:
    script = Path(sys.executable).with_name("acode")
    acode_cmd = [str(script)] if script.exists() else [sys.executable, "-m", "cli.app"]
    home = ["--home", str(acode.home)]
    workspace = acode.workspace()
    runs = args.cli_runs

    def wait_done(session_id: str) -> None:  # a detached session must not slow the next measurement
        follow(acode.connection, session_id, lambda event: None)

    floor = _wall([sys.executable, "-c", "pass"], runs)
    out: dict[str, Any] = {
        "floor_python_ms": floor,
        "import_cli_app_ms": _wall([sys.executable, "-c", "import cli.app"], runs),
        "help_ms": _wall([*acode_cmd, "--help"], runs),
        "status_ms": _wall([*acode_cmd, *home, "status"], runs),
        "run_detach_ms": _wall([*acode_cmd, *home, "run", "read ten files", "-w", str(workspace), "--provider",
                                "scripted", "--script", str(acode.script), "--detach"], runs, between=wait_done),
        "runs": runs, "target_ms": 150}
    for key in ("help_ms", "status_ms", "run_detach_ms"):
        out[key]["over_floor"] = round(out[key]["p50"] / floor["p50"], 2)
        out[key]["cpu_over_floor"] = round(out[key]["cpu_p50"] / max(floor["cpu_p50"], 1.0), 2)
    return out


def group_tool(acode: _Acode, args: argparse.Namespace) -> dict[str, Any]:
    session_id = new_id()
    acode.connection.persistence(Commit(session_id=session_id, snapshot=SessionSnapshot(
        id=session_id, task="bench", workspace="/", created_at=time.time(), updated_at=time.time())))
    rtt = []
    for _ in range(250):  # with the client the tool calls use (Connection.coordinator also checks the pid file)
        t0 = time.perf_counter()
        acode.connection.client.call("coordinator", GetStatus(), timeout=15, decoder=codec.COORDINATOR_REPLY)
        rtt.append((time.perf_counter() - t0) * 1000)
    rtt = rtt[50:]  # the first calls warm the sockets and caches up
    workspace = acode.workspace()
    tool_ms = _tool_dispatch(acode.connection, session_id, workspace, calls=args.tool_calls)
    journaled_ms = _tool_dispatch(acode.connection, session_id, workspace, calls=args.tool_calls, held=False)
    p50 = _percentile(tool_ms, 0.5)
    return {"tool_dispatch_ms": {"p50": p50, "p99": _percentile(tool_ms, 0.99), "count": len(tool_ms),
                                 "call": "executor -> sandbox -> executor, read_file of 1 KB, journaled by the "
                                         "stage with its next write (RunTool.held)",
                                 "target_p50": 1.0},
            "journaled_by_sandbox_ms": {"p50": _percentile(journaled_ms, 0.5),
                                        "p99": _percentile(journaled_ms, 0.99),
                                        "call": "the same read journaled by the sandbox through persistence before "
                                                "it answers (a replay's read)"},
            "floor_broker_rtt_ms": {"p50": _percentile(rtt, 0.5), "p99": _percentile(rtt, 0.99)},
            "over_floor": round(p50 / _percentile(rtt, 0.5), 2)}


def _profile_summary(profile: cProfile.Profile, top: int = 25) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, function), (_, calls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(filename).name}:{line}({function})", "calls": calls,
                     "tottime_ms": round(tottime * 1000, 1), "cumtime_ms": round(cumtime * 1000, 1)})
    return sorted(rows, key=lambda r: -r["tottime_ms"])[:top]


def group_turn(acode: _Acode, args: argparse.Namespace) -> dict[str, Any]:
    profile = cProfile.Profile() if args.profile else None
    requests: dict[str, list[float]] = {}
    turns = _executor_turns(acode.paths, Path(tempfile.mkdtemp(dir=acode.tmp)), args.turns, profile, requests)
    out: dict[str, Any] = {"executor_turn_overhead_ms": {
        "p50": _percentile(turns, 0.5), "p99": _percentile(turns, 0.99), "count": len(turns),
        "turns_per_step": TURNS_PER_STEP,
        "turn": "zero-latency model -> read_file of 1 KB (journaled with the step's next write) -> next request",
        "target_p50": 1.0},
        # where a turn waits: each request the executor made, by service and type (a turn of
        # this benchmark makes one read; the attempt asks its replay index once; commits come
        # at the steps' ends)
        "requests_ms": {name: {"count": len(times), "per_turn": round(len(times) / max(1, len(turns)), 2),
                               "p50": _percentile(times, 0.5)} for name, times in sorted(requests.items())}}
    if profile is not None:
        out["profile_by_own_time"] = _profile_summary(profile)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(GROUPS), help=f"groups to run, comma-separated: {','.join(GROUPS)}")
    parser.add_argument("--sessions", type=int, default=20, help="W1 sessions timed (w1, memory)")
    parser.add_argument("--no-peer", action="store_true", help="w1 without the LangGraph peer")
    parser.add_argument("--levels", default="1,10,25,50", help="concurrent sessions per concurrency run")
    parser.add_argument("--events", type=int, default=10_000, help="events appended (eventlog)")
    parser.add_argument("--cli-runs", type=int, default=10)
    parser.add_argument("--tool-calls", type=int, default=300)
    parser.add_argument("--synchronous", choices=["full", "normal"], default="full")
    parser.add_argument("--commands", type=int, default=50, help="run_terminal calls per isolation level")
    parser.add_argument("--context-runs", type=int, default=20, help="context preparations to time")
    parser.add_argument("--turns", type=int, default=400,
                        help=f"executor turns timed for the turn overhead (at most {MAX_STEPS * (TURNS_PER_STEP - 1)})")
    parser.add_argument("--profile", action="store_true", help="profile the executor's turns (turn group)")
    parser.add_argument("--reread-only", action="store_true", help="only the prompt re-read benchmark (--only reread)")
    args = parser.parse_args(argv)
    args.groups = ["reread"] if args.reread_only else [g for g in args.only.split(",") if g]
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    args.levels = [int(n) for n in args.levels.split(",")]
    return args


def _machine() -> dict[str, Any]:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpus": psutil.cpu_count(), "cpu": model, "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": sys.version.split()[0], "platform": platform.platform()}


def _compile_bytecode() -> None:
    """Write acode's bytecode before anything starts, as an installed acode has it: with
    PYTHONDONTWRITEBYTECODE set (this sandbox sets it) and a source newer than its cache,
    every actor would compile that module at each start, slower and with the compiler's
    memory left in its heap (about 1.5 MB in a stage actor)."""
    for package in ("actors", "broker", "cli", "protocol"):
        compileall.compile_dir(ROOT / package, quiet=1)


def run_groups(groups: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Run ``groups`` in a fixed order; one actor set serves every group that needs one."""
    result: dict[str, Any] = {}

    def timed(name: str, run: Callable[[], dict[str, Any]]) -> None:
        before = _load()
        figures = run()
        figures["loadavg"] = {"before": before, "after": _load()}
        result[name] = figures

    _compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="acode-bench-") as tmp_name:
        tmp = Path(tmp_name)
        # memory first: its "at rest" is the actor set before any session (after W1's, it was warm)
        shared = [g for g in ("memory", "w1", "eventlog", "tool", "turn", "cli") if g in groups]
        if shared:
            acode = _Acode(tmp, synchronous=args.synchronous)
            try:
                for name in shared:
                    group: Callable[[_Acode, argparse.Namespace], dict[str, Any]] = globals()[f"group_{name}"]
                    timed(name, functools.partial(group, acode, args))
            finally:
                acode.stop()
            if "w1" in groups:
                transitions = acode.transitions_ms()  # warm-ups and the memory group's sessions too
                result["w1"]["transition_ms"].update({"p50_all_sessions": _percentile(transitions, 0.5),
                                                      "p99_all_sessions": _percentile(transitions, 0.99),
                                                      "count_all_sessions": len(transitions)})
                result["w1"]["up_s"] = round(acode.up_s, 3)
        if "concurrency" in groups:
            timed("concurrency", lambda: group_concurrency(tmp, args))
    if "terminal" in groups:
        timed("terminal", lambda: _run_terminal(args.commands))
    if "context" in groups:
        timed("context", lambda: {"context_prep_ms": _context_prep(args.context_runs), "target_p50": 200.0})
    if "reread" in groups:
        timed("reread", lambda: {"prompt_reread_tokens": {
            "before": _prompt_reread(keep=1.0), "after": _prompt_reread(keep=0.5),
            "step": "20 executor turns, num_ctx 32768 (executor budget 30%), a 2.4 KB read_file result a turn; "
                    "tokens at 4 characters"}})
    return result


def main() -> int:
    args = parse_args()
    # the JSON on stdout is the output; in-process actors' log lines go to stderr
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr),
                        wrapper_class=structlog.make_filtering_bound_logger(30))
    started = _load()
    result: dict[str, Any] = {"machine": _machine(), "synchronous": args.synchronous, "groups": args.groups}
    result.update(run_groups(args.groups, args))
    result["loadavg"] = {"start": started, "end": _load()}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
