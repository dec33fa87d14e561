"""The executor and a small model's edits, replayed over real HTTP from the stand-in server (issue 25).

Qwen2.5-Coder-1.5B on llama.cpp answered every turn with a tool call written as fenced JSON
text. It called modify_file with ``content`` (a whole new file) and was refused three
times; it sent a search text that matched twice until the repeat rule (ACODE-EXEC-008)
ended the try. Here the same answers come from :mod:`tests.modelserver` in llama.cpp's
OpenAI format, through the real provider, the real sandbox and its journal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from actors.stages.calls import preview
from actors.stages.execution import executor
from actors.stages.prompting import prompts
from actors.stages.prompting.untrusted import Fence
from protocol.sessions.profiles import offered_tools, profile_for
from protocol.sessions.session import OpenAIProvider
from tests.actors.stages.conftest import Run, Stack
from tests.modelserver import ModelServer, Text

MODEL = "qwen2.5-coder-1.5b-instruct"
STUB = "def add(a, b):\n    pass\n"
TWICE = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


def fenced(name: str, **arguments: Any) -> Text:
    """A call as the model wrote it: fenced JSON in the answer's text."""
    return Text("```json\n" + json.dumps({"name": name, "arguments": arguments}) + "\n```")


def plan(action: str) -> dict[str, Any]:
    step = {"label": "S1", "title": "implement add in solution.py", "action": action}
    return {"goal": "the goal", "status": "ready", "tasks": [{"label": "T1", "title": "the task", "steps": [step]}]}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(models=[MODEL]) as running:
        yield running


def _stage(stack: Stack, server: ModelServer, files: dict[str, str], action: str, **settings: Any) -> Run:
    provider = OpenAIProvider(base_url=server.openai_url, model=MODEL, num_ctx=8_192)
    return stack.stage("executor", [], plan(action), files=files, provider=provider, **settings)


def _results(server: ModelServer, request: int) -> str:
    """The text acode sent back after the model's last answer, in chat request ``request``."""
    messages = server.chats[request].messages
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return "\n".join(str(m["content"]) for m in messages[last + 1:])


def test_modify_file_with_content_replaces_the_file_on_the_first_call(stack: Stack, server: ModelServer) -> None:
    server.queue(fenced("modify_file", path="solution.py", content="def add(a, b):\n    return a + b\n"),
                 fenced("step_complete", summary="implemented add"))
    run = _stage(stack, server, {"solution.py": STUB}, "modify_file")

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "modify_file with content replaced the whole file: wrote 32 bytes to solution.py" in _results(server, 1)
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.files_changed) == ("completed", 2, ["solution.py"])
    # 8,192 tokens of context: compact definitions, write_file offered first
    tools = server.chats[0].body["tools"]
    assert tools[0]["function"]["name"] == "write_file"
    assert "maxLength" not in json.dumps(tools)


@pytest.mark.parametrize("fix", ["neighbouring line", "line"])
def test_an_ambiguous_search_is_answered_with_each_match_and_the_next_turn_fixes_it(
        stack: Stack, server: ModelServer, fix: str) -> None:
    ambiguous = fenced("modify_file", path="calc.py", edits=[{"search": "    return a - b",
                                                              "replace": "    return a + b"}])
    fixed = (fenced("modify_file", path="calc.py", edits=[{"search": "def add(a, b):\n    return a - b",
                                                           "replace": "def add(a, b):\n    return a + b"}])
             if fix == "neighbouring line" else
             fenced("modify_file", path="calc.py", edits=[{"search": "    return a - b", "replace": "    return a + b",
                                                           "line": 2}]))
    server.queue(ambiguous, fixed, fenced("step_complete", summary="add adds"))
    run = _stage(stack, server, {"calc.py": TWICE}, "modify_file")

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "calc.py").read_text() == TWICE.replace("a - b", "a + b", 1)
    answer = _results(server, 1)
    assert "the search text '    return a - b' matches 2 times in calc.py" in answer
    assert "it matches at lines 2, 6:\n     1\tdef add(a, b):\n     2\t    return a - b\n     3\t\n--\n" \
           "     5\tdef sub(a, b):\n     6\t    return a - b" in answer
    assert "(ACODE-SBX-009)" in answer
    assert result.execution.steps[0].turns == 3  # type: ignore[union-attr]


def test_the_small_profile_offers_whole_file_writes_in_compact_definitions(stack: Stack, server: ModelServer) -> None:
    server.queue(fenced("write_file", path="solution.py", content="def add(a, b):\n    return a + b\n"),
                 fenced("step_complete", summary="implemented add"))
    run = _stage(stack, server, {"solution.py": STUB}, "modify_file", profile=profile_for(MODEL))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    names = [tool["function"]["name"] for tool in server.chats[0].body["tools"]]
    assert names == ["write_file", "read_file", "run_terminal", "list_directory", "step_complete", "step_failed"]


def test_an_approval_preview_shows_the_change_a_tolerated_form_makes(stack: Stack, server: ModelServer) -> None:
    # a human approving the call must see what the sandbox will write, whatever form it came in
    run = _stage(stack, server, {"solution.py": STUB}, "modify_file")
    whole = preview.diff_of(run.ctx, "k1", "modify_file", {"path": "solution.py",
                                                           "content": "def add(a, b):\n    return a + b\n"})
    assert whole == ("--- a/solution.py\n+++ b/solution.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    pass\n"
                     "+    return a + b\n")
    renamed = preview.diff_of(run.ctx, "k2", "modify_file", {"path": "solution.py", "old": "    pass",
                                                             "new": "    return a + b"})
    assert renamed == "--- a/solution.py\n+++ b/solution.py\n@@ edit @@\n-    pass\n+    return a + b\n"


def _said(server: ModelServer, request: int) -> str:
    """Everything acode sent the model in chat request ``request``: messages and tool definitions."""
    chat = server.chats[request]
    return "\n".join(str(m.get("content") or "") for m in chat.messages) + json.dumps(chat.body.get("tools", []))


def test_a_small_profile_writes_a_file_it_was_shown_whole_and_no_prompt_names_modify_file(
        stack: Stack, server: ModelServer) -> None:
    """The small profile offers no modify_file, yet the executor's rules said "use modify_file
    with edits" and the model called it. Now the rules say to write the whole file, and the
    model's whole-file write_file of the file its first turn showed completes the step."""
    server.queue(fenced("write_file", path="solution.py", content="def add(a, b):\n    return a + b\n"),
                 fenced("step_complete", summary="implemented add"))
    run = _stage(stack, server, {"solution.py": STUB}, "modify_file", profile=profile_for(MODEL))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == "def add(a, b):\n    return a + b\n"
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.files_changed) == ("completed", 2, ["solution.py"])
    system, step_message = (str(m["content"]) for m in server.chats[0].messages)
    assert "Current content of solution.py" in step_message and "    pass" in step_message  # it was shown
    assert "To write a file, answer with its path on one line and then its complete new content" in system
    assert "Action: write_file (the whole new content of the file)" in step_message
    for request in range(2):
        assert "modify_file" not in _said(server, request)
    # the compact prompt style: shorter rules, the essentials kept
    assert system.startswith(prompts.executor_system(run.ctx.fence, offered_tools(profile_for(MODEL)), compact=True,
                                                     file_blocks=True))
    assert len(system) < len(prompts.executor_system(run.ctx.fence))
    for essential in ("relative to the workspace root", "without a shell", "step_complete", "step_failed",
                      "one JSON object"):
        assert essential in system, essential


def test_the_default_profile_keeps_the_prompt_that_names_modify_file(stack: Stack, server: ModelServer) -> None:
    server.queue(fenced("step_complete", summary="nothing to do"))
    run = _stage(stack, server, {"solution.py": STUB}, "read_file")

    executor.run(run.ctx)

    system = str(server.chats[0].messages[0]["content"])
    assert system.startswith(prompts.EXECUTOR + "\n")
    assert "use\n  modify_file with edits" in system


def test_prompts_follow_the_offered_tools_deterministically() -> None:
    fence = Fence("n0")
    small = offered_tools(profile_for(MODEL))
    for compact in (False, True):
        shown = prompts.executor_system(fence, small, compact=compact)
        assert shown == prompts.executor_system(fence, sorted(small, reverse=True), compact=compact)
        assert "modify_file" not in shown and "write_file" in shown and "run_terminal" in shown
    assert prompts.executor_system(fence, offered_tools(profile_for("some-model"))) == prompts.executor_system(fence)
    assert "modify_file" in prompts.executor_system(fence, offered_tools(profile_for("some-model")), compact=True)
    # a profile without run_terminal or read_file: its rules do not name them
    bare = prompts.executor_system(fence, {"write_file", "step_complete", "step_failed"}, compact=True)
    assert "run_terminal" not in bare and "read" not in bare.split("\n", 1)[1].split("Text between")[0]


def test_under_the_small_profile_pushback_and_the_repeated_call_example_name_write_file(
        stack: Stack, server: ModelServer) -> None:
    broken = Text('```json\n{"name": "modify_file", "arguments": {"path": "solution.py", "content": }}\n```')
    server.queue(fenced("step_complete", summary="done"), broken, broken,
                 fenced("write_file", path="solution.py", content="def add(a, b):\n    return a + b\n"),
                 fenced("step_complete", summary="implemented add"))
    run = _stage(stack, server, {"solution.py": STUB}, "modify_file", profile=profile_for(MODEL))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    pushback = _results(server, 1)
    assert "is a step that changes files but no file was written or changed in it. Make the change with " \
           "a file block (the file's path on one line, then its complete content in a fenced code block), then " \
           "call step_complete" in pushback
    repeated = _results(server, 3)
    assert repeated.startswith("error: you sent the same invalid answer again"), repeated
    # whole-file edits: the example is a file block for the step's file, not a file inside a JSON string
    assert repeated.endswith("a fenced code block, no JSON:\nsolution.py\n```python\n<the complete file>\n```")
