"""kill -9 drills: any actor killed while busy is restarted with a new epoch, the run
completes with the same workspace and the same outcome as an undisturbed run, no event
is lost or duplicated, and no tool call with a side effect runs twice.

One actor set serves the whole module (actors are restarted in place, as in production);
the undisturbed baseline runs first on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import Acode, running, wait_exit

pytestmark = pytest.mark.system

DELAY = 2.0


@dataclass
class Baseline:
    manifest: dict[str, str]
    outcome: list[tuple[Any, ...]]


@pytest.fixture(scope="module")
def drill() -> Iterator[Acode]:
    with running("acode-kill-") as acode:
        yield acode


def _run(acode: Acode, root: Path, delays: dict[str, float]) -> Any:
    workspace = w.workspace(root / "w")
    script = w.script(root / "s.yaml", w.workload(delays))
    return workspace, acode.start("run", w.TASK, "--workspace", str(workspace), "--provider", "scripted",
                                  "--script", str(script), "--json")


def _events(acode: Acode, stdout: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    session_id = lines[-1]["session"]["id"]
    shown = acode("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["events"]  # type: ignore[no-any-return]


def _diagnosis(acode: Acode) -> str:
    """What to read when a drill fails: the last session and the actor logs' warnings."""
    sessions = acode("sessions", "--limit", "1").stdout.splitlines()
    shown = acode("show", sessions[-1].split()[0]).stdout if len(sessions) > 1 else ""
    logs = []
    for path in sorted((acode.home / "run" / "logs").glob("*.log")):
        lines = [line for line in path.read_text(errors="replace").splitlines()
                 if '"warning"' in line or '"error"' in line]
        logs += [f"{path.stem}: {line[:400]}" for line in lines[-15:]]
    return shown + "\n" + "\n".join(logs)


@pytest.fixture(scope="module")
def baseline(drill: Acode, tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    workspace, run = _run(drill, tmp_path_factory.mktemp("baseline"), {})
    code, out, err = wait_exit(run)
    assert code == 0, out + err
    return Baseline(w.manifest(workspace), w.outcome(_events(drill, out)))


# target -> (stage answers to slow down, the instance that must be busy at the kill)
DRILLS = {
    "planner": ({"planner": DELAY}, "planner"),
    "executor": ({"executor": DELAY}, "executor"),
    "verifier": ({"verifier": DELAY}, "verifier"),
    "reviewer": ({"reviewer": DELAY}, "reviewer"),
    "sandbox": ({}, "sandbox"),  # killed while slow.py sleeps, after its side effect
    "persistence": ({"executor": DELAY}, "executor"),  # killed mid-run, while the executor works
    "broker": ({"executor": DELAY}, "executor"),
}


@pytest.mark.parametrize("target", list(DRILLS))
def test_kill_9_mid_run_is_survived_without_loss_or_repeated_side_effects(
        drill: Acode, baseline: Baseline, tmp_path: Path, target: str) -> None:
    delays, busy = DRILLS[target]
    workspace, run = _run(drill, tmp_path, delays)
    drill.wait_busy(busy)
    if target == "sandbox":
        # Kill it while slow.py runs with its side effect done: the drill is that acode does not
        # run it again. (Killed before the side effect, the outcome is honestly unknown and a
        # scripted model cannot react to that the way a real one would.)
        wait_until(lambda: (workspace / "log.txt").exists(), what="slow.py's side effect")
    before = drill.kill(target)

    code, out, err = wait_exit(run)

    assert code == 0, f"{target}: exit {code}\n{out}\n{err}\n{_diagnosis(drill)}"
    after = drill.wait_restarted(target, before["epoch"])
    assert after["pid"] != before["pid"] and after["restarts"] == before["restarts"] + 1
    assert w.manifest(workspace) == baseline.manifest  # same files, slow.py's log says it ran once
    events = _events(drill, out)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["id"] for e in events}) == len(events)
    assert w.outcome(events) == baseline.outcome
