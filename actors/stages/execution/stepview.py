"""What a step's first message shows of the workspace (seed 004 FR-017..021).

Each try of a step (:class:`actors.stages.execution.step.Step`) begins with :func:`gather`, one round
trip to the sandbox: the workspace's AGENTS.md, read once per executor visit, and the one
nearest to the step's file (:mod:`actors.stages.request.instructions`), which the system prompt
carries; a listing of the workspace (list_directory, .gitignore respected, cut); the
current content of the files the step names (its task's resource files and the paths in
the step's and the task's text, then up to two workspace modules a named test file
imports; read through the sandbox, cut). The step's message shows them fenced. Everything
is chosen from what the sandbox answered alone, so a replay, answered from the sandbox's
journal, gathers the same.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from actors.stages.prompting import prompts
from actors.stages.prompting.terms import task_terms
from actors.stages.request import instructions as project
from actors.stages.request.context import StageContext
from protocol.plans.plan import PlanStep, PlanTask
from protocol.plans.results import ToolResult

__all__ = ["MAX_CONTEXT_FILES", "Seen", "gather", "step_paths"]

MAX_CONTEXT_FILES = 8
_PATH_WEIGHT = 4  # actors.stages.prompting.terms: a file name or path
_LISTING_DEPTH = 3
_LISTING_CHARS = 2_000  # the workspace listing in a step's first message, at most
_MAX_IMPORTED = 2
_TEST_FILE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")
_IMPORT = re.compile(r"^(?:\s*\d+\t)?[ \t]*(?:from[ \t]+([A-Za-z_][\w.]*)[ \t]+import\b|import[ \t]+([A-Za-z_][\w.]*))",
                     re.M)


class Seen(NamedTuple):
    """What one try of a step gathered of the workspace."""

    listing: str  # '' when the workspace cannot be listed
    files: list[tuple[str, str | None]]  # (path, its text as read and cut; None: no such file)
    instructions: str  # the AGENTS.md nearest to the step's file, else the workspace's
    project: str  # the workspace's AGENTS.md as the system prompt carries it


def step_paths(task: PlanTask, step: PlanStep) -> list[str]:
    """The files the step names: its task's resources, then the paths written in the
    step's and the task's text (at most :data:`MAX_CONTEXT_FILES`)."""
    said = " ".join([step.title, step.description, step.expected_output, task.title, task.description])
    named = [term for term, weight in task_terms(said) if weight == _PATH_WEIGHT]
    return list(dict.fromkeys([*task.resources.read, *task.resources.write, *named]))[:MAX_CONTEXT_FILES]


def gather(ctx: StageContext, task: PlanTask, step: PlanStep, key: str, known: str | None, *, budget: int,
           result_limit: int) -> Seen:
    """What the step's first message shows of the workspace, read in one round trip
    (:meth:`StageContext.tools`; a transient failure is retried alone): the listing
    (list_directory, .gitignore respected, cut to :data:`_LISTING_CHARS` and a tenth of
    the ``budget``; '' when it cannot be listed) and the files the step names as they are
    now (None: it does not exist), each cut (to ``result_limit`` and a quarter of the
    budget), all within a third of the budget, then the workspace modules a named test file
    imports (:func:`_imported`; a step that names only the test still shows the code it
    tests). The stage's AGENTS.md is read with them, before its first step (``known``: as
    an earlier step read it; None: not yet)."""
    paths = step_paths(task, step)
    # the listing is not under the step's own keys (<session>:e<visit>:...), which name the model's calls
    calls = [(key.replace(":e", ":ctx-e", 1) + ":ls", "list_directory", {"path": ".", "depth": _LISTING_DEPTH})]
    calls += [(f"{key}:ctx{index}", "read_file", {"path": path}) for index, path in enumerate(paths)]
    nearer = project.nearer_calls(next(iter(task.resources.write or paths), ""), key)
    calls = nearer + calls
    if known is None:
        calls.insert(0, project.read_call(ctx))
    results = [ctx.tool_retrying(*call) if result.error is not None and result.error.retryable else result
               for call, result in zip(calls, ctx.tools(calls), strict=True)]
    if known is None:
        known = project.render_result(ctx, results.pop(0))
    found = [project.render_result(ctx, result, call[2]["path"])
             for call, result in zip(nearer, results, strict=False)]
    instructions = next((text for text in found if text), known)  # the nearest wins
    del results[:len(nearer)]
    listing_result, *read = results
    imported = _imported(paths, read, listing_result.output if listing_result.ok else "")
    if imported:  # a second round trip, only for a test file that imports workspace code
        more = [(f"{key}:ctximp{index}", "read_file", {"path": path}) for index, path in enumerate(imported)]
        read += [ctx.tool_retrying(*call) if result.error is not None and result.error.retryable else result
                 for call, result in zip(more, ctx.tools(more), strict=True)]
        paths += imported
    listing = prompts.truncate(listing_result.output, min(_LISTING_CHARS, budget // 10)) \
        if listing_result.ok else ""
    per_file = min(result_limit, budget // 4)
    left = budget // 3
    files: list[tuple[str, str | None]] = []
    for path, result in zip(paths, read, strict=True):
        if left <= 0:
            break
        if result.ok:
            text = prompts.truncate(result.output, min(per_file, left))
        elif result.error is not None and result.error.code == "ACODE-SBX-003":
            files.append((path, None))
            continue
        else:
            text = f"(could not be read: {result.error.message if result.error else 'no output'})"
        left -= len(text)
        files.append((path, text))
    return Seen(listing, files, instructions, known)


def _imported(paths: list[str], read: list[ToolResult], listing: str) -> list[str]:
    """The workspace modules (at most :data:`_MAX_IMPORTED`, in import order) that the test
    files among ``paths`` import with ``from X.Y import`` or ``import X.Y`` (as ``X/Y.py`` or
    ``X/Y/__init__.py``, at the root or under ``src/``) and that the workspace ``listing``
    shows, leaving out the files already in ``paths``. Read from the results alone, so a
    replay finds the same modules."""
    listed = set(listing.splitlines())
    found: list[str] = []
    for path, result in zip(paths, read, strict=False):
        if not result.ok or not _TEST_FILE.search(path):
            continue
        for match in _IMPORT.finditer(result.output):
            parts = (match.group(1) or match.group(2)).split(".")
            for root in ("", "src/"):
                candidates = [root + "/".join(parts[:end]) + suffix for end in range(len(parts), 0, -1)
                              for suffix in (".py", "/__init__.py")]
                module = next((c for c in candidates if c in listed), None)
                if module is not None:
                    if module not in paths and module not in found:
                        found.append(module)
                    break
            if len(found) >= _MAX_IMPORTED:
                return found
    return found
