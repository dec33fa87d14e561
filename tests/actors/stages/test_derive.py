"""Plans derived from the task without a model call (actors/stages/planning/derive.py): only when simple rules
leave no doubt, and made only of what the task states."""

from __future__ import annotations

import msgspec
import pytest

from actors.stages.planning.derive import asks_for_tests, derive, failing_test
from actors.stages.prompting.terms import created_paths

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
    "Add farewell(name) to src/app.py and solution.py",  # two files to change
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


# --- one existing source file to change, in a workspace with tests (issue 25) ---------------------

WORDCOUNT = {"wordcount/__init__.py", "wordcount/core.py", "wordcount/cli.py", "tests/test_core.py", "README.md"}
TOP = ("Add a --top N option to wordcount/cli.py that prints only the N most common words (without --top it "
       "prints every word, as now).")


def test_a_change_to_one_named_source_file_is_one_step_checked_by_the_tests_and_judged_by_the_verifier() -> None:
    plan = derive(TOP, WORDCOUNT)
    assert plan is not None
    assert plan.goal == TOP.rstrip(".")  # the task, nothing added
    [only] = plan.tasks
    assert (only.resources.read, only.resources.write, only.resources.commands) == (
        ["wordcount/cli.py"], ["wordcount/cli.py"], ["python -m pytest -q"])
    [step] = only.steps
    assert (step.action, step.description) == ("modify_file", TOP.rstrip("."))
    a1, a2 = only.acceptance
    assert a1.check is not None and (a1.label, a1.check.command) == ("A1", "python -m pytest -q")
    assert (a2.label, a2.description, a2.check) == ("A2", TOP.rstrip("."), None)


def test_a_request_followed_by_more_sentences_keeps_the_whole_task_as_its_goal() -> None:
    task = "Add a --top N option to wordcount/cli.py. Without it the output stays as it is."
    plan = derive(task, WORDCOUNT)
    assert plan is not None and plan.goal == task and plan.tasks[0].steps[0].title == task.split(".py")[0] + ".py"


@pytest.mark.parametrize("task", [
    TOP.replace("wordcount/cli.py", "wordcount/main.py"),  # no such file
    "Add a --top N option to wordcount/cli.py and wordcount/core.py",  # two files
    "Add a --top N option to wordcount/cli.py and a test for it",  # a test file too
    "Refactor wordcount/core.py",
    "Update every call of count_words in wordcount/core.py",
    "Change all files like wordcount/core.py to use pathlib",
    "Move count_words out of wordcount/core.py into a new module",
    "Add logging to wordcount/core.py everywhere",
    "Add a --top N option to README.md",  # not a source file
    "Why does wordcount/cli.py print every word?",  # not a request for a change
    "The output is wrong. Fix wordcount/cli.py.",  # the first sentence is not the request
    "Fix wordcount/cli.py:\n```\nTraceback ...\n```",
])
def test_a_one_file_change_is_derived_only_when_nothing_else_is_named_or_implied(task: str) -> None:
    assert derive(task, WORDCOUNT) is None


def test_a_one_file_change_is_not_derived_in_a_workspace_without_python_tests() -> None:
    assert derive(TOP, {"wordcount/core.py", "wordcount/cli.py", "README.md"}) is None


@pytest.mark.parametrize(("task", "asked"), [
    ("Add a test of count_words to tests/test_core.py", True),
    ("Write unit tests for wordcount/core.py", True),
    ("Update tests/test_core.py to use pytest.raises", True),
    ("Add a --top option and a test for it", True),
    ("Fix the failing test in tests/test_core.py", True),  # which one is meant is not certain: the model's plan
    ("The test test_contractions_are_one_word in tests/test_core.py fails. Fix the code so that it passes.", False),
    ("Implement f in solution.py so that test_solution.py passes", False),
    ("Add a --top N option to wordcount/cli.py", False),
])
def test_what_counts_as_asking_for_tests(task: str, asked: bool) -> None:
    assert asks_for_tests(task) is asked


def test_a_derived_step_has_no_expected_output_a_model_could_write_as_the_file() -> None:
    # Qwen2.5-Coder-1.5B wrote "wordcount/cli.py as the task asks" (the step's expected
    # output) as the whole content of wordcount/cli.py
    plans = [derive(TOP, WORDCOUNT), derive("Create hello.py that prints hello", FILES),
             derive("Implement `add` in solution.py so that test_solution.py passes.", FILES)]
    assert all(plan is not None for plan in plans)
    assert [s.expected_output for p in plans if p for t in p.tasks for s in t.steps] == ["", "", ""]


TRACEBACK = '''`python -m wordcount.cli empty.txt` on an empty file crashes:

Traceback (most recent call last):
  File "/home/me/proj/wordcount/cli.py", line 22, in <module>
    sys.exit(main())
  File "wordcount/cli.py", line 17, in main
    print(f"average length {average_length(counts):.2f}")
  File "wordcount/core.py", line 22, in average_length
    return sum(len(word) * count for word, count in counts.items()) / total
ZeroDivisionError: division by zero

Fix it: for an empty file the average length is 0 and the command exits 0.'''


def test_add_a_test_of_something_to_a_test_file_is_one_step_on_that_file_checked_by_running_it() -> None:
    # the benchmark's edit/add-test: the model planned it in 32 s and the tool loop failed it
    plan = derive("Add a test of average_length to tests/test_core.py.", WORDCOUNT)
    assert plan is not None
    [only] = plan.tasks
    assert (only.resources.write, only.steps[0].action) == (["tests/test_core.py"], "modify_file")
    a1, a2 = only.acceptance
    assert a1.check is not None and a1.check.command == "python -m pytest -q tests/test_core.py"
    assert (a2.description, a2.check) == ("tests/test_core.py has a new test of average_length", None)
    for other in ("Add a test of average_length to tests/test_cli.py.",  # no such file
                  "Add a test of average_length to wordcount/core.py.",  # not a test file
                  "Add a test of average_length to tests/test_core.py and fix wordcount/core.py."):
        assert derive(other, WORDCOUNT) is None, other


def test_a_traceback_to_fix_is_one_step_on_its_last_workspace_frame() -> None:
    plan = derive(TRACEBACK, WORDCOUNT)
    assert plan is not None
    [only] = plan.tasks
    assert only.resources.write == ["wordcount/core.py"]  # where the error is raised
    assert only.resources.read == ["wordcount/cli.py", "wordcount/core.py"]  # the absolute frame found too
    assert plan.goal == TRACEBACK.strip()  # the traceback itself is what the executor needs to see
    a1, a2 = only.acceptance
    assert a1.check is not None and a1.check.command == "python -m pytest -q" and a2.check is None
    # a frame outside the workspace (the standard library) is never the target
    outside = TRACEBACK.replace('File "wordcount/core.py"', 'File "/usr/lib/python3.11/json/decoder.py"')
    assert derive(outside, WORDCOUNT).tasks[0].resources.write == ["wordcount/cli.py"]  # type: ignore[union-attr]
    # a traceback without a request to fix it, or in no workspace file: the model plans
    assert derive(TRACEBACK.replace("Fix it", "Explain it").replace("crashes", "stops"), WORDCOUNT) is None
    assert derive(TRACEBACK, {"other.py", "tests/test_other.py"}) is None


def test_a_rename_in_named_files_is_a_step_per_file_in_the_order_named() -> None:
    task = ("Rename the function count_words to word_counts everywhere: its definition in wordcount/core.py and "
            "every use in wordcount/cli.py and tests/test_core.py.")
    plan = derive(task, WORDCOUNT)
    assert plan is not None
    [only] = plan.tasks
    assert only.resources.write == ["wordcount/core.py", "wordcount/cli.py", "tests/test_core.py"]
    assert [s.title for s in only.steps] == [f"Rename count_words to word_counts in {f}" for f in only.resources.write]
    assert only.acceptance[0].check is not None and only.acceptance[0].check.command == "python -m pytest -q"
    # the old name gone is checked by a command (a model passed it with the definition still there)
    gone = only.acceptance[1].check
    assert gone is not None and gone.expect_exit == 1
    assert gone.command == "grep -n -e count_words -- wordcount/core.py wordcount/cli.py tests/test_core.py"
    assert gone.command in only.resources.commands
    assert derive("Rename count_words to word_counts", WORDCOUNT) is None  # where: the model's to find out
    assert derive("Rename count_words to word_counts in wordcount/main.py", WORDCOUNT) is None  # no such file


def test_a_failing_test_to_fix_is_recognised_for_the_planner_to_retarget() -> None:
    task = "The test test_contractions_are_one_word in tests/test_core.py fails. Fix the code so that it passes."
    found = failing_test(task, WORDCOUNT)
    assert found is not None and found[0] == "tests/test_core.py"
    assert found[1].tasks[0].resources.write == ["tests/test_core.py"]  # testtarget.retarget points it at the code
    for other in ("The test test_x in tests/test_core.py fails.",  # no fix asked
                  "The test test_x in tests/test_other.py fails. Fix the code.",  # no such file
                  "The test test_x in tests/test_core.py fails. Fix wordcount/cli.py.",  # another file named
                  "The test test_x in tests/test_core.py fails. Fix it. Then add docs. And more."):
        assert failing_test(other, WORDCOUNT) is None, other


def test_a_rename_step_says_the_name_goes_inside_longer_names_too() -> None:
    # the benchmark's rename: the model renamed every call but left test_count_words_ignores_case
    plan = derive("Rename count_words to word_counts in wordcount/core.py and tests/test_core.py", WORDCOUNT)
    assert plan is not None
    assert "also where it is part of a longer name (test_count_words becomes test_word_counts)" in \
        plan.tasks[0].steps[1].description
