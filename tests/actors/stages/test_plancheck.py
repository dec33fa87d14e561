"""Reading and checking the planner model's plan: decoding problems, commands, protected paths."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from actors.stages.planning.plancheck import (
    drop_unusable_checks,
    exit_codes_said,
    plan_problems,
    read_plan,
    rules_questions,
)
from actors.stages.planning.testtarget import code_step, imported_files, retarget, written_tests
from protocol.plans.plan import PlanProblem, Question, TaskPlan
from protocol.policy.sandbox import SandboxPolicy
from tests.actors.stages.replays import CONTRACTIONS, TESTS_ONLY


def _task(label: str = "T1", **extra: Any) -> dict[str, Any]:
    return {"label": label, "title": f"task {label}", "complexity": 2,
            "steps": [{"label": "S1", "title": "do it", "action": "modify_file"}], **extra}


def _plan(*tasks: dict[str, Any]) -> TaskPlan:
    plan, problems = read_plan(json.dumps({"goal": "g", "tasks": list(tasks)}))
    assert plan is not None, problems
    return plan


def _messages(plan: TaskPlan, sandbox: SandboxPolicy | None = None) -> list[str]:
    return [p.message for p in plan_problems(plan, sandbox or SandboxPolicy())]


# --- reading -------------------------------------------------------------------------------------


def test_a_plan_in_prose_and_a_code_fence_is_read() -> None:
    text = "Here is the plan:\n```json\n" + json.dumps({"goal": "g", "tasks": [_task()]}) + "\n```\nDone."
    plan, problems = read_plan(text)
    assert problems == [] and plan is not None and plan.tasks[0].label == "T1"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I think we should first look at the code.", "the answer is not one JSON object (JSON is malformed: "
         "invalid character (byte 0)); answer with the plan as one JSON object and nothing else"),
        ("[1, 2]", "the answer is not one JSON object (Expected `object`, got `array`); answer with the plan as one "
         "JSON object and nothing else"),
        ('{"goal": 7, "tasks": []}', "Expected `str`, got `int` - at `$.goal`"),
        ('{"goal": "g", "tasks": {"label": "T1"}}', "Expected `array`, got `object` - at `$.tasks`"),
    ],
    ids=["prose", "array", "goal-type", "tasks-type"],
)
def test_an_answer_that_is_not_a_plan_says_why(text: str, problem: str) -> None:
    assert read_plan(text) == (None, [problem])


def test_every_broken_task_and_question_is_named_with_its_position() -> None:
    raw = {"goal": "g", "tasks": [
        _task("T1", complexity=40),
        {"label": "T2"},
        _task("T3", steps=[{"label": "S1", "title": "x", "action": "delete_file"}]),
        _task("T4"),
    ], "questions": [{"label": "Q1"}]}
    plan, problems = read_plan(json.dumps(raw))
    assert plan is None
    assert problems == [
        "Invalid enum value 40 - at `$.tasks[0].complexity`",
        "Object missing required field `title` - at `$.tasks[1]`",
        "Invalid enum value 'delete_file' - at `$.tasks[2].steps[0].action`",
        "Object missing required field `question` - at `$.questions[0]`",
    ]


# --- checking ------------------------------------------------------------------------------------


def test_a_plan_with_allowed_commands_and_paths_has_no_problems() -> None:
    plan = _plan(_task(resources={"read": [".agent/config.yml", "src/a.py"], "write": ["src/a.py"],
                                  "commands": ["python -m pytest -q", "git status"]},
                       acceptance=[{"label": "A1", "description": "tests pass",
                                    "check": {"command": "python -m pytest -q tests/test_a.py"}}]))
    assert plan_problems(plan, SandboxPolicy()) == []


def test_each_refused_command_is_named_with_where_it_is_and_the_sandbox_reason() -> None:
    plan = _plan(_task(resources={"commands": ["pytest -q", "curl https://example.com", "ls | wc -l"]},
                       acceptance=[{"label": "A1", "description": "runs",
                                    "check": {"command": "python -c 'print(1)'"}},
                                   {"label": "A2", "description": "fine", "check": {"command": "pytest -q"}}]))
    messages = _messages(plan)
    assert len(messages) == 3
    assert messages[0].startswith("task T1 resources.commands[1] would be refused by the sandbox: command 'curl' "
                                  "is not allowed by the allowlist rule; allowed: awk, ")
    assert messages[1] == ("task T1 resources.commands[2] would be refused by the sandbox: command 'ls | wc -l' uses "
                           "shell syntax: '|' (pipe); no shell runs commands, so run one program with its arguments "
                           "(split the work into several calls), or list this exact command in "
                           "sandbox.shell_commands")
    assert messages[2] == ("task T1 criterion A1 check command would be refused by the sandbox: argument '-c' "
                           "refused by rule inline-code: python -c runs code given on the command line; write the "
                           "code to a file and run that, or set sandbox.allow_inline_code: true")
    assert all(p.code == "ACODE-PLAN-004" for p in plan_problems(plan, SandboxPolicy()))


def test_the_sessions_policy_decides_what_is_allowed() -> None:
    plan = _plan(_task(resources={"commands": ["curl https://example.com", "make test && make lint",
                                               "python -c 'print(1)'"]}))
    assert len(_messages(plan)) == 3
    assert _messages(plan, SandboxPolicy(extra_commands=["curl"], shell_commands=["make test && make lint"],
                                         allow_inline_code=True)) == []
    narrow = SandboxPolicy(allowed_commands=["pytest"])
    assert [m.split(": ", 1)[1][:25] for m in _messages(_plan(_task(resources={"commands": ["python x.py"]})),
                                                         narrow)] == ["command 'python' is not a"]


@pytest.mark.parametrize("field", ["write", "directories"])
@pytest.mark.parametrize("path", [".git/hooks/pre-commit", "sub/.git/config", ".agent/config.yml", ".GIT/x"])
def test_writing_where_the_sandbox_protects_is_a_problem(field: str, path: str) -> None:
    [problem] = plan_problems(_plan(_task(resources={field: [path]})), SandboxPolicy())
    assert problem.code == "ACODE-PLAN-004"
    assert problem.message.startswith(f"task T1 resources.{field}: path '{path}' is inside ")


def test_structural_problems_come_first_then_sandbox_ones() -> None:
    plan = _plan(_task("T1", depends_on=["T2"], resources={"write": ["/abs.py"], "commands": ["wget x"]}),
                 _task("T2", depends_on=["T1"]))
    found = plan_problems(plan, SandboxPolicy())
    assert [(p.code, p.message.split(" would")[0]) for p in found] == [
        ("ACODE-PLAN-004", "task T1 resources.write path '/abs.py' is absolute; name it relative to the "
                           "workspace root"),
        ("ACODE-PLAN-005", "tasks depend on each other in a cycle: T1 -> T2 -> T1"),
        ("ACODE-PLAN-004", "task T1 resources.commands[0]"),
    ]
    assert all(isinstance(p, PlanProblem) for p in found)


def test_a_task_above_the_complexity_cap_is_sent_back_to_be_split() -> None:
    plan = _plan(_task("T1", complexity=34), _task("T2", complexity=21))
    assert [p.message for p in plan_problems(plan, SandboxPolicy(), 21)] == [
        "task T1 has complexity 34; at most 21 is allowed: split it into smaller tasks"]
    assert plan_problems(plan, SandboxPolicy()) == []  # no cap by default


# --- what a small model means ----------------------------------------------------------------------


def test_a_complexity_between_the_allowed_values_is_rounded_up_and_tool_names_are_read_as_actions() -> None:
    steps = [{"label": "S1", "title": "a", "action": "create_file"}, {"label": "S2", "title": "b",
                                                                      "action": "run_terminal"}]
    notes: list[str] = []
    plan, problems = read_plan(json.dumps({"goal": "g", "tasks": [_task(complexity=4, steps=steps),
                                                                  _task("T2", complexity=1)]}), notes)
    assert problems == [] and plan is not None
    assert [t.complexity for t in plan.tasks] == [5, 1]
    assert [s.action for s in plan.tasks[0].steps] == ["write_file", "run_command"]
    assert notes == ["acode read task T1's complexity 4 as 5", "acode read step T1/S1's action 'create_file' as "
                     "'write_file'", "acode read step T1/S2's action 'run_terminal' as 'run_command'"]


@pytest.mark.parametrize("value", [0, 35, "3", True])
def test_a_complexity_outside_the_scale_is_still_a_problem(value: object) -> None:
    plan, problems = read_plan(json.dumps({"goal": "g", "tasks": [_task(complexity=value)]}))
    assert plan is None and problems[0].endswith("- at `$.tasks[0].complexity`")


@pytest.mark.parametrize(("question", "about_rules"), [
    ("What is the correct criterion label?", True),
    ("Should the criteria labels be unique across the plan?", True),
    ("Which label should A1 get?", True),
    ("Is depends_on a list of task labels?", True),
    # Qwen2.5-Coder-1.5B, after its grep pipe was refused as a check
    ("How can I run this command without using a shell? ", True),
    ("Why is the command 'grep -r 'count_words' wordcount/core.py | grep -v 'wordcount/core.py'", True),
    ("Which command-line flag name do you prefer, --top or --limit?", False),
    ("Which shell should the completion script support, bash or zsh?", False),
    ("Should farewell() say 'Bye' or 'Goodbye'?", False),
    ("What text should the button label show?", False),
    ("Which dependency should be added to requirements.txt?", False),
])
def test_questions_about_acodes_plan_rules_are_told_from_questions_about_the_task(
        question: str, about_rules: bool) -> None:
    plan = TaskPlan(goal="g", status="needs_clarification", questions=[Question(label="Q1", question=question)])
    left, asked = rules_questions(plan)
    assert (asked != []) is about_rules
    assert (left.questions == []) is about_rules


def test_a_plan_with_tasks_whose_only_questions_are_about_the_rules_is_ready() -> None:
    plan = msgspec.structs.replace(_plan(_task()), status="needs_clarification",
                                   questions=[Question(label="Q1", question="What is the correct criterion label?")])
    left, asked = rules_questions(plan)
    assert (left.status, left.questions, len(asked)) == ("ready", [], 1)


def test_strings_where_lists_belong_a_check_given_as_its_command_and_a_missing_title_are_read() -> None:
    task = {"label": "T1", "description": "Write hello.py\nthat prints hello", "depends_on": "",
            "resources": {"write": "hello.py", "commands": "python hello.py"},
            "acceptance": [{"label": "A1", "description": "prints hello", "check": "python hello.py"}],
            "steps": [{"label": "S1", "description": "write it", "action": "write_file"},
                      {"label": "S2", "title": "run it", "action": "run_command", "depends_on": "S1"}]}
    notes: list[str] = []
    plan, problems = read_plan(json.dumps({"goal": "g", "tasks": [task]}), notes)
    assert problems == [] and plan is not None
    [t1] = plan.tasks
    assert (t1.title, t1.depends_on, t1.resources.write, t1.resources.commands) == (
        "Write hello.py", [], ["hello.py"], ["python hello.py"])
    assert t1.acceptance[0].check is not None and t1.acceptance[0].check.command == "python hello.py"
    assert [(s.title, s.depends_on) for s in t1.steps] == [("write it", []), ("run it", ["S1"])]
    assert notes == ["acode titled task T1 by its description", "acode read task T1's depends_on as a list",
                     "acode read task T1's resources.write as a list",
                     "acode read task T1's resources.commands as a list",
                     "acode read criterion A1's check as its command", "acode titled step T1/S1 by its description",
                     "acode read step T1/S2's depends_on as a list"]
    assert plan_problems(plan, SandboxPolicy()) == []


# --- checks acode drops instead of correcting (issue 25) -------------------------------------------

PLACEHOLDER = "python -m wordcount.cli --top 2 <path to test file>"  # what Qwen2.5-Coder-1.5B wrote


def test_a_check_with_a_placeholder_is_dropped_and_its_criterion_kept_for_the_verifier() -> None:
    plan = _plan(_task(resources={"write": ["wordcount/cli.py"], "commands": [PLACEHOLDER, "python -m pytest -q"]},
                       acceptance=[{"label": "A1", "description": "--top 2 prints the two most common words",
                                    "check": {"command": PLACEHOLDER}},
                                   {"label": "A2", "description": "tests pass",
                                    "check": {"command": "python -m pytest -q"}}]))
    assert _messages(plan)  # as the model wrote it, the sandbox refuses it
    repaired, notes = drop_unusable_checks(plan, SandboxPolicy())
    a1, a2 = repaired.tasks[0].acceptance
    assert (a1.description, a1.check) == ("--top 2 prints the two most common words", None)
    assert a2.check is not None and a2.check.command == "python -m pytest -q"
    assert repaired.tasks[0].resources.commands == ["python -m pytest -q"]
    assert notes == [f"acode dropped criterion A1's check {PLACEHOLDER!r} (it holds a <...> placeholder); the "
                     "verifier judges the criterion from the evidence",
                     "acode dropped 1 command(s) of task T1's resources.commands (a dropped check, a <...> "
                     "placeholder, or a file rewrite such as sed -i that the file tools do)"]
    assert _messages(repaired) == []


def test_a_check_the_sandbox_refuses_is_dropped_with_the_sandboxs_reason() -> None:
    plan = _plan(_task(acceptance=[{"label": "A1", "description": "prints bye",
                                    "check": {"command": "python greet.py | grep bye"}}]))
    repaired, [note] = drop_unusable_checks(plan, SandboxPolicy())
    assert repaired.tasks[0].acceptance[0].check is None
    assert "the sandbox would refuse it:" in note and "'|' (pipe)" in note


def test_a_sed_in_place_resource_command_is_dropped_the_file_tools_do_that_work() -> None:
    # the rename task: Qwen2.5-Coder-1.5B listed a `sed -i` per task, refused each time, and
    # the correction loop ended in ACODE-PLAN-004 after 411 s
    sed = "sed -i s/count_words/word_counts/g wordcount/core.py"
    plan = _plan(_task(resources={"write": ["wordcount/core.py"], "commands": [sed, "python -m pytest -q"]}))
    assert _messages(plan) and "sed-in-place" in _messages(plan)[0]
    repaired, [note] = drop_unusable_checks(plan, SandboxPolicy())
    assert repaired.tasks[0].resources.commands == ["python -m pytest -q"]
    assert "file rewrite such as sed -i" in note
    assert _messages(repaired) == []


def test_an_expected_output_guessed_for_a_file_the_task_writes_is_dropped_its_command_kept() -> None:
    # Qwen2.5-Coder-1.5B, "write what the notes say into answer.txt": `cat answer.txt` was to print
    # a sentence it made up, so the right answer failed verification and the executor looped
    request = "Look up the word acode with the notes lookup tool, then write what the notes say into answer.txt"
    guessed = {"command": "cat answer.txt", "expect_output": "acode is a programming language."}
    stated = {"command": "cat ./hello.txt", "expect_output": "Hello, world"}
    other = {"command": "python greet.py", "expect_output": "bye"}  # a program's output: the planner's to state
    plan = _plan(_task(resources={"write": ["answer.txt", "hello.txt"], "commands": ["cat answer.txt"]},
                       acceptance=[{"label": "A1", "description": "answer.txt says it", "check": guessed},
                                   {"label": "A2", "description": "hello.txt greets", "check": stated},
                                   {"label": "A3", "description": "greets", "check": other}]))
    repaired, [note] = drop_unusable_checks(plan, SandboxPolicy(), request + ' and "Hello, world" into hello.txt')
    a1, a2, a3 = repaired.tasks[0].acceptance
    assert a1.check is not None and (a1.check.command, a1.check.expect_output) == ("cat answer.txt", None)
    assert a2.check is not None and a2.check.expect_output == "Hello, world", "the request says it"
    assert a3.check is not None and a3.check.expect_output == "bye"
    assert repaired.tasks[0].resources.commands == ["cat answer.txt"]
    assert note == ("acode dropped criterion A1's expected output 'acode is a programming language.' of "
                    "'cat answer.txt': a guess at what the step will write, which the request does not say")


def test_a_good_plan_and_other_refused_commands_are_left_as_they_are() -> None:
    plan = _plan(_task(resources={"commands": ["curl -s https://example.com"]},
                       acceptance=[{"label": "A1", "description": "ok", "check": {"command": "python -m pytest -q"}}]))
    assert drop_unusable_checks(plan, SandboxPolicy()) == (plan, [])
    assert _messages(plan) and "curl" in _messages(plan)[0]  # the model still hears about it


@pytest.mark.parametrize(("command", "dropped"), [
    ("python -m pytest -q <test file>", True),
    ("python run.py <file_path>", True),
    ("python -m pytest -q tests/test_core.py::test_x", False),
    ("python check.py 1<2", False),  # no placeholder (and the sandbox decides the rest)
])
def test_what_counts_as_a_placeholder(command: str, dropped: bool) -> None:
    plan = _plan(_task(acceptance=[{"label": "A1", "description": "x", "check": {"command": command}}]))
    repaired, notes = drop_unusable_checks(plan, SandboxPolicy(shell_commands=[command]))
    assert (repaired.tasks[0].acceptance[0].check is None) is dropped


def test_a_completed_tasks_checks_are_not_touched() -> None:
    plan = _plan(_task(status="completed", acceptance=[{"label": "A1", "description": "x",
                                                        "check": {"command": PLACEHOLDER}}]))
    assert drop_unusable_checks(plan, SandboxPolicy()) == (plan, [])


# --- a plan that writes only tests the task did not ask to change (issue 25) ------------------------

FILES = {"wordcount/__init__.py", "wordcount/core.py", "wordcount/cli.py", "tests/test_core.py", "README.md"}
TEST_SOURCE = ("import pytest\n\nfrom wordcount.core import count_words, top_words\n\n\n"
               "def test_contractions_are_one_word():\n    assert count_words(\"don't stop\") == {\"don't\": 1, "
               "\"stop\": 1}\n")


@pytest.mark.parametrize(("source", "files"), [
    ("from wordcount.core import count_words\n", ["wordcount/core.py"]),
    ("from wordcount import core\n", ["wordcount/core.py"]),
    ("import wordcount.cli\nimport os, sys\n", ["wordcount/cli.py"]),
    ("from wordcount import VERSION\n", ["wordcount/__init__.py"]),
    ("import pytest\nfrom .helpers import x\n", []),
    ("from wordcount.core import (\n    count_words,\n    top_words,\n)\nfrom wordcount.cli import main\n",
     ["wordcount/core.py", "wordcount/cli.py"]),
])
def test_the_workspace_files_a_test_imports(source: str, files: list[str]) -> None:
    assert imported_files(source, FILES) == files


def test_a_tests_only_plan_is_made_to_change_the_one_module_the_test_imports() -> None:
    plan = msgspec.convert(TESTS_ONLY, TaskPlan)
    assert written_tests(plan) == ["tests/test_core.py"]
    done = retarget(plan, CONTRACTIONS, {"tests/test_core.py": TEST_SOURCE}, FILES)
    assert done is not None
    repaired, note = done
    [task] = repaired.tasks
    assert repaired.goal == CONTRACTIONS  # the task's words, not "Fix the test"
    assert (task.resources.write, task.resources.read) == (["wordcount/core.py"],
                                                          ["wordcount/core.py", "tests/test_core.py"])
    command = "python -m pytest -q tests/test_core.py::test_contractions_are_one_word"
    [criterion] = task.acceptance
    assert criterion.check is not None and criterion.check.command == command
    [step] = task.steps
    assert step.action == "modify_file" and step.description.startswith("Change wordcount/core.py so that")
    assert "do not change them" in step.description
    assert note == ("acode made task T1 change wordcount/core.py instead of tests/test_core.py (the task does not ask "
                    f"to change tests: they are the check, {command!r})")
    assert written_tests(repaired) == [] and _messages(repaired) == []


def test_two_imported_modules_or_a_plan_that_also_writes_code_are_not_repaired() -> None:
    plan = msgspec.convert(TESTS_ONLY, TaskPlan)
    two = TEST_SOURCE + "from wordcount.cli import main\n"
    assert retarget(plan, CONTRACTIONS, {"tests/test_core.py": two}, FILES) is None
    assert retarget(plan, CONTRACTIONS, {}, FILES) is None  # the test file could not be read
    both = json.loads(json.dumps(TESTS_ONLY))
    both["tasks"][0]["resources"]["write"].append("wordcount/core.py")
    assert written_tests(msgspec.convert(both, TaskPlan)) == []


@pytest.mark.parametrize(("request_text", "description", "command", "expected"), [
    ("`prog done 5` crashes. Make it print an error and exit 1 instead.", "prints an error and exits 1",
     "prog done 5", 1),
    ("prog --bad must exit with code 2", "exits with status 2", "prog  --bad", 2),  # spaces aside
    ("prog --bad must exit with code 2", "the tests pass", "prog --bad", 0),  # the criterion does not say it
    ("prog --bad must exit 2", "exits 2", "python -m pytest -q", 0),  # a command the request does not name
    ("prog x exits 1 on error and 0 on success", "exits 1 on error, 0 on success", "prog x", 1),  # 0 aside
    ("prog x exits 1 on a bad number, exit code 3 on no file", "exits 1, or exits 3", "prog x", 0),  # which?
    ("prog x should exit 0", "exits 0", "prog x", 0),
])
def test_an_exit_code_the_request_and_the_criterion_agree_on_is_expected(
        request_text: str, description: str, command: str, expected: int) -> None:
    plan = _plan(_task(acceptance=[{"label": "A1", "description": description, "check": {"command": command}}]))
    repaired, notes = exit_codes_said(plan, request_text)
    check = repaired.tasks[0].acceptance[0].check
    assert check is not None and check.expect_exit == expected
    assert bool(notes) is (expected != 0)
    done = _plan(_task(status="completed",
                       acceptance=[{"label": "A1", "description": description, "check": {"command": command}}]))
    assert exit_codes_said(done, request_text) == (done, []), "a completed task is left as it is"


@pytest.mark.parametrize(("request_text", "goal", "added"), [
    ("a.py crashes on empty input; fix it and add a test to tests/test_a.py", "fix a.py", True),
    ("Add a test of f in a.py to tests/test_a.py", "test a.py", False),  # a.py is to test, not to change
    ("a.py crashes on empty input; fix it and add a test to tests/test_a.py", "add a test", False),  # plan: no a.py
    ("a.py and b.py crash; fix them and add a test to tests/test_a.py", "fix a.py and b.py", False),  # which one?
])
def test_a_plan_writing_only_tests_gets_the_code_step_the_request_asks_for(
        request_text: str, goal: str, added: bool) -> None:
    plan = msgspec.structs.replace(_plan(_task(resources={"write": ["tests/test_a.py"]},
                                               steps=[{"label": "S1", "title": "t", "action": "modify_file",
                                                       "depends_on": []},
                                                      {"label": "S2", "title": "u", "action": "run_command",
                                                       "depends_on": ["S1"]}])), goal=goal)
    done = code_step(plan, request_text, {"a.py", "b.py", "tests/test_a.py"})
    assert (done is not None) is added
    if done is not None:
        steps = done[0].tasks[0].steps
        assert [(s.label, s.depends_on) for s in steps] == [("S1", []), ("S2", []), ("S3", ["S2"])]
        assert done[0].tasks[0].resources.write == ["a.py", "tests/test_a.py"]
