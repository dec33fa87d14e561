"""The JSON schemas sent with a request for a structured answer, bounded.

A server that constrains generation with a grammar built from the schema (llama.cpp,
Ollama) lets a small model loop inside an unbounded list or string until the answer cap.
So the schema sent is msgspec's schema of the contract (``$defs``/``$ref``, as the stages
have always sent it) with:

- ``additionalProperties: false`` on every object;
- ``maxItems`` on every list and ``maxLength`` on every string, from :data:`LIMITS` (the
  plan's own limits: 50 steps, 100 files, 64-character labels…) or the defaults;
- the fields acode fills in itself (ids, versions, a task's status) left out, so a model
  cannot write them.

The bounds are never looser than the Struct's own (``msgspec.Meta``) bounds, and decoding
still validates against the Struct: a server that ignores the schema is caught there.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from protocol.plans.plan import MAX_CONTEXT_FILES, MAX_STEPS

__all__ = ["LIMITS", "bounded", "schema_of"]

DEFAULT_ITEMS = 100
DEFAULT_LENGTH = 4_000
# (definition, property) or property alone -> maxItems of a list / maxLength of a string
LIMITS: dict[str, int] = {
    "TaskPlan.tasks": MAX_STEPS, "PlanTask.steps": MAX_STEPS, "depends_on": MAX_STEPS,
    "Resources.read": MAX_CONTEXT_FILES, "Resources.write": MAX_CONTEXT_FILES,
    "Resources.directories": MAX_CONTEXT_FILES, "Resources.commands": 20,
    "acceptance": 20, "TaskPlan.questions": 10, "Question.options": 10,
    "ReviewerAnswer.issues": 50, "VerifierAnswer.criteria": 100,
    "title": 200, "goal": 1_000, "question": 1_000, "summary": 2_000, "change_summary": 2_000,
    "expected_output": 2_000, "verification": 2_000, "Question.default": 1_000,
}
ACODE_FIELDS: dict[str, frozenset[str]] = {
    "TaskPlan": frozenset({"id", "version"}), "PlanTask": frozenset({"id", "status"}),
    "PlanStep": frozenset({"id"}),
}


# A plain dict rather than functools.cache: the checker does not take a class for Hashable.
# Two threads may build the same schema at once; both results are equal, either is kept.
_schemas: dict[object, dict[str, Any]] = {}


def schema_of(type_: object) -> dict[str, Any]:
    """The bounded JSON schema of a contract type (built once per type; do not mutate it)."""
    schema = _schemas.get(type_)
    if schema is None:
        schema = _schemas[type_] = bounded(msgspec.json.schema(type_))
    return schema


def bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a msgspec schema with the bounds above."""
    out = copy.deepcopy(schema)
    for name, definition in out.get("$defs", {}).items():
        _object(definition, name)
    if "$defs" not in out:
        _object(out, str(out.get("title", "")))
    return out


def _object(definition: dict[str, Any], name: str) -> None:
    if definition.get("type") != "object" or "properties" not in definition:
        return
    hidden = ACODE_FIELDS.get(name, frozenset())
    properties = {k: v for k, v in definition["properties"].items() if k not in hidden}
    definition["properties"] = properties
    if "required" in definition:
        definition["required"] = [k for k in definition["required"] if k not in hidden]
    definition["additionalProperties"] = False
    for key, value in properties.items():
        _bound(value, LIMITS.get(f"{name}.{key}") or LIMITS.get(key))


def _bound(schema: dict[str, Any], limit: int | None) -> None:
    for option in schema.get("anyOf", []):
        _bound(option, limit)
    if schema.get("type") == "array":
        schema["maxItems"] = min(schema.get("maxItems", DEFAULT_ITEMS), limit or DEFAULT_ITEMS)
        items = schema.get("items")
        if isinstance(items, dict):
            _bound(items, None)
    elif schema.get("type") == "string":
        schema["maxLength"] = min(schema.get("maxLength", DEFAULT_LENGTH), limit or DEFAULT_LENGTH)
