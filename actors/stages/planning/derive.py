"""A plan derived from the task without asking the model, when the task says everything.

A small task that names its file and its check needs no planning: asking a small local
model for a plan costs a request of a thousand prompt tokens or more and tens of seconds
before any code is touched, and the plan it writes can mislead the executor (a goal that
sends it to edit the tests, a directory the task never named). :func:`derive` recognises
a few forms by simple rules and gives a one-task, one-step plan made only of what the task
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

- a task whose first sentence asks for a change (add, change, make, update, modify, extend,
  implement, fix, improve, support, handle, allow) to one existing ``.py`` file that is not a
  test, where that file is the only path the whole task names, in a workspace with Python
  tests (``tests/`` or ``test_*.py``): one ``modify_file`` step on that file whose description
  is the task; criterion A1 is ``python -m pytest -q`` (the workspace's tests still pass),
  A2 is the task's statement without a check (the verifier's model judges it). Not when
  the task asks for tests too (:func:`asks_for_tests`: the tests are another file), nor for
  words that reach past one file: rename, refactor, everywhere, across, all/every
  file/module/place/occurrence/call/use (``prints every word`` is fine), a new file or
  module, create, move, delete, remove.

- ``add a test of <what> to <test file>`` (one sentence, the test file existing and the only
  path named): one ``modify_file`` step on the test file; A1 runs it (``python -m pytest -q
  <test file>``), A2 says it has a new test of ``<what>`` (the verifier's model judges it).
- a task holding a Python traceback (``Traceback (most recent call last):``) and a word asking
  for a fix (fix, crash, repair, solve): one ``modify_file`` step on the last frame's file that
  is a workspace source file (a frame's absolute path counts when it ends in a workspace
  file; the standard library's never does), the other frames' workspace files read; A1 is
  ``python -m pytest -q`` when the workspace has Python tests, and the last criterion says the
  change fixes the error (the verifier's model judges it). The goal is the whole task, the
  traceback with it.

- ``rename <old> to <new>`` (a function, class, method, variable or name; identifiers)
  followed by the files to do it in, each an existing ``.py`` file: one task with one
  ``modify_file`` step per file, in the order named; A1 is ``python -m pytest -q`` when the
  workspace has Python tests, and the last criterion says the name is changed in those
  files. A rename that names no file is the model's to plan.

- "the test <name> in <test file> fails; fix the code" (:func:`failing_test`): the planner
  reads the test file and :func:`actors.stages.planning.testtarget.retarget` makes the one step
  change the one workspace module it imports, checked by running that test.

The plan's goal is the task itself; the stage's summary and the ``plan_derived`` log line
say the plan was derived. The planner still checks the plan like a model's
(:func:`actors.stages.planning.plancheck.plan_problems`) and asks the model when it has a problem.
"""

from __future__ import annotations

import re
import shlex

import msgspec

from protocol.plans.plan import Check, Criterion, PlanStep, PlanTask, Resources, TaskPlan

__all__ = ["asks_for_tests", "derive", "failing_test", "is_test_file"]

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
_CHANGE = re.compile(r"(?:please\s+)?(?:add|change|make|update|modify|extend|implement|fix|improve|support|handle"
                     r"|allow)\b", re.IGNORECASE)
_WIDE = re.compile(r"\b(?:renam\w*|refactor\w*|everywhere|across|creat\w*|move|moving|delete|remove|"
                   r"(?:all|every|each)\s+(?:the\s+)?(?:files?|modules?|places?|occurrences?|calls?|uses?|callers?)|"
                   r"new\s+(?:files?|modules?|packages?))\b", re.IGNORECASE)
_VERBS = r"add|write|create|change|update|modify|edit|fix|extend|rewrite|adjust|correct|remove|delete|rename|refactor"
_BETWEEN = r"(?:(?:a|an|the|new|this|that|these|those|failing|broken|existing|unit|more|some|another|its|one|two)\s+)"
_ASKS_TESTS = re.compile(rf"\b(?:{_VERBS})\s+{_BETWEEN}{{0,3}}[\w./-]*test"
                         r"|\b(?:and|with|plus|also)\s+(?:a\s+|an\s+|new\s+|some\s+)?(?:unit\s+)?tests?\b"
                         r"|\btests?\s+(?:for|of|that\s+checks?|covering)\b", re.IGNORECASE)
_TEST_NAME = re.compile(r"(?:^|/)(?:test_[\w-]*|[\w-]*_test)\.py$")
_PATHS = re.compile(rf"(?<![\w./-]){_PATH}(?![\w/])")


def is_test_file(path: str) -> bool:
    """Whether ``path`` is named like a Python test file (``test_x.py``, ``x_test.py``, under ``tests/``)."""
    return bool(_TEST_NAME.search(path)) or path.startswith("tests/") or "/tests/" in path


def asks_for_tests(task: str) -> bool:
    """Whether ``task`` asks to change or add tests ("add a test of X", "write tests", "update
    tests/test_x.py", "... and a test for it"); when in doubt it counts as asked."""
    return bool(_ASKS_TESTS.search(" ".join(task.split())))


def _one_file_change(task: str, files: set[str]) -> TaskPlan | None:
    """The one-step plan for a task asking to change one existing non-test ``.py`` file (see
    the module's docstring), or None."""
    text = " ".join(task.split())
    if len(text) > 1_000 or "```" in task or not any(is_test_file(f) and f.endswith(".py") for f in files):
        return None
    sentences = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)
    first = sentences[0].rstrip(".!")
    named = {m.group().strip(_QUOTE) for m in _PATHS.finditer(text)}
    if len(named) != 1 or not _CHANGE.match(first) or _WIDE.search(text) or asks_for_tests(text):
        return None
    [target] = named
    if target not in files or not target.endswith(".py") or is_test_file(target) or target not in first:
        return None
    goal = first if len(sentences) == 1 else text
    command = "python -m pytest -q"
    criteria = [Criterion(label="A1", description="the workspace's tests pass", check=Check(command=command)),
                Criterion(label="A2", description=goal)]
    # no expected_output: the model wrote "wordcount/cli.py as the task asks" as the file's content
    step = PlanStep(label="S1", title=first[:200], description=goal, action="modify_file")
    resources = Resources(read=[target], write=[target], commands=[command])
    return TaskPlan(goal=goal, tasks=[PlanTask(label="T1", title=first[:200], complexity=1, resources=resources,
                                               acceptance=criteria, steps=[step])])


_ADD_TEST = re.compile(r"(?:please\s+)?(?:add|write)\s+(?:a|an|one|another|a\s+new)?\s*(?:unit\s+)?test\s+"
                       r"(?:of|for)\s+(?P<what>[^\n]{1,80}?)\s+(?:to|in)\s+" + _NAMED.replace("NAME", "test"),
                       re.IGNORECASE)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"\n]{1,300})", line \d+', re.MULTILINE)
_FIX = re.compile(r"\b(?:fix|crash\w*|repair|solve)\b", re.IGNORECASE)


def _add_test(text: str, files: set[str]) -> TaskPlan | None:
    """``add a test of <what> to <test file>``: one step on that existing test file, checked by
    running it (see the module's docstring)."""
    match = _ADD_TEST.fullmatch(text)
    if match is None:
        return None
    test = match["test"]
    named = {m.group().strip(_QUOTE) for m in _PATHS.finditer(text)}
    if named != {test} or test not in files or not is_test_file(test) or not test.endswith(".py"):
        return None
    command = f"python -m pytest -q {test}"
    criteria = [Criterion(label="A1", description=f"{test} passes", check=Check(command=command)),
                Criterion(label="A2", description=f"{test} has a new test of {match['what']}")]
    step = PlanStep(label="S1", title=text, action="modify_file",
                    description=f"Add the new test to {test} and keep every test it has. Do not change the code "
                                "under test.")
    resources = Resources(read=[test], write=[test], commands=[command])
    return TaskPlan(goal=text, tasks=[PlanTask(label="T1", title=text, complexity=1, resources=resources,
                                               acceptance=criteria, steps=[step])])


def _traceback_fix(task: str, files: set[str]) -> TaskPlan | None:
    """A task that shows a Python traceback and asks for a fix: one step on the last frame's
    file that is a workspace source file (not a test), the other frames' files shown; the
    workspace's tests still pass when it has any (see the module's docstring)."""
    if "Traceback (most recent call last):" not in task or not _FIX.search(task) or len(task) > 6_000:
        return None
    frames = [_workspace_path(m["file"], files) for m in _FRAME.finditer(task)]
    ours = [f for f in dict.fromkeys(frames) if f is not None and f.endswith(".py") and not is_test_file(f)]
    if not ours:
        return None
    target = next(f for f in reversed(frames) if f in ours)
    criteria = [Criterion(label="A1", description="the change fixes the error the traceback shows")]
    commands = []
    if any(is_test_file(f) and f.endswith(".py") for f in files):
        commands = ["python -m pytest -q"]
        criteria.insert(0, Criterion(label="A1", description="the workspace's tests pass",
                                     check=Check(command=commands[0])))
        criteria[1] = msgspec.structs.replace(criteria[1], label="A2")
    title = f"Fix the error the traceback shows, in {target}"
    step = PlanStep(label="S1", title=title, action="modify_file",
                    description=f"The error is raised in {target}: fix it there, as the task says.")
    resources = Resources(read=[f for f in ours if f != target] + [target], write=[target], commands=commands)
    return TaskPlan(goal=task.strip(), tasks=[PlanTask(label="T1", title=title, complexity=1, resources=resources,
                                                       acceptance=criteria, steps=[step])])


_RENAME = re.compile(r"(?:please\s+)?rename\s+(?:the\s+)?(?:function|class|method|variable|constant|name)?\s*"
                     r"`?(?P<old>[A-Za-z_]\w{0,80})`?\s+to\s+`?(?P<new>[A-Za-z_]\w{0,80})`?\b", re.IGNORECASE)


def _rename(task: str, files: set[str]) -> TaskPlan | None:
    """``rename <old> to <new>`` in the files the task names (each an existing ``.py`` file,
    in the order named): one task with a step per file; the workspace's tests are the check
    when it has any (see the module's docstring)."""
    text = " ".join(task.split())
    match = _RENAME.match(text)
    if match is None or len(text) > 600 or "```" in task or match["old"] == match["new"]:
        return None
    named = list(dict.fromkeys(m.group().strip(_QUOTE) for m in _PATHS.finditer(text)))
    if not named or any(f not in files or not f.endswith(".py") for f in named) or len(named) > 8:
        return None
    old, new = match["old"], match["new"]
    steps = [PlanStep(label=f"S{n}", title=f"Rename {old} to {new} in {path}", action="modify_file",
                      description=f"Replace every occurrence of {old} in {path} with {new}, also where it is "
                                  f"part of a longer name (test_{old} becomes test_{new}); change nothing else.")
             for n, path in enumerate(named, start=1)]
    # the old name gone is a command's to judge, not a model's: the verifier's model passed "count_words
    # is renamed" with the definition still in core.py, and the tests passed (none imports cli.py)
    gone = f"grep -n -e {old} -- {' '.join(shlex.quote(path) for path in named)}"
    criteria = [Criterion(label="A1", description=f"{old} appears nowhere in {', '.join(named)} (renamed to {new})",
                          check=Check(command=gone, expect_exit=1))]
    commands = [gone]
    if any(is_test_file(f) and f.endswith(".py") for f in files):
        commands = ["python -m pytest -q", gone]
        criteria = [Criterion(label="A1", description="the workspace's tests pass", check=Check(command=commands[0])),
                    msgspec.structs.replace(criteria[0], label="A2")]
    title = f"Rename {old} to {new}"
    resources = Resources(read=named, write=named, commands=commands)
    return TaskPlan(goal=text, tasks=[PlanTask(label="T1", title=title, complexity=1 if len(named) == 1 else 2,
                                               resources=resources, acceptance=criteria, steps=steps)])


_FAILING = re.compile(r"(?:the\s+)?tests?\s+(?:`?(?P<name>test_\w{1,100})`?\s+)?in\s+" + _NAMED.replace("NAME", "test")
                      + r"\s+(?:fails|is\s+failing|keeps\s+failing|breaks|does\s+not\s+pass)\b", re.IGNORECASE)


def failing_test(task: str, files: set[str]) -> tuple[str, TaskPlan] | None:
    """For "the test <name> in <test file> fails. Fix the code so that it passes.": the test
    file and a one-step plan that writes it, for :func:`actors.stages.planning.testtarget.retarget`
    to point at the module the test imports (this module reads no file). None: not this
    form (another file named, no word asking for a fix, a task longer than two sentences)."""
    text = " ".join(task.split())
    match = _FAILING.search(text)
    if match is None or len(text) > 400 or not _FIX.search(text) or len(re.findall(r"[.!?](?:\s|$)", text)) > 2:
        return None
    test = match["test"]
    named = {m.group().strip(_QUOTE) for m in _PATHS.finditer(text)}
    if named != {test} or test not in files or not is_test_file(test) or not test.endswith(".py"):
        return None
    step = PlanStep(label="S1", title=f"fix the code {test} tests", action="modify_file")
    draft = TaskPlan(goal=text, tasks=[PlanTask(label="T1", title=text[:200], complexity=1, steps=[step],
                                                resources=Resources(read=[test], write=[test]))])
    return test, draft


def _workspace_path(shown: str, files: set[str]) -> str | None:
    """The workspace file a traceback's frame names (relative, or absolute ending in one), or None."""
    path = shown.replace("\\", "/")
    if path in files:
        return path
    found = [f for f in files if path.endswith("/" + f)]
    return max(found, key=len) if found else None


def _one_sentence(task: str) -> str | None:
    """The task as one line without its final stop, or None when it is more than one sentence."""
    text = " ".join(task.split()).rstrip(".!")
    if len(text) > 300 or "\n" in task.strip() or re.search(r"[.;:!?]\s", text):
        return None
    return text


def _plan(task: str, target: str, action: str, criterion: Criterion, read: list[str], note: str) -> TaskPlan:
    check = criterion.check
    steps = [PlanStep(label="S1", title=task, description=note, action=action)]  # type: ignore[arg-type]
    resources = Resources(read=read, write=[target], commands=[check.command] if check else [])
    return TaskPlan(goal=task, tasks=[PlanTask(label="T1", title=task, complexity=1, resources=resources,
                                               acceptance=[criterion], steps=steps)])


def derive(task: str, files: set[str]) -> TaskPlan | None:
    """A one-task, one-step plan for ``task`` made of what it states, or None (the model
    plans). ``files``: the workspace's files, relative to its root."""
    text = _one_sentence(task)
    if text is not None and (added := _add_test(text, files)) is not None:
        return added
    if text is None or not (_IMPLEMENT.fullmatch(text) or _PRINTS.fullmatch(text)):
        return _traceback_fix(task, files) or _rename(task, files) or _one_file_change(task, files)
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
