"""What scripts/bench.py's groups share: the W1 workload ("plan, then 10 steps each doing
one read_file of a small file, then verify, then review", its scripted model and its
workspaces), :class:`Acode`, a running actor set in a private home that runs it, the
memory and CPU of that set's processes, and :func:`percentile`.

Imported by scripts/bench.py after it has put the repository on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from acode.config.loader import resolve
from acode.config.settings import session_settings, up_options
from acode.connection import Connection
from acode.stream import follow
from actors.paths import RunPaths
from cli import daemon
from protocol.basics.ids import new_id
from protocol.messages import GetEvents, SubmitTask

__all__ = ["STEPS", "Acode", "cpu_of", "memory_of", "percentile"]

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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


class Acode:
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

    def submit(self, workspace: Path | None = None, *, checkpoints: bool = True) -> str:
        workspace = workspace or self.workspace()
        settings = session_settings(resolve(home=self.home, workspace=workspace, env={}, flags={
            "model.provider": "scripted", "model.script": str(self.script), "checkpoints.enabled": checkpoints}))
        session_id = new_id()
        self.connection.coordinator(SubmitTask(session_id=session_id, task="read ten files",
                                               workspace=str(workspace), settings=settings), timeout=30)
        return session_id

    def w1(self, *, checkpoints: bool = True) -> tuple[float, float]:
        """One W1 session: (submit to the final event as a follower sees it, first event to last as stored)."""
        t0 = time.perf_counter()
        session_id = self.submit(checkpoints=checkpoints)
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


def memory_of(processes: list[psutil.Process]) -> dict[str, Any]:
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


def cpu_of(processes: list[psutil.Process]) -> dict[str, float]:
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
