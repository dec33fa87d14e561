"""Real sessions' records (``acode show --json``'s session and events), kept as test data.

- ``executor_killed.json``: the resilience drill's scripted session (three steps, a check),
  its executor killed with ``kill -9`` mid-step and re-dispatched (attempt 2);
- ``killed_while_pausing_then_resumed.json``: tests/system/test_human.py's session on the
  stand-in model server (Ollama's API, streamed: first-token times): the executor killed
  while a pause was on its way, the session paused (user), then ``acode resume``.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from protocol.sessions.events import Event
from protocol.sessions.session import SessionSnapshot

__all__ = ["NAMES", "load"]

HERE = Path(__file__).resolve().parent
NAMES = ("executor_killed", "killed_while_pausing_then_resumed")


def load(name: str) -> tuple[SessionSnapshot, list[Event]]:
    data = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
    session = msgspec.convert(data["session"], SessionSnapshot)
    events = msgspec.convert(data["events"], list[Event])
    return session, events
