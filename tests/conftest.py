"""Shared fixtures: a private acode home per test and a process harness that always cleans up."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import Harness


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
