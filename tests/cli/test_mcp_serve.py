"""``acode mcp serve`` without a running acode: the command without the optional SDK, and
``mcp.serve.allow_approvals``, which only the user's own config sets (the tools themselves
are driven over MCP in tests/system/test_mcp_serve.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from acode.config.loader import resolve
from cli.commands import home as home_option
from cli.commands.mcp_serve import allow_approvals

ROOT = Path(__file__).resolve().parents[2]
ALLOW = "mcp:\n  serve:\n    allow_approvals: true\n"


def test_without_the_sdk_the_command_says_to_install_the_extra_and_exits_1(tmp_path: Path) -> None:
    probe = ("import sys\nsys.modules['mcp'] = None  # as if `pip install acode` had no [mcp]\n"
             f"sys.argv = ['acode', '--home', {str(tmp_path)!r}, 'mcp', 'serve']\n"
             "from cli.app import main\nmain()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACODE_")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("acode: acode mcp serve needs the MCP SDK (mcp 2.3 or later), which is not "
                                  "installed (No module named 'mcp.server'")  # the import's own words
    assert done.stderr.endswith("; install it with `pip install 'acode[mcp]'` (ACODE-MCP-020)\n")


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home_option.set_home(tmp_path / "home")
    (tmp_path / "home").mkdir()
    try:
        yield tmp_path / "home"
    finally:
        home_option.set_home(None)


def test_approvals_over_mcp_are_off_unless_the_user_config_turns_them_on(home: Path) -> None:
    assert allow_approvals() is False
    (home / "config.yml").write_text("mcp:\n  serve:\n    allow_approvals: false\n")
    assert allow_approvals() is False
    (home / "config.yml").write_text(ALLOW)
    assert allow_approvals() is True


def test_a_workspace_config_cannot_allow_approvals_over_mcp(home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "clone"
    (workspace / ".agent").mkdir(parents=True)
    (workspace / ".agent" / "config.yml").write_text(ALLOW)
    notices: list[str] = []
    config = resolve(home=home, workspace=workspace, env={}, notices=notices)
    assert config.mcp.serve is None
    assert len(notices) == 1 and " sets mcp.serve: " in notices[0] and notices[0].endswith("(ACODE-CFG-005)")
    assert allow_approvals() is False  # the command reads the user's file alone in any case
