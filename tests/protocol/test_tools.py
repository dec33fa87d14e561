"""Executor tools: the function-calling definitions, argument decoding and risk classes."""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
import pytest

from protocol.calls import tools
from protocol.calls.tools import (
    CONTROL_TOOLS,
    INTERNAL_TOOLS,
    SANDBOX_TOOLS,
    TOOL_ARGS,
    BaselineWorkspace,
    DiffWorkspace,
    Edit,
    ListDirectory,
    ModifyFile,
    ReadFile,
    RunTerminal,
    WriteFile,
    decode_args,
    risk_of,
    tool_definitions,
)

REQUIRED = {
    "read_file": ["path"],
    "write_file": ["path", "content"],
    "modify_file": ["path"],
    "create_directory": ["path"],
    "list_directory": [],
    "search_code": ["query"],
    "run_terminal": ["command"],
    "step_complete": ["summary"],
    "step_failed": ["reason"],
}
DEFINITIONS = {d["function"]["name"]: d for d in tool_definitions()}


def _keys(schema: Any) -> set[str]:
    """Every key anywhere in a JSON schema."""
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in _keys(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in _keys(v)}
    return set()


def _parameters(name: str) -> dict[str, Any]:
    return DEFINITIONS[name]["function"]["parameters"]


def test_tool_definitions_has_one_function_per_tool_write_file_first() -> None:
    definitions = tool_definitions()
    assert [d["function"]["name"] for d in definitions] == list(tools.OFFER_ORDER)
    assert set(tools.OFFER_ORDER) == set(TOOL_ARGS) and tools.OFFER_ORDER[0] == "write_file"
    assert all(d["type"] == "function" for d in definitions)
    assert SANDBOX_TOOLS | CONTROL_TOOLS == set(TOOL_ARGS)
    assert not SANDBOX_TOOLS & CONTROL_TOOLS


def test_tool_definitions_can_be_limited_to_some_tools() -> None:
    names = [d["function"]["name"] for d in tool_definitions(frozenset({"write_file", "read_file", "nope"}))]
    assert names == ["write_file", "read_file"]


@pytest.mark.parametrize("name", list(TOOL_ARGS))
def test_a_tool_schema_is_flat_with_no_ref_or_title(name: str) -> None:
    params = _parameters(name)
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert not {"$ref", "$defs", "title"} & _keys(params)
    assert "description" not in params  # the description is the function's, not repeated here


@pytest.mark.parametrize("name", list(TOOL_ARGS))
def test_a_tool_schema_lists_every_argument_and_the_required_ones(name: str) -> None:
    params = _parameters(name)
    offered = [f for f in TOOL_ARGS[name].__struct_fields__ if f not in tools._UNOFFERED.get(name, ())]
    assert list(params["properties"]) == offered
    assert params.get("required", []) == REQUIRED[name]


@pytest.mark.parametrize("name", list(TOOL_ARGS))
def test_a_tool_description_is_its_struct_docstring(name: str) -> None:
    description = DEFINITIONS[name]["function"]["description"]
    assert description
    assert description == inspect.cleandoc(TOOL_ARGS[name].__doc__ or "")


def test_modify_file_schema_inlines_its_edits_and_offers_a_diff() -> None:
    properties = _parameters("modify_file")["properties"]
    edits, null = properties["edits"]["anyOf"]
    assert null == {"type": "null"}
    assert edits["type"] == "array"
    assert (edits["minItems"], edits["maxItems"]) == (1, 100)
    assert edits["items"]["required"] == ["search", "replace"]
    assert list(edits["items"]["properties"]) == ["search", "replace", "line"]
    assert "content" not in properties  # accepted, not offered: write_file is the whole-text tool
    assert properties["diff"]["anyOf"] == [{"type": "string", "maxLength": 1_000_000, "minLength": 1},
                                           {"type": "null"}]
    description = DEFINITIONS["modify_file"]["function"]["description"]
    assert "exactly one of `edits` or `diff`" in description and "\n " not in description


def test_the_schema_carries_the_struct_bounds() -> None:
    offset = _parameters("read_file")["properties"]["offset"]
    assert offset["anyOf"] == [{"type": "integer", "minimum": 0, "maximum": 10_000_000}, {"type": "null"}]
    depth = _parameters("list_directory")["properties"]["depth"]
    assert depth == {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}


def test_a_parameter_named_title_stays_in_the_schema() -> None:
    class CreateNote(tools._Args, frozen=True, kw_only=True):
        """Write a note."""

        title: str
        body: str = ""

    params = tools._parameters(CreateNote)
    assert params["properties"] == {"title": {"type": "string"}, "body": {"type": "string", "default": ""}}
    assert params["required"] == ["title"]


# --- decoding arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("read_file", {"path": "a.py"}, ReadFile(path="a.py")),
        ("read_file", {"path": "a.py", "offset": 10, "limit": 5}, ReadFile(path="a.py", offset=10, limit=5)),
        ("write_file", {"path": "a.py", "content": ""}, WriteFile(path="a.py", content="")),
        ("modify_file", {"path": "a.py", "edits": [{"search": "x", "replace": "y"}]},
         ModifyFile(path="a.py", edits=[Edit(search="x", replace="y")])),
        ("modify_file", {"path": "a.py", "diff": "@@ -1 +1 @@\n-x\n+y\n"},
         ModifyFile(path="a.py", diff="@@ -1 +1 @@\n-x\n+y\n")),
        ("list_directory", {}, ListDirectory(path=".", depth=1)),
        ("run_terminal", {"command": "pytest -q", "timeout_s": 30}, RunTerminal(command="pytest -q", timeout_s=30.0)),
    ],
)
def test_decode_args_builds_the_struct_of_the_tool(name: str, arguments: dict[str, Any], expected: Any) -> None:
    assert decode_args(name, arguments) == expected


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {"path": "a.py", "encoding": "utf-8"}, "Object contains unknown field `encoding`"),
        ("step_complete", {"summary": "done", "extra": 1}, "Object contains unknown field `extra`"),
        ("modify_file", {"path": "a", "edits": [{"search": "x", "replace": "y", "all": True}]},
         "Object contains unknown field `all` - at `$.edits[0]`"),
    ],
)
def test_decode_args_rejects_an_unknown_argument(name: str, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        decode_args(name, arguments)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {"path": 5}, "Expected `str`, got `int` - at `$.path`"),
        ("read_file", {"path": "a", "offset": 1.5}, "Expected `int | null`, got `float` - at `$.offset`"),
        ("read_file", {"path": "a", "limit": True}, "Expected `int | null`, got `bool` - at `$.limit`"),
        ("write_file", {"path": "a", "content": ["x"]}, "Expected `str`, got `array` - at `$.content`"),
        ("modify_file", {"path": "a", "edits": "x"}, "Expected `array | null`, got `str` - at `$.edits`"),
        # one edit sent as an object is read as a list of one (tolerant_args), then checked
        ("modify_file", {"path": "a", "edits": {"search": "x"}}, "Object missing required field `replace` - at "
                                                                  "`$.edits[0]`"),
        ("modify_file", {"path": "a", "diff": ""}, "Expected `str` of length >= 1 - at `$.diff`"),
        ("write_file", {"path": "a.py"}, "Object missing required field `content`"),
        ("read_file", {"path": ""}, "Expected `str` of length >= 1 - at `$.path`"),
        ("list_directory", {"depth": 11}, "Expected `int` <= 10 - at `$.depth`"),
        ("modify_file", {"path": "a", "edits": []}, "Expected `array` of length >= 1 - at `$.edits`"),
        ("run_terminal", {"command": "ls", "timeout_s": 0}, "Expected `float` > 0.0 - at `$.timeout_s`"),
    ],
)
def test_decode_args_rejects_a_wrong_type_or_value(name: str, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        decode_args(name, arguments)
    assert str(info.value) == message


# --- risk --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "risk"),
    [
        ("read_file", "read"),
        ("list_directory", "read"),
        ("search_code", "read"),
        ("write_file", "write"),
        ("modify_file", "write"),
        ("create_directory", "write"),
        ("run_terminal", "execute"),
        ("step_complete", "read"),
        ("step_failed", "read"),
        ("delete_everything", "destructive"),
        ("", "destructive"),
    ],
)
def test_risk_of_classes_each_tool(tool: str, risk: str) -> None:
    assert risk_of(tool) == risk


def test_every_sandbox_tool_has_a_risk_class_of_its_own() -> None:
    assert {tool for tool in SANDBOX_TOOLS if risk_of(tool) == "destructive"} == set()


def test_decode_args_refuses_an_unknown_tool_as_a_validation_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown tool 'rm_rf'; available: read_file"):
        decode_args("rm_rf", {})


# --- internal tools ----------------------------------------------------------------------


def test_internal_tools_are_never_offered_to_the_model() -> None:
    assert INTERNAL_TOOLS == {"baseline_workspace", "diff_workspace", "search_code_terms"}
    assert INTERNAL_TOOLS.isdisjoint(TOOL_ARGS)  # the executor refuses what TOOL_ARGS does not name
    assert INTERNAL_TOOLS.isdisjoint(SANDBOX_TOOLS)
    assert INTERNAL_TOOLS.isdisjoint(d["function"]["name"] for d in tool_definitions())
    assert tool_definitions(INTERNAL_TOOLS) == []


def test_internal_tools_decode_only_when_asked_for() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown tool 'diff_workspace'"):
        decode_args("diff_workspace", {})
    assert decode_args("baseline_workspace", {}, internal=True) == BaselineWorkspace()
    assert decode_args("diff_workspace", {"max_bytes": "5000"}, internal=True) == DiffWorkspace(max_bytes=5000)
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int` >= 1024"):
        decode_args("diff_workspace", {"max_bytes": 10}, internal=True)
    with pytest.raises(msgspec.ValidationError, match="unknown field `path`"):
        decode_args("baseline_workspace", {"path": "."}, internal=True)


def test_internal_tools_are_read_risk() -> None:
    assert {risk_of(tool) for tool in INTERNAL_TOOLS} == {"read"}
