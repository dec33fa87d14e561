"""scripts/bench.py's groups that run in this process, without an actor set: ``terminal``
(``true`` through run_terminal under each isolation level this machine offers),
``context`` (the planner's context preparation over a generated 2,000-file workspace) and
``reread`` (the prompt tokens a caching model server reads again on each executor turn,
as the stand-in server of tests/modelserver.py sees them).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
from bench_actorset import percentile

from actors.llm.provider import ModelRequest
from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.confinement.isolation import Isolation, command_env, detect
from actors.sandbox.dispatch import ToolCall
from actors.sandbox.tools.terminal import Terminal
from actors.stages.execution import executor
from actors.stages.planning import gather
from actors.stages.prompting import prompts
from actors.stages.prompting.untrusted import Fence
from protocol.calls.tools import RunTerminal
from protocol.messages import RunTool
from protocol.plans.results import ModelToolCall, ToolResult
from protocol.sessions.session import SessionSettings

__all__ = ["group_context", "group_reread", "group_terminal"]


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
        out["plain_subprocess_p50"] = percentile(base, 0.5)
        from actors.sandbox.confinement import sealed, tripwire

        checks = []
        for _ in range(calls):  # the record and compare alone, in this process (no command between)
            t0 = time.perf_counter()
            tripwire.Tripwire(sealed.find(root)).check()
            checks.append((time.perf_counter() - t0) * 1000)
        out["protected_paths_record_and_compare_p50"] = percentile(checks, 0.5)
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
                out[name] = timings[name] = {"p50": percentile(times[name], 0.5),
                                             "p99": percentile(times[name], 0.99)}
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
    return {"p50": percentile(times, 0.5), "p99": percentile(times, 0.99), "runs": runs, "files": files,
            "budget_tokens": budget, "prompt_tokens": prepared.tokens, "tool_calls": prepared.tool_calls,
            "sections": len(prepared.sections), "omitted": len(prepared.omitted)}


def _prompt_reread(keep: float, turns: int = 20) -> dict[str, object]:
    from actors.llm.openai import OpenAICompatibleModel
    from actors.stages.execution.conversation import Conversation
    from protocol.sessions.profiles import tool_surface
    from protocol.sessions.session import OpenAIProvider
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


def group_terminal(args: argparse.Namespace) -> dict[str, Any]:
    return _run_terminal(args.commands)


def group_context(args: argparse.Namespace) -> dict[str, Any]:
    return {"context_prep_ms": _context_prep(args.context_runs), "target_p50": 200.0}


def group_reread(args: argparse.Namespace) -> dict[str, Any]:
    return {"prompt_reread_tokens": {
        "before": _prompt_reread(keep=1.0), "after": _prompt_reread(keep=0.5),
        "step": "20 executor turns, num_ctx 32768 (executor budget 30%), a 2.4 KB read_file result a turn; "
                "tokens at 4 characters"}}
