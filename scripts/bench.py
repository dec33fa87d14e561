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
- ``checkpoints``: a checkpoint of a ``--checkpoint-files`` (10,000) file git repository:
  the first, then ``--checkpoint-takes`` (100) each after up to 10 files changed (p50, p99),
  and the store's growth over a session editing 20 files (``scripts/bench_checkpoints.py``).
  W1 runs each timed session twice, with checkpoints and without (``checkpoints_off``),
  alternated: what checkpoints cost a session.

Usage: ``.venv/bin/python scripts/bench.py [--only GROUPS] [--sessions N] [--levels 1,10,50]
[--synchronous full|normal] [--profile] [--reread-only] ...`` (``--help`` lists every option).
The JSON alone goes to stdout; log lines of actors run in this process go to stderr.

This file is the runner and its command line; the groups live beside it, by what they need:
``bench_sessions.py`` (w1, memory, concurrency, eventlog) and ``bench_calls.py`` (cli, tool,
turn) on a running actor set (``bench_actorset.py``, which also holds the W1 workload);
``bench_local.py`` (terminal, context, reread) in this process alone.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import structlog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench_calls  # noqa: E402 - beside this file, and they import acode's packages from ROOT
import bench_checkpoints  # noqa: E402
import bench_local  # noqa: E402
import bench_sessions  # noqa: E402
from bench_actorset import Acode, percentile  # noqa: E402

from protocol.plans.plan import MAX_STEPS  # noqa: E402

GROUPS = ("w1", "memory", "concurrency", "eventlog", "cli", "tool", "turn", "terminal", "context", "reread",
          "checkpoints")

# The groups one actor set serves, in the order they run: memory first, as its "at rest" is
# the actor set before any session (after W1's, it was warm). concurrency starts its own.
ON_THE_ACTOR_SET: dict[str, Callable[[Acode, argparse.Namespace], dict[str, Any]]] = {
    "memory": bench_sessions.group_memory, "w1": bench_sessions.group_w1, "eventlog": bench_sessions.group_eventlog,
    "tool": bench_calls.group_tool, "turn": bench_calls.group_turn, "cli": bench_calls.group_cli}
IN_THIS_PROCESS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "terminal": bench_local.group_terminal, "context": bench_local.group_context, "reread": bench_local.group_reread,
    "checkpoints": lambda args: bench_checkpoints.measure(args.checkpoint_files, args.checkpoint_takes)}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


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
    most = MAX_STEPS * (bench_calls.TURNS_PER_STEP - 1)
    parser.add_argument("--turns", type=int, default=400,
                        help=f"executor turns timed for the turn overhead (at most {most})")
    parser.add_argument("--checkpoint-files", type=int, default=10_000, help="repository size (checkpoints)")
    parser.add_argument("--checkpoint-takes", type=int, default=100, help="checkpoints timed (checkpoints)")
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
        shared = [g for g in ON_THE_ACTOR_SET if g in groups]
        if shared:
            acode = Acode(tmp, synchronous=args.synchronous)
            try:
                for name in shared:
                    timed(name, functools.partial(ON_THE_ACTOR_SET[name], acode, args))
            finally:
                acode.stop()
            if "w1" in groups:
                transitions = acode.transitions_ms()  # warm-ups and the memory group's sessions too
                result["w1"]["transition_ms"].update({"p50_all_sessions": percentile(transitions, 0.5),
                                                      "p99_all_sessions": percentile(transitions, 0.99),
                                                      "count_all_sessions": len(transitions)})
                result["w1"]["up_s"] = round(acode.up_s, 3)
        if "concurrency" in groups:
            timed("concurrency", lambda: bench_sessions.group_concurrency(tmp, args))
    for name, group in IN_THIS_PROCESS.items():
        if name in groups:
            timed(name, functools.partial(group, args))
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
