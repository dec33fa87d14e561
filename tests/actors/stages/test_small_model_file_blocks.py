"""A small model writes a file as a file block, replayed over real HTTP from the stand-in server (issue 25).

Qwen2.5-Coder-1.5B on llama.cpp solves HumanEval problems when asked in one chat turn for
the complete file in a ```python block, and fails inside acode's executor when the whole
file must go inside a JSON string (the stub copied back unchanged, imports forgotten, the
escaping broken). aider's "whole" edit format, which solves them with the same model, has
the model write the file's path on a line and then the file fenced. Under the small
profile acode asks for that form and reads it as a write_file call
(:func:`actors.llm.toolcalls.file_blocks`), through the same check, pipeline and sandbox.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from actors.stages.execution import executor
from actors.stages.prompting import prompts
from actors.stages.prompting.untrusted import Fence
from protocol.sessions.profiles import ModelProfile, offered_tools, profile_for
from protocol.sessions.session import OpenAIProvider
from tests.actors.stages.conftest import Run, Stack
from tests.modelserver import ModelServer, Text

MODEL = "qwen2.5-coder-1.5b-instruct"  # profile_for chooses "small": whole-file edits
HEAD = ('from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n'
        '    """Check if any two numbers are closer to each other than the threshold."""\n')
STUB = HEAD + '    raise NotImplementedError\n'
IMPLEMENTATION = (HEAD +
                  '    for i, a in enumerate(numbers):\n'
                  '        for b in numbers[i + 1:]:\n'
                  '            if abs(a - b) < threshold:\n'
                  '                return True\n'
                  '    return False\n')
TEST = ("from solution import has_close_elements\n\n\ndef test_close() -> None:\n"
        "    assert has_close_elements([1.0, 2.8, 3.0], 0.3)\n"
        "    assert not has_close_elements([1.0, 2.0, 3.0], 0.5)\n")
FILES = {"solution.py": STUB, "test_solution.py": TEST}
BLOCK = Text(f"solution.py\n```python\n{IMPLEMENTATION}```")  # what the model writes, asked as aider asks
DONE = Text('{"name": "step_complete", "arguments": {"summary": "implemented has_close_elements"}}')


def plan() -> dict[str, Any]:
    step = {"label": "S1", "title": "Implement has_close_elements in solution.py so that test_solution.py passes",
            "action": "modify_file"}
    return {"goal": "implement has_close_elements", "status": "ready",
            "tasks": [{"label": "T1", "title": "the task", "steps": [step],
                       "resources": {"read": ["test_solution.py"], "write": ["solution.py"]}}]}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(models=[MODEL]) as running:
        yield running


def _stage(stack: Stack, server: ModelServer, profile: ModelProfile | None = None) -> Run:
    provider = OpenAIProvider(base_url=server.openai_url, model=MODEL, num_ctx=8_192)
    # the tool loop's file blocks: the small profile answers a one-file step as the file itself
    # (tests/actors/stages/test_file_step.py); the tool loop keeps file blocks for the rest
    tools = msgspec.structs.replace(profile_for(MODEL), step_style="tools")
    return stack.stage("executor", [], plan(), files=FILES, provider=provider, profile=profile or tools)


def _results(server: ModelServer, request: int) -> str:
    """The text acode sent back after the model's last answer, in chat request ``request``."""
    messages = server.chats[request].messages
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return "\n".join(str(m["content"]) for m in messages[last + 1:])


def test_a_file_block_writes_the_file_and_step_complete_ends_the_step(stack: Stack, server: ModelServer) -> None:
    server.queue(BLOCK, DONE)
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == IMPLEMENTATION
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.files_changed) == ("completed", 2, ["solution.py"])
    said = _results(server, 1)
    assert "note: acode wrote solution.py from your file block. If the step is done, call step_complete" in said
    assert f"wrote {len(IMPLEMENTATION.encode())} bytes to solution.py" in said
    # the system prompt asks for the form with the step's own file as its example: the model
    # copies an example's path (it wrote its change to path/to/file.py, the old example)
    system = str(server.chats[0].messages[0]["content"])
    assert ("To write a file, answer with its path on one line and then its complete new content in a fenced code "
            "block:\nsolution.py\n```python\n<the complete file>\n```") in system
    assert "path/to" not in system
    assert "Call other tools as function calls or as one JSON object" in system


def test_a_file_block_and_step_complete_in_one_answer_write_then_complete(stack: Stack, server: ModelServer) -> None:
    server.queue(Text(f"solution.py\n```python\n{IMPLEMENTATION}```\n\n{DONE.text}"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary  # the write came first: step_complete is not pushed back
    assert (run.workspace / "solution.py").read_text() == IMPLEMENTATION
    assert result.execution.steps[0].turns == 1  # type: ignore[union-attr]


def test_prose_after_the_write_gets_the_no_call_correction_and_the_flow_ends(stack: Stack, server: ModelServer) -> None:
    server.queue(BLOCK, Text("I have implemented the function."), DONE)
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == IMPLEMENTATION
    assert _results(server, 2) == prompts.NO_TOOL_CALL
    assert result.execution.steps[0].turns == 3  # type: ignore[union-attr]


def test_a_code_block_without_a_path_line_writes_nothing(stack: Stack, server: ModelServer) -> None:
    server.queue(Text(f"Here is the implementation:\n```python\n{IMPLEMENTATION}```"), BLOCK, DONE)
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    said = _results(server, 1)  # not a guess at the file: the correction names the missing path line
    assert said == prompts.render_unnamed_block("solution.py")
    assert said.startswith("No tool call found in your answer, and your code block was not written: it had no path "
                           "line before it.")
    assert "\nsolution.py\n```python\n<the complete file>\n```\n" in said  # the task's one file to write
    assert result.execution.steps[0].turns == 3  # type: ignore[union-attr]


def test_step_complete_before_any_write_is_pushed_back_to_a_file_block(stack: Stack, server: ModelServer) -> None:
    server.queue(DONE, BLOCK, DONE)
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert "Make the change with a file block (the file's path on one line, then its complete content in a fenced " \
           "code block), then call step_complete" in _results(server, 1)
    assert (run.workspace / "solution.py").read_text() == IMPLEMENTATION


def test_the_default_profile_reads_no_file_blocks_and_keeps_its_prompt(stack: Stack, server: ModelServer) -> None:
    server.queue(BLOCK, DONE, DONE)
    run = _stage(stack, server, ModelProfile())  # what any other model gets

    executor.run(run.ctx)

    assert (run.workspace / "solution.py").read_text() == STUB
    assert _results(server, 1) == prompts.NO_TOOL_CALL
    assert str(server.chats[0].messages[0]["content"]).startswith(prompts.EXECUTOR + "\n")


def test_a_repeated_invalid_write_is_shown_the_file_block_form(stack: Stack, server: ModelServer) -> None:
    broken = Text('```json\n{"name": "write_file", "arguments": {"path": "solution.py", "content": }}\n```')
    server.queue(broken, broken, BLOCK, DONE)
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    repeated = _results(server, 2)
    assert repeated.endswith("no JSON:\nsolution.py\n```python\n<the complete file>\n```"), repeated
    assert '"content"' not in repeated.split("no JSON:")[1]
    assert (run.workspace / "solution.py").read_text() == IMPLEMENTATION


def test_the_written_file_runs_in_the_sandbox(stack: Stack, server: ModelServer) -> None:
    """The file block's text is the file: the implementation imports and passes (the stub would raise)."""
    check = ("from solution import has_close_elements\n"
             "assert has_close_elements([1.0, 2.8, 3.0], 0.3)\nprint('checked')\n")
    run_it = Text('{"name": "run_terminal", "arguments": {"command": "python3 check.py"}}')
    server.queue(BLOCK, run_it, DONE)
    provider = OpenAIProvider(base_url=server.openai_url, model=MODEL, num_ctx=8_192)
    run = stack.stage("executor", [], plan(), files={**FILES, "check.py": check}, provider=provider,
                      profile=msgspec.structs.replace(profile_for(MODEL), step_style="tools"))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    said = _results(server, 2)
    assert "checked" in said and "exit code 0" in said, said


def test_the_file_block_rules_follow_the_style_and_need_write_file() -> None:
    fence = Fence("n0")
    small = offered_tools(profile_for(MODEL))
    for compact in (False, True):
        shown = prompts.executor_system(fence, small, compact=compact, file_blocks=True)
        assert shown == prompts.executor_system(fence, sorted(small), compact=compact, file_blocks=True)
        assert prompts.file_block_example() in shown and "modify_file" not in shown and "run_terminal" in shown
        assert "<path>\n```python" in shown  # no step file: a placeholder no file block accepts
    # no write_file offered: nothing to write as a block, the rules are those without it
    bare = {"read_file", "step_complete", "step_failed"}
    assert prompts.executor_system(fence, bare, compact=True, file_blocks=True) == \
        prompts.executor_system(fence, bare, compact=True)


def test_a_bare_step_complete_after_a_file_block_completes_the_step(stack: Stack, server: ModelServer) -> None:
    # Qwen2.5-Coder-1.5B answered "step_complete" (the bare name) after its file block, then
    # echoed "step_failed: No tool call found in your answer." for eight turns
    server.queue(Text(f"solution.py\n```python\n{IMPLEMENTATION}```"), Text("step_complete"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.summary) == ("completed", 2, "done")
    assert (run.workspace / "solution.py").read_text() == IMPLEMENTATION
