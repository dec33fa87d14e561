"""Forcing the sandbox's isolation, and kill -9 of the sandbox mid-command in every mode.

The sandbox picks the strongest isolation it finds, so on a machine with bubblewrap the
weaker modes would never run under a real sandbox actor. The ``isolation`` and ``tree``
options (or ``ACODE_SANDBOX_ISOLATION`` / ``ACODE_SANDBOX_TREE``) force one; these tests
force each mode this machine offers, start a real sandbox process, run a command that
double-forks a ``setsid`` daemon, SIGKILL the sandbox and check, pid by pid, that nothing
of the command's tree survives. A mode the machine lacks is skipped, naming what is missing.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors.sandbox.actor import isolation_of
from actors.sandbox.confinement.isolation import READS_NOT_CONFINED, Level, Tree, choose
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import ConfigError, SandboxError
from protocol.messages import RunTool, ToolDone
from protocol.policy.sandbox import SandboxPolicy
from tests.harness import Harness, wait_until

JOURNAL = "tests.actors.sandbox.journal_actor"  # persistence's tool-call journal, in memory

# (isolation, tree) -> what the sandbox must report it runs with
MODES: dict[str, tuple[Level, Tree | None, str]] = {
    "bubblewrap": ("bubblewrap", None, "bubblewrap; only the workspace, system and toolchain dirs exist"),
    "process+pidns": ("process", "pidns", f"process; {READS_NOT_CONFINED}; pid namespace"),
    "process+subreaper": ("process", "subreaper", f"process; {READS_NOT_CONFINED}; subreaper"),
    "landlock+subreaper": ("landlock", "subreaper", "landlock; Landlock ABI"),
}
KILLED_WITHIN_S = 5.0


def _available(level: Level, tree: Tree | None) -> None:
    """Skip unless this machine offers the mode (the reason is choose()'s: what is missing)."""
    try:
        choose(level, tree or "auto")
    except SandboxError as exc:
        pytest.skip(f"this machine cannot run {level}+{tree or 'auto'}: {exc}")


@pytest.fixture
def journal(harness: Harness) -> Harness:
    harness.start("broker")
    harness.start("persistence", module=JOURNAL)
    return harness


def _options(level: Level, tree: Tree | None) -> dict[str, Any]:
    return {"isolation": level, **({"tree": tree} if tree else {})}


def _daemon_command(marker: str) -> str:
    """Python whose child ``setsid``s and forks a grandchild, then exits; the grandchild
    writes its pid to ``grandchild.pid`` (atomically) and becomes ``sleep <marker>``; the
    command itself sleeps on."""
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        open('grandchild.tmp', 'w').write(str(os.getpid()))\n"
            "        os.replace('grandchild.tmp', 'grandchild.pid')\n"
            f"        os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\ntime.sleep(600)")
    return f"python -c \"{code}\""


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE  # a zombie runs nothing; its parent reaps it
    except psutil.NoSuchProcess:
        return False


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())[:100]
    except psutil.Error:
        return "?"


def _marked(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker] and _alive(p)]


@pytest.fixture
def survivors() -> Iterator[list[psutil.Process]]:
    """Processes a test watches; any still alive at the end is killed here (by pid, after
    psutil checked it is still the same process), so a failing test leaks nothing."""
    watched: list[psutil.Process] = []
    yield watched
    for process in watched:
        if _alive(process):
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.mark.parametrize("mode", list(MODES))
def test_killing_the_sandbox_mid_command_kills_the_whole_tree_in_every_mode(
        mode: str, journal: Harness, tmp_path: Path, survivors: list[psutil.Process]) -> None:
    level, tree, described = MODES[mode]
    _available(level, tree)
    journal.start("sandbox", **_options(level, tree))
    info = journal.wait_ready("sandbox").info["isolation"]
    assert info.startswith(described) and "forced by sandbox option isolation=" in info, info
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = f"{9_000_000 + secrets.randbelow(10**6)}.5"  # a sleep nobody else runs: found by its cmdline
    request = RunTool(key=new_id(), session_id="s1", workspace=str(workspace), tool="run_terminal",
                      arguments={"command": _daemon_command(marker), "timeout_s": 120},
                      policy=SandboxPolicy(allow_inline_code=True))
    client = journal.client()
    request_id = client.send("sandbox", request, timeout=60, decoder=codec.SANDBOX_REPLY, retry_on_lost=False)
    sandbox = psutil.Process(journal.procs["sandbox"].pid)

    [grandchild] = wait_until(lambda: (workspace / "grandchild.pid").exists() and _marked(marker),
                              what=f"the double-forked grandchild under {mode}")
    tree_now = [p for p in sandbox.children(recursive=True) if _alive(p)]
    survivors.extend([*tree_now, grandchild])
    assert grandchild.pid in {p.pid for p in tree_now}, "the grandchild is not in the sandbox's tree"
    assert len(tree_now) >= 3, [p.cmdline() for p in tree_now]  # launcher, command, grandchild at least
    if tree == "subreaper":  # no PID namespace: the pid the grandchild wrote is the host's
        assert int((workspace / "grandchild.pid").read_text()) == grandchild.pid

    journal.kill("sandbox")
    client.cancel(request_id)
    try:
        wait_until(lambda: not any(_alive(p) for p in tree_now) and not _marked(marker), timeout=KILLED_WITHIN_S,
                   what="the command's tree gone")
    except AssertionError:
        alive = [(p.pid, _cmdline(p)) for p in [*tree_now, *_marked(marker)] if _alive(p)]
        raise AssertionError(f"{mode}: {len(alive)} process(es) of the command's tree still alive "
                             f"{KILLED_WITHIN_S:g}s after the sandbox was killed: {alive}") from None


def test_the_environment_forces_the_mode_and_commands_run_under_it(
        journal: Harness, tmp_path: Path) -> None:
    journal.start("sandbox", env={"ACODE_SANDBOX_ISOLATION": "process", "ACODE_SANDBOX_TREE": "subreaper"})
    info = journal.wait_ready("sandbox").info["isolation"]
    assert info.startswith(f"process; {READS_NOT_CONFINED}; subreaper; process limit by ")
    assert info.endswith(" (forced by ACODE_SANDBOX_ISOLATION=process, ACODE_SANDBOX_TREE=subreaper)")
    request = RunTool(key=new_id(), session_id="s1", workspace=str(tmp_path), tool="run_terminal",
                      arguments={"command": "echo hi"})
    reply = journal.client().call("sandbox", request, timeout=15, decoder=codec.SANDBOX_REPLY)
    assert isinstance(reply, ToolDone)
    assert (reply.result.ok, reply.result.output) == (True, "hi\n")
    assert reply.result.isolation.startswith(f"process; {READS_NOT_CONFINED}; subreaper; process limit by ")


def test_an_option_wins_over_the_environment(journal: Harness) -> None:
    _available("landlock", "pidns")
    journal.start("sandbox", env={"ACODE_SANDBOX_ISOLATION": "landlock", "ACODE_SANDBOX_TREE": "subreaper"},
                  tree="pidns")
    info = journal.wait_ready("sandbox").info["isolation"]
    assert "pid namespace" in info and "subreaper" not in info.split(" (forced")[0], info
    assert info.endswith("(forced by ACODE_SANDBOX_ISOLATION=landlock, sandbox option tree=pidns)"), info


def test_forcing_a_level_the_machine_lacks_fails_the_start_with_sbx_015(journal: Harness, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = journal.start("sandbox", env={"PATH": str(empty), "ACODE_SANDBOX_ISOLATION": "bubblewrap"}, wait=False)
    assert proc.wait(30) == 1
    log = journal.log("sandbox")
    assert ("isolation 'bubblewrap' is forced (by ACODE_SANDBOX_ISOLATION=bubblewrap) but this machine cannot "
            "provide it: no bwrap on the PATH; to get it, install bubblewrap") in log
    assert "(ACODE-SBX-015)" in log
    assert "actor_ready" not in log  # it never served, under bubblewrap or anything weaker


def test_contradictory_or_unknown_settings_are_refused_before_anything_is_probed(harness: Harness) -> None:
    spec = harness.spec("sandbox", isolation="bubblewrap", tree="subreaper")
    with pytest.raises(ConfigError, match=r"tree 'subreaper' cannot go with it \(forced by sandbox option "
                                          r"isolation=bubblewrap, sandbox option tree=subreaper\)"):
        isolation_of(spec, {})
    with pytest.raises(ConfigError, match="isolation is auto, process, landlock or bubblewrap "
                                          r"\(ACODE_SANDBOX_ISOLATION\)") as bad:
        isolation_of(harness.spec("sandbox"), {"ACODE_SANDBOX_ISOLATION": "bwrap"})
    assert bad.value.code == "ACODE-CFG-001" and "'bwrap'" in str(bad.value)
    with pytest.raises(ConfigError, match="isolaton"):
        isolation_of(harness.spec("sandbox", isolaton="process"), {})


def test_auto_is_the_strongest_level_and_is_not_reported_as_forced(harness: Harness) -> None:
    isolation, forced = isolation_of(harness.spec("sandbox", isolation="auto"), {"ACODE_SANDBOX_TREE": "auto"})
    assert forced == ""
    assert isolation == choose()
