"""The event schema clients read, versioned and committed: ``events-v<N>.json``.

Every event a client can receive (``acode run --json``, ``acode show --json``, the event
stream) is a type of :data:`protocol.sessions.events.Event`; :func:`generate` makes its JSON Schema
from those types (msgspec does), and the file for :data:`SCHEMA_VERSION` is committed beside
this module. ``tests/protocol/test_schema.py`` fails when the types and the committed file
disagree, so a change to an event is a change to the schema someone looked at.

Within a major version changes are additive only: a new event type, a new field with a
default. A field removed or retyped, or a field made required, is a new major version: a
new file, and :data:`SCHEMA_VERSION` raised. Every JSON line acode prints carries
``schema_version`` (:func:`versioned`).

Regenerate after an additive change with ``python -m protocol.schema`` (it rewrites the
current version's file and says which).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["SCHEMA_VERSION", "generate", "path", "versioned"]

from protocol.sessions.events import SCHEMA_VERSION  # the types' own version: they say it (Event.schema_version)

_HERE = Path(__file__).resolve().parent


def path(version: int = SCHEMA_VERSION) -> Path:
    return _HERE / f"events-v{version}.json"


def generate() -> str:
    """The JSON Schema of every event type, as the committed file holds it (sorted keys, 2-space indent)."""
    from protocol.sessions.events import Event

    schema: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                              "title": f"acode events, schema version {SCHEMA_VERSION}",
                              **msgspec.json.schema(Event)}
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def versioned(value: Any) -> Any:
    """``value`` (JSON-ready builtins) with ``schema_version`` first in each object a JSON
    line prints: the object itself, or each object of a list."""
    if isinstance(value, dict):
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in value.items() if k != "schema_version"}}
    if isinstance(value, list):
        return [versioned(item) if isinstance(item, dict) else item for item in value]
    return value
