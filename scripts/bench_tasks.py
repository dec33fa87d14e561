#!/usr/bin/env python3
"""The task benchmark: does the change the user asked for get made, with a real local model?

Runs each *system* on each task (``scripts/task_set.py``: a fixed HumanEval subset and five
edits of a tiny repository) against one model server, then judges the workspace with the
task's hidden tests. Prints one JSON object (and rewrites ``--out`` after every task, so a
long run's partial figures survive an interruption). Systems, interleaved task by task so a
drift of the machine's speed meets them alike:

- ``acode``: this checkout's ``acode`` (the one beside ``sys.executable``), a private home,
  ``acode up`` once, then ``acode run TASK -w WS --json`` per task (stage and step timeouts
  raised as the README advises for real models; a call needing approval is approved:
  ``non_interactive_policy: auto``, everything still in the sandbox);
- ``aider``: aider (``aider-chat``; ``--aider PATH`` or ``aider`` on the PATH) with its
  whole-file edit format (its setting for small models), the task's files added to the chat,
  and its own test loop (``--auto-test --test-cmd "python -m pytest -q"``; ``--aider-no-test``
  turns it off);
- ``direct``: the model asked once, in one chat turn, to complete the function (HumanEval
  only): what the model can do alone, the floor acode must add to.

Every request of every system goes through a recording proxy on loopback, so all are
counted alike: requests, prompt tokens evaluated, prompt tokens served from the server's
cache (llama.cpp's ``timings.cache_n``, or ``usage.prompt_tokens_details.cached_tokens``;
Ollama reports none), completion tokens, and the server's own prompt and generation time.
Per acode task also: the final state and exit code, time per stage, cycles, error codes.

Usage::

    M=$(../shared/models/setup-qwen-coder.sh)      # or any OpenAI-compatible / Ollama server
    ~/.cache/acode-models/srv/bin/python ../shared/models/serve.py "$M" 8090 --ctx 8192 &
    .venv/bin/python scripts/bench_tasks.py --base-url http://127.0.0.1:8090/v1 --model "$M" \\
        --tasks all --systems acode,aider,direct --out bench-tasks.json

``--tasks``: ``humaneval``, ``edits``, ``all`` or ids (``he/8,edit/flag``); ``--provider
ollama`` with an Ollama base URL (``http://127.0.0.1:11434``). Only loopback servers.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import task_set  # noqa: E402
from task_set import Task  # noqa: E402

SYSTEMS = ("acode", "aider", "direct")
CODE = re.compile(r"ACODE-[A-Z]+-\d{3}")
FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


# -- the recording proxy -----------------------------------------------------------------------

@dataclass
class Usage:
    """What the server did for the requests of one system on one task."""

    requests: int = 0
    prompt_evaluated: int = 0
    prompt_cached: int = 0
    completion_tokens: int = 0
    prompt_ms: float = 0.0
    generation_ms: float = 0.0
    unreported: int = 0

    def add(self, other: Usage) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


def usage_of(body: bytes) -> Usage:
    """The counts in one chat answer: an SSE stream, Ollama's NDJSON or one JSON object."""
    usage = Usage(requests=1)
    final: dict[str, Any] = {}
    for line in body.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and any(k in item for k in ("usage", "timings", "prompt_eval_count")):
            final.update(item)
    timings, counts = final.get("timings") or {}, final.get("usage") or {}
    if timings:
        usage.prompt_evaluated = int(timings.get("prompt_n", 0))
        usage.prompt_cached = int(timings.get("cache_n", 0))
        usage.completion_tokens = int(timings.get("predicted_n", counts.get("completion_tokens", 0)))
        usage.prompt_ms, usage.generation_ms = float(timings.get("prompt_ms", 0)), float(timings.get("predicted_ms", 0))
    elif counts:
        cached = int((counts.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0)
        usage.prompt_cached, usage.prompt_evaluated = cached, int(counts.get("prompt_tokens", 0)) - cached
        usage.completion_tokens = int(counts.get("completion_tokens", 0))
    elif "prompt_eval_count" in final:
        usage.prompt_evaluated = int(final["prompt_eval_count"])
        usage.completion_tokens = int(final.get("eval_count", 0))
        usage.prompt_ms = final.get("prompt_eval_duration", 0) / 1e6
        usage.generation_ms = final.get("eval_duration", 0) / 1e6
    else:
        usage.unreported = 1
    return usage


def streamed_text(body: str) -> str:
    """The answer's text from an SSE stream (OpenAI) or NDJSON (Ollama)."""
    text = []
    for line in body.splitlines():
        line = line.removeprefix("data:").strip()
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        choices = item.get("choices") or [{}]
        text.append((choices[0].get("delta") or {}).get("content") or (item.get("message") or {}).get("content") or "")
    return "".join(text)


class Proxy:
    """A loopback HTTP relay to the model server that counts what each chat request cost.

    Answers are relayed as they arrive (a streamed answer stays streamed); the counts go to
    :attr:`usage`, which the benchmark swaps for a fresh one before each run."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"--base-url {upstream!r} is not a loopback address; the benchmark talks only to loopback")
        self.host, self.port = parts.hostname, parts.port or 80
        self.usage = Usage()
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.relay(b"")

            def do_POST(self) -> None:
                self.relay(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def relay(self, body: bytes) -> None:
                upstream = http.client.HTTPConnection(proxy.host, proxy.port, timeout=3600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    answer = upstream.getresponse()
                    self.send_response(answer.status)
                    for key, value in answer.getheaders():
                        if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                            self.send_header(key, value)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    seen = bytearray()
                    while chunk := answer.read1(65536):
                        seen += chunk
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (OSError, http.client.HTTPException):
                    return
                finally:
                    upstream.close()
                if self.command == "POST" and self.path.endswith(("/chat/completions", "/api/chat")):
                    with proxy.lock:
                        proxy.usage.add(usage_of(bytes(seen)))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}" + parts.path.rstrip("/")

    def take(self) -> Usage:
        with self.lock:
            usage, self.usage = self.usage, Usage()
        return usage

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- one result --------------------------------------------------------------------------------

@dataclass
class Result:
    task: str
    system: str
    passed: bool
    detail: str
    wall_s: float
    usage: Usage
    state: str = ""
    exit_code: int | None = None
    stages_s: dict[str, float] = field(default_factory=dict)
    cycles: dict[str, int] = field(default_factory=dict)
    error_codes: list[str] = field(default_factory=list)


@dataclass
class Bench:
    args: argparse.Namespace
    proxy: Proxy
    root: Path

    def workspace(self, task: Task, system: str) -> Path:
        base = self.root / system / task.id.replace("/", "-")
        path, n = base, 1
        while path.exists():  # the same task twice in one run (a repeat)
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        path.mkdir(parents=True)
        task.create(path)
        return path


def run_direct(bench: Bench, task: Task, ws: Path) -> Result:
    """Ask the model once for the whole solution.py; write the code it answers and judge it."""
    start = time.monotonic()
    prompt = ("Complete the following Python code. Answer with the complete file in one ```python code block.\n\n"
              f"```python\n{task.files['solution.py']}```")
    messages = [{"role": "user", "content": prompt}]
    if bench.args.provider == "ollama":
        url, body = f"{bench.proxy.base}/api/chat", {"model": bench.args.model, "messages": messages, "stream": True,
                                                     "options": {"temperature": 0, "num_ctx": bench.args.num_ctx}}
    else:
        url, body = f"{bench.proxy.base}/chat/completions", {"model": bench.args.model, "messages": messages,
                                                             "temperature": 0, "max_tokens": 1024, "stream": True,
                                                             "stream_options": {"include_usage": True}}
    try:
        answer = httpx.post(url, json=body, timeout=bench.args.task_timeout)
        answer.raise_for_status()
    except httpx.HTTPError as error:
        wall = time.monotonic() - start
        return Result(task.id, "direct", False, f"request failed: {error}", wall, bench.proxy.take())
    text = streamed_text(answer.text)
    blocks = FENCE.findall(text) or [text]
    (ws / "solution.py").write_text(max(blocks, key=len))
    verdict = task_set.judge(task, ws)
    return Result(task.id, "direct", verdict.passed, verdict.detail, time.monotonic() - start, bench.proxy.take())


def run_aider(bench: Bench, task: Task, ws: Path) -> Result:
    aider = bench.args.aider or shutil.which("aider")
    if not aider:
        raise SystemExit("aider is not installed: pip install -e '.[bench]' or pass --aider PATH")
    argv = [aider, "--model", f"{'ollama_chat' if bench.args.provider == 'ollama' else 'openai'}/{bench.args.model}",
            "--edit-format", "whole", "--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-check-update",
            "--no-show-model-warnings", "--no-analytics", "--no-pretty", "--no-fancy-input", "--no-show-release-notes",
            "--timeout", str(int(bench.args.task_timeout)), "--message", task.request, *task.chat_files]
    if not bench.args.aider_no_test:
        argv[1:1] = ["--auto-test", "--test-cmd", "python -m pytest -q"]
    env = {**os.environ, "OPENAI_API_KEY": "local", "OPENAI_API_BASE": bench.proxy.base,
           "OLLAMA_API_BASE": bench.proxy.base, "HOME": str(bench.root / "aider-home")}
    Path(env["HOME"]).mkdir(exist_ok=True)
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=bench.args.task_timeout,
                              stdin=subprocess.DEVNULL)
        code: int | None = done.returncode
    except subprocess.TimeoutExpired:
        code = None
    wall = time.monotonic() - start
    verdict = task_set.judge(task, ws)
    return Result(task.id, "aider", verdict.passed, verdict.detail, wall, bench.proxy.take(),
                  state="timeout" if code is None else "exited", exit_code=code)


class Acode:
    """A private acode home with the actor set up for the whole run."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.home = bench.root / "acode-home"
        self.home.mkdir()
        exe = Path(sys.executable).parent / "acode"
        self.argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "cli.app"]
        self.argv += ["--home", str(self.home)]
        timeout = bench.args.stage_timeout
        (self.home / "config.yml").write_text(json.dumps({
            "model": {"provider": bench.args.provider, "base_url": bench.proxy.base, "model": bench.args.model,
                      "num_ctx": bench.args.num_ctx},
            # the README's advice for real models: stages and a step's try get far more time
            "orchestration": {f"{s}_timeout": timeout for s in ("planner", "executor", "verifier", "reviewer")},
            "executor": {"step_timeout_seconds": bench.args.step_timeout},
            "approvals": {"non_interactive_policy": "auto"},
        }, indent=2))
        self.acode("up", "--detach", check=True)

    def acode(self, *args: str, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.argv, *args], capture_output=True, text=True, check=check, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def run(self, task: Task, ws: Path) -> Result:
        start = time.monotonic()
        try:
            done = self.acode("run", task.request, "-w", str(ws), "--json", timeout=self.bench.args.task_timeout)
            code: int | None = done.returncode
        except subprocess.TimeoutExpired:
            code = None
        wall = time.monotonic() - start
        sessions = json.loads(self.acode("sessions", "--json").stdout or "[]")
        mine = [s for s in sessions if s.get("workspace") == str(ws)]
        result = Result(task.id, "acode", False, "", wall, Usage(), exit_code=code)
        if mine:
            sid = mine[0]["id"]
            if code is None:
                self.acode("cancel", sid)
            shown = json.loads(self.acode("show", sid, "--json").stdout)
            session, events = shown["session"], shown["events"]
            result.state = session["status"]
            result.cycles = dict(session.get("cycles") or {})
            for event in events:
                if event.get("type") == "stage_finished":
                    stage = event["stage"]
                    result.stages_s[stage] = round(result.stages_s.get(stage, 0.0) + event["duration_ms"] / 1000, 2)
            result.error_codes = sorted(set(CODE.findall(json.dumps(events))))
        verdict = task_set.judge(task, ws)
        result.passed, result.detail, result.usage = verdict.passed, verdict.detail, self.bench.proxy.take()
        return result

    def close(self) -> None:
        self.acode("down")


# -- the run -----------------------------------------------------------------------------------

def summary(results: list[Result]) -> dict[str, Any]:
    total = Usage()
    for r in results:
        total.add(r.usage)
    passed = sum(r.passed for r in results)
    prompt = total.prompt_evaluated + total.prompt_cached
    return {
        "passed": passed, "of": len(results), "pass_rate": round(passed / len(results), 3) if results else None,
        "wall_s": round(sum(r.wall_s for r in results), 1), **asdict(total),
        "prompt_evaluated_per_passed": round(total.prompt_evaluated / passed) if passed else None,
        "cache_share": round(total.prompt_cached / prompt, 3) if prompt else None,
        "results": [{**asdict(r), "wall_s": round(r.wall_s, 1)} for r in results],
    }


def report(args: argparse.Namespace, tasks: list[Task], results: dict[str, list[Result]],
           load: list[float]) -> dict[str, Any]:
    systems = {name: summary(rs) for name, rs in results.items()}
    compare: dict[str, Any] = {}
    for peer in ("aider", "direct"):
        if "acode" in systems and peer in systems:
            a, p = systems["acode"], systems[peer]
            ids = {r["task"] for r in p["results"]}
            on_same = sum(r["passed"] for r in a["results"] if r["task"] in ids)
            ratio = (a["prompt_evaluated_per_passed"] / p["prompt_evaluated_per_passed"]
                     if a["prompt_evaluated_per_passed"] and p["prompt_evaluated_per_passed"] else None)
            compare[f"acode_vs_{peer}"] = {"passed": [on_same, p["passed"]], "of": p["of"],
                                           "prompt_evaluated_per_passed_ratio": round(ratio, 2) if ratio else None}
    return {
        "server": {"provider": args.provider, "base_url": args.base_url, "model": args.model, "num_ctx": args.num_ctx},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg": {
            "before": load, "after": [round(x, 2) for x in os.getloadavg()]}},
        "tasks": [t.id for t in tasks], "systems": systems, "compare": compare,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True, help="the model server (loopback only)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--provider", choices=("openai", "ollama"), default="openai")
    parser.add_argument("--num-ctx", type=int, default=8192)
    parser.add_argument("--tasks", default="all", help="humaneval, edits, all, or ids: he/8,edit/flag")
    parser.add_argument("--systems", default="acode,aider,direct", help=f"comma-separated: {', '.join(SYSTEMS)}")
    parser.add_argument("--task-timeout", type=float, default=1200.0, help="seconds per system per task")
    parser.add_argument("--stage-timeout", type=float, default=900.0, help="acode's stage timeouts")
    parser.add_argument("--step-timeout", type=float, default=600.0, help="acode's executor.step_timeout_seconds")
    parser.add_argument("--aider", help="the aider executable (default: aider on the PATH)")
    parser.add_argument("--aider-no-test", action="store_true", help="no --auto-test for aider")
    parser.add_argument("--out", type=Path, help="also write the JSON here, after every task")
    parser.add_argument("--keep", action="store_true", help="keep the workspaces (their path goes to stderr)")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := [s for s in systems if s not in SYSTEMS]:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    tasks = task_set.select(args.tasks)
    # a SIGTERM unwinds like Ctrl-C: acode is stopped and the workspaces go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load = [round(x, 2) for x in os.getloadavg()]
    proxy = Proxy(args.base_url)  # refuses a server off loopback before anything is made
    root = Path(tempfile.mkdtemp(prefix="acode-bench-tasks-"))
    runners: dict[str, Callable[[Bench, Task, Path], Result]] = {"direct": run_direct, "aider": run_aider}
    results: dict[str, list[Result]] = {s: [] for s in systems}
    acode = None
    try:
        bench = Bench(args, proxy, root)
        acode = Acode(bench) if "acode" in systems else None
        for task in tasks:
            for system in systems:
                if system == "direct" and "solution.py" not in task.files:
                    continue
                ws = bench.workspace(task, system)
                result = acode.run(task, ws) if system == "acode" and acode else runners[system](bench, task, ws)
                results[system].append(result)
                print(f"{task.id:18} {system:6} {'PASS' if result.passed else 'fail'} {result.wall_s:7.1f}s "
                      f"req={result.usage.requests} eval={result.usage.prompt_evaluated} "
                      f"cached={result.usage.prompt_cached} {result.state} {' '.join(result.error_codes)}",
                      file=sys.stderr, flush=True)
                if args.out:
                    args.out.write_text(json.dumps(report(args, tasks, results, load), indent=2))
    finally:
        if acode:
            acode.close()
        proxy.close()
        if args.keep:
            print(f"workspaces kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report(args, tasks, results, load), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
