"""The peer of acode's W1: the same workload in LangGraph, one process, SQLite checkpointer.

W1: plan, then an agent/tool loop of 10 ``read_file`` calls of a small file (one per agent
turn), then verify, then review; a "model" that answers at once (plain functions, as acode's
scripted model), and durable state after every superstep: a ``SqliteSaver`` on a file (WAL,
as LangGraph sets it) with ``durability="sync"``, so each checkpoint is written before the
next superstep starts (acode makes each transition durable before it acts on it). The figure
is one session's wall time, ``invoke`` to its return, p50/min/max (:meth:`Peer.summary`).

Two scripts use it: ``scripts/bench.py``'s ``w1`` group runs a :class:`Peer` session after
each of acode's, and ``scripts/bench_langgraph.py`` runs it alone or beside that group.
Needs the optional extra: ``pip install -e .[bench]`` (LangGraph is imported when a peer is
made, so importing this module needs nothing).
"""

from __future__ import annotations

import operator
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

__all__ = ["STEPS", "Peer", "State", "measure"]

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


class Peer:
    """LangGraph's W1 on one checkpoint database, one session at a time (:meth:`session`),
    so a caller can alternate its sessions with acode's and both meet the same machine."""

    def __init__(self, durability: str = "sync"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.durability = durability
        self._tmp = tempfile.TemporaryDirectory(prefix="acode-bench-lg-")
        workspace = Path(self._tmp.name) / "ws"
        workspace.mkdir()
        for i in range(1, STEPS + 1):
            (workspace / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        self._conn = sqlite3.connect(str(Path(self._tmp.name) / "checkpoints.db"), check_same_thread=False)
        self.saver = SqliteSaver(self._conn)
        self.saver.setup()
        self.graph = _graph(workspace, self.saver)
        self.checkpoints = 0
        self._sessions = 0

    def session(self) -> float:
        """One W1 session, ``invoke`` to its return; seconds."""
        from langchain_core.messages import HumanMessage
        from langchain_core.runnables import RunnableConfig

        self._sessions += 1
        config: RunnableConfig = {"configurable": {"thread_id": f"s{self._sessions}"}}
        t0 = time.perf_counter()
        final = self.graph.invoke({"messages": [HumanMessage(content="read ten files")], "plan": [],
                                   "verified": False, "approved": False}, config, durability=self.durability)
        elapsed = time.perf_counter() - t0
        assert final["approved"] and len([m for m in final["messages"] if m.type == "tool"]) == STEPS
        self.checkpoints = sum(1 for _ in self.saver.list(config))
        return elapsed

    def summary(self, times: list[float]) -> dict[str, Any]:
        """The figures of ``times`` (seconds per session, warm-up left out by the caller)."""
        from importlib.metadata import version

        journal_mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
        level = self._conn.execute("PRAGMA synchronous").fetchone()[0]
        synchronous = {0: "off", 1: "normal", 2: "full", 3: "extra"}[level]
        return {"p50": round(statistics.median(times), 4), "min": round(min(times), 4),
                "max": round(max(times), 4), "sessions": len(times), "checkpoints_per_session": self.checkpoints,
                "durability": self.durability, "sqlite": f"journal_mode={journal_mode}, synchronous={synchronous}",
                "langgraph": version("langgraph"), "unit": "s"}

    def close(self) -> None:
        self._conn.close()
        self._tmp.cleanup()


def measure(sessions: int, durability: str = "sync") -> dict[str, Any]:
    """LangGraph's W1, ``sessions`` times on one checkpoint database; seconds per session."""
    peer = Peer(durability)
    try:
        peer.session()  # the first session warms up imports and the database
        return peer.summary([peer.session() for _ in range(sessions)])
    finally:
        peer.close()
