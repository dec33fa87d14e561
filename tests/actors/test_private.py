"""actors.private: the umask every acode process runs with, and tightening an older home."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import private
from protocol.errors import ConfigError


@pytest.fixture
def restore_umask(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(private.USER_UMASK_ENV, raising=False)
    saved = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(saved)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_enter_sets_umask_077_and_remembers_the_users_for_children(restore_umask: None, tmp_path: Path) -> None:
    os.umask(0o002)
    assert private.enter() == 0o002
    assert os.environ[private.USER_UMASK_ENV] == "002"
    (tmp_path / "f").write_text("x")
    assert _mode(tmp_path / "f") == 0o600
    assert private.enter() == 0o002  # twice: still the user's, not our own 077
    assert private.user_umask() == 0o002
    assert private.workspace_mode(directory=False) == 0o664
    assert private.workspace_mode(directory=True) == 0o775


def test_a_child_takes_the_umask_its_acode_parent_recorded(restore_umask: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(private.USER_UMASK_ENV, "027")
    os.umask(0o077)  # what the parent passed down
    assert private.enter() == 0o027
    monkeypatch.setenv(private.USER_UMASK_ENV, "not octal")
    assert private.enter() == 0o077  # a garbled value: the process's own umask stands


def test_secure_home_tightens_every_path_keeps_stricter_modes_and_follows_no_symlink(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "run" / "logs").mkdir(parents=True)
    (home / "acode.db").write_text("")
    (home / "run" / "logs" / "a.log").write_text("")
    (home / "run" / "epoch").write_text("1")
    outside = tmp_path / "outside.txt"
    outside.write_text("not acode's")
    (home / "run" / "link").symlink_to(outside)
    for path, mode in [(home, 0o755), (home / "run", 0o700), (home / "run" / "logs", 0o777),
                       (home / "acode.db", 0o644), (home / "run" / "logs" / "a.log", 0o666),
                       (home / "run" / "epoch", 0o400), (outside, 0o644)]:
        os.chmod(path, mode)
    changed = private.secure_home(home)
    assert sorted((str(c.path), c.old, c.new) for c in changed) == sorted([
        (str(home), 0o755, 0o700), (str(home / "run" / "logs"), 0o777, 0o700),
        (str(home / "acode.db"), 0o644, 0o600), (str(home / "run" / "logs" / "a.log"), 0o666, 0o600)])
    assert _mode(home / "run" / "epoch") == 0o400
    assert _mode(outside) == 0o644  # the link's target is not acode's
    assert private.secure_home(home) == []
    assert str(private.Tightened(home, 0o755, 0o700)) == f"{home} was 0755, now 0700"


def test_secure_home_creates_a_missing_home_private(restore_umask: None, tmp_path: Path) -> None:
    home = tmp_path / "a" / "b"
    assert private.secure_home(home) == []
    assert _mode(home) == 0o700


def test_a_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "file"
    home.write_text("")
    with pytest.raises(ConfigError, match=r"is not a directory.*\(ACODE-CFG-004\)"):
        private.secure_home(home)
