"""A plan derived from the task without asking the model, when the task says everything.

A small task that names its file and its check needs no planning: asking a small local
model for a plan costs a request of a thousand prompt tokens or more and tens of seconds
before any code is touched, and the plan it writes can mislead the executor (a goal that
sends it to edit the tests, a directory the task never named). :func:`derive` recognises
two forms by simple rules and gives a one-task, one-step plan made only of what the task
states; anything else (a re-plan, answers, two sentences, another file named, a test file
as the target, a file that is not where the task says) is the model's to plan:

- ``<verb> <what> in <file> so that <test file> passes`` (verb: implement, complete,
  finish, fix, write), ``<file>`` and ``<test file>`` existing in the workspace's listing,
  ``<test file>`` named like a test (``test_*.py``, ``*_test.py``) and ``<file>`` not: one
  ``modify_file`` step on ``<file>``; criterion A1 is ``python -m pytest -q <test file>``.
  The step says the test file is the check, not the change.
- ``<create|write> <file> that prints <word or quoted text>``, ``<file>`` a ``.py`` file
  that does not exist yet: one ``write_file`` step; criterion A1 runs ``python <file>`` and
  expects that text in its output.

The plan's goal is the task itself; the stage's summary and the ``plan_derived`` log line
say the plan was derived. The planner still checks the plan like a model's
(:func:`actors.stages.plancheck.plan_problems`) and asks the model when it has a problem.
"""

from __future__ import annotations

import re

from protocol.plan import Check, Criterion, PlanStep, PlanTask, Resources, TaskPlan

__all__ = ["derive", "is_test_file"]

_PATH = r"(?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z][A-Za-z0-9]{0,9}"
_QUOTE = "`'\""
_NAMED = rf"[{_QUOTE}]?(?P<NAME>{_PATH})[{_QUOTE}]?"
_IMPLEMENT = re.compile(
    r"(?P<verb>implement|complete|finish|fix|write)\s+(?P<what>[^\n]{1,120}?)\s+in\s+"
    + _NAMED.replace("NAME", "target")
    + r",?\s+so\s+that\s+(?:the\s+tests?\s+in\s+)?" + _NAMED.replace("NAME", "test") + r"\s+pass(?:es)?", re.IGNORECASE)
_PRINTS = re.compile(
    r"(?P<verb>create|write)\s+(?:a\s+(?:new\s+)?(?:file|script)\s+(?:named\s+|called\s+)?)?"
    + _NAMED.replace("NAME", "target")
    + r"\s+(?:that|which)\s+prints\s+(?:`(?P<q1>[^`\n]{1,80})`|'(?P<q2>[^'\n]{1,80})'|\"(?P<q3>[^\"\n]{1,80})\""
    r"|(?P<word>[\w!,.-]{1,40}))", re.IGNORECASE)
_TEST_NAME = re.compile(r"(?:^|/)(?:test_[\w-]*|[\w-]*_test)\.py$")
_PATHS = re.compile(rf"(?<![\w./-]){_PATH}(?![\w/])")


def is_test_file(path: str) -> bool:
    """Whether ``path`` is named like a Python test file (``test_x.py``, ``x_test.py``, under ``tests/``)."""
    return bool(_TEST_NAME.search(path)) or path.startswith("tests/") or "/tests/" in path


def _one_sentence(task: str) -> str | None:
    """The task as one line without its final stop, or None when it is more than one sentence."""
    text = " ".join(task.split()).rstrip(".!")
    if len(text) > 300 or "\n" in task.strip() or re.search(r"[.;:!?]\s", text):
        return None
    return text


def _plan(task: str, target: str, action: str, criterion: Criterion, read: list[str], note: str) -> TaskPlan:
    check = criterion.check
    steps = [PlanStep(label="S1", title=task, description=note, action=action,  # type: ignore[arg-type]
                      expected_output=f"{target} as the task asks")]
    resources = Resources(read=read, write=[target], commands=[check.command] if check else [])
    return TaskPlan(goal=task, tasks=[PlanTask(label="T1", title=task, complexity=1, resources=resources,
                                               acceptance=[criterion], steps=steps)])


def derive(task: str, files: set[str]) -> TaskPlan | None:
    """A one-task, one-step plan for ``task`` made of what it states, or None (the model
    plans). ``files``: the workspace's files, relative to its root."""
    text = _one_sentence(task)
    if text is None:
        return None
    named = {m.group().strip(_QUOTE) for m in _PATHS.finditer(text)}
    if (match := _IMPLEMENT.fullmatch(text)) is not None:
        target, test = match["target"], match["test"]
        if (named != {target, test} or target not in files or test not in files or is_test_file(target)
                or not is_test_file(test) or not test.endswith(".py")):
            return None
        command = f"python -m pytest -q {test}"
        criterion = Criterion(label="A1", description=f"{test} passes", check=Check(command=command))
        note = (f"Change {target} as the task says. {test} is the check: run it, do not change it.")
        return _plan(text, target, "modify_file", criterion, [target, test], note)
    if (match := _PRINTS.fullmatch(text)) is not None:
        target = match["target"]
        printed = match["q1"] or match["q2"] or match["q3"] or match["word"]
        if named != {target} or not target.endswith(".py") or target in files or is_test_file(target):
            return None
        check = Check(command=f"python {target}", expect_output=printed)
        criterion = Criterion(label="A1", description=f"running {target} prints {printed}", check=check)
        return _plan(text, target, "write_file", criterion, [], f"Write {target} at exactly that path.")
    return None
