"""What a client command loads while it runs against a live actor set (README "Performance").

``tests/cli/test_startup.py`` guards ``import cli.app``; a command can still pull in a heavy
package at run time through a module it imports inside its body (``acode status`` took
structlog and rich in through ``cli.doctor``: some 50 ms per call). Each command here runs
in a fresh interpreter, as ``acode`` would, and then lists what it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.conftest import REPO, Acode
from tests.system.workloads import script, workload, workspace

# Packages no client command below needs: the actors' code runs in their processes,
# structlog (and rich, which its dev module loads) is for the actors' logs, httpx talks to
# models, psutil is replaced by /proc on Linux, sqlite3 is persistence's.
_HEAVY = ("actors.sandbox", "actors.coordinator", "actors.stages", "actors.llm", "actors.persistence",
          "structlog", "rich", "httpx", "psutil", "sqlite3", "logging", "asyncio",
          "mcp", "pydantic")  # the MCP SDK: `acode mcp serve` and the mcp actor only


def _loaded_by(acode: Acode, tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """Run ``acode ARGS`` in a fresh interpreter; its output and the modules it loaded."""
    listing = tmp_path / "modules.json"
    probe = ("import atexit, json, sys\n"
             f"atexit.register(lambda: open({str(listing)!r}, 'w').write(json.dumps(sorted("
             "n for n, m in sys.modules.items() if m is not None))))\n"
             f"sys.argv = ['acode', '--home', {str(acode.home)!r}, *{list(args)!r}]\n"
             "from cli.app import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=acode.env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout, set(json.loads(listing.read_text()))


# ... except the checks ``run`` and ``status`` make before anything is submitted: the
# sandbox's policy for the configured read and write paths (acode.config.settings.sandbox_policy) and
# whether a model server's base URL is local (actors.llm.locality)
_CHECKS = {"actors.sandbox", "actors.sandbox.confinement", "actors.sandbox.confinement.isolation",
           "actors.sandbox.confinement.visible", "actors.llm", "actors.llm.locality"}


def _heavy(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded - _CHECKS if any(m == h or m.startswith(h + ".") for h in _HEAVY))


@pytest.mark.timeout(180)
def test_status_run_detach_sessions_and_show_load_no_actor_code_or_logging(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    root = workspace(tmp_path / "ws")
    model = script(tmp_path / "script.yaml", workload())
    out, loaded = _loaded_by(acode, tmp_path, "run", "write two files", "-w", str(root), "--provider", "scripted",
                             "--script", str(model), "--detach")
    session_id = out.strip()
    assert len(session_id) == 36, out
    assert _heavy(loaded) == [], f"`acode run --detach` loaded {_heavy(loaded)}"
    # an HTTP provider's base URL is checked before the session is submitted, without httpx
    # (nothing listens on port 9: the session pauses later, in the planner)
    other = workspace(tmp_path / "ws2")
    out, loaded = _loaded_by(acode, tmp_path, "run", "write two files", "-w", str(other), "--provider", "ollama",
                             "--model", "m", "--base-url", "http://127.0.0.1:9", "--detach")
    assert len(out.strip()) == 36, out
    assert _heavy(loaded) == [], f"`acode run --provider ollama --detach` loaded {_heavy(loaded)}"
    for args in (("status",), ("status", "--json"), ("sessions",), ("show", session_id[:24])):
        out, loaded = _loaded_by(acode, tmp_path, *args)
        assert out, args
        assert _heavy(loaded) == [], f"`acode {' '.join(args)}` loaded {_heavy(loaded)}"
