#!/usr/bin/env python3
"""The peer of acode's W1: the same workload in LangGraph, one process, SQLite checkpointer.

W1: plan, then an agent/tool loop of 10 ``read_file`` calls of a small file (one per agent
turn), then verify, then review; a "model" that answers at once (plain functions, as acode's
scripted model), and durable state after every superstep: a ``SqliteSaver`` on a file (WAL,
as LangGraph sets it) with ``durability="sync"``, so each checkpoint is written before the
next superstep starts (acode makes each transition durable before it acts on it). The figure
is one session's wall time, ``invoke`` to its return, p50/min/max over ``--sessions``; the
same with LangGraph's default ``durability="async"`` is reported beside it.

Run alone it also runs acode's W1 (``scripts/bench.py``'s ``w1`` group) in the same run and
prints both figures and their ratio; ``scripts/bench.py --only w1`` calls :func:`measure`.
Needs the optional extra: ``pip install -e .[bench]``.

Usage: ``scripts/bench_langgraph.py [--sessions N] [--peer-only]`` (JSON on stdout).
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

STEPS = 10


class State(TypedDict):
    """The graph's state (module level: LangGraph reads the nodes' type hints)."""

    messages: Annotated[list[Any], operator.add]
    plan: list[str]
    verified: bool
    approved: bool


def _graph(workspace: Path, saver: Any) -> Any:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return (workspace / path).read_text()

    def plan(state: State) -> dict[str, Any]:
        return {"plan": [f"read f{i}.txt" for i in range(1, STEPS + 1)],
                "messages": [AIMessage(content="plan: read ten files")]}

    def agent(state: State) -> dict[str, Any]:
        done = sum(1 for m in state["messages"] if isinstance(m, ToolMessage))
        if done >= STEPS:
            return {"messages": [AIMessage(content="all steps done")]}
        call = {"name": "read_file", "args": {"path": f"f{done + 1}.txt"}, "id": f"call{done + 1}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else "verify"

    def verify(state: State) -> dict[str, Any]:
        return {"verified": True, "messages": [AIMessage(content='{"passed": true}')]}

    def review(state: State) -> dict[str, Any]:
        return {"approved": True, "messages": [AIMessage(content='{"decision": "approve"}')]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([read_file]))
    builder.add_node("verify", verify)
    builder.add_node("review", review)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "agent")
    builder.add_conditional_edges("agent", route, {"tools": "tools", "verify": "verify"})
    builder.add_edge("tools", "agent")
    builder.add_edge("verify", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def measure(sessions: int, durability: str = "sync") -> dict[str, Any]:
    """LangGraph's W1, ``sessions`` times on one checkpoint database; seconds per session."""
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory(prefix="acode-bench-lg-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        for i in range(1, STEPS + 1):
            (workspace / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        conn = sqlite3.connect(str(Path(tmp) / "checkpoints.db"), check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            graph = _graph(workspace, saver)
            times: list[float] = []
            checkpoints = 0
            for n in range(sessions + 1):
                config: RunnableConfig = {"configurable": {"thread_id": f"s{n}"}}
                t0 = time.perf_counter()
                final = graph.invoke({"messages": [HumanMessage(content="read ten files")], "plan": [],
                                      "verified": False, "approved": False}, config, durability=durability)
                elapsed = time.perf_counter() - t0
                assert final["approved"] and len([m for m in final["messages"] if m.type == "tool"]) == STEPS
                if n:  # the first session warms up imports and the database
                    times.append(elapsed)
                    checkpoints = sum(1 for _ in saver.list(config))
            journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            level = conn.execute("PRAGMA synchronous").fetchone()[0]
            synchronous = {0: "off", 1: "normal", 2: "full", 3: "extra"}[level]
        finally:
            conn.close()
    from importlib.metadata import version

    return {"p50": round(statistics.median(times), 4), "min": round(min(times), 4), "max": round(max(times), 4),
            "sessions": sessions, "checkpoints_per_session": checkpoints, "durability": durability,
            "sqlite": f"journal_mode={journal_mode}, synchronous={synchronous}",
            "langgraph": version("langgraph"), "unit": "s"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--peer-only", action="store_true", help="measure LangGraph only")
    args = parser.parse_args()
    load_before = os.getloadavg()
    peer = measure(args.sessions)
    result: dict[str, Any] = {"langgraph_w1_s": peer, "langgraph_w1_async_s": measure(args.sessions, "async")}
    if not args.peer_only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench

        acode = bench.run_groups(["w1"], bench.parse_args(["--sessions", str(args.sessions), "--no-peer"]))
        result["acode"] = acode
        result["w1_ratio"] = round(acode["w1"]["session_s"]["server_p50"] / peer["p50"], 2)
    result["loadavg"] = {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
