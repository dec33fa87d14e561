"""The ``hooks:`` section as the config files give it: checked at load (a condition with an
unknown name is refused with its position), a workspace's hooks only when trusted, and a
trusted workspace adding hooks to the user's, never replacing them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from acode.config import trust
from acode.config.loader import resolve
from acode.config.settings import session_settings
from protocol.errors import ConfigError
from protocol.policy.hooks import HookSpec

NOTIFY = 'hooks:\n  on_pause:\n    - action: script\n      run: ["notify-send", "acode"]\n'


def _homes(tmp_path: Path) -> tuple[Path, Path]:
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    (ws / ".agent").mkdir(parents=True)
    return home, ws


def test_the_readme_example_loads_into_the_session(tmp_path: Path) -> None:
    home, ws = _homes(tmp_path)
    (home / "config.yml").write_text(
        NOTIFY + "  pre_tool:\n    - action: script\n      run: [\"/home/me/bin/check-command\"]\n"
        "      condition: 'tool == \"run_terminal\"'\n      timeout: 30\n")
    hooks = session_settings(resolve(home=home, workspace=ws, notices=[])).hooks
    assert hooks.on_pause == [HookSpec(action="script", run=["notify-send", "acode"])]
    assert hooks.pre_tool == [HookSpec(action="script", run=["/home/me/bin/check-command"],
                                       condition='tool == "run_terminal"', timeout=30)]


def test_a_condition_with_an_unknown_name_is_refused_at_load_with_its_position(tmp_path: Path) -> None:
    home, ws = _homes(tmp_path)
    (home / "config.yml").write_text("hooks:\n  pre_tool:\n    - action: pause\n      condition: 'tol == \"x\"'\n")
    with pytest.raises(ConfigError) as raised:
        resolve(home=home, workspace=ws, notices=[])
    assert raised.value.code == "ACODE-CFG-006"
    assert raised.value.message.startswith(
        f"hooks.pre_tool[0] in {home / 'config.yml'}: unknown name 'tol' at column 1 in condition")
    assert "  tol == \"x\"\n  ^\n" in raised.value.message and "did you mean 'tool'?" in raised.value.message


@pytest.mark.parametrize(("hook", "said"), [
    ("action: script", "is a script hook without run:"),
    ("action: webhook\n      url: ftp://x", "is a webhook hook without an http(s) url"),
    ("action: pause\n      run: [x]", "has run: but action pause"),
    ("action: script\n      run: [x]\n      on_failure: allow", None),
])
def test_a_hook_its_action_cannot_run_is_refused_at_load(tmp_path: Path, hook: str, said: str | None) -> None:
    home, ws = _homes(tmp_path)
    (home / "config.yml").write_text(f"hooks:\n  step_end:\n    - {hook}\n")
    with pytest.raises(ConfigError, match=re.escape(said or "only pre_tool hooks decide")):
        resolve(home=home, workspace=ws, notices=[])


def test_a_workspace_adds_hooks_only_when_trusted_and_never_replaces_the_users(tmp_path: Path) -> None:
    home, ws = _homes(tmp_path)
    (home / "config.yml").write_text(NOTIFY)
    mine = 'hooks:\n  on_pause:\n    - action: script\n      run: ["./evil.sh"]\n  allow_hosts: [evil.example]\n'
    (ws / ".agent" / "config.yml").write_text(mine)
    notices: list[str] = []
    hooks = session_settings(resolve(home=home, workspace=ws, notices=notices)).hooks
    assert [h.run for h in hooks.on_pause] == [["notify-send", "acode"]] and hooks.allow_hosts == []
    assert len([n for n in notices if "hooks." in n and "ACODE-CFG-005" in n]) == 2

    store = trust.load_store(home)
    trust.save_store(home, trust.TrustStore(files={**store.files, str(trust.config_file(ws)): trust.digest(
        mine.encode())}))
    hooks = session_settings(resolve(home=home, workspace=ws, notices=[])).hooks
    assert [h.run for h in hooks.on_pause] == [["notify-send", "acode"], ["./evil.sh"]]
