"""Shared fixtures: a private acode home per test and a process harness that always cleans up."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import Harness

# The tests run as a developer whose shell has acode's venv activated: a sandboxed ``python``
# is that venv's (it has pytest), as in their shell. A command never gets acode's own
# interpreter unless the user's PATH names it (actors/sandbox/confinement/toolchain.py).
_BIN = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _BIN:
    os.environ["PATH"] = os.pathsep.join([_BIN, os.environ.get("PATH", os.defpath)])


@pytest.fixture
def home() -> Iterator[Path]:
    # Short paths under /tmp keep ipc socket names well inside the ~107-byte limit.
    with tempfile.TemporaryDirectory(prefix="acode-t-") as path:
        yield Path(path)


@pytest.fixture
def harness(home: Path) -> Iterator[Harness]:
    h = Harness(home)
    try:
        yield h
    finally:
        h.close()


@pytest.fixture(autouse=True)
def _no_acode_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read the developer's ~/.acode or ACODE_* settings."""
    for key in list(os.environ):
        if key.startswith("ACODE_"):
            monkeypatch.delenv(key)
