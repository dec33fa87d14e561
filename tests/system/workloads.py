"""Scripted workloads for system tests: workspaces and scripted-model files built in code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TASK = "Write a.txt and b.txt and run slow.py once"

# The two-file session of the undo, budget and hooks tests: one task, a step per file, one check.
TWO_FILES = "Write a.txt and b.txt"
TWO_FILES_PLAN = {"goal": "a.txt and b.txt", "status": "ready", "tasks": [{
    "label": "T1", "title": "write both", "complexity": 2, "depends_on": [],
    "resources": {"write": ["a.txt", "b.txt"], "commands": []},
    "acceptance": [{"label": "A1", "description": "both written", "check": {"command": "cat a.txt b.txt"}}],
    "steps": [{"label": "S1", "title": "write a.txt", "action": "write_file"},
              {"label": "S2", "title": "write b.txt", "action": "write_file"}]}]}


def write_step(path: str, content: str) -> list[dict[str, Any]]:
    """A step's two answers: write ``path``, then step_complete."""
    return [{"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]},
            {"tool_calls": [{"name": "step_complete", "arguments": {"summary": f"wrote {path}"}}]}]

SLOW_PY = """import time
with open("log.txt", "a") as log:  # the side effect first, then the busy time
    log.write("ran\\n")
time.sleep(1.0)
"""

CHECK_PY = """import sys
problems = []
if open("a.txt").read() != "alpha\\n":
    problems.append("a.txt is wrong")
if open("b.txt").read() != "beta\\n":
    problems.append("b.txt is wrong")
runs = open("log.txt").read().count("ran")
if runs != 1:
    problems.append(f"slow.py ran {runs} times")
print("; ".join(problems) or "all good")
sys.exit(1 if problems else 0)
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def done(summary: str) -> dict[str, Any]:
    return call("step_complete", summary=summary)


def plan(*, checks: list[dict[str, Any]] | None = None, steps: list[dict[str, Any]] | None = None,
         goal: str = "write two files and run slow.py once") -> dict[str, Any]:
    return {"json": {
        "goal": goal, "status": "ready",
        "tasks": [{
            "label": "T1", "title": "files", "complexity": 2,
            "acceptance": checks if checks is not None else [
                {"label": "A1", "description": "files right, slow.py ran once",
                 "check": {"command": "python check.py", "expect_exit": 0, "expect_output": "all good"}},
                {"label": "A2", "description": "the change is tidy"},
            ],
            "steps": steps if steps is not None else [
                {"label": "S1", "title": "write a.txt", "action": "write_file"},
                {"label": "S2", "title": "run slow.py", "action": "run_command", "depends_on": ["S1"]},
                {"label": "S3", "title": "write b.txt", "action": "write_file", "depends_on": ["S2"]},
            ],
        }],
    }}


def workload(delays: dict[str, float] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Plan, three steps (write, run slow.py, write), verify (a check and a model
    criterion), review. ``delays`` puts a ``delay_s`` on a stage's first answer."""
    delays = delays or {}
    responses: dict[str, list[dict[str, Any]]] = {
        "planner": [plan()],
        "executor": [
            call("write_file", path="a.txt", content="alpha\n"), done("wrote a.txt"),
            call("run_terminal", command="python slow.py"), done("ran slow.py"),
            call("write_file", path="b.txt", content="beta\n"), done("wrote b.txt"),
        ],
        "verifier": [{"json": {"passed": True, "summary": "tidy",
                               "criteria": [{"label": "A2", "passed": True, "evidence": "looks tidy"}]}}],
        "reviewer": [{"json": {"decision": "approve", "summary": "all there", "issues": []}}],
    }
    for stage, seconds in delays.items():
        responses[stage][0] = {**responses[stage][0], "delay_s": seconds}
    return responses


def workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "slow.py").write_text(SLOW_PY)
    (root / "check.py").write_text(CHECK_PY)
    return root


def script(path: Path, responses: dict[str, list[dict[str, Any]]]) -> Path:
    path.write_text(json.dumps({"version": 1, "responses": responses}, indent=1))  # JSON is YAML
    return path


def outcome(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a run did, minus what may legitimately differ after a crash (attempts,
    retries, timings, ids, whether an interrupted call's outcome is known)."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        kind = e["type"]
        if kind == "transitioned":
            out.append((kind, e["source"], e["target"]))
        elif kind == "stage_finished":
            out.append((kind, e["stage"], e["ok"]))
        elif kind == "plan_recorded":
            out.append((kind, e["version"], e["tasks"], e["steps"]))
        elif kind == "step_finished":
            out.append((kind, e["task"], e["step"], e["status"]))
        elif kind == "tool_called":
            out.append((kind, e["tool"], e.get("target", "")))
        elif kind == "check_ran":
            out.append((kind, e["label"], e["passed"]))
        elif kind == "session_finished":
            out.append((kind, e["status"], e["exit_code"]))
    return out


def manifest(root: Path) -> dict[str, str]:
    """Every file of a workspace and its content (no caches)."""
    return {str(p.relative_to(root)): p.read_text(errors="replace") for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}
