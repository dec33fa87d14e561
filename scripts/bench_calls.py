"""scripts/bench.py's groups that time one call against a running actor set: ``cli`` (the
wall time of ``acode --help``, ``status`` and ``run --detach`` beside Python's floor),
``tool`` (a 1 KB ``read_file`` round trip to the sandbox beside a broker round trip) and
``turn`` (the executor loop's own cost per turn, the real executor code in this process,
optionally under cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog
import zmq
from bench_actorset import Acode, percentile

from acode.connection import Connection
from acode.stream import follow
from actors.llm.meter import Meter
from actors.llm.provider import ModelRequest
from actors.paths import RunPaths
from actors.stages.execution import executor
from actors.stages.request.context import StageContext
from broker.threads import ThreadClients
from protocol import codec
from protocol.basics.ids import new_id
from protocol.messages import Commit, GetStatus, Message, RunStage, RunTool, ToolDone
from protocol.plans.plan import MAX_STEPS, PlanTask, TaskPlan, finalize
from protocol.plans.results import ModelAnswer, ModelToolCall
from protocol.sessions.session import ScriptedProvider, SessionSettings, SessionSnapshot

__all__ = ["TURNS_PER_STEP", "group_cli", "group_tool", "group_turn"]


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
    return {"p50": percentile(wall, 0.5), "min": round(min(wall), 1), "cpu_p50": percentile(cpu, 0.5)}


def group_cli(acode: Acode, args: argparse.Namespace) -> dict[str, Any]:
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


def group_tool(acode: Acode, args: argparse.Namespace) -> dict[str, Any]:
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
    p50 = percentile(tool_ms, 0.5)
    return {"tool_dispatch_ms": {"p50": p50, "p99": percentile(tool_ms, 0.99), "count": len(tool_ms),
                                 "call": "executor -> sandbox -> executor, read_file of 1 KB, journaled by the "
                                         "stage with its next write (RunTool.held)",
                                 "target_p50": 1.0},
            "journaled_by_sandbox_ms": {"p50": percentile(journaled_ms, 0.5),
                                        "p99": percentile(journaled_ms, 0.99),
                                        "call": "the same read journaled by the sandbox through persistence before "
                                                "it answers (a replay's read)"},
            "floor_broker_rtt_ms": {"p50": percentile(rtt, 0.5), "p99": percentile(rtt, 0.99)},
            "over_floor": round(p50 / percentile(rtt, 0.5), 2)}


def _profile_summary(profile: cProfile.Profile, top: int = 25) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, function), (_, calls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(filename).name}:{line}({function})", "calls": calls,
                     "tottime_ms": round(tottime * 1000, 1), "cumtime_ms": round(cumtime * 1000, 1)})
    return sorted(rows, key=lambda r: -r["tottime_ms"])[:top]


def group_turn(acode: Acode, args: argparse.Namespace) -> dict[str, Any]:
    profile = cProfile.Profile() if args.profile else None
    requests: dict[str, list[float]] = {}
    turns = _executor_turns(acode.paths, Path(tempfile.mkdtemp(dir=acode.tmp)), args.turns, profile, requests)
    out: dict[str, Any] = {"executor_turn_overhead_ms": {
        "p50": percentile(turns, 0.5), "p99": percentile(turns, 0.99), "count": len(turns),
        "turns_per_step": TURNS_PER_STEP,
        "turn": "zero-latency model -> read_file of 1 KB (journaled with the step's next write) -> next request",
        "target_p50": 1.0},
        # where a turn waits: each request the executor made, by service and type (a turn of
        # this benchmark makes one read; the attempt asks its replay index once; commits come
        # at the steps' ends)
        "requests_ms": {name: {"count": len(times), "per_turn": round(len(times) / max(1, len(turns)), 2),
                               "p50": percentile(times, 0.5)} for name, times in sorted(requests.items())}}
    if profile is not None:
        out["profile_by_own_time"] = _profile_summary(profile)
    return out
