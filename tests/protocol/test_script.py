"""The scripted model file: what it accepts, and loud, located errors for what it does not."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from protocol.errors import ModelError
from protocol.plans.plan import TaskPlan, validate
from protocol.plans.results import ReviewerAnswer, VerifierAnswer
from protocol.plans.script import Script, ScriptedResponse, ScriptedToolCall, load_script

#: The scripted model example of issue 2 ("Contracts"), verbatim.
ISSUE_EXAMPLE = """\
version: 1
responses:
  planner:
    - json: {goal: …, status: ready, tasks: [...]}       # json: is sugar for content: <that JSON>
  executor:
    - tool_calls: [{name: write_file, arguments: {path: hello.py, content: "print('hello')\\n"}}]
    - tool_calls: [{name: step_complete, arguments: {summary: wrote hello.py}}]
  verifier:
    - json: {passed: true, summary: ok, criteria: []}
  reviewer:
    - json: {decision: approve, summary: looks right, issues: []}
"""

README = "; see README 'Scripted model format'"


def _reject(text: str | bytes, name: str = "s.yaml") -> ModelError:
    with pytest.raises(ModelError) as info:
        load_script(text, name=name)
    assert info.value.code == "ACODE-LLM-004"
    return info.value


def test_the_example_of_the_issue_loads() -> None:
    script = load_script(ISSUE_EXAMPLE, name="s.yaml")
    assert list(script.responses) == ["planner", "executor", "verifier", "reviewer"]
    assert script.responses["executor"] == [
        ScriptedResponse(tool_calls=[ScriptedToolCall(name="write_file",
                                                      arguments={"path": "hello.py", "content": "print('hello')\n"})]),
        ScriptedResponse(tool_calls=[ScriptedToolCall(name="step_complete", arguments={"summary": "wrote hello.py"})]),
    ]
    assert script.responses["planner"][0].text() == '{"goal":"…","status":"ready","tasks":["..."]}'


def test_json_responses_become_json_text_the_stage_contracts_decode() -> None:
    script = load_script(ISSUE_EXAMPLE)
    verifier = msgspec.json.decode(script.responses["verifier"][0].text(), type=VerifierAnswer)
    reviewer = msgspec.json.decode(script.responses["reviewer"][0].text(), type=ReviewerAnswer)
    assert verifier == VerifierAnswer(passed=True, summary="ok", criteria=[])
    assert reviewer == ReviewerAnswer(decision="approve", summary="looks right", issues=[])


def test_a_planner_json_response_is_a_task_plan() -> None:
    script = load_script("""\
version: 1
responses:
  planner:
    - json:
        goal: greet
        tasks:
          - label: T1
            title: write hello.py
            complexity: 2
            steps: [{label: S1, title: write it, action: write_file}]
""")
    plan = msgspec.json.decode(script.responses["planner"][0].text(), type=TaskPlan)
    validate(plan)
    assert [(t.label, [s.label for s in t.steps]) for t in plan.tasks] == [("T1", ["S1"])]


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ("content: plain words", "plain words"),
        ("content: ''", ""),
        ("json: false", "false"),
        ("json: 0", "0"),
        ("json: 'x'", '"x"'),
        ("json: [1, two]", '[1,"two"]'),
        ("json: {when: 2024-01-02}", '{"when":"2024-01-02"}'),
        ("tool_calls: [{name: read_file, arguments: {path: a}}]", ""),
    ],
)
def test_a_response_text_is_its_content_or_its_json(response: str, text: str) -> None:
    script = load_script(f"version: 1\nresponses:\n  executor:\n    - {response}\n")
    assert script.responses["executor"][0].text() == text


@pytest.mark.parametrize(("value", "seconds"), [("2.5", 2.5), ("3", 3.0), ("0", 0.0), ("3600", 3_600.0)])
def test_delay_s_is_parsed_as_seconds(value: str, seconds: float) -> None:
    script = load_script(f"version: 1\nresponses:\n  planner:\n    - content: x\n      delay_s: {value}\n")
    assert script.responses["planner"][0].delay_s == seconds


def test_a_script_without_responses_loads_empty() -> None:
    assert load_script(b"version: 1\n") == Script(version=1, responses={})


# --- rejected files ----------------------------------------------------------------------


def test_an_unknown_key_in_a_response_is_refused_with_its_position() -> None:
    text = "version: 1\nresponses:\n  executor:\n    - content: hi\n    - tool_call: [{name: write_file}]\n"
    assert _reject(text).message == ("scripted model file s.yaml: responses.executor[1] is invalid: "
                                     "Object contains unknown field `tool_call`" + README)


def test_an_unknown_key_in_a_tool_call_is_refused_with_its_position() -> None:
    text = "version: 1\nresponses:\n  executor:\n    - tool_calls: [{name: read_file, args: {path: a}}]\n"
    assert _reject(text).message == ("scripted model file s.yaml: responses.executor[0] is invalid: "
                                     "Object contains unknown field `args` - at `$.tool_calls[0]`" + README)


def test_an_unknown_top_level_key_is_refused() -> None:
    assert _reject("version: 1\nresponse: {}\n").message == (
        "scripted model file s.yaml is invalid: Object contains unknown field `response`" + README)


def test_an_unknown_stage_is_refused() -> None:
    assert _reject("version: 1\nresponses:\n  executer: []\n").message == (
        "scripted model file s.yaml is invalid: Invalid enum value 'executer' - at `key` in `$.responses`" + README)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("version: 2\n", "Invalid enum value 2 - at `$.version`"),
        ("version: '1'\n", "Expected `int`, got `str` - at `$.version`"),
        ("responses: {}\n", "Object missing required field `version`"),
        ("", "Expected `object`, got `null`"),
        ("- version: 1\n", "Expected `object`, got `array`"),
    ],
    ids=["version-2", "version-str", "no-version", "empty-file", "a-list"],
)
def test_a_bad_version_or_shape_is_refused(text: str, problem: str) -> None:
    assert _reject(text).message == f"scripted model file s.yaml is invalid: {problem}" + README


def test_a_response_with_both_content_and_json_is_refused() -> None:
    text = "version: 1\nresponses:\n  verifier:\n    - content: a\n      json: {passed: true}\n"
    assert _reject(text).message == (
        "scripted model file s.yaml: responses.verifier[0] has both content and json; keep one")


@pytest.mark.parametrize("empty", ["{}", "{delay_s: 1}", "{tool_calls: []}", "{json: null}"])
def test_an_empty_response_is_refused(empty: str) -> None:
    text = f"version: 1\nresponses:\n  reviewer:\n    - content: fine\n    - {empty}\n"
    assert _reject(text).message == (
        "scripted model file s.yaml: responses.reviewer[1] is empty; give content, json or tool_calls")


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ("", "Expected `object`, got `null`"),
        ("content: x\n      delay_s: -1", "Expected `float` >= 0.0 - at `$.delay_s`"),
        ("content: x\n      delay_s: 3601", "Expected `float` <= 3600.0 - at `$.delay_s`"),
        ("tool_calls: [{name: ''}]", "Expected `str` of length >= 1 - at `$.tool_calls[0].name`"),
        ("tool_calls: [{arguments: {}}]", "Object missing required field `name` - at `$.tool_calls[0]`"),
    ],
    ids=["null", "negative-delay", "long-delay", "empty-tool-name", "no-tool-name"],
)
def test_an_invalid_response_is_refused_with_its_position(response: str, problem: str) -> None:
    text = f"version: 1\nresponses:\n  planner:\n    - content: ok\n    - {response}\n"
    assert _reject(text).message == f"scripted model file s.yaml: responses.planner[1] is invalid: {problem}" + README


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("version: 1\nresponses: [\n", "line 3, column 1"),
        ("version: 1\n\tresponses: {}\n", "line 2, column 1"),
        ("version: 1\nresponses:\n  planner:\n    - content: 'unclosed\n", "line 4, column 16"),
    ],
    ids=["unclosed-flow", "tab", "unclosed-quote"],
)
def test_invalid_yaml_is_refused_naming_the_file_and_the_position(text: str, position: str) -> None:
    err = _reject(text, name="drills/slow.yaml")
    assert err.message == f"scripted model file drills/slow.yaml is not valid YAML: {err.__cause__}"
    assert position in err.message


def test_an_unnamed_script_is_called_script_in_errors() -> None:
    with pytest.raises(ModelError) as info:
        load_script("version: 3\n")
    assert info.value.message.startswith("scripted model file <script> is invalid: ")


def _as_json(text: str) -> str:
    import yaml  # the YAML reading of the text, written back as strict JSON

    return msgspec.json.encode(yaml.safe_load(text)).decode()


def test_a_script_written_as_json_loads_as_its_yaml_reading_does() -> None:
    text = _as_json(ISSUE_EXAMPLE)
    assert text.startswith("{") and load_script(text) == load_script(ISSUE_EXAMPLE)
    assert load_script(("  \n" + text).encode()) == load_script(ISSUE_EXAMPLE)  # bytes, leading space


def test_a_flow_mapping_that_is_not_strict_json_is_still_read_as_yaml() -> None:
    flow = "{version: 1, responses: {reviewer: [{content: fine}]}}  # YAML, not JSON\n"
    assert load_script(flow).responses["reviewer"][0].content == "fine"


def test_a_json_script_of_the_wrong_shape_is_refused_as_the_yaml_one_is() -> None:
    bad = '{"version": 1, "responses": {"executer": []}}'
    assert _reject(bad).message == _reject("version: 1\nresponses:\n  executer: []\n").message
    wrong = '{"version": 1, "responses": {"planner": [{"content": "ok"}, {"tool_calls": [{"name": ""}]}]}}'
    assert _reject(wrong).message == ("scripted model file s.yaml: responses.planner[1] is invalid: Expected `str` "
                                      "of length >= 1 - at `$.tool_calls[0].name`" + README)


def test_a_script_with_bytes_that_are_not_utf8_is_refused_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b'version: 1\nresponses:\n  planner:\n    - content: "a\xffb"\n')
    with pytest.raises(ModelError) as raised:
        load_script(path.read_text(errors="surrogateescape"), name=str(path))  # as the CLI reads it
    assert (raised.value.code, raised.value.message) == (
        "ACODE-LLM-004", f"scripted model file {path} is not UTF-8 text: an undecodable byte (\\xff) at character "
                         "50; save it as UTF-8")
