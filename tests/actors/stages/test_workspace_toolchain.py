"""Issue 25's first failure, replayed: a plan's ``python -m pytest`` check ran acode's own interpreter.

With ``pipx install .`` acode's interpreter has no pytest and none of the workspace's
packages, so every Python check failed ("No module named pytest"). Here the verifier runs
a plan's check through the real sandbox actor, in a workspace with its own ``.venv`` and a
session PATH without acode on it: the check's tests pass only when they run in the
workspace's venv. The venv gets pytest from this test run's environment through a
``.pth`` file (no network, no install), that directory granted as a ``read_paths`` entry.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from actors.stages.judging import verifier
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.events import CheckRan
from tests.actors.stages.conftest import Stack
from tests.actors.stages.test_verifier import check, plan

TEST_ENV = """import os, sys


def test_runs_in_the_workspace_venv():
    assert sys.prefix == os.path.abspath(".venv"), sys.prefix
    assert os.environ["VIRTUAL_ENV"] == os.path.abspath(".venv")
"""


@pytest.fixture(scope="module")
def venv_ws(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv-ws") / "ws"
    root.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True,
                   capture_output=True)
    site = subprocess.run([str(root / ".venv" / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "dev-packages.pth").write_text(sysconfig.get_path("purelib") + "\n")  # pytest, from this run
    (root / "test_env.py").write_text(TEST_ENV)
    return root


def test_a_plans_pytest_check_runs_in_the_workspaces_venv_not_acodes_interpreter(
        stack: Stack, venv_ws: Path) -> None:
    command = "python -m pytest -q -p no:cacheprovider test_env.py"
    run = stack.stage("verifier", [], plan(check("A1", command)), workspace=venv_ws,
                      sandbox=SandboxPolicy(path="/usr/bin:/bin", read_paths=[sysconfig.get_path("purelib")]))

    answer = verifier.run(run.ctx).verification

    assert answer is not None and answer.passed, answer
    [ran] = [e for e in run.events() if isinstance(e, CheckRan)]
    assert (ran.label, ran.command, ran.passed) == ("A1", command, True)
