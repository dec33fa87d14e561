"""The schemas sent for structured answers are bounded (issue 15 #11)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from actors.llm.schemas import schema_of
from protocol.plans.plan import MAX_STEPS, TaskPlan
from protocol.plans.results import ReviewerAnswer, VerifierAnswer


def _walk(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        found.append(schema)
        for value in schema.values():
            found += _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _walk(value)
    return found


@pytest.mark.parametrize("contract", [TaskPlan, VerifierAnswer, ReviewerAnswer])
def test_every_object_list_and_string_is_bounded(contract: type) -> None:
    schema = schema_of(contract)
    assert schema["$ref"].startswith("#/$defs/"), "the same $defs/$ref shape as always"
    nodes = _walk(schema)
    assert all(n.get("additionalProperties") is False for n in nodes if n.get("type") == "object")
    assert all("maxItems" in n for n in nodes if n.get("type") == "array")
    assert all("maxLength" in n for n in nodes if n.get("type") == "string")


def test_the_plan_schema_carries_the_plan_limits_and_hides_acode_fields() -> None:
    defs = schema_of(TaskPlan)["$defs"]
    assert defs["TaskPlan"]["properties"]["tasks"]["maxItems"] == MAX_STEPS
    assert defs["PlanTask"]["properties"]["steps"]["maxItems"] == MAX_STEPS
    assert defs["PlanTask"]["properties"]["label"]["maxLength"] == 64
    assert "id" not in defs["PlanStep"]["properties"] and "status" not in defs["PlanTask"]["properties"]
    assert "version" not in defs["TaskPlan"]["properties"]
    assert msgspec.json.schema(TaskPlan)["$defs"]["TaskPlan"]["properties"].get("version"), "the Struct is untouched"
