"""What the file step asks the model, and what it answers a turn with (issue 25).

The step answered as one whole file (:mod:`actors.stages.execution.filestep`) asks for the complete
new content of the file in one fenced block: the system prompt (:data:`SYSTEM`), the full
ask (:func:`render`: the request, the checks that will run, the files the step names, the
file as it is now, how the checks fail, then what to answer, last), the plain ask
(:func:`render_plain`), and the next turn's message after an answer refused before
anything was written (:func:`render_problem`, for the kinds of
:func:`actors.stages.execution.fileanswer.problem`). Workspace text is fenced. Everything here is a
pure function of what it is given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from actors.stages.execution.definitions import named_definitions
from actors.stages.prompting.untrusted import Fence
from protocol.plans.plan import Check, PlanStep, PlanTask, TaskPlan
from protocol.sessions.session import Feedback

__all__ = ["EARLIER", "SYSTEM", "render", "render_plain", "render_problem", "steady"]

EARLIER = "An earlier answer (in the file now, not shown here) fails it:"

SYSTEM = ("You are an expert programmer. You change one file of a project at a time. Answer with the complete "
          "new content of the file in one fenced code block: every line of it, not only the lines that "
          "change, and no other code block.")

_LANGUAGE = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
             ".md": "markdown", ".toml": "toml", ".json": "json", ".yml": "yaml", ".yaml": "yaml", ".sh": "bash"}


def _language(path: str) -> str:
    return next((name for suffix, name in _LANGUAGE.items() if path.endswith(suffix)), "")


def _block(path: str, text: str, fence: Fence) -> str:
    ticks = "`" * max(3, max((len(run) for run in re.findall(r"`{3,}", text)), default=0) + 1)
    body = text if text.endswith("\n") else text + "\n"
    return fence.wrap(f"file {path}", f"{ticks}{_language(path)}\n{body}{ticks}")


def _request(plan: TaskPlan, step: PlanStep) -> list[str]:
    """The lines every ask starts with: the request, and the step when it says more."""
    lines = [f"The request: {plan.goal}"]
    said = " ".join(part for part in (step.title, step.description) if part and part.strip() != plan.goal.strip())
    return lines + [f"Your part of it: {said}"] if said else lines


def _now(path: str, current: str | None, fence: Fence) -> list[str]:
    """``path`` as it is now (``current``; None: not there yet)."""
    return [f"{path} does not exist yet."] if current is None else [f"{path} now:", _block(path, current, fence)]


def _answer(path: str) -> str:
    return f"Answer with the complete new {path} in one ```{_language(path)} code block."


def render(plan: TaskPlan, plan_task: PlanTask, step: PlanStep, path: str, files: Sequence[tuple[str, str | None]],
           feedback: Feedback | None, fence: Fence, *, runs_checks: bool = True,
           failing: Sequence[tuple[Check, str]] = (), note: str = "", failing_said: str = "") -> str:
    """The step's message: the request, the step when it says more, the checks that will
    run, the other files the step names, then ``path`` as it is now, then what changes from
    one ask to the next, then what to answer, last (the direct prompt's order). Workspace text
    is fenced. ``runs_checks``: the checks run after this step's answers (its task's last
    step), else they are not named; ``failing``: how they fail before the change (a failing
    test's own message says what to fix); ``note``: what an earlier try ended with;
    ``failing_said``: what the failures are of, when not the file shown (:data:`EARLIER`).

    Everything that differs between the step's asks (how the checks fail, the reviewer's
    feedback, the note) comes after the files: a fresh conversation then shares the whole
    head of the last one, which the server has cached, and only the new tail is evaluated.
    With the failures before the files, every retry re-read the files (HumanEval/120: 16
    requests, 9,970 tokens evaluated). What to answer stays the last line: a model answering
    a prompt that ends in a note copied the nearest file back."""
    lines = _request(plan, step)
    checks = [c for c in plan_task.acceptance if c.check is not None]
    judged = [c for c in plan_task.acceptance if c.check is None]
    others = [s.title for s in plan_task.steps if s.label != step.label]
    if others:
        lines.append("Other steps change the other files (not yours): " + "; ".join(others))
    if checks and runs_checks:
        lines.append("After your answer acode runs: " + "; ".join(f"`{c.check.command}`" for c in checks if c.check)
                     + ". It must succeed.")
    if judged:
        lines.append("The change must also meet: " + "; ".join(c.description for c in judged))
    for name, text in files:
        if name != path and text is not None:
            lines += [f"{name}, for reference (do not change it):", _block(name, text, fence)]
    lines += _now(path, dict(files).get(path), fence)
    if checks and runs_checks and failing:
        lines.append(failing_said or "Now, before your change, it fails:")
        lines += [fence.wrap(f"check `{check.command}`", steady(evidence)) for check, evidence in failing]
    if feedback is not None:
        lines.append(f"The {feedback.source} found problems with the last change: {feedback.summary}")
        lines += [f"- {item.label}: {item.problem}" + (f"\n{fence.wrap('evidence', item.detail)}" if item.detail
                                                       else "") for item in feedback.items]
    if note:  # a later try
        lines.append(note.strip())
    return "\n\n".join([*lines, _answer(path)])


def render_plain(plan: TaskPlan, step: PlanStep, path: str, current: str | None, fence: Fence,
                 files: Sequence[tuple[str, str | None]] = ()) -> str:
    """The plain ask: the request, the step when it says more, ``path`` as the step found it
    and what to answer; no other file, no check, no failure. The file step asks it every
    other time it asks afresh after a failed answer
    (:class:`actors.stages.execution.filestep.FileStyleStep`): the model alone, asked this way in one
    turn, solves problems the full ask sends it the wrong way on (HumanEval/8: shown its
    test and failure it answered ``product(numbers)``, an undefined name, 12 times over, at
    temperature 0 and 0.6), and the checks judge either answer alike. What the step names
    from the other ``files`` it read is one line each
    (:func:`actors.stages.execution.definitions.named_definitions`): a name alone, the model guessed
    the arguments."""
    lines = _request(plan, step)
    named = named_definitions(" ".join((plan.goal, step.title, step.description or "")), files, skip=path)
    if named:
        lines.append("Defined in the workspace:\n" + fence.wrap("definitions", "\n".join(named)))
    return "\n\n".join([*lines, *_now(path, current, fence), _answer(path)])


# pytest's "1 failed, 2 passed in 0.12s": the one part of the same failure that differs run to run
_TIMING = re.compile(r"((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected)\b[ ,]*)+)"
                     r" in \d+(?:\.\d+)?s\b")


def steady(evidence: str) -> str:
    """A check's ``evidence`` without the test runner's run time, so the same failure reads
    the same in every ask (and the server's cache holds across them)."""
    return _TIMING.sub(lambda found: found.group(1).rstrip(" ,"), evidence)


def render_problem(kind: str, path: str, request: str = "") -> str:
    """The next turn's message for :func:`actors.stages.execution.fileanswer.problem`'s ``kind``
    (``request``: what to change, said again after an unchanged file)."""
    ask = _answer(path)
    if kind == "no_block":
        return f"Your answer had no code block, so nothing was written. {ask}"
    if kind == "unchanged":
        again = f" The request: {request}" if request else ""
        return f"Your code block is {path} exactly as it already is: nothing changed. Make the change.{again} {ask}"
    if kind == "reverted":
        again = f" The request: {request}" if request else ""
        return (f"Your code block is {path} as this step found it: it undoes your change and makes none, so it was "
                f"not written. Make the change.{again} {ask}")
    if kind.startswith("copied:"):
        return (f"Your code block is {kind[7:]}, which was shown for reference: it was not written. Write "
                f"{path}. {ask}")
    if kind == "left_out":
        return (f"Your code block leaves part of {path} out (a comment stands for the rest), so it was not "
                f"written: it would delete that code. {ask} Give every line.")
    if kind.startswith("dropped:"):
        return (f"Your code block was not written: it deletes tests that {path} had ({kind[8:]}). Keep every "
                f"test that was there and add yours. {ask}")
    assert kind.startswith("syntax:")
    return f"Your code block was not written: it is not valid Python: {kind[7:]}. {ask}"
