"""Checking a plan the model wrote before anything acts on it (seed 003 FR-044..051, FR-081/082).

Two halves. :func:`read_plan` turns the model's text into a :class:`~protocol.plans.plan.TaskPlan`
(JSON found in prose or a code fence, as :func:`~actors.stages.prompting.answers.parse_answer` does);
when the whole does not decode, each task and question is decoded on its own, so the
model hears about every broken one (a complexity of 4 in T1, an unknown action in T3),
not only the first. What a small model writes in another form than the schema's, with one
meaning only, is read as that before decoding (:func:`read_plan`'s ``notes`` say so): a
complexity between the allowed values is rounded up to the next (4 is 5), an action named
after the executor's tool (``run_terminal``, ``create_file``, ``edit_file``) is that action,
``"depends_on": "T1"`` is ``["T1"]``, ``"check": "pytest -q"`` is that check's command, a
missing title is the description's first line.

:func:`plan_problems` lists everything else that would make the plan fail later:
the structural rules of :func:`protocol.plans.plan.problems` (labels, dependencies, cycles
named by their members, limits, lexical paths), write targets the sandbox protects
(``.git``, ``.agent``), and every command (a task's ``resources.commands`` and each
acceptance ``check.command``) the session's sandbox policy would refuse, with the
policy's own reason. The verifier runs check commands through that same policy, so a
plan that passes here does not fail there for its commands' form.

:func:`rules_questions` picks out the questions a plan asks about acode's own plan format
(labels, dependencies, complexity: "What is the correct criterion label?"), which are not
the user's to answer; the planner tells the model :data:`RULES` instead.

:func:`drop_unusable_checks` repairs the one command problem that is mechanical: a
criterion's check that holds a ``<...>`` placeholder or that the sandbox would refuse loses
its check (the verifier's model judges the criterion), with a note, before
:func:`plan_problems` runs.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

import msgspec

from actors.sandbox.confinement import policy, protected
from actors.sandbox.confinement.policy import command_policy_of
from actors.stages.prompting.answers import parse_answer
from protocol.calls.autonomy import command_argv
from protocol.errors import ModelError, SandboxError
from protocol.plans.plan import Check, PlanProblem, PlanTask, Question, TaskPlan, path_problem, problems
from protocol.policy.sandbox import SandboxPolicy

__all__ = ["RULES", "drop_unusable_checks", "plan_problems", "read_plan", "rules_questions"]

#: acode's plan rules, told to a model that asked the user about them
RULES = ("labels: tasks T1, T2, ...; steps S1, S2, ... unique in their task; criteria A1, A2, ... unique in the "
         "whole plan; a task's depends_on names other tasks, a step's names steps of its own task")
# A question about acode's plan format rather than the task: labels, dependencies, the schema.
_RULES_QUESTION = re.compile(
    r"\b(?:criterion|criteria|step|task|question)\s+(?:labels?|ids?)\b|\blabels?\s+(?:for|of)\s+(?:the\s+)?"
    r"(?:criteri|steps?|tasks?)|\blabels?\b[^?.]{0,40}\b[ATSQ]\d+\b|\b[ATSQ]\d+\b[^?.]{0,40}\blabels?\b"
    r"|\bdepends_on\b|\bcomplexity\b|\bacceptance criteri|\b(?:plan|JSON)\s+(?:format|schema)\b"
    # how commands run (acode's rule: no shell): "How can I run this command without using a shell?"
    r"|\bwithout\s+(?:using\s+)?(?:a\s+)?shell\b|\bshell\s+syntax\b|\bsandbox\b"
    r"|\bcommand\b[^?]{0,300}(?:\||&&|;|\s[<>]\s)", re.IGNORECASE)



def _at(error: msgspec.ValidationError, prefix: str) -> str:
    """The error with its location made absolute (``$.title`` in task 2 is ``$.tasks[2].title``)."""
    text = str(error)
    return text.replace("`$", f"`{prefix}", 1) if " - at `$" in text else f"{text} - at `{prefix}`"


_COMPLEXITIES = (1, 2, 3, 5, 8, 13, 21, 34)
# what the executor's tools and common words call an action: each means one action only
_ACTIONS = {"create_file": "write_file", "edit_file": "modify_file", "update_file": "modify_file",
            "run_terminal": "run_command", "run_tests": "run_command", "list_directory": "analyze_code",
            "search_code": "analyze_code"}


def _listed(item: dict[str, Any], key: str, field: str, notes: list[str]) -> None:
    """A string where a list of strings belongs (``field``, as the note names it) is that list of one."""
    if isinstance(item.get(key), str):
        item[key] = [item[key]] if item[key].strip() else []
        notes.append(f"acode read {field} as a list")


def _titled(item: dict[str, Any], where: str, notes: list[str]) -> None:
    """A task or step without a title but with a description is titled by its description's first line."""
    if "title" not in item and isinstance(item.get("description"), str) and item["description"].strip():
        item["title"] = item["description"].strip().splitlines()[0][:200]
        notes.append(f"acode titled {where} by its description")


def _normalize(raw: dict[str, Any], notes: list[str]) -> None:
    """``raw`` (the decoded answer) with what has one meaning in another form made the
    schema's, in place, with a note for each: a complexity between the scale's values
    (:data:`_COMPLEXITIES`), an action by another name (:data:`_ACTIONS`), a string where a
    list belongs (``depends_on``, resources), a check given as its command, a title missing
    beside a description."""
    tasks = raw.get("tasks")
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        label = task.get("label", "?")
        where = f"task {label}'s"
        value = task.get("complexity")
        if type(value) is int and 1 <= value <= 34 and value not in _COMPLEXITIES:
            task["complexity"] = next(c for c in _COMPLEXITIES if c >= value)
            notes.append(f"acode read task {label}'s complexity {value} as {task['complexity']}")
        _titled(task, f"task {label}", notes)
        _listed(task, "depends_on", f"{where} depends_on", notes)
        resources = task.get("resources")
        for key in ("read", "write", "directories", "commands"):
            if isinstance(resources, dict):
                _listed(resources, key, f"{where} resources.{key}", notes)
        criteria = task.get("acceptance")
        for criterion in criteria if isinstance(criteria, list) else []:
            if isinstance(criterion, dict) and isinstance(criterion.get("check"), str) and criterion["check"].strip():
                criterion["check"] = {"command": criterion["check"]}
                notes.append(f"acode read criterion {criterion.get('label', '?')}'s check as its command")
        steps = task.get("steps")
        for step in steps if isinstance(steps, list) else []:
            if not isinstance(step, dict):
                continue
            name = f"step {label}/{step.get('label', '?')}"
            _titled(step, name, notes)
            _listed(step, "depends_on", f"{name}'s depends_on", notes)
            if isinstance(step.get("action"), str) and step["action"] in _ACTIONS:
                was = step["action"]
                step["action"] = _ACTIONS[was]
                notes.append(f"acode read {name}'s action {was!r} as {step['action']!r}")


def read_plan(text: str, notes: list[str] | None = None) -> tuple[TaskPlan | None, list[str]]:
    """The plan in ``text``, or None and every decoding problem found. What was read in
    another form than the schema's is appended to ``notes``."""
    try:
        raw: Any = parse_answer(text, dict, stage="planner")
    except ModelError as exc:
        return None, [f"the answer is not one JSON object ({exc.__cause__ or exc.message}); answer with the plan "
                      "as one JSON object and nothing else"]
    _normalize(raw, notes if notes is not None else [])
    try:
        return msgspec.convert(raw, TaskPlan), []
    except msgspec.ValidationError as error:
        whole = str(error)
    found: list[str] = []
    for key, type_ in (("tasks", PlanTask), ("questions", Question)):
        items = raw.get(key)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            try:
                msgspec.convert(item, type_)
            except msgspec.ValidationError as error:
                found.append(_at(error, f"$.{key}[{index}]"))
    return None, found or [whole]  # no task or question is wrong: the problem is at the top level


def rules_questions(plan: TaskPlan) -> tuple[TaskPlan, list[Question]]:
    """``plan`` without its questions about acode's own plan rules (labels, dependencies,
    complexity, the format), which are not the user's to answer, and those questions. A
    plan whose every question was one and that has tasks is read as ready."""
    asked = [q for q in plan.questions if _RULES_QUESTION.search(q.question)]
    if not asked:
        return plan, []
    left = [q for q in plan.questions if q not in asked]
    status = plan.status if left or not plan.tasks else "ready"
    return msgspec.structs.replace(plan, questions=left, status=status), asked


def _command_problem(command: str, rules: policy.CommandPolicy) -> str | None:
    try:
        policy.check(command, rules)
    except SandboxError as exc:
        return exc.message
    return None


# a placeholder copied from a prompt's shape: `<path to test file>`, `<check command>`
_PLACEHOLDER = re.compile(r"<[A-Za-z_][\w .,/-]{0,78}>")


# the remedy the policy names when a command would rewrite files itself (sed -i): the
# executor's file tools do that work, so such a resources command means nothing lost
_FILE_TOOLS_REMEDY = "use modify_file or write_file"


def _file_tools_do_it(command: str, rules: policy.CommandPolicy) -> bool:
    """Whether the sandbox refuses ``command`` as a file rewrite the file tools do instead."""
    why = _command_problem(command, rules)
    return why is not None and _FILE_TOOLS_REMEDY in why


_SHOWS_FILE = frozenset({"cat", "head", "tail"})


def _guessed(check: Check, task: PlanTask, request: str) -> bool:
    """Whether ``check`` prints a file its task writes and expects text the user's request
    does not contain: the planner's guess at what the executor will write. On the real 1.5B
    model, "write what the notes say into answer.txt" got ``cat answer.txt`` expecting
    "acode is a programming language.", which the right answer could never print."""
    expected = (check.expect_output or "").strip()
    if not expected or expected.lower() in request.lower():
        return False
    argv = command_argv(check.command)
    return bool(argv) and posixpath.basename(argv[0]) in _SHOWS_FILE and any(
        arg.removeprefix("./") in task.resources.write for arg in argv[1:])


def drop_unusable_checks(plan: TaskPlan, sandbox: SandboxPolicy, request: str = "") -> tuple[TaskPlan, list[str]]:
    """``plan`` without the checks it cannot run, and a note for each: a criterion whose
    check command holds a ``<...>`` placeholder or would be refused by the session's
    sandbox policy keeps its description and loses its check (the verifier's model then
    judges it from the evidence), instead of a correction the small model may never get
    right (issue 25: ``python -m wordcount.cli --top 2 <path to test file>`` went back
    three times and the session paused). A ``resources.commands`` entry goes too when it
    is the same command as a dropped check, holds a placeholder, or is a file rewrite the
    sandbox refuses in favour of the file tools (``sed -i``: the rename task's plan listed
    one per task and the correction loop ended in ACODE-PLAN-004); any other command the
    sandbox refuses there stays a problem for the model (:func:`plan_problems`): it may
    mean something the task needs. A check that prints a file the task writes keeps its
    command but loses an expected output the user's ``request`` does not contain
    (:func:`_guessed`). Tasks marked completed are left as they are."""
    rules = command_policy_of(sandbox)
    replace = msgspec.structs.replace
    notes: list[str] = []
    tasks = []
    for task in plan.tasks:
        dropped: set[str] = set()
        guessed = False  # an expected output dropped: the task changed, its commands stay
        acceptance = []
        for criterion in task.acceptance:
            command = criterion.check.command if criterion.check is not None else ""
            why = ("it holds a <...> placeholder" if _PLACEHOLDER.search(command) else
                   _command_problem(command, rules) if command else None)
            if task.status != "completed" and why is None and criterion.check and _guessed(criterion.check, task,
                                                                                            request):
                notes.append(f"acode dropped criterion {criterion.label}'s expected output "
                             f"{criterion.check.expect_output!r} of {command!r}: a guess at what the step will "
                             "write, which the request does not say")
                acceptance.append(replace(criterion, check=replace(criterion.check, expect_output=None)))
                guessed = True
                continue
            if task.status == "completed" or why is None:
                acceptance.append(criterion)
                continue
            if not _PLACEHOLDER.search(command):
                why = f"the sandbox would refuse it: {why}"
            dropped.add(command)
            acceptance.append(replace(criterion, check=None))
            notes.append(f"acode dropped criterion {criterion.label}'s check {command!r} ({why}); the verifier "
                         "judges the criterion from the evidence")
        commands = [c for c in task.resources.commands
                    if task.status == "completed" or (c not in dropped and not _PLACEHOLDER.search(c)
                                                      and not _file_tools_do_it(c, rules))]
        if len(commands) < len(task.resources.commands):
            notes.append(f"acode dropped {len(task.resources.commands) - len(commands)} command(s) of task "
                         f"{task.label}'s resources.commands (a dropped check, a <...> placeholder, or a file "
                         "rewrite such as sed -i that the file tools do)")
            task = replace(task, resources=replace(task.resources, commands=commands))
        tasks.append(replace(task, acceptance=acceptance) if dropped or guessed else task)
    return (replace(plan, tasks=tasks), notes) if notes else (plan, [])


# "exit 1", "exits with 2", "exit code 3", "exit status 4", "return code 5"
_EXIT_SAID = re.compile(r"\b(?:exit(?:s|ing)?\s+(?:with\s+)?(?:(?:code|status)\s+)?(?:of\s+)?|"
                        r"(?:exit|return)\s+(?:code|status)\s+(?:of\s+|is\s+)?)(\d{1,3})\b", re.IGNORECASE)


def _exits_said(text: str) -> set[int]:
    return {int(found) for found in _EXIT_SAID.findall(text) if int(found) <= 255}


def exit_codes_said(plan: TaskPlan, request: str) -> tuple[TaskPlan, list[str]]:
    """``plan`` with the expected exit code the request and a criterion's words agree on: a
    check of a command the user's ``request`` names, expecting 0, whose criterion says
    the command exits N, as the request does (one N, not 0), expects N. On the real 1.5B
    model, "python -m todo.cli done 5 crashes ... make it print 'no item 5' and exit 1"
    got that command as A1's check, described "print 'no item 5' ... and exit 1" but with
    ``expect_exit`` 0: the model's right answer failed it six times and the session
    paused (EXEC-008). Tasks marked completed are left as they are."""
    asked = _exits_said(request)
    flat = " ".join(request.split())
    replace = msgspec.structs.replace
    notes: list[str] = []
    tasks = []
    for task in plan.tasks:
        acceptance = []
        for criterion in task.acceptance:
            check = criterion.check
            said = asked & _exits_said(criterion.description) - {0}
            if (task.status != "completed" and check is not None and check.expect_exit == 0 and len(said) == 1
                    and " ".join(check.command.split()) in flat):
                code = said.pop()
                criterion = replace(criterion, check=replace(check, expect_exit=code))
                notes.append(f"acode made criterion {criterion.label}'s check {check.command!r} expect exit code "
                             f"{code}, as the criterion and the request say (it expected 0)")
            acceptance.append(criterion)
        tasks.append(replace(task, acceptance=acceptance) if acceptance != task.acceptance else task)
    return (replace(plan, tasks=tasks), notes) if notes else (plan, [])


def plan_problems(plan: TaskPlan, sandbox: SandboxPolicy, max_complexity: int = 34) -> list[PlanProblem]:
    """Every problem of ``plan`` under the session's sandbox policy and complexity cap
    (``planner.max_complexity``); empty when it is good."""
    found = problems(plan)
    rules = command_policy_of(sandbox)
    for task in plan.tasks:
        if task.complexity > max_complexity and task.status != "completed":
            found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} has complexity {task.complexity}; at most "
                                                       f"{max_complexity} is allowed: split it into smaller tasks"))
        for field in ("write", "directories"):
            for path in getattr(task.resources, field):
                if path_problem(path):
                    continue  # protocol.plans.plan.problems named it
                try:
                    protected.check(posixpath.normpath(path), path)
                except SandboxError as exc:
                    found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} resources.{field}: {exc.message}"))
        for index, command in enumerate(task.resources.commands):
            why = _command_problem(command, rules)
            if why:
                found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} resources.commands[{index}] "
                                                           f"would be refused by the sandbox: {why}"))
        for criterion in task.acceptance:
            if criterion.check is None:
                continue
            why = _command_problem(criterion.check.command, rules)
            if why:
                found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} criterion {criterion.label} check "
                                                           f"command would be refused by the sandbox: {why}"))
    return found
