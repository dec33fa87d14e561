"""Each actor process imports only what it uses (memory: README "Performance").

Checked in a fresh interpreter per actor (this test process has imported everything), as
``python -m actors.<name>`` loads it, without starting it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# module run by `python -m` -> packages it must not load
_UNUSED = {
    "broker.__main__": ("httpx", "sqlite3", "actors.sandbox", "actors.stages", "actors.persistence", "actors.llm"),
    "actors.persistence.__main__": ("httpx", "actors.sandbox", "actors.stages", "actors.llm", "actors.coordinator"),
    # regex is imported by the first regex search
    "actors.sandbox.__main__": ("httpx", "regex", "actors.stages", "actors.llm", "actors.coordinator"),
    "actors.coordinator.__main__": ("httpx", "actors.sandbox", "actors.llm", "actors.persistence.store"),
    # plan checks use the sandbox's command policy, not its tools, terminal or journal; the
    # HTTP providers (httpx) are imported when a session uses one
    # the MCP SDK (and its pydantic) is imported at the first request, on the actor's asyncio thread
    "actors.mcp.__main__": ("mcp", "pydantic", "httpx", "actors.sandbox.actor", "actors.sandbox.tools",
                            "actors.stages", "actors.llm", "actors.persistence", "actors.coordinator"),
    "actors.stages.__main__": ("actors.sandbox.actor", "actors.sandbox.journal", "actors.sandbox.dispatch",
                               "actors.sandbox.tools", "actors.sandbox.workspace",
                               "actors.sandbox.confinement.isolation", "psutil", "httpx",
                               "actors.llm.http", "actors.persistence", "actors.coordinator"),
}
# ... and none loads rich, asyncio (structlog imports it: a stand-in, actors.lean), ssl or the
# MCP SDK (only the mcp actor does, once asked); only the sandbox, which hashes file contents,
# loads OpenSSL's digests (_hashlib)
_NEVER = ("rich", "asyncio", "ssl", "mcp", "mcp_types")
_OPENSSL_DIGESTS = {"actors.sandbox.__main__"}


def _loaded(module: str) -> set[str]:
    # run as `python -m` would, minus running it: the package's __main__ under another name
    probe = (f"import runpy, sys, json\nrunpy.run_module({module!r}, run_name='not_main')\n"
             "print(json.dumps(sorted(name for name, m in sys.modules.items()\n"
             "                        if m is not None and type(m).__name__ != 'Deferred')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", sorted(_UNUSED))
def test_an_actor_process_loads_neither_rich_asyncio_ssl_nor_what_another_actor_uses(module: str) -> None:
    loaded = _loaded(module)
    unused = _UNUSED[module] + _NEVER + (() if module in _OPENSSL_DIGESTS else ("_hashlib",))
    assert sorted(m for m in loaded if any(m == u or m.startswith(u + ".") for u in unused)) == []
    assert ("_hashlib" in loaded) == (module in _OPENSSL_DIGESTS)


def test_a_stage_actor_holds_its_own_stage_code_only() -> None:
    """Imported at start by the stage's name (actors.stages.actor.runner), not all four."""
    probe = ("import sys, json\nfrom actors import lean\nimport actors.stages.actor as a\n"
             "before = {m for m in sys.modules if m.startswith('actors.stages.')}\n"
             "a.runner('executor')\n"
             "print(json.dumps([sorted(before), sorted(m for m in sys.modules if m.startswith('actors.stages.'))]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    before, after = (set(names) for names in json.loads(done.stdout.splitlines()[-1]))
    stages = {"actors.stages.planning.planner", "actors.stages.execution.executor", "actors.stages.judging.verifier",
              "actors.stages.judging.reviewer", "actors.stages.planning.gather"}
    assert before & stages == set()
    assert after & stages == {"actors.stages.execution.executor"}
    # nor anything of the other stages' rooms (tests/actors/stages/test_rooms.py keeps them apart)
    assert sorted(m for m in after if m.startswith(("actors.stages.planning.", "actors.stages.judging."))) == []


def test_asyncio_behind_the_stand_in_works_as_imported_and_replaces_it() -> None:
    """Code that does use asyncio in an actor process gets the real module, whichever way
    it reaches it: an attribute, ``from asyncio import``, a submodule, structlog's ``ainfo``."""
    probe = ("from actors import lean\nimport sys\nimport asyncio, structlog\n"
             "assert type(sys.modules['asyncio']) is lean.Deferred and 'ssl' not in sys.modules\n"
             "from asyncio import sleep\nimport asyncio.subprocess\n"
             "async def main():\n    await sleep(0)\n    await structlog.get_logger().ainfo('awaited')\n    return 7\n"
             "assert asyncio.run(main()) == 7\n"
             "assert type(sys.modules['asyncio']) is type(sys) and sys.modules['asyncio'].sleep is sleep\n"
             "print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "ok" and "awaited" in done.stdout
