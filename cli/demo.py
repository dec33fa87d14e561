"""``acode demo``: the shipped example project and scripted task, end to end.

Starts the actor set if it is not running, copies ``cli/example/project`` to a temporary
workspace, runs the scripted task through every stage (its first verification fails and
cycles back to the executor), prints the progress, the result and the files changed, and
stops the actors if it started them. The workspace is kept for you to look at.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import msgspec

from acode.client import Client
from acode.config.loader import resolve
from acode.config.settings import session_settings, up_options
from acode.connection import coordinator_pid
from actors.paths import RunPaths
from cli import daemon
from cli.follow import follow_and_print
from cli.render import echo
from protocol.basics.ids import new_id
from protocol.messages import SubmitTask

__all__ = ["EXAMPLE", "TASK", "run_demo"]

EXAMPLE = Path(__file__).resolve().parent / "example"
TASK = "Add a farewell(name) function to greet.py, with a unit test"


def _manifest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def run_demo(paths: RunPaths, *, keep_running: bool = False) -> int:
    started = False
    if coordinator_pid(paths) is None:
        echo(f"starting acode (home {paths.home}) ...")
        options, interval, liveness = up_options(resolve(home=paths.home))
        spec = daemon.coordinator_spec(paths, options, heartbeat_interval=interval, liveness=liveness)
        report, started = daemon.start_detached(spec)
        echo(f"acode is up: {len(report.actors)} actors ready")
    try:
        workspace = Path(tempfile.mkdtemp(prefix="acode-demo-"))
        shutil.copytree(EXAMPLE / "project", workspace, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        before = _manifest(workspace)
        settings = session_settings(resolve(home=paths.home, workspace=workspace, flags={
            "model.provider": "scripted", "model.script": str(EXAMPLE / "script.yaml")}))
        # The example's check is `python -m unittest`: the Python acode runs on answers it, also
        # where the user's PATH has no `python` (only python3). A user's own task gets their PATH.
        path = os.pathsep.join([os.path.dirname(sys.executable), settings.sandbox.path or os.defpath])
        settings = msgspec.structs.replace(settings, sandbox=msgspec.structs.replace(settings.sandbox, path=path))
        echo(f"task: {TASK}\nworkspace: {workspace}\n")
        with Client(paths.home) as client:
            session_id = new_id()
            client.connection.coordinator(SubmitTask(session_id=session_id, task=TASK, workspace=str(workspace),
                                                     settings=settings), timeout=30.0)
            session = follow_and_print(client, session_id)
        after = _manifest(workspace)
        changed = sorted(p for p in after if before.get(p) != after[p])
        echo(f"\nresult: {session.status} (exit {session.exit_code})")
        for path in changed:
            echo(f"--- {path} ---\n{(workspace / path).read_text()}")
        echo(f"workspace kept at {workspace}; `acode show {session_id}` shows every transition")
        return session.exit_code or 0
    finally:
        if started and not keep_running:
            daemon.stop(paths)
            echo("acode stopped (the demo started it)")
