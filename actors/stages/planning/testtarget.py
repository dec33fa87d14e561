"""Tests the task names are checks: a plan that would change only tests when the task did not ask for it.

Issue 25: for "The test test_contractions_are_one_word in tests/test_core.py fails. Fix the
code so that it passes." a small model planned "Fix the test ... so that it passes", with
``tests/test_core.py`` as its only write resource, and the executor edited the test. A
plan whose every write resource is a test file (:func:`~actors.stages.planning.derive.is_test_file`),
for a task that does not ask to change or add tests
(:func:`~actors.stages.planning.derive.asks_for_tests`: "add a test", "write tests",
"update tests/test_x.py", "... and a test for it"; when in doubt it counts as asked, and
the model's plan stands), is handled by :func:`retarget`:

- when the plan has one task, every test file it writes exists and the test files import
  exactly one workspace module that is not a test (``from wordcount.core import count`` is
  ``wordcount/core.py``; :func:`imported_files`), the plan is repaired without asking: that
  module is the write resource, the test files are read resources, each file-changing step
  says to change the module and not the test, the one criterion's check runs the test
  (``python -m pytest -q tests/test_core.py::test_x`` when the task names a test function
  the file defines) and the goal is the task's own text;
- otherwise the planner sends the model one correction naming the code files the tests
  import (:func:`correction`); a plan that still writes only tests after it is used.
"""

from __future__ import annotations

import re

import msgspec

from actors.stages.planning.derive import is_test_file
from protocol.plans.plan import Check, Criterion, PlanStep, PlanTask, TaskPlan

__all__ = ["code_step", "correction", "imported_files", "retarget", "writes_named", "written_tests"]

_IMPORT = re.compile(r"^\s*(?:from\s+(?P<base>[A-Za-z_][\w.]*)\s+import\s+"
                     r"(?:\((?P<grouped>[\w\s,]+)\)|(?P<names>[\w \t,]+))"
                     r"|import\s+(?P<modules>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*))", re.MULTILINE)
_FILE_STEPS = ("modify_file", "write_file", "generate_code")


def written_tests(plan: TaskPlan) -> list[str]:
    """The test files ``plan`` writes when every file it writes (in tasks not completed) is a
    test file; else empty."""
    written = [path for task in plan.tasks if task.status != "completed" for path in task.resources.write]
    if not written or not all(is_test_file(path) for path in written):
        return []
    return list(dict.fromkeys(written))


def _module_files(module: str, files: set[str]) -> list[str]:
    base = module.replace(".", "/")
    for root in ("", "src/"):
        for candidate in (f"{root}{base}.py", f"{root}{base}/__init__.py"):
            if candidate in files:
                return [candidate]
    return []


def imported_files(source: str, files: set[str]) -> list[str]:
    """The workspace files (of ``files``) that are not tests and that ``source``'s absolute
    imports name, in order of first import; a package's ``__init__.py`` only when nothing
    more precise is found for that import."""
    found: list[str] = []
    for match in _IMPORT.finditer(source):
        if match["base"]:
            names = [n for n in re.split(r"[\s,]+", match["grouped"] or match["names"]) if n and n != "as"]
            precise = [f for name in names for f in _module_files(f"{match['base']}.{name}", files)]
            found += precise or _module_files(match["base"], files)
        else:
            for module in re.split(r"\s*,\s*", match["modules"]):
                found += _module_files(module, files)
    return [path for path in dict.fromkeys(found) if not is_test_file(path)]


def _test_ref(task: str, test: str, source: str) -> str:
    """``test`` or ``test::name`` when the task names one test function ``source`` defines."""
    named = [n for n in dict.fromkeys(re.findall(r"\b(test_\w+)\b", task))
             if re.search(rf"^\s*(?:async\s+)?def\s+{n}\s*\(", source, re.MULTILINE)]
    return f"{test}::{named[0]}" if len(named) == 1 else test


def retarget(plan: TaskPlan, task: str, sources: dict[str, str], files: set[str]) -> tuple[TaskPlan, str] | None:
    """``plan`` (which writes only the test files in ``sources``, path to text) made to
    change the one workspace module those tests import, and a note; None when that is not
    certain (more than one task to change, a test file missing, no module or several)."""
    tests = written_tests(plan)
    pending = [t for t in plan.tasks if t.status != "completed"]
    if len(pending) != 1 or not tests or any(path not in sources for path in tests):
        return None
    modules = list(dict.fromkeys(f for path in tests for f in imported_files(sources[path], files)))
    if len(modules) != 1:
        return None
    [module] = modules
    [old] = pending
    replace = msgspec.structs.replace
    test = tests[0]
    ref = _test_ref(task, test, sources[test]) if len(tests) == 1 else " ".join(tests)
    command = f"python -m pytest -q {ref}"
    note = f"Change {module} so that {ref} passes. The tests are the check: run them, do not change them."
    if not any(s.action in _FILE_STEPS for s in old.steps):
        return None
    steps = [replace(s, title=f"change {module}", description=note, action="modify_file")
             if s.action in _FILE_STEPS else s for s in old.steps]
    label = old.acceptance[0].label if old.acceptance else "A1"
    criterion = Criterion(label=label, description=f"{ref} passes", check=Check(command=command))
    read = list(dict.fromkeys([module, *tests, *(p for p in old.resources.read if p not in tests)]))
    resources = replace(old.resources, read=read, write=[module], commands=[command])
    goal = " ".join(task.split())[:2_000]
    new = replace(old, title=goal[:200], description=note, resources=resources, acceptance=[criterion], steps=steps)
    done = replace(plan, goal=goal, tasks=[new if t is old else t for t in plan.tasks])
    return done, (f"acode made task {old.label} change {module} instead of {', '.join(tests)} (the task does not ask "
                  f"to change tests: they are the check, {command!r})")


# what a request that asks for a change to code says (besides the test it asks for)
_CHANGE_WORDS = re.compile(r"\b(?:fix(?:es|ed)?|crash(?:es|ed)?|bugs?|errors?|exceptions?|raises|traceback|fails|"
                           r"treat|handle|instead|should|must)\b", re.IGNORECASE)


def _names(text: str, path: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])", text) is not None


def code_step(plan: TaskPlan, task: str, files: set[str]) -> tuple[TaskPlan, str] | None:
    """``plan`` (one task, writing only test files) with a first step changing the one
    workspace source file the ``task`` names, for a task that asks for tests and for that
    change, and a note; None otherwise: several tasks, no such file or several, a task
    without words of a change to make (:data:`_CHANGE_WORDS`: "add a test of f in a.py" names
    a.py to test, not to change), or a plan whose own words never name the file. A hand
    run on the real 1.5B model: "Store.load in todo/store.py crashes ... Treat an empty file
    as an empty list, and add a test for that to tests/test_store.py" got one step, on the
    test file alone (its goal: "Fix the Store.load method in todo/store.py"); the test
    could only pass as the file was, and the session paused."""
    tests = written_tests(plan)
    if len(plan.tasks) != 1 or plan.tasks[0].status == "completed" or not tests:
        return None
    flat = " ".join(task.split())
    if not _CHANGE_WORDS.search(flat):
        return None
    named = [path for path in sorted(files) if path.endswith(".py") and not is_test_file(path) and _names(flat, path)]
    if len(named) != 1:
        return None
    [code] = named
    [old] = plan.tasks
    said = " ".join([plan.goal, old.title, old.description, *(f"{s.title} {s.description}" for s in old.steps)])
    if not _names(said, code):
        return None
    replace = msgspec.structs.replace
    labels = {s.label: f"S{n}" for n, s in enumerate(old.steps, start=2)}
    # its words name no other file: a step naming two of its task's files is no one-file step
    # (actors.stages.execution.fileanswer.target), and the tool loop wrote store.py broken
    steps = [PlanStep(label="S1", title=f"change {code} as the request says", action="modify_file"),
             *(replace(s, label=labels[s.label], depends_on=[labels.get(d, d) for d in s.depends_on])
               for s in old.steps)]
    read = list(dict.fromkeys([code, *old.resources.read]))
    resources = replace(old.resources, read=read, write=[code, *old.resources.write])
    done = replace(plan, tasks=[replace(old, resources=resources, steps=steps)])
    return done, (f"acode gave task {old.label} a first step changing {code}, which the task names and the plan "
                  f"did not change (it wrote only {', '.join(tests)})")


def correction(tests: list[str], sources: dict[str, str], files: set[str]) -> str:
    """What the model is told once about a plan that writes only ``tests``."""
    code = list(dict.fromkeys(f for path in tests if path in sources for f in imported_files(sources[path], files)))
    where = (f"the code they test is in {', '.join(code)}: plan to change that" if code else
             "plan to change the code the tests exercise")
    return (f"the plan writes only test files ({', '.join(tests)}), but the task does not ask to change tests: they "
            f"are the check; {where}, with the tests as read resources and a criterion whose check runs them")



def writes_named(plan: TaskPlan, task: str, files: set[str]) -> tuple[TaskPlan, list[str]]:
    """``plan`` with a write resource for each task that changes files but names none to
    write: the workspace files its own words name, else, for the one such task left, the
    one source file the user's ``task`` names that no task writes; a note for each. A hand
    run on the real 1.5B model planned "Modify `Store.load` to handle empty files" and "Add a
    test ... in `tests/test_store.py`", both ``modify_file`` with no write resource: neither
    step could be answered as its file, and the tool loop wrote a 135-byte todo/store.py."""
    replace = msgspec.structs.replace
    notes: list[str] = []
    tasks = list(plan.tasks)

    def bare(t: PlanTask) -> bool:
        return t.status != "completed" and not t.resources.write and any(
            s.action in _FILE_STEPS for s in t.steps)

    for n, t in enumerate(tasks):
        if bare(t):
            said = " ".join([t.title, t.description, *(f"{s.title} {s.description}" for s in t.steps)])
            named = [path for path in sorted(files) if _names(said, path)]
            if named:
                tasks[n] = replace(t, resources=replace(t.resources, write=named))
                notes.append(f"acode gave task {t.label} the write resource(s) {', '.join(named)}, which it names "
                             "(it had none)")
    left = [n for n, t in enumerate(tasks) if bare(t)]
    written = {path for t in tasks for path in t.resources.write}
    flat = " ".join(task.split())
    named = [path for path in sorted(files) if path.endswith(".py") and not is_test_file(path)
             and path not in written and _names(flat, path)]
    if len(left) == 1 and len(named) == 1:
        t = tasks[left[0]]
        tasks[left[0]] = replace(t, resources=replace(t.resources, write=named))
        notes.append(f"acode gave task {t.label} the write resource {named[0]}, which the task names and no other "
                     "plan task writes (it had none)")
    return (replace(plan, tasks=tasks), notes) if notes else (plan, [])
