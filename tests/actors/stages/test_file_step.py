"""A small model's step answered as one whole file, replayed over real HTTP from the stand-in server (issue 25).

In the benchmark, Qwen2.5-Coder-1.5B on llama.cpp solved none of acode's tasks in the tool
loop (it echoed the step's message, broke files inside JSON strings, repeated a useless
call) while it solves HumanEval problems asked in one chat turn for the whole file. Under
the small profile's ``file`` step style the executor asks just that, writes the block
through the pipeline and runs the task's checks itself (:mod:`actors.stages.execution.filestep`).
The answers here are the shapes the real model sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from actors.stages.execution import executor, fileanswer, fileprompt, filestep
from protocol.plans.plan import PlanStep, PlanTask, TaskPlan
from protocol.sessions.events import TurnAnswered
from protocol.sessions.profiles import profile_for
from protocol.sessions.session import Feedback, OpenAIProvider
from tests.actors.stages.conftest import Run, Stack
from tests.modelserver import ModelServer, Text

MODEL = "qwen2.5-coder-1.5b-instruct"  # profile_for chooses "small": the file step style
HEAD = "def add(a: int, b: int) -> int:\n    \"\"\"The sum of a and b.\"\"\"\n"
STUB = HEAD + "    raise NotImplementedError\n"
RIGHT = HEAD + "    return a + b\n"
WRONG = HEAD + "    return a - b\n"
CHECK = ("from solution import add\n\n"
         "assert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\n"
         "print('all good')\n")
FILES = {"solution.py": STUB, "check_solution.py": CHECK}
COMMAND = "python check_solution.py"


def plan(check: bool = True, write: list[str] | None = None, action: str = "modify_file") -> dict[str, Any]:
    step = {"label": "S1", "title": "Implement add in solution.py so that check_solution.py passes", "action": action}
    criterion: dict[str, Any] = {"label": "A1", "description": "check_solution.py passes"}
    if check:
        criterion["check"] = {"command": COMMAND, "expect_output": "all good"}
    return {"goal": "Implement `add` in solution.py so that check_solution.py passes.", "status": "ready",
            "tasks": [{"label": "T1", "title": "the task", "steps": [step], "acceptance": [criterion],
                       "resources": {"read": ["check_solution.py"], "write": write or ["solution.py"]}}]}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(models=[MODEL]) as running:
        yield running


def _stage(stack: Stack, server: ModelServer, the_plan: dict[str, Any] | None = None,
           files: dict[str, str] | None = None, **settings: Any) -> Run:
    provider = OpenAIProvider(base_url=server.openai_url, model=MODEL, num_ctx=8_192)
    return stack.stage("executor", [], the_plan or plan(), files=files or FILES, provider=provider,
                       profile=profile_for(MODEL), **settings)


def _said(server: ModelServer, request: int) -> str:
    """The message acode sent after the model's last answer, in chat request ``request``."""
    messages = server.chats[request].messages
    return str(messages[-1]["content"]) if messages[-1]["role"] == "user" else ""


def test_the_small_profile_answers_a_one_file_step_as_that_file() -> None:
    assert profile_for(MODEL).step_style == "file"
    assert profile_for("qwen2.5-coder:32b").step_style == "tools"
    assert fileanswer.target(msgspec.convert(plan()["tasks"][0], PlanTask),
                           msgspec.convert(plan()["tasks"][0]["steps"][0], PlanStep)) == "solution.py"


def test_a_plain_code_block_is_written_and_the_passing_check_completes_the_step(
        stack: Stack, server: ModelServer) -> None:
    # what the model answers when asked as the direct prompt asks: a ```python block, no path line
    server.queue(Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == RIGHT
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.files_changed) == ("completed", 1, ["solution.py"])
    assert f"`{COMMAND}` passed" in record.summary
    [chat] = server.chats
    assert "tools" not in chat.body  # no tool definitions: nothing to call
    system, user = (str(m["content"]) for m in chat.messages)
    assert system.startswith(fileprompt.SYSTEM)
    # the file to change comes last, right before what to answer; the check file before it, fenced
    assert user.index("check_solution.py, for reference") < user.index("solution.py now:")
    assert user.endswith("Answer with the complete new solution.py in one ```python code block.")
    assert f"After your answer acode runs: `{COMMAND}`. It must succeed." in user
    # the check ran before the model was asked: its failure says what is missing
    assert "Now, before your change, it fails:" in user and "NotImplementedError" in user
    assert f"<<untrusted file solution.py {run.ctx.fence.nonce}>>\n```python\n{STUB}```" in user, user


def test_a_failing_check_is_asked_afresh_plainly_then_with_its_output(stack: Stack, server: ModelServer) -> None:
    # in one real run, every recovery from a failed answer came from a fresh ask; the turn that
    # showed the model its failed file and the failure got that file back, every time
    other = HEAD + "    return a * b\n"
    server.queue(Text(f"```python\n{WRONG}```"), Text(f"```python\n{other}```"),
                 Text(f"solution.py\n```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == RIGHT
    plain, full = server.chats[1], server.chats[2]
    assert [m["role"] for m in plain.messages] == [m["role"] for m in full.messages] == ["system", "user"]
    assert "add(2, 3) gave -1" not in str(plain.messages[1]["content"])  # the plain ask: request and file
    asked = str(full.messages[1]["content"])
    assert f"{fileprompt.EARLIER}\n\n" in asked and "add(2, 3) gave 6" in asked  # the check's own output
    assert "return a * b" not in asked and asked.endswith(
        "Answer with the complete new solution.py in one ```python code block.")
    assert "temperature" not in plain.body or plain.body["temperature"] != 0.6
    assert "temperature" not in full.body or full.body["temperature"] != 0.6  # a new failure: a new ask
    turns = [e for e in run.events() if isinstance(e, TurnAnswered)]
    assert [(t.turn, t.tool_calls, t.correction) for t in turns] == [
        (1, 2, "1 check(s) failed"), (2, 2, "1 check(s) failed"), (3, 2, "")]


def test_the_stub_sent_back_unchanged_is_not_a_change(stack: Stack, server: ModelServer) -> None:
    server.queue(Text(f"```python\n{STUB}```"), Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert _said(server, 1).startswith("Your code block is solution.py exactly as it already is: nothing changed.")
    # asked the same way, the model answers the same: the next answer is sampled warmer
    assert server.chats[1].body["temperature"] == 0.6 and server.chats[0].body.get("temperature") != 0.6
    assert result.execution.steps[0].turns == 2  # type: ignore[union-attr]


def test_the_step_message_echoed_back_three_times_ends_the_try_without_a_write(
        stack: Stack, server: ModelServer) -> None:
    # the real model's answer in the tool loop: the step's own message, echoed
    echo = Text("Your step, S1: Implement add in solution.py so that check_solution.py passes\nAction: modify_file")
    server.queue(echo, echo, echo)
    run = _stage(stack, server, step_retry_limit=1)

    result = executor.run(run.ctx)

    assert not result.ok
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert record.status == "failed" and record.code == "ACODE-EXEC-008", record
    assert (run.workspace / "solution.py").read_text() == STUB
    assert _said(server, 1) == fileprompt.render_problem("no_block", "solution.py")


def test_code_left_out_or_broken_python_is_not_written(stack: Stack, server: ModelServer) -> None:
    longer = STUB + "\n\ndef sub(a: int, b: int) -> int:\n    return a - b\n"
    lazy = HEAD + "    return a + b\n\n# ... rest of the code ...\n"
    broken = HEAD + "    return a +\n"
    server.queue(Text(f"```python\n{lazy}```"), Text(f"```python\n{broken}```"),
                 Text(f"```python\n{RIGHT}\n\ndef sub(a: int, b: int) -> int:\n    return a - b\n```"))
    run = _stage(stack, server, files={**FILES, "solution.py": longer})

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert _said(server, 1).startswith("Your code block leaves part of solution.py out")
    assert _said(server, 2).startswith("Your code block was not written: it is not valid Python: invalid syntax "
                                       "(line 3).")
    assert "def sub" in (run.workspace / "solution.py").read_text()


def test_a_json_write_call_and_copied_fence_markers_are_read_as_the_file(stack: Stack, server: ModelServer) -> None:
    # the model kept to the tool loop's JSON habit, and copied the fence's marker lines
    server.queue(Text('{"name": "write_file", "arguments": {"path": "solution.py", "content": '
                      + msgspec.json.encode(RIGHT).decode() + "}}"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == RIGHT
    marked = f"<<untrusted file solution.py {run.ctx.fence.nonce}>>\n{RIGHT}<<end {run.ctx.fence.nonce}>>\n"
    assert fileanswer.answered_file(f"```python\n{marked}```", "solution.py", run.ctx.fence) == RIGHT


def test_a_block_named_as_another_file_is_not_written_to_the_step_file(stack: Stack, server: ModelServer) -> None:
    server.queue(Text(f"check_solution.py\n```python\n{CHECK}print('changed')\n```"), Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "check_solution.py").read_text() == CHECK  # the model writes only the step's file
    assert _said(server, 1).startswith("Your answer had no code block, so nothing was written.")


def test_without_a_check_the_write_completes_the_step(stack: Stack, server: ModelServer) -> None:
    server.queue(Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server, plan(check=False))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert result.execution.steps[0].summary == "wrote solution.py"  # type: ignore[union-attr]


def test_a_step_of_several_files_and_the_tools_style_keep_the_tool_loop() -> None:
    several = plan(write=["solution.py", "other.py"])
    task = msgspec.convert(several["tasks"][0], PlanTask)
    assert fileanswer.target(task, task.steps[0]) == "solution.py"  # the one of them its step names
    task = msgspec.convert(plan(write=["a.py", "b.py"])["tasks"][0], PlanTask)
    assert fileanswer.target(task, task.steps[0]) == ""
    task = msgspec.convert(plan(action="run_command")["tasks"][0], PlanTask)
    assert fileanswer.target(task, task.steps[0]) == ""


def test_a_replayed_file_step_asks_the_model_nothing_again(stack: Stack, server: ModelServer) -> None:
    server.queue(Text(f"```python\n{WRONG}```"), Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)
    assert executor.run(run.ctx).ok
    asked = len(server.chats)

    again = executor.run(run.ctx)  # the stage dispatched again (a crash after the answers were recorded)

    assert again.ok, again.summary
    assert len(server.chats) == asked


def test_only_a_file_read_whole_is_rewritten_whole() -> None:
    numbered = "     1\tdef add(a, b):\n     2\t\treturn a + b\n"
    assert fileanswer.unnumbered(numbered) == "def add(a, b):\n\treturn a + b\n"  # a tab in the file stays
    assert fileanswer.unnumbered("     1\tx = 1") == "x = 1"  # no newline at the end: none added
    cut = numbered + "[… 9,000 characters (~2,250 tokens) cut here; 9,100 in all. Ask for less …]\n     9\ty\n"
    assert fileanswer.unnumbered(cut) is None
    assert fileanswer.unnumbered("     3\tfrom an offset\n") is None
    assert fileanswer.whole([("solution.py", cut)], "solution.py") is None  # the tool loop, which can read parts
    assert fileanswer.whole([("other.py", cut), ("solution.py", None)], "solution.py") == [
        ("other.py", cut), ("solution.py", None)]


def test_a_file_too_large_to_show_whole_keeps_the_tool_loop(stack: Stack, server: ModelServer) -> None:
    big = STUB + "".join(f"\n\ndef helper_{n}(x: int) -> int:\n    return x + {n}\n" for n in range(600))
    server.queue(Text('{"name": "step_complete", "arguments": {"summary": "nothing to do"}}'),
                 Text('{"name": "step_complete", "arguments": {"summary": "nothing to do"}}'))
    run = _stage(stack, server, files={**FILES, "solution.py": big})

    executor.run(run.ctx)

    assert not str(server.chats[0].messages[0]["content"]).startswith(fileprompt.SYSTEM)
    assert "tools" in server.chats[0].body


def test_the_tasks_checks_run_after_its_last_step_only(stack: Stack, server: ModelServer) -> None:
    # a rename: the first file alone breaks the checks; asking the model to fix that file would undo it
    steps = [{"label": "S1", "title": "Rename add to plus in solution.py", "action": "modify_file"},
             {"label": "S2", "title": "Rename add to plus in check_solution.py", "action": "modify_file"}]
    two = plan(write=["solution.py", "check_solution.py"])
    two["tasks"][0]["steps"] = steps
    server.queue(Text(f"```python\n{RIGHT.replace('def add', 'def plus')}```"),
                 Text(f"```python\n{CHECK.replace('add', 'plus')}```"))
    run = _stage(stack, server, two)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    first, second = result.execution.steps  # type: ignore[union-attr]
    assert first.summary == "wrote solution.py; the task's checks run after its last step"
    assert second.summary == f"wrote check_solution.py; `{COMMAND}` passed"
    asked_first = str(server.chats[0].messages[1]["content"])
    assert "After your answer acode runs" not in asked_first
    assert "Other steps change the other files (not yours): Rename add to plus in check_solution.py" in asked_first


def test_the_agents_md_nearest_to_the_steps_file_wins(stack: Stack, server: ModelServer) -> None:
    files = {"pkg/sub/solution.py": STUB, "check_solution.py": CHECK.replace("from solution", "from pkg.sub.solution"),
             "pkg/__init__.py": "", "pkg/sub/__init__.py": "",
             "AGENTS.md": "ROOT RULE: tabs.\n", "pkg/AGENTS.md": "PKG RULE: four spaces.\n"}
    nested = plan(write=["pkg/sub/solution.py"])
    server.queue(Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server, nested, files=files)

    assert executor.run(run.ctx).ok
    system = str(server.chats[0].messages[0]["content"])
    assert "PKG RULE: four spaces." in system and "ROOT RULE" not in system
    assert "Project instructions from the workspace's pkg/AGENTS.md" in system


def test_the_reviewers_extra_step_writes_the_one_changed_file_and_carries_the_checks() -> None:
    feedback = Feedback(source="reviewer", summary="handle negative numbers", cycle=1)
    the_plan = msgspec.convert(plan(), TaskPlan)
    one = executor.review_task(feedback, ["solution.py"], the_plan)
    assert one.resources.write == ["solution.py"] and fileanswer.target(one, one.steps[0]) == "solution.py"
    assert [c.check.command for c in one.acceptance if c.check] == [COMMAND]  # run after each answer
    two = executor.review_task(feedback, ["solution.py", "other.py"], the_plan)
    assert (two.resources.write, two.acceptance) == ([], [])  # several files: the tool loop, as before


def test_a_check_that_runs_forever_after_the_change_is_cut_at_ten_times_its_time_before(
        stack: Stack, server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # HumanEval/32: the model's Newton loop never ended, and each check took the whole 120 s
    monkeypatch.setattr(filestep, "_CHECK_FLOOR_S", 0.5)
    loops = HEAD + "    while True:\n        pass\n"
    server.queue(Text(f"```python\n{loops}```"), Text(f"```python\n{loops}```"), Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)
    started = time.monotonic()

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert time.monotonic() - started < 60  # the session's command timeout is 120 s
    said = str(server.chats[2].messages[1]["content"])  # the full ask after the plain one
    assert "did not run to completion" in said and "did not finish within" in said, said


def test_the_test_file_copied_back_is_not_written_and_a_later_try_still_ends_with_what_to_answer(
        stack: Stack, server: ModelServer) -> None:
    # HumanEval/64: the stub sent back three times, then, in the next try (whose prompt ended with
    # the retry note), the test file copied back as the answer
    stub = Text(f"```python\n{STUB}```")
    server.queue(stub, stub, stub, Text(f"```python\n{CHECK}```"), Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "check_solution.py").read_text() == CHECK
    assert (run.workspace / "solution.py").read_text() == RIGHT
    assert _said(server, 1).endswith("Make the change. The request: Implement `add` in solution.py so that "
                                     "check_solution.py passes. Answer with the complete new solution.py in one "
                                     "```python code block.")
    second_try = str(server.chats[3].messages[1]["content"])
    assert "This is try 2 of 3" in second_try and "step_failed" not in second_try
    assert second_try.endswith("Answer with the complete new solution.py in one ```python code block.")
    assert _said(server, 4).startswith("Your code block is check_solution.py, which was shown for reference: it "
                                       "was not written.")


def test_a_failed_answer_sent_back_unchanged_is_asked_afresh_without_it(stack: Stack, server: ModelServer) -> None:
    # HumanEval/72, 120, 128: shown its own failed file, the model sent it back in every later turn
    # and try; asked afresh from the file as the step found it, it samples a new answer. HumanEval/8:
    # asked the full way it gave the same wrong file 12 times, at 0 and 0.6; so every other fresh ask
    # is the plain one, as the model alone is asked
    wrong = Text(f"```python\n{WRONG}```")
    server.queue(wrong, wrong, wrong, Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == RIGHT
    first = str(server.chats[0].messages[1]["content"])
    plain, afresh, again = server.chats[1], server.chats[2], server.chats[3]
    for chat in (plain, afresh):
        assert [m["role"] for m in chat.messages] == ["system", "user"]  # a new conversation
        asked = str(chat.messages[1]["content"])
        assert f"```python\n{STUB}```" in asked and "return a - b" not in asked  # the file as the step found it
    # the plain ask: the request and the file, nothing else, at the session's temperature
    asked = str(plain.messages[1]["content"])
    assert asked.startswith("The request: Implement `add` in solution.py")
    assert "check_solution.py, for reference" not in asked and "After your answer acode runs" not in asked
    assert "add(2, 3) gave -1" not in asked and fileprompt.EARLIER not in asked
    assert asked.endswith("Answer with the complete new solution.py in one ```python code block.")
    assert plain.body.get("temperature") != 0.6
    # the next fresh ask is the full one, with what failed said, sampled warmer
    asked = str(afresh.messages[1]["content"])
    assert f"{fileprompt.EARLIER}\n\n" in asked and "add(2, 3) gave -1" in asked
    assert afresh.body["temperature"] == 0.6
    # and the plain ask again, sampled: asked as before it would answer as before
    assert again.messages == plain.messages and again.body["temperature"] == 0.6
    turns = [e for e in run.events() if isinstance(e, TurnAnswered)]
    assert [t.correction for t in turns[1:3]] == ["asked afresh: the failed solution.py came back unchanged"] * 2
    # what differs between the asks comes after the files: the full fresh ask shares the first's
    # whole head, which the server has cached (with the failures first, every retry re-read the files)
    head = first[:first.index(f"```python\n{STUB}```") + len(f"```python\n{STUB}```")]
    assert asked.startswith(head) and server.chats[0].messages[0] == afresh.messages[0]


def test_the_run_time_of_a_failure_is_left_out_so_the_same_failure_reads_the_same() -> None:
    assert fileprompt.steady("FAILED t.py::test_x - AssertionError\n1 failed in 0.12s\n") == (
        "FAILED t.py::test_x - AssertionError\n1 failed\n")
    assert fileprompt.steady("== 1 failed, 2 passed, 1 warning in 3.41s ==") == "== 1 failed, 2 passed, 1 warning =="
    assert fileprompt.steady("slept 2 times in 0.5s") == "slept 2 times in 0.5s"  # only the runner's summary


def test_an_answer_cut_at_the_token_limit_ends_the_try_and_the_next_writes_the_file(
        stack: Stack, server: ModelServer) -> None:
    """edit/add-test on the real model: try 2's first whole-file answer ran to the 4,096-token
    limit (ACODE-LLM-012) and the session paused as an escalation. Now the try ends and the
    next one, from a fresh window that says why, writes the file."""
    server.queue(Text("```python\n" + HEAD + "    return a + b\n" * 600, finish="length", usage=(900, 4_096)))
    server.queue(Text(f"```python\n{RIGHT}```"))
    run = _stage(stack, server)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "solution.py").read_text() == RIGHT
    first, second = server.chats
    told = str(second.messages[-1]["content"])
    assert "This is try 2 of " in told and "ran on to the token limit" in told, told[-600:]
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert record.status == "completed"


CORE = ('def average_length(counts):\n    """The average length of the words counted."""\n'
        '    return sum(len(w) * n for w, n in counts.items()) / sum(counts.values())\n')
TEST_CORE = "from wordcount.core import average_length\n"
WRONG_TEST = TEST_CORE + "\n\ndef test_average_length():\n    assert average_length('a bb') == 1.5\n"
RIGHT_TEST = TEST_CORE + "\n\ndef test_average_length():\n    assert average_length({'a': 1, 'bb': 1}) == 1.5\n"
RUNNER = ("import test_core\n\nfor name, test in vars(test_core).items():\n    if name[:5] == 'test_':\n"
          "        test()\nprint('ok')\n")


ADD_TEST_PLAN = {"goal": "Add a test of average_length to test_core.py.", "status": "ready", "tasks": [{
    "label": "T1", "title": "the task", "resources": {"read": ["wordcount/core.py"], "write": ["test_core.py"]},
    "steps": [{"label": "S1", "title": "Add a test of average_length to test_core.py", "action": "modify_file"}],
    "acceptance": [{"label": "A1", "description": "the tests pass",
                    "check": {"command": "python run_tests.py", "expect_output": "ok"}}]}]}


def _add_test(stack: Stack, server: ModelServer, tests: str) -> Run:
    """edit/add-test in small: wordcount/core.py read for reference, test_core.py to change."""
    return _stage(stack, server, ADD_TEST_PLAN, files={"wordcount/__init__.py": "", "wordcount/core.py": CORE,
                                                       "test_core.py": tests, "run_tests.py": RUNNER})


def test_the_plain_ask_says_how_the_function_the_step_names_is_called(stack: Stack, server: ModelServer) -> None:
    """edit/add-test on the real model: twenty answers called ``average_length(text)``; every
    other ask was the plain one, which showed test_core.py alone. It now carries the
    signature of the function the step names, from the file the step read."""
    server.queue(Text(f"```python\n{WRONG_TEST}```"))
    server.queue(Text(f"```python\n{RIGHT_TEST}```"))
    run = _add_test(stack, server, TEST_CORE)

    result = executor.run(run.ctx)
    assert result.ok, result.summary
    assert (run.workspace / "test_core.py").read_text() == RIGHT_TEST
    first, plain = (str(chat.messages[-1]["content"]) for chat in server.chats)
    assert "wordcount/core.py, for reference" in first, "the full ask shows the file"
    assert "for reference" not in plain and "AttributeError" not in plain, "the plain ask is still plain"
    assert "wordcount/core.py: def average_length(counts)  # The average length of the words counted." in plain


TWO_TESTS = (TEST_CORE + "\n\ndef test_one():\n    assert average_length({'a': 2}) == 1\n"
             "\n\ndef test_two():\n    assert average_length({'ab': 1}) == 2\n")


def test_an_answer_that_deletes_the_files_tests_is_not_written(stack: Stack, server: ModelServer) -> None:
    """edit/add-test on the real model: the session completed with test_core.py holding the
    new test alone (its checks passed: fewer tests fail less). Such an answer is refused."""
    kept = TWO_TESTS + "\n\ndef test_average_length():\n    assert average_length({'a': 1, 'bb': 1}) == 1.5\n"
    server.queue(Text(f"```python\n{RIGHT_TEST}```"))  # the new test alone
    server.queue(Text(f"```python\n{kept}```"))
    run = _add_test(stack, server, TWO_TESTS)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "test_core.py").read_text() == kept
    told = _said(server, 1)
    assert told.startswith("Your code block was not written: it deletes tests that test_core.py had (test_one, "
                           "test_two)."), told


def test_a_renamed_test_is_not_a_deleted_one() -> None:
    renamed = TWO_TESTS.replace("test_one", "test_first")
    assert fileanswer.problem(renamed, TWO_TESTS, "test_core.py", found=TWO_TESTS) == ""
    assert fileanswer.problem(RIGHT_TEST, TWO_TESTS, "test_core.py", found=TWO_TESTS) == "dropped:test_one, test_two"
    assert fileanswer.problem(RIGHT_TEST, TWO_TESTS, "notes.txt", found=TWO_TESTS) == ""
    # a test the step added is the model's own to drop; one the step found is not
    other = TEST_CORE + "\n\ndef helper():\n    return 1\n"
    assert fileanswer.problem(other, RIGHT_TEST, "test_core.py", found=TEST_CORE) == ""
    assert fileanswer.problem(TEST_CORE, RIGHT_TEST, "test_core.py", found=None) == "", "a file the step created"
    assert fileanswer.problem(TEST_CORE, RIGHT_TEST, "test_core.py", found=TEST_CORE) == "reverted", "no change left"
    assert fileanswer.problem(TEST_CORE, RIGHT_TEST, "test_core.py", found=RIGHT_TEST) == "dropped:test_average_length"


ONE_TEST = TEST_CORE + "\n\ndef test_one():\n    assert average_length({'a': 2}) == 1\n"


def test_a_test_the_step_added_may_be_taken_back_into_another(stack: Stack, server: ModelServer) -> None:
    """A hand run on the real model ("add a remove command ... and a test of Store.remove"):
    its new test_remove expected the wrong item gone and failed; its next answers put the
    assertions into the file's one existing test instead, and each was refused as "deletes
    tests that tests/test_store.py has (test_remove)", a test of its own, three times a try
    until the session paused (EXEC-008). Only the tests the step found are kept now."""
    merged = (TEST_CORE + "\n\ndef test_one():\n    assert average_length({'a': 2}) == 1\n"
              "    assert average_length({'a': 1, 'bb': 1}) == 1.5\n")
    server.queue(Text(f"```python\n{ONE_TEST}\n\ndef test_average_length():\n"
                      "    assert average_length('a bb') == 1.5\n```"))  # its own test, failing
    server.queue(Text(f"```python\n{merged}```"))
    run = _add_test(stack, server, ONE_TEST)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "test_core.py").read_text() == merged
    assert "deletes tests" not in _said(server, 1) and len(server.chats) == 2


def test_the_file_as_the_step_found_it_is_not_written_after_a_write_of_the_step(
        stack: Stack, server: ModelServer) -> None:
    """A hand run on the real model ("treat an empty file as an empty list, and add a test
    for that"): its test failed, its next answer was the test file as the step found it,
    which was written, passed the checks, and the session completed with nothing added."""
    added = ONE_TEST + "\n\ndef test_average_length():\n    assert average_length({'a': 1, 'bb': 1}) == 1.5\n"
    server.queue(Text(f"```python\n{ONE_TEST}\n\ndef test_average_length():\n"
                      "    assert average_length('a bb') == 1.5\n```"))  # its test, failing
    server.queue(Text(f"```python\n{ONE_TEST}```"))  # the file as it was
    server.queue(Text(f"```python\n{added}```"))
    run = _add_test(stack, server, ONE_TEST)

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "test_core.py").read_text() == added
    assert _said(server, 2).startswith("Your code block is test_core.py as this step found it: it undoes your "
                                       "change and makes none, so it was not written. Make the change.")
