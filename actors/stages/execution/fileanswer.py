"""When a step is answered as one whole file, and what of the answer is written (issue 25).

The file step (:mod:`actors.stages.execution.filestep`) applies to a step that changes exactly one
file (:func:`target`) the model can see whole (:func:`whole`). Its answer is read for that
file (:func:`answered_file`) and refused before anything is written when it cannot be the
file's new content (:func:`problem`: no block, the file unchanged, another file copied, a
syntax error, code left out, tests dropped); the model is then told why
(:func:`actors.stages.execution.fileprompt.render_problem`). Everything here is a pure function of
the answer and the files as the step read them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from actors.llm import toolcalls
from actors.stages.execution.turnwatch import unnumbered
from actors.stages.prompting.untrusted import Fence
from protocol.plans.plan import PlanStep, PlanTask

__all__ = ["CHANGING_ACTIONS", "answered_file", "problem", "target", "unnumbered", "whole"]

CHANGING_ACTIONS = frozenset({"write_file", "modify_file", "generate_code"})

# a line standing for code left out: "# ... rest of the code ...", "// existing code unchanged", "..." alone
_LEFT_OUT = re.compile(
    r"^\s*(?:#|//|/\*|<!--)?\s*(?:\.\.\.|…)?\s*\(?\s*(?:the\s+)?(?:rest|remainder)\s+of\s+(?:the\s+)?"
    r"(?:code|file|function|module|class|implementation)|"
    r"^\s*(?:#|//|/\*|<!--)\s*(?:\.\.\.|…)?\s*(?:\(?\s*)?(?:existing|other|previous|original|unchanged|same)\s+"
    r"(?:code|functions?|methods?|imports?|lines?|content)\b|"
    r"^\s*(?:#|//)\s*(?:\.\.\.|…)\s*$", re.IGNORECASE | re.MULTILINE)


def target(plan_task: PlanTask, step: PlanStep) -> str:
    """The one file ``step`` changes, or '' when it is no step for one whole file: a changing
    action and exactly one file its task writes, or, when the task writes several, exactly one
    of them named in the step's own text."""
    if step.action not in CHANGING_ACTIONS:
        return ""
    write = plan_task.resources.write
    if len(write) == 1:
        return write[0]
    said = f"{step.title} {step.description}"
    named = [path for path in write if re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])", said)]
    return named[0] if len(named) == 1 else ""


def whole(files: Sequence[tuple[str, str | None]], path: str) -> list[tuple[str, str | None]] | None:
    """``files`` as the step's first message gathered them (read_file's numbered text; None:
    no such file), as their own text, or None when ``path`` is there but not whole (cut to
    the context, or unreadable): a file the model cannot see whole must not be rewritten
    whole. A file for reference that is not whole is shown as it was read."""
    out: list[tuple[str, str | None]] = []
    for name, text in files:
        plain = None if text is None else unnumbered(text)
        if name == path and text is not None and plain is None:
            return None
        out.append((name, text if plain is None else plain))
    return out


def answered_file(answer: str, path: str, fence: Fence) -> str | None:
    """The file an answer gives for ``path``: the block named ``path``, else the longest
    block named nothing (a block named as another file is not this one), else a whole-file
    write_file call to ``path`` written as JSON; the fence's own marker lines, which a small
    model copies from the prompt, are dropped. None: no such block."""
    blocks = toolcalls.code_blocks(answer)
    named = [body for name, body, _ in blocks if name is not None and name.lstrip("./") == path]
    unnamed = [body for name, body, label in blocks if name is None and label.lower() not in ("json", "diff")]
    body = named[-1] if named else max(unnamed, key=len, default=None)
    if body is None:
        parsed = toolcalls.parse(answer, frozenset({"write_file"}))
        calls = [] if parsed.problem is not None else parsed.calls
        body = next((str(c.arguments["content"]) for c in calls
                     if c.name == "write_file" and str(c.arguments.get("path", "")).lstrip("./") == path
                     and isinstance(c.arguments.get("content"), str)), None)
    if body is None:
        return None
    kept = [line for line in body.split("\n") if fence.nonce not in line]
    return "\n".join(kept)


def problem(content: str | None, current: str | None, path: str,
            others: Sequence[tuple[str, str | None]] = (), *, found: str | None) -> str:
    """Why ``content`` (the answered file; None: no block) is not written over ``current``
    (None: no file yet), or '': no code block, the file as it is, another file shown for
    reference (``others``: the model copied the test file), Python that does not compile
    (compiled only, never run), a line standing for code left out of a file that had more,
    the file as the step found it (``found``; None: no file) after a write of the step
    (written, the step would end with no change: a hand run on the real model wrote a
    failing test, then the file as it was, and the step "completed" with nothing added),
    fewer ``test_*`` functions than the file had when the step found it with some gone
    (edit/add-test on the real model: the new test alone, the old ones gone, and every
    check passed). A test the model added in this step is its own
    to drop: on the real model, a test it wrote with a wrong expectation, then left out,
    was refused six times and the session paused."""
    if content is None or not content.strip():
        return "no_block"
    if current is not None and content.strip() == current.strip():
        return "unchanged"
    if found is not None and content.strip() == found.strip():
        return "reverted"
    copied = next((name for name, text in others if text is not None and name != path
                   and text.strip() == content.strip()), None)
    if copied is not None:
        return f"copied:{copied}"
    if path.endswith(".py"):
        try:
            compile(content, path, "exec", dont_inherit=True)
        except SyntaxError as error:
            return f"syntax:{error.msg} (line {error.lineno})"
        except (ValueError, RecursionError, MemoryError) as error:
            return f"syntax:{type(error).__name__}: {error}"
    if current is not None and _LEFT_OUT.search(content) and not _LEFT_OUT.search(current):
        return "left_out"
    if found is not None and path.endswith(".py"):
        gone = _tests(found) - _tests(content)
        if gone and len(_tests(content)) < len(_tests(found)):  # a rename keeps the count
            return "dropped:" + ", ".join(sorted(gone))
    return ""


def _tests(source: str) -> set[str]:
    """The top-level ``test_*`` functions of ``source`` (none when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")}
