"""scripts/bench.py's groups of sessions on a running actor set: ``w1`` (acode's W1
sessions, LangGraph's peer alternated with them), ``memory`` (the actor processes' memory
at rest and as sessions pass, what each import costs), ``concurrency`` (W1 sessions at
once, one and two executors) and ``eventlog`` (10,000 events appended through
persistence). The figures each reports are in scripts/bench.py's docstring.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import langgraph_peer  # beside this file: the W1 peer (LangGraph is loaded when one is made)
from bench_actorset import STEPS, Acode, cpu_of, memory_of, percentile

from protocol import codec
from protocol.basics.ids import new_id
from protocol.messages import Commit, GetEvents, ListSessions
from protocol.sessions.events import ToolCalled, Transitioned
from protocol.sessions.session import SessionSnapshot

__all__ = ["group_concurrency", "group_eventlog", "group_memory", "group_w1"]

ROOT = Path(__file__).resolve().parent.parent


def group_w1(acode: Acode, args: argparse.Namespace) -> dict[str, Any]:
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
        client, server, peer_s, off = [], [], [], []
        before = len(acode.transitions_ms())
        for _ in range(args.sessions):
            c, s = acode.w1()
            client.append(c)
            server.append(s)
            if peer is not None:
                peer_s.append(peer.session())
            off.append(acode.w1(checkpoints=False)[1])  # alternated: what checkpoints cost
        out: dict[str, Any] = {"session_s": {
            "server_p50": round(statistics.median(server), 4), "server_min": round(min(server), 4),
            "server_max": round(max(server), 4), "client_p50": round(statistics.median(client), 4),
            "sessions": args.sessions, "workload": f"plan, {STEPS} steps of one read_file each, verify, review"}}
        out["checkpoints_off"] = {"server_p50": round(statistics.median(off), 4),
                                  "on_over_off": round(statistics.median(server) / statistics.median(off), 3),
                                  "target_on_over_off": 1.05}
        timed = acode.transitions_ms()[before:]  # these sessions' and the checkpoint-free ones
        out["transition_ms"] = {"p50": percentile(timed, 0.5), "p99": percentile(timed, 0.99), "count": len(timed),
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


def group_memory(acode: Acode, args: argparse.Namespace) -> dict[str, Any]:
    at_rest = memory_of(acode.processes())
    for _ in range(3):
        acode.w1()
    warm = memory_of(acode.processes())
    for _ in range(args.sessions):
        acode.w1()
    after = memory_of(acode.processes())
    time.sleep(1.0)  # the sessions have ended; let the actors go idle
    ended = memory_of(acode.processes())
    per_session = {k: round((after["total_mb"][k] - warm["total_mb"][k]) / args.sessions, 3)
                   for k in ("rss", "pss", "uss")}
    after_end = {k: round(ended["total_mb"][k] - after["total_mb"][k], 1) for k in ("rss", "pss", "uss")}
    return {"at_rest": at_rest, "after_warm_up_total_mb": warm["total_mb"], "after_sessions": after,
            "after_end_total_mb": ended["total_mb"], "sessions": args.sessions,
            "growth_per_session_mb": per_session, "change_after_end_mb": after_end,
            "imports": _import_costs(),
            "targets": {"total_rss_mb": 200, "growth_per_session_mb": 0.5}}


def _concurrent(acode: Acode, level: int) -> dict[str, Any]:
    workspaces = [acode.workspace() for _ in range(level)]
    cpu_before = cpu_of(acode.processes())
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
    cpu_after = cpu_of(acode.processes())
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
            "latency_s": {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)} if latencies else {},
            "cost_per_session_s": round(span / level, 4) if finished else None,
            "cpu_s_per_process": dict(sorted(busy.items(), key=lambda item: -item[1]))}


def group_concurrency(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"levels": args.levels}
    for executors in (1, 2):
        acode = Acode(tmp, synchronous=args.synchronous, executors=executors, name=f"home-x{executors}")
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


def group_eventlog(acode: Acode, args: argparse.Namespace) -> dict[str, Any]:
    from protocol.sessions.events import Transitioned as Ev

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
