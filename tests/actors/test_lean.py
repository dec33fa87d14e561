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
    "actors.sandbox.__main__": ("httpx", "actors.stages", "actors.llm", "actors.coordinator"),
    "actors.coordinator.__main__": ("httpx", "actors.sandbox", "actors.llm", "actors.persistence.store"),
    # plan checks use the sandbox's command policy, not its tools or its journal
    "actors.stages.__main__": ("actors.sandbox.actor", "actors.sandbox.journal", "actors.sandbox.dispatch",
                               "actors.persistence", "actors.coordinator"),
}


def _loaded(module: str) -> set[str]:
    # run as `python -m` would, minus running it: the package's __main__ under another name
    probe = (f"import runpy, sys, json\nrunpy.run_module({module!r}, run_name='not_main')\n"
             "print(json.dumps(sorted(name for name, m in sys.modules.items() if m is not None)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", sorted(_UNUSED))
def test_an_actor_process_loads_neither_rich_nor_what_another_actor_uses(module: str) -> None:
    loaded = _loaded(module)
    unused = _UNUSED[module] + ("rich",)
    assert sorted(m for m in loaded if any(m == u or m.startswith(u + ".") for u in unused)) == []
