"""``acode doctor -w DIR``: which python and pytest a session's commands get, asked in the real sandbox.

A workspace venv is made once for the module (``python -m venv --without-pip``: no pytest in
it). Without a venv, python is this shell's (the tests' PATH starts with acode's dev venv,
which has pytest: tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.paths import RunPaths
from cli import doctor
from cli.toolcheck import python_tests

VERSION = ".".join(map(str, sys.version_info[:3]))
PYTEST = pytest.__version__


@pytest.fixture(scope="module")
def venv_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("doctor") / "ws"
    (root / "tests").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True,
                   capture_output=True)
    return root


def _checks(tmp_path: Path, workspace: Path) -> dict[str, doctor.Check]:
    return {c.name: c for c in doctor._toolchain_checks(RunPaths(tmp_path / "acode-home"), workspace)}


def test_a_workspace_venv_without_pytest_fails_when_the_workspace_has_python_tests(
        tmp_path: Path, venv_ws: Path) -> None:
    (venv_ws / "tests" / "test_calc.py").write_text("def test_one():\n    assert True\n")
    try:
        found = _checks(tmp_path, venv_ws)
    finally:
        (venv_ws / "tests" / "test_calc.py").unlink()
    python = venv_ws / ".venv" / "bin" / "python"
    assert found["python"].ok and found["python"].detail == f"{python} ({VERSION}, the workspace's .venv)"
    check = found["pytest"]
    assert not check.ok
    assert check.detail == ("not installed for that python, but the workspace looks like a Python project with "
                            "tests (it has tests/test_calc.py): every `python -m pytest` check would fail")
    assert check.fix == f"{python} -m pip install pytest"
    rendered = doctor.render_checks([check])
    assert rendered.startswith("FAIL  pytest  not installed") and f"fix: {python} -m pip install pytest" in rendered


def test_a_workspace_venv_without_tests_only_says_pytest_is_missing(tmp_path: Path, venv_ws: Path) -> None:
    found = _checks(tmp_path, venv_ws)
    assert found["python"].detail == f"{venv_ws / '.venv' / 'bin' / 'python'} ({VERSION}, the workspace's .venv)"
    assert found["pytest"].ok
    assert found["pytest"].detail == "not installed for that python (the workspace has no Python tests)"


def test_without_a_venv_python_and_pytest_are_the_users(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.pytest.ini_options]\naddopts = '-q'\n")
    found = _checks(tmp_path, workspace)
    python = os.path.join(os.path.dirname(sys.executable), "python")
    assert found["python"].ok and found["python"].detail == f"{python} ({VERSION}, your PATH)"
    assert found["pytest"].ok and found["pytest"].detail == PYTEST


def test_a_python_project_with_no_python_on_the_path_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "test_solution.py").write_text("def test_f():\n    pass\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    [check] = _checks(tmp_path, workspace).values()
    assert not check.ok and check.detail == ("no python on your PATH, but the workspace looks like a Python project "
                                             "with tests (it has test_solution.py)")
    assert check.fix == "create the workspace's virtualenv (python3 -m venv .venv), or put python on your PATH"


@pytest.mark.parametrize(("files", "why"), [
    ({"pytest.ini": "[pytest]\n"}, "it has pytest.ini"),
    ({"setup.cfg": "[tool:pytest]\ntestpaths = t\n"}, "setup.cfg configures pytest"),
    ({"setup.cfg": "[metadata]\nname = x\n"}, None),
    ({"tests/test_a.py": ""}, "it has tests/test_a.py"),
    ({"src/app.py": "", "README.md": ""}, None)])
def test_what_counts_as_a_python_project_with_tests(tmp_path: Path, files: dict[str, str], why: str | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert python_tests(tmp_path) == why
