"""The functions and classes a step names, as the workspace defines them: one line each.

Edit/add-test on Qwen2.5-Coder-1.5B ("Add a test of average_length to tests/test_core.py"):
twenty whole-file answers called ``average_length(text)`` where the function takes
``counts``. Every other ask of the file step is the plain one, which shows the file to write
and nothing else (:func:`actors.stages.execution.fileprompt.render_plain`): the model guessed the
argument from the name. The plain ask now also says, for each name the step's words use
that a Python file it read defines, its signature and the first line of its docstring.

Parsed with :mod:`ast` (never run); a file that does not parse gives nothing. The text is
the workspace's, so the caller fences it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

__all__ = ["named_definitions"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MAX_DEFINITIONS = 6


def named_definitions(words: str, files: Sequence[tuple[str, str | None]], *, skip: str) -> list[str]:
    """``path: def name(args) -> returns: first docstring line`` for each top-level function
    or class (with its ``__init__``'s arguments) of the Python ``files`` (not ``skip``, the
    file being written) whose name is one of ``words``'s, in the order the files give."""
    named = set(_WORD.findall(words))
    found: list[str] = []
    for path, text in files:
        if path == skip or text is None or not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in _top_level(tree.body):
            if node.name in named and len(found) < MAX_DEFINITIONS:
                found.append(f"{path}: {_signature(node)}")
    return found


def _top_level(body: Iterable[ast.stmt]) -> Iterable[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        head = f"class {node.name}" + (f"({ast.unparse(init.args)})" if init is not None else "")
    else:
        returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
        head = f"{'async ' if isinstance(node, ast.AsyncFunctionDef) else ''}def {node.name}" \
               f"({ast.unparse(node.args)}){returns}"
    doc = (ast.get_docstring(node) or "").strip().split("\n", 1)[0]
    return f"{head}" + (f"  # {doc[:200]}" if doc else "")
