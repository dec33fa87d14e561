"""What differs between two sightings of the same failure: times, temp paths, durations, addresses, pids.

The coordinator's loop detection (``actors.coordinator.escalation.fingerprint``, ORCH-008)
and the executor's anomaly detectors (``actors.stages.execution.anomalies``) both compare failures
with these replaced; the detectors drop line and column numbers too (:data:`POSITIONS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["POSITIONS", "VOLATILE", "normalise"]

Rule = tuple[re.Pattern[str], str]

VOLATILE: tuple[Rule, ...] = (
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(\.\d+)?\b"), "<time>"),
    (re.compile(r"(/private)?(/tmp|/var/folders|/var/tmp)/[^\s'\":]*"), "<tmp>"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|s|sec|secs|seconds|µs|us|ns|min)\b"), "<duration>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (re.compile(r"\bpid[ =:]*\d+\b", re.IGNORECASE), "pid <n>"),
)
POSITIONS: tuple[Rule, ...] = (
    (re.compile(r"\b(line|column|col|char|offset)\s+\d+", re.IGNORECASE), r"\1 <n>"),
    (re.compile(r"(\.\w{1,6}):\d+(:\d+)?\b"), r"\1:<n>"),  # file.py:12:5, as tracebacks and linters say it
)


def normalise(text: str, rules: Iterable[Rule] = VOLATILE) -> str:
    """``text`` with each rule's pattern replaced, spaces collapsed."""
    for pattern, placeholder in rules:
        text = pattern.sub(placeholder, text)
    return " ".join(text.split())
