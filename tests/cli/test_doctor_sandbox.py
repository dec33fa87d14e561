"""``acode doctor`` and ``acode status`` on the sandbox: what a command can read, the
configured read and write paths, and hard-linked files whose other name is outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.paths import RunPaths
from actors.sandbox.confinement.hardlinks import outside
from actors.sandbox.confinement.isolation import READS_NOT_CONFINED, Isolation, Level
from cli import doctor
from protocol.messages import ActorStatus, StatusReport


def _config(paths: RunPaths, text: str) -> None:
    """The user's config: read and write paths are theirs to grant (a workspace's own file may only tighten)."""
    paths.home.mkdir(parents=True, exist_ok=True)
    (paths.home / "config.yml").write_text(text)


@pytest.fixture
def site(tmp_path: Path) -> tuple[RunPaths, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return RunPaths(tmp_path / "acode-home"), workspace


def test_doctor_reports_files_with_a_hard_link_outside_the_workspace(site: tuple[RunPaths, Path],
                                                                     tmp_path: Path) -> None:
    _, workspace = site
    (workspace / "pkg").mkdir()
    store = tmp_path / "store"
    store.mkdir()
    (store / "blob").write_text("from a pnpm-like store\n")
    os.link(store / "blob", workspace / "pkg" / "linked.js")  # its other name is outside
    (workspace / "a.txt").write_text("a\n")
    os.link(workspace / "a.txt", workspace / "pkg" / "a-again.txt")  # both names inside: fine
    os.symlink(store / "blob", workspace / "sym")  # a symlink is not a hard link, and is not followed

    assert outside(str(workspace)).paths == ["pkg/linked.js"]
    check = doctor._hardlink_check(workspace)
    assert (check.name, check.ok, check.warning) == ("hard links", True, True)
    assert check.detail.startswith(f"1 file(s) in {workspace} have another name outside it: pkg/linked.js (")
    assert "read_file shows their content" in check.detail and "cp --remove-destination" in check.fix
    (workspace / "pkg" / "linked.js").unlink()
    clean = doctor._hardlink_check(workspace)
    assert not clean.warning and clean.detail.startswith(f"no file in {workspace} has a hard link outside it")


def test_doctor_and_status_show_the_read_and_write_paths_and_what_commands_see(
        site: tuple[RunPaths, Path], tmp_path: Path) -> None:
    paths, workspace = site
    shared, out = tmp_path / "shared", tmp_path / "out"
    shared.mkdir()
    out.mkdir()
    _config(paths, f"sandbox: {{read_paths: [{shared}], write_paths: [{out}], read_opt: false}}\n")
    check = doctor._paths_check(paths, workspace, "bubblewrap")
    assert check.ok and not check.warning, check
    assert check.detail.startswith(f"read_paths {shared}; write_paths {out}; /opt not seen; commands see the "
                                   "workspace and a scratch HOME/TMPDIR (read-write)")
    assert f"write_paths {out} (read-write)" in check.detail and check.detail.endswith("nothing else")
    line = doctor.configured_paths(paths, workspace)
    assert line == (f"sandbox paths for {workspace}: read_paths {shared} (read-only); write_paths {out} "
                    "(read-write); /opt not seen; minimum isolation process")
    process = doctor._paths_check(paths, workspace, "process")
    assert process.warning and "NOT enforced at the process level" in process.detail


def test_a_bad_read_path_fails_the_doctor_with_its_code(site: tuple[RunPaths, Path]) -> None:
    paths, workspace = site
    _config(paths, "sandbox: {read_paths: [/]}\n")
    check = doctor._paths_check(paths, workspace, "landlock")
    assert not check.ok and "sandbox.read_paths entry '/' is /" in check.detail and "(ACODE-CFG-001)" in check.detail
    assert "configuration error" in doctor.configured_paths(paths, workspace)


def test_the_process_level_warns_that_reads_are_not_confined(site: tuple[RunPaths, Path]) -> None:
    paths, workspace = site
    sandbox = ActorStatus(instance="sandbox", actor="sandbox", state="ready",
                          info={"isolation": Isolation(level="process").describe()})  # as a running sandbox says
    report = StatusReport(pid=1, home=str(paths.home), started_at=0.0, actors=[sandbox])
    checks = {c.name: c for c in doctor._sandbox_checks(paths, workspace, report)}
    assert checks["sandbox"].warning and READS_NOT_CONFINED in checks["sandbox"].detail
    assert "Landlock" in checks["sandbox"].fix
    assert checks["sandbox paths"].warning


@pytest.mark.parametrize(("level", "pidns", "kernel"), [("bubblewrap", True, True), ("landlock", True, True),
                                                      ("landlock", False, False), ("process", True, True),
                                                      ("process", False, False)])
def test_doctor_shows_how_the_level_enforces_the_protected_paths(site: tuple[RunPaths, Path], level: Level,
                                                                 pidns: bool, kernel: bool) -> None:
    paths, workspace = site
    described = Isolation(level=level, landlock_abi=4 if level == "landlock" else 0, pidns=pidns).describe()
    sandbox = ActorStatus(instance="sandbox", actor="sandbox", state="ready", info={"isolation": described})
    report = StatusReport(pid=1, home=str(paths.home), started_at=0.0, actors=[sandbox])
    check = {c.name: c for c in doctor._sandbox_checks(paths, workspace, report)}["protected paths"]
    assert check.ok and check.detail.startswith(".git/config, .git/hooks/, .git/info/")
    assert check.warning is not kernel
    if kernel:
        assert "read-only binds in the kernel" in check.detail and "compare-and-restore" in check.detail
    else:
        assert f"NOT refused by the kernel at the {level} level without a PID namespace" in check.detail
        assert "restored, and the session pauses (ACODE-SBX-021)" in check.detail and "bubblewrap" in check.fix
