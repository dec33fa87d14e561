"""``acode doctor``'s toolchain checks: which ``python`` and ``pytest`` a session in the workspace gets.

The interpreter is found as a command would find it (:mod:`actors.sandbox.confinement.toolchain`): the
workspace's own virtualenv, else this shell's PATH (which ``acode run`` would send). Its
version and pytest's are asked *inside the sandbox*, under the workspace's own policy
(``python --version``, ``python -m pytest --version``): the venv is workspace content, and
the doctor runs nothing of the workspace's outside the sandbox. When the workspace looks
like a Python project with tests (:func:`python_tests`) and that python or its pytest
cannot start, the check fails: every check a plan proposes there would fail the same way.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import msgspec

from acode.config.loader import resolve
from acode.config.settings import sandbox_policy
from actors.paths import RunPaths
from protocol.errors import AcodeError

__all__ = ["python_tests", "toolchain_checks"]

_TIMEOUT_S = 60.0
_PYTEST_CONFIG = (("pytest.ini", ""), ("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"),
                  ("tox.ini", "[pytest]"))


def python_tests(workspace: Path) -> str | None:
    """Why ``workspace`` looks like a Python project with tests (for the detail), or None."""
    for name, section in _PYTEST_CONFIG:
        path = workspace / name
        try:
            if path.is_file() and (not section or section in path.read_text(errors="replace")):
                return f"{name} configures pytest" if section else f"it has {name}"
        except OSError:
            continue
    for where in (workspace, workspace / "tests", workspace / "test"):
        found = sorted([*where.glob("test_*.py"), *where.glob("*_test.py")]) if where.is_dir() else []
        if found:
            return f"it has {found[0].relative_to(workspace)}"
    return None


def toolchain_checks(paths: RunPaths, workspace: Path) -> list[tuple[str, bool, str, str]]:
    """(name, ok, detail, fix) for ``python`` and ``pytest`` in ``workspace``."""
    from actors.sandbox.confinement import toolchain

    if not workspace.is_dir():
        return [("python", True, f"workspace {workspace} does not exist; nothing to check", "")]
    tests = python_tests(workspace)
    tools = toolchain.command_path(str(workspace), os.environ.get("PATH", os.defpath))
    python = shutil.which("python", path=tools.path)
    if python is None:
        detail = f"no python on {'the workspace venv or ' if tools.venv else ''}your PATH"
        if tests is None:
            return [("python", True, detail + " (the workspace has no Python tests)", "")]
        return [("python", False, f"{detail}, but the workspace looks like a Python project with tests ({tests})",
                 "create the workspace's virtualenv (python3 -m venv .venv), or put python on your PATH")]
    try:
        version = _ask(paths, workspace, "python --version")
        runner = _ask(paths, workspace, "python -m pytest --version")
    except AcodeError as exc:
        return [("python", False, f"{python} ({tools.origin}) cannot be asked in the sandbox: {exc}",
                 "correct the sandbox settings named above")]
    found = re.search(r"Python (\S+)", version[1])
    if version[0] != 0 or found is None:
        return [("python", False, f"{python} ({tools.origin}) does not start in the sandbox: {_tail(version[1])}",
                 "repair or recreate that interpreter (a venv whose base python was removed: python3 -m venv "
                 "--clear .venv)")]
    checks = [("python", True, f"{python} ({found.group(1)}, {tools.origin})", "")]
    pytest = re.search(r"pytest (\d\S*)", runner[1])
    if runner[0] == 0 and pytest is not None:
        return [*checks, ("pytest", True, pytest.group(1), "")]
    missing = "not installed for that python" if "No module named pytest" in runner[1] else (
        f"does not start: {_tail(runner[1])}")
    if tests is None:
        return [*checks, ("pytest", True, f"{missing} (the workspace has no Python tests)", "")]
    pip = os.path.join(tools.venv, "bin", "python") if tools.venv else python
    return [*checks, ("pytest", False, f"{missing}, but the workspace looks like a Python project with tests "
                                       f"({tests}): every `python -m pytest` check would fail",
                      f"{pip} -m pip install pytest" + ("" if tools.venv else
                                                        ", or make the workspace's virtualenv (python3 -m venv "
                                                        ".venv) with pytest in it"))]


def _ask(paths: RunPaths, workspace: Path, command: str) -> tuple[int, str]:
    """``command``'s exit code and output, run as a session's command in ``workspace`` would be."""
    from actors.sandbox.confinement.confine import Workspace
    from actors.sandbox.tools.terminal import Terminal
    from protocol.calls.tools import RunTerminal

    policy = sandbox_policy(resolve(home=paths.home, workspace=workspace, notices=[]), home=paths.home)
    policy = msgspec.structs.replace(policy, require_isolation="process")  # the sandbox check reports the level
    terminal = Terminal()
    terminal.hide(str(paths.home), str(paths.sock_dir))
    try:
        with Workspace(str(workspace)) as ws:
            outcome = terminal.run(ws, RunTerminal(command=command), timeout_s=_TIMEOUT_S, max_bytes=8_000,
                                   policy=policy)
    finally:
        terminal.close()
    return (outcome.exit_code if outcome.exit_code is not None else -1), outcome.output


def _tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "no output"
