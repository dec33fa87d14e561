"""Plans derived from the task without a model call (actors/stages/derive.py): only when simple rules
leave no doubt, and made only of what the task states."""

from __future__ import annotations

import msgspec
import pytest

from actors.stages.derive import derive
from actors.stages.terms import created_paths

FILES = {"solution.py", "test_solution.py", "README.md", "src/app.py", "tests/test_app.py"}


def test_implement_in_a_file_so_that_a_test_file_passes_is_one_step_on_that_file_checked_by_pytest() -> None:
    task = "Implement `has_close_elements` in solution.py so that test_solution.py passes."
    plan = derive(task, FILES)
    assert plan is not None
    assert plan.goal == task.rstrip(".")
    [only] = plan.tasks
    assert (only.resources.read, only.resources.write) == (["solution.py", "test_solution.py"], ["solution.py"])
    [step] = only.steps
    assert step.action == "modify_file"
    assert step.description == "Change solution.py as the task says. test_solution.py is the check: run it, do not " \
                               "change it."
    [criterion] = only.acceptance
    assert criterion.check is not None and criterion.check.command == "python -m pytest -q test_solution.py"


def test_create_a_python_file_that_prints_a_word_is_checked_by_running_it() -> None:
    plan = derive("Create hello.py that prints hello", FILES)
    assert plan is not None
    [criterion] = plan.criteria()
    assert criterion.check is not None
    assert (criterion.check.command, criterion.check.expect_output) == ("python hello.py", "hello")
    assert plan.tasks[0].resources.write == ["hello.py"] and plan.tasks[0].steps[0].action == "write_file"
    assert "src" not in msgspec.json.encode(plan).decode()


@pytest.mark.parametrize("task", [
    "Implement f in solution.py so that test_missing.py passes",  # the test file does not exist
    "Implement f in missing.py so that test_solution.py passes",  # neither does the target
    "Implement f in test_solution.py so that solution.py passes",  # the target is a test
    "Implement f in solution.py so that README.md passes",  # the check is not a test file
    "Implement f in solution.py so that test_solution.py passes. Also update README.md",  # two sentences
    "Implement f in solution.py and src/app.py so that test_solution.py passes",  # another file
    "Create solution.py that prints hello",  # exists already: replacing it is not what "create" says
    "Create hello.py that prints hello world",  # the output is more than a word and not quoted
    "Create notes.md that prints hello",  # not something to run
    "Create tests/test_hello.py that prints hello",  # a test file
    "Add farewell(name) to src/app.py",  # another form: the model plans
    "Create hello.py that prints hello\nand a test for it",
])
def test_anything_less_certain_is_left_to_the_model(task: str) -> None:
    assert derive(task, FILES) is None


@pytest.mark.parametrize(("task", "paths"), [
    ("Create hello.py that prints hello", ["hello.py"]),
    ("write a.txt", ["a.txt"]),
    ("Write a.txt and b.txt and run slow.py once", ["a.txt", "b.txt"]),
    ("Write `notes.md`, a.txt, and b.py.", ["notes.md", "a.txt", "b.py"]),
    ("create a new file named src/x.py", ["src/x.py"]),
    ("Create hello.py in src", []),  # the words after it place it
    ("Add a.txt to .gitignore", []),  # not created
    ("Delete old.py and create new.py", []),  # a task that deletes: nothing is certain
    ("Rename a.py to b.py", []),
    ("Do not create hello.py", []),
    ("make greet.txt say hello", []),
    ("implement f in solution.py so that test_solution.py passes", []),
])
def test_the_files_a_task_says_to_create_by_name(task: str, paths: list[str]) -> None:
    assert created_paths(task) == paths
