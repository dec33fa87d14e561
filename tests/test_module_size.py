"""No module over the style's size without its reason written at its top (issue 26).

The style guide wants a module to read top to bottom in a few minutes (roughly 50–300
lines). A module of acode (protocol/, broker/, actors/, acode/, cli/, scripts/; not tests/)
longer than :data:`LIMIT` lines must either be split along its seams or say, in a line of
its module docstring that starts with ``Size:``, why it stays one module. The files are
read, not imported: the check takes well under a second.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "broker", "actors", "acode", "cli", "scripts")
# The example project `acode init` copies is the user's code, not acode's.
SKIPPED = ("cli/example/",)
LIMIT = 500  # lines; past it a module says why it is one module


def project_modules(root: Path) -> list[Path]:
    """Every ``.py`` file of acode's own packages under ``root``."""
    found: list[Path] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if not path.relative_to(root).as_posix().startswith(SKIPPED):
                found.append(path)
    return found


def has_size_reason(source: str) -> bool:
    """Whether the module docstring has a line starting ``Size:`` (after indentation)."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return any(line.strip().startswith("Size:") for line in docstring.splitlines())


def oversized(root: Path, limit: int = LIMIT) -> list[str]:
    """``path: N lines`` for each module over ``limit`` lines without a ``Size:`` reason."""
    found: list[str] = []
    for path in project_modules(root):
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > limit and not has_size_reason(source):
            found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_no_module_is_over_the_size_without_a_reason() -> None:
    found = oversized(ROOT)
    assert not found, (
        f"modules over {LIMIT} lines without a reason: {', '.join(found)}; split each along its seams, "
        "or add a line starting 'Size:' to its module docstring saying why it stays one module")


def _module(root: Path, name: str, docstring: str, lines: int) -> None:
    path = root / "actors" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [f'"""{docstring}"""', ""]
    body += [f"X{n} = {n}" for n in range(lines - len(body))]
    path.write_text("\n".join(body) + "\n", encoding="utf-8")


def test_a_module_one_line_over_without_a_reason_is_found(tmp_path: Path) -> None:
    _module(tmp_path, "big.py", "A module.", LIMIT + 1)
    _module(tmp_path, "fits.py", "A module.", LIMIT)
    assert oversized(tmp_path) == [f"actors/big.py: {LIMIT + 1} lines"]


def test_a_size_line_in_the_docstring_is_the_reason(tmp_path: Path) -> None:
    _module(tmp_path, "big.py", "A module.\n\nSize: one table, read as one.\n", LIMIT + 1)
    assert oversized(tmp_path) == []


def test_size_elsewhere_than_the_module_docstring_is_no_reason(tmp_path: Path) -> None:
    path = tmp_path / "cli" / "big.py"
    path.parent.mkdir(parents=True)
    function = 'def f() -> None:\n    """What f does.\n\n    Size: a function docstring, not the module one.\n    """\n'
    path.write_text('"""A module."""\n' + function + "X = 1\n" * LIMIT, encoding="utf-8")
    assert oversized(tmp_path) == [f"cli/big.py: {LIMIT + 6} lines"]


def test_tests_and_the_example_project_are_not_checked(tmp_path: Path) -> None:
    for folder in ("tests", "cli/example"):
        path = tmp_path / folder / "big.py"
        path.parent.mkdir(parents=True)
        path.write_text("X = 1\n" * (LIMIT + 1), encoding="utf-8")
    assert oversized(tmp_path) == []
