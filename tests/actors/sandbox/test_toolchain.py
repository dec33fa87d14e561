"""The workspace's own toolchain in run_terminal (actors/sandbox/confinement/toolchain.py), with real venvs.

``python`` in a command resolves as in the user's shell for that workspace: the
workspace's ``.venv`` when it has one (its ``bin`` first, ``VIRTUAL_ENV`` set, its base
interpreter visible read-only under bubblewrap and Landlock), else the user's PATH (the
client's, carried in the session's sandbox policy), never acode's own interpreter. The
venv is made once per module (``python -m venv --without-pip``, about 2 s). A venv is
workspace content: it cannot name a directory to be made visible.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.sandbox.confinement import toolchain, visible
from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.confinement.isolation import Isolation, command_env, detect
from actors.sandbox.tools.terminal import Terminal
from protocol.calls.tools import RunTerminal
from protocol.errors import SandboxError
from protocol.policy.sandbox import SandboxPolicy

# A PATH without acode's interpreter or any version manager: what the venv needs must come from the venv.
SYSTEM_PATH = "/usr/bin:/bin"
WHERE = "import os, sys\nprint('prefix', sys.prefix)\nprint('venv', os.environ.get('VIRTUAL_ENV'))\n"


def _levels() -> dict[str, Isolation | None]:
    full = detect()
    landlock = detect(bubblewrap=False)
    return {"bubblewrap": full if full.level == "bubblewrap" else None,
            "landlock": landlock if landlock.level == "landlock" else None,
            "process": Isolation(level="process", pidns=False, pids=full.pids)}


LEVELS = _levels()


@pytest.fixture(scope="module")
def venv_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with its own .venv, made from this interpreter's base (pyenv under ~ here)."""
    root = tmp_path_factory.mktemp("toolchain") / "ws"
    root.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True,
                   capture_output=True)
    (root / "where.py").write_text(WHERE)
    return root


@pytest.fixture(params=list(LEVELS))
def terminal(request: pytest.FixtureRequest) -> Iterator[Terminal]:
    isolation = LEVELS[request.param]
    if isolation is None:
        pytest.skip(f"this machine does not offer {request.param}")
    terminal = Terminal(isolation)
    yield terminal
    terminal.close()


def _run(terminal: Terminal, root: Path, command: str, policy: SandboxPolicy) -> str:
    with Workspace(str(root)) as ws:
        outcome = terminal.run(ws, RunTerminal(command=command), timeout_s=30, max_bytes=20_000, policy=policy)
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def test_python_is_the_workspace_venv_with_its_base_interpreter_visible(terminal: Terminal, venv_ws: Path) -> None:
    out = _run(terminal, venv_ws, "python where.py", SandboxPolicy(path=SYSTEM_PATH))
    assert out.splitlines() == [f"prefix {venv_ws / '.venv'}", f"venv {venv_ws / '.venv'}"]


def test_without_a_venv_python_is_the_users_not_acodes(terminal: Terminal, tmp_path: Path) -> None:
    root, user_bin = tmp_path / "plain", tmp_path / "user" / "bin"
    root.mkdir()
    user_bin.mkdir(parents=True)
    fake = user_bin / "python"
    fake.write_text("#!/bin/sh\necho \"the user's python: $0 $*\"\n")
    fake.chmod(0o755)
    (root / "where.py").write_text(WHERE)
    out = _run(terminal, root, "python where.py", SandboxPolicy(path=f"{user_bin}:{SYSTEM_PATH}"))
    assert out == f"the user's python: {fake} where.py\n"


def test_without_a_path_from_the_client_the_sandboxs_own_path_is_used(
        terminal: Terminal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, user_bin = tmp_path / "plain", tmp_path / "up" / "bin"
    root.mkdir()
    user_bin.mkdir(parents=True)
    (user_bin / "python").write_text("#!/bin/sh\necho from acode up\n")
    (user_bin / "python").chmod(0o755)
    monkeypatch.setenv("PATH", f"{user_bin}:{SYSTEM_PATH}")
    assert _run(terminal, root, "python x.py", SandboxPolicy()) == "from acode up\n"


def test_acodes_own_interpreter_is_not_put_on_a_commands_path(tmp_path: Path) -> None:
    env = command_env(tmp_path, base={"PATH": f"relative/bin::/usr/bin:{tmp_path}", "VIRTUAL_ENV": "/acode/venv"})
    assert env["PATH"] == f"/usr/bin:{tmp_path}"  # relative and empty entries name the command's cwd: dropped
    assert os.path.dirname(sys.executable) not in env["PATH"].split(":") and "VIRTUAL_ENV" not in env
    assert command_env(tmp_path, base={"PATH": "/usr/bin"}, path="/opt/x/bin:/bin")["PATH"] == "/opt/x/bin:/bin"


def test_a_venv_cannot_name_a_directory_to_be_made_visible(tmp_path: Path) -> None:
    root, secret = tmp_path / "ws", tmp_path / "secret"
    (secret / "bin").mkdir(parents=True)
    (secret / "bin" / "python").write_text("#!/bin/sh\n")
    (secret / "notes.txt").write_text("private\n")
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {secret / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(secret / "bin" / "python")
    assert toolchain.workspace_venv(str(root)) == str(venv)
    # neither the symlink's target nor pyvenv.cfg's home is bound: not a Python installation
    assert visible.python_home(str(venv), str(root), home=str(tmp_path / "home")) == ()
    real = Path(os.path.realpath(sys.base_prefix))  # a real Python installation is
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(real / "bin" / "python3")
    assert visible.python_home(str(venv), str(root), home=str(tmp_path / "home")) == (str(real),)


def test_a_venv_that_points_out_of_the_workspace_is_not_used(tmp_path: Path, venv_ws: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".venv").symlink_to(venv_ws / ".venv")
    assert toolchain.workspace_venv(str(root)) is None
    (root / "venv").mkdir()
    (root / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "venv" / "bin").symlink_to(venv_ws / ".venv" / "bin")
    assert toolchain.workspace_venv(str(root)) is None
    assert toolchain.workspace_venv(str(venv_ws)) == str(venv_ws / ".venv")


def test_the_workspaces_own_path_entries_are_not_followed_for_the_view(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".venv" / "bin").mkdir(parents=True)
    path = f"{root / '.venv' / 'bin'}:/usr/bin:{root}:{tmp_path / 'tools'}"
    assert toolchain.outside(path, str(root)) == f"/usr/bin:{tmp_path / 'tools'}"


def test_a_missing_python_is_named_with_its_code(tmp_path: Path) -> None:
    terminal = Terminal(LEVELS["process"])
    try:
        with Workspace(str(tmp_path)) as ws, pytest.raises(SandboxError) as caught:
            terminal.run(ws, RunTerminal(command="python x.py"), timeout_s=10, max_bytes=1_000,
                         policy=SandboxPolicy(path=str(tmp_path / "nothing-here")))
    finally:
        terminal.close()
    assert caught.value.code == "ACODE-SBX-005" and "'python' was not found on PATH" in caught.value.message


def test_the_session_carries_the_clients_path_and_no_config_file_can_set_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acode.config.loader import resolve
    from acode.config.settings import session_settings
    from protocol.errors import ConfigError

    monkeypatch.setenv("PATH", f"{tmp_path / 'mine' / 'bin'}:/usr/bin")
    settings = session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env={}))
    assert settings.sandbox.path == f"{tmp_path / 'mine' / 'bin'}:/usr/bin"
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text("sandbox: {path: /evil/bin}\n")
    with pytest.raises(ConfigError, match="path"):
        resolve(home=tmp_path / "h", workspace=tmp_path, env={})
