#!/usr/bin/env python3
"""LangGraph's W1 beside acode's: the peer's figures, acode's, and their ratio, in one run.

The peer (:mod:`langgraph_peer`) is the same workload in LangGraph, one process, SQLite
checkpointer; the figure is one session's wall time, ``invoke`` to its return, p50/min/max
over ``--sessions``; the same with LangGraph's default ``durability="async"`` is reported
beside it.

Run alone it also runs acode's W1 (``scripts/bench.py``'s ``w1`` group) in the same run and
prints both figures and their ratio. ``scripts/bench.py --only w1`` runs a peer session
after each of acode's, alternated, so both meet the same machine: on a shared virtual
machine the speed drifts by ±10 % within minutes, and two blocks run one after the other
would measure the drift as much as the two systems.
Needs the optional extra: ``pip install -e .[bench]``.

Usage: ``scripts/bench_langgraph.py [--sessions N] [--peer-only]`` (JSON on stdout).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import bench
from langgraph_peer import measure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--peer-only", action="store_true", help="measure LangGraph only")
    args = parser.parse_args()
    load_before = os.getloadavg()
    result: dict[str, Any] = {}
    if args.peer_only:
        result["langgraph_w1_s"] = measure(args.sessions)
    else:  # acode's W1 with the peer's sessions alternated with its own (bench.py's w1 group)
        acode = bench.run_groups(["w1"], bench.parse_args(["--sessions", str(args.sessions)]))
        result["langgraph_w1_s"] = acode["w1"].pop("peer_langgraph_s")
        result["acode"] = acode
        result["w1_ratio"] = acode["w1"]["ratio"]
    result["langgraph_w1_async_s"] = measure(args.sessions, "async")
    result["loadavg"] = {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
