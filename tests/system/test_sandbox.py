"""The sandbox inside a real acode: a canary that must leak nowhere, and forced isolation.

The canary test runs acode as a user would, with a scripted executor that throws an
attack list at the sandbox: reads of a file outside the workspace by ``..``, by absolute
path, through every kind of symlink, through ``/proc``, with the tree tools and with
commands, then writes onto it. The sandbox's unit tests check each tool's result; this one
checks everything acode *keeps*: every file under ``$ACODE_HOME`` (actor logs, the SQLite
database with its ``-wal`` and ``-shm``), and what the CLI prints (``run``, ``show``,
``logs``), while acode runs and again after ``acode down``. The canary must appear nowhere
and stay byte for byte unchanged.

So that a silent grep cannot pass it, the same search must find two control markers that
travel exactly where a leaked canary would: one in a workspace file read by ``read_file``,
one printed by a ``cat`` command. Every attack must also have its ``tool_called`` event.

The canary lives where secrets do, in a fresh directory under the real home directory
(``~/.acode-canary-*/``: an ``id_rsa``-style key, a ``.env`` and a git repository next to
the workspace), removed whatever happens. acode is forced to each level that confines
reads, bubblewrap and Landlock (fail closed: if the level broke, the sandbox would not
start rather than run the attacks weaker); a level the machine lacks is skipped. A third
control marker sits in a configured ``sandbox.read_paths`` directory, read by a command.
The read boundary's own matrix is in tests/actors/sandbox/test_read_boundary.py.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.sandbox.confinement.isolation import Level, choose
from protocol.errors import SandboxError
from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import Acode

pytestmark = pytest.mark.system


LEVELS = ("bubblewrap", "landlock")


@pytest.fixture(params=LEVELS)
def level(request: pytest.FixtureRequest) -> str:
    try:
        choose(request.param)
    except SandboxError as exc:
        pytest.skip(f"this machine cannot force {request.param}: {exc}")
    return str(request.param)


class Site:
    """``~/.acode-canary-*/``: the workspace ``w/`` and, next to it, ``secret/`` (``canary.txt``,
    ``id_rsa``, ``.env``, a git repository ``repo/``); a ``read_paths`` dir ``shared/``."""

    def __init__(self, base: Path):
        self.base = base
        self.workspace = base / "w"
        self.secret = base / "secret"
        self.canary = self.secret / "canary.txt"
        self.content = f"CANARY-{uuid.uuid4().hex}".encode()
        self.control_file = f"CONTROL-FILE-{secrets.token_hex(12)}"
        self.control_cmd = f"CONTROL-CMD-{secrets.token_hex(12)}"
        self.control_log = f"CONTROL-LOG-{secrets.token_hex(12)}"  # the reviewer says it: stage_finished logs it
        self.control_shared = f"CONTROL-SHARED-{secrets.token_hex(12)}"
        self.shared = base / "shared"
        self.secret.mkdir()
        self.shared.mkdir()
        (self.shared / "control.txt").write_text(self.control_shared + "\n")
        self.canary.write_bytes(self.content)
        text = self.content.decode()
        (self.secret / "id_rsa").write_text(f"# {text}\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n"
                                            "-----END OPENSSH PRIVATE KEY-----\n")
        (self.secret / ".env").write_text(f"PROJECT_NOTE={text}\n")
        self.repo = self.secret / "repo"
        self.repo.mkdir()
        (self.repo / "notes.txt").write_text(text + "\n")
        git = {"PATH": os.environ["PATH"], "HOME": str(self.repo), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
               "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        for args in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", "notes"]):
            subprocess.run(["git", *args], cwd=self.repo, env=git, check=True, capture_output=True)
        ws = self.workspace
        (ws / "sub").mkdir(parents=True)
        (ws / ".agent").mkdir()
        # python -c allowed, so the inline-code attack really runs instead of being refused; `git -C` is a
        # shell command the user allowed, so the policy does not stop it before the isolation can
        (ws / ".agent" / "config.yml").write_text(
            f"sandbox: {{allow_inline_code: true, read_paths: [{self.shared}], "
            f"shell_commands: ['git -C {self.repo} log -p', 'cat /proc/1/root{self.canary}']}}\n")
        (ws / "attack.py").write_text(
            "import os, pwd\n"
            f"for path in {[str(self.canary), str(self.secret / 'id_rsa'), str(self.secret / '.env')]!r}:\n"
            "    try:\n        print(open(path).read())\n    except OSError as exc:\n        print(exc.strerror)\n"
            f"for root in (os.path.expanduser('~'), pwd.getpwuid(os.getuid()).pw_dir, {str(base)!r}, '/home'):\n"
            "    for top, dirs, files in os.walk(root):\n"
            "        dirs[:] = [d for d in dirs if d not in ('.pyenv', '.rustup', 'w')]\n"
            "        for name in files:\n"
            "            try:\n                print(open(os.path.join(top, name), errors='replace').read(200))\n"
            "            except OSError:\n                pass\n")
        (ws / "control-file.txt").write_text(self.control_file + "\n")
        (ws / "control-cmd.txt").write_text(self.control_cmd + "\n")
        (ws / "abs_link").symlink_to(self.canary)
        (ws / "rel_link").symlink_to("../secret/canary.txt")
        (ws / "dir_link").symlink_to("../secret")
        (ws / "sub" / "deep_link").symlink_to("../../secret")
        (ws / "proc_link").symlink_to(f"/proc/self/root{self.canary}")


@pytest.fixture
def site(level: str) -> Iterator[Site]:
    with tempfile.TemporaryDirectory(prefix=".acode-canary-", dir=os.path.expanduser("~")) as base:
        yield Site(Path(base))


Call = tuple[str, dict[str, Any]]
# Attacks whose tool may well succeed without doing harm (a search that finds nothing, a
# find that lists nothing, rm -f of a file it cannot see): for them only the grep speaks.
HARMLESS = {("search_code", "."), ("run_terminal", "find"), ("run_terminal", "rm"), ("run_terminal", "tar -xOf"),
            ("run_terminal", "python attack.py")}


def attacks(site: Site) -> list[Call]:
    """Every way out we know of, as (tool, arguments); none may return or change the canary."""
    canary, secret = str(site.canary), str(site.secret)
    reads: list[Call] = [("read_file", {"path": path}) for path in (
        "../secret/canary.txt", canary, "sub/../../secret/canary.txt", "./../secret/canary.txt",
        "abs_link", "rel_link", "dir_link/canary.txt", "sub/deep_link/canary.txt", "proc_link",
        f"/proc/self/root{canary}", "/proc/self/cwd/../secret/canary.txt")]
    trees: list[Call] = [("list_directory", {"path": path})
                         for path in ("..", secret, "dir_link", "sub/deep_link", "/tmp")]
    trees += [("search_code", {"query": "CANARY", "path": path}) for path in (".", "..", secret, "dir_link")]
    commands: list[Call] = [("run_terminal", {"command": command}) for command in (
        "cat ../secret/canary.txt", f"cat {canary}", "cat abs_link", "cat rel_link", "cat dir_link/canary.txt",
        "cat proc_link", f"cat /proc/self/root{canary}", f"sed -n 1p {canary}", "head -c 200 ../secret/canary.txt",
        "cat ../secret/id_rsa", "head ../secret/.env", "cat /proc/self/cwd/../secret/.env",
        f"git -C {site.repo} log -p", f"cat /proc/1/root{canary}", "python attack.py",
        f"grep -r -s CANARY- {site.base} /var/tmp /tmp /home",
        f"git -c core.pager=cat show {canary}", "git diff --no-index ../secret/canary.txt control-cmd.txt",
        "find / -maxdepth 4 -name canary*", "find .. -name canary*", "find /tmp -name canary*",
        f"python -c \"print(open('{canary}').read())\"",
        "python -c \"print(open('../secret/canary.txt').read())\"",
        f"cp {canary} stolen.txt", "tar -cf bundle.tar ../secret", "grep -r CANARY ..",
        "tar -xOf bundle.tar")]
    writes: list[Call] = [("read_file", {"path": "stolen.txt"})]
    writes += [("write_file", {"path": path, "content": "PWNED\n"}) for path in (
        "../secret/canary.txt", canary, "rel_link", "dir_link/canary.txt", f"/proc/self/root{canary}")]
    writes += [("modify_file", {"path": path, "edits": [{"search": "CANARY", "replace": "PWNED"}]})
               for path in (canary, "abs_link", "dir_link/canary.txt")]
    writes += [("create_directory", {"path": "../secret/planted"}),
               ("run_terminal", {"command": f"cp control-cmd.txt {canary}"}),
               ("run_terminal", {"command": f"rm -f {canary}"}),
               ("run_terminal", {"command": "python -c \"open('../secret/canary.txt', 'w').write('PWNED')\""})]
    return [*reads, *trees, *commands, *writes]


def harmless(call: Call) -> bool:
    tool, arguments = call
    what = arguments.get("path", arguments.get("command", ""))
    return any(tool == kind and (what == prefix or what.startswith(prefix + " ")) for kind, prefix in HARMLESS)


def controls(site: Site) -> list[Call]:
    return [("read_file", {"path": "control-file.txt"}), ("run_terminal", {"command": "cat control-cmd.txt"}),
            ("run_terminal", {"command": f"cat {site.shared / 'control.txt'}"})]


def script(site: Site, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "planner": [w.plan(goal="probe the sandbox", checks=[
            {"label": "A1", "description": "the canary is out of a check's reach",
             "check": {"command": "cat ../secret/canary.txt", "expect_exit": 1}},
            {"label": "A2", "description": "nothing leaked"}],
            steps=[{"label": "S1", "title": "attack", "action": "run_command"}])],
        "executor": [{"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls]},
                     w.done("attacks made")],
        "verifier": [{"json": {"passed": True, "summary": "ok",
                               "criteria": [{"label": "A2", "passed": True, "evidence": "nothing seen"}]}}],
        "reviewer": [{"json": {"decision": "approve", "summary": f"contained {site.control_log}", "issues": []}}],
    }


def _files(home: Path) -> list[Path]:
    return sorted(p for p in home.rglob("*") if p.is_file() and not p.is_symlink())


def where(marker: str, home: Path, printed: dict[str, str]) -> list[str]:
    """Every file under ``home`` and every CLI output that holds ``marker`` (raw bytes: the
    database's pages, free ones included, and its WAL are searched as they are on disk)."""
    needle = marker.encode()
    found = [str(p.relative_to(home)) for p in _files(home) if needle in p.read_bytes()]
    return found + [f"<{name}>" for name, text in printed.items() if marker in text]


def no_leak(site: Site, home: Path, printed: dict[str, str], moment: str) -> None:
    """The canary is nowhere, and the controls are found (the search sees what tools returned)."""
    assert where(site.content.decode(), home, printed) == [], f"the canary leaked {moment}"
    assert where(site.content.decode().removeprefix("CANARY-"), home, printed) == [], f"canary leaked {moment}"
    found = {marker: where(marker, home, printed) for marker in (site.control_file, site.control_cmd)}
    found[site.control_shared] = where(site.control_shared, home, printed)
    for marker, places in found.items():
        assert any(place.startswith("acode.db") for place in places), f"{marker} not in the database {moment}"
    assert "run/logs/reviewer.log" in where(site.control_log, home, printed), f"the log control not found {moment}"


def cli_outputs(acode: Acode, session_id: str, run: str) -> dict[str, str]:
    """What the CLI prints about the session and the logs of the actors that saw the attacks
    (``acode logs`` prints a log's raw tail; every log file is searched whole anyway)."""
    commands = [["show", session_id], ["show", session_id, "--json"]]
    commands += [["logs", instance, "-n", "100000"] for instance in ("sandbox", "executor", "coordinator")]
    running = [(command, acode.start(*command)) for command in commands]
    printed = {"acode run": run}
    for command, proc in running:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (command, err)
        printed[" ".join(command)] = out + err
    return printed


def test_no_attack_leaks_the_canary_into_logs_the_database_or_cli_output(acode: Acode, site: Site, level: str) -> None:
    acode.env["ACODE_SANDBOX_ISOLATION"] = level
    assert acode.up().returncode == 0
    sandbox = acode.actor("sandbox")["info"]
    assert sandbox["isolation"].startswith(f"{level};")
    assert sandbox["isolation"].endswith(f"(forced by ACODE_SANDBOX_ISOLATION={level})")
    assert sandbox["reads"].endswith("nothing else")
    attacks_made = attacks(site)
    calls = [*attacks_made, *controls(site)]
    script_path = w.script(site.base / "s.yaml", script(site, calls))
    # the workspace's config loosens the sandbox (inline code, a read path, shell commands): the user trusts it
    assert acode("trust", str(site.workspace)).returncode == 0

    result = acode("run", "probe the sandbox", "--workspace", str(site.workspace), "--provider", "scripted",
                   "--script", str(script_path), "--autonomy", "3")  # every attack reaches the sandbox unasked

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    session_id = result.stdout.split("session ", 1)[1].split(":", 1)[0]
    shown = json.loads(acode("show", session_id, "--json").stdout)
    called = [e for e in shown["events"] if e["type"] == "tool_called" and e["key"].split(":")[1] == "e1"]
    assert [e["tool"] for e in called] == [name for name, _ in calls], "an attack was not made"
    succeeded = [(e["tool"], e["target"], e["summary"]) for e, call in zip(called, calls, strict=True)
                 if e["ok"] and call in attacks_made and not harmless(call)]
    assert succeeded == [], f"attacks that were not refused and did not fail: {succeeded}"
    assert all(e["ok"] for e in called[-len(controls(site)):])
    ran = {e["isolation"].split(";")[0] for e in called if e["tool"] == "run_terminal" and "-c core" not in e["target"]}
    assert ran == {level}  # every command but the one the policy refused ran, under the forced level
    [check] = [e for e in shown["events"] if e["type"] == "check_ran"]
    assert (check["label"], check["passed"], check["exit_code"]) == ("A1", True, 1)

    printed = cli_outputs(acode, session_id, result.stdout + result.stderr)
    status = acode("status", "--workspace", str(site.workspace))
    assert status.returncode == 0 and f"read_paths {site.shared} (read-only)" in status.stdout, status.stdout
    printed["acode status"] = status.stdout + status.stderr
    assert {"acode.db", "acode.db-wal"} <= {p.name for p in _files(acode.home)}
    no_leak(site, acode.home, printed, "while acode runs")
    assert acode("down").returncode == 0
    no_leak(site, acode.home, {}, "after acode down")  # the WAL checkpointed into acode.db
    assert site.canary.read_bytes() == site.content
    assert sorted(p.name for p in site.secret.iterdir()) == [".env", "canary.txt", "id_rsa", "repo"]
    copies = [p.name for p in site.workspace.rglob("*")
              if p.is_file() and not p.is_symlink() and site.content in p.read_bytes()]
    assert copies == [] and not (site.workspace / "stolen.txt").exists()


def test_forcing_isolation_the_machine_lacks_fails_the_sandbox_with_sbx_015_in_acode_status(
        home: Path, tmp_path: Path) -> None:
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    acode = Acode(home, env={"ACODE_SANDBOX_ISOLATION": "bubblewrap", "PATH": str(no_bwrap),
                             "ACODE_SUPERVISION__RESTART_INTENSITY": "0"})
    try:
        up = acode.up()
        assert up.returncode == 1
        sandbox = acode.actor("sandbox")
        assert sandbox["state"] == "failed" and sandbox["pid"] is None
        assert ("isolation 'bubblewrap' is forced (by ACODE_SANDBOX_ISOLATION=bubblewrap) but this machine cannot "
                "provide it: no bwrap on the PATH;") in sandbox["reason"]
        assert "(ACODE-SBX-015)" in sandbox["reason"]
        # `up` returns as soon as the sandbox is failed; the others may still be starting
        wait_until(lambda: all(a["state"] == "ready" for a in acode.status()["actors"] if a["instance"] != "sandbox"),
                   timeout=30, what="every other actor to be ready")
    finally:
        acode.close()


PLANT = """import pathlib
pathlib.Path('.git/config').write_text(pathlib.Path('.git/config').read_text() + pathlib.Path('evil.cfg').read_text())
hooks = pathlib.Path('.git/hooks')
hooks.mkdir(exist_ok=True)
(hooks / 'pre-commit').write_text(pathlib.Path('evil.sh').read_text())
(hooks / 'pre-commit').chmod(0o755)
"""


@pytest.mark.parametrize(("forced", "stage"), [("landlock", "executor"), ("process", "executor"),
                                               ("landlock", "verifier")])
def test_a_command_that_plants_git_config_and_a_hook_is_undone_and_pauses_the_session(
        acode: Acode, tmp_path: Path, forced: Level, stage: str) -> None:
    """Where the kernel cannot refuse the write (Landlock or the process level without
    namespaces: the subreaper tree), the sandbox puts
    .git back as it was and the session pauses with ACODE-SBX-021 (exit 32, in ``acode
    show``), whether the executor's command or the plan's acceptance check did it; the
    user's own ``git status`` and ``git commit`` then run nothing planted.
    (Under bubblewrap or in a mount namespace the write is refused in the kernel:
    tests/actors/sandbox/test_protected_commands.py.)"""
    from tests.modelserver import Json, ModelServer, ToolCalls
    from tests.system.test_models import APPROVE, VERDICT, _configure, _workspace, done, plan

    try:
        choose(forced, "subreaper")
    except SandboxError as exc:
        pytest.skip(f"this machine cannot force {forced}: {exc}")
    marker = tmp_path / "PLANTED-RAN"
    root = _workspace(tmp_path)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@example.com", *args], cwd=root, env=env,
                       check=True, capture_output=True)

    git("init", "-q")
    git("add", "check.py")
    git("commit", "-qm", "one")
    (root / "evil.cfg").write_text(f"[core]\n\tfsmonitor = touch {marker}; true\n")
    (root / "evil.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (root / "plant.py").write_text(PLANT)
    config = (root / ".git" / "config").read_bytes()
    hooks = sorted(p.name for p in (root / ".git" / "hooks").iterdir())
    with ModelServer() as server:
        _configure(acode, server)
        acode.env.update(ACODE_SANDBOX_ISOLATION=forced, ACODE_SANDBOX_TREE="subreaper")  # no mount namespace
        acode.up()
        if stage == "executor":
            server.by_stage(planner=[plan()], executor=[ToolCalls([("run_terminal", {"command": "python plant.py"})]),
                                                        done(), done()], verifier=[VERDICT], reviewer=[APPROVE])
        else:  # the plan's own acceptance check plants it
            checked = plan().value
            checked["tasks"][0]["resources"]["commands"] = ["python plant.py"]
            checked["tasks"][0]["acceptance"] = [{"label": "A1", "description": "it holds",
                                                  "check": {"command": "python plant.py", "expect_exit": 0}}]
            server.by_stage(planner=[Json(checked)], executor=[done(), done()], verifier=[VERDICT],
                            reviewer=[APPROVE])
        result = acode("run", "make greet.txt say hello", "--workspace", str(root), timeout=180)
        output = result.stdout + result.stderr
        assert result.returncode == 32, output
        assert "ACODE-SBX-021" in output and "'.git/config' changed" in output, output
        session_id = output.split("session ", 1)[1].split(":", 1)[0]
        shown = json.loads(acode("show", session_id, "--json").stdout)["session"]
        assert shown["status"] == "paused"
        assert (shown["pause"]["kind"], shown["pause"]["code"]) == ("escalation", "ACODE-SBX-021")
        assert "ACODE-SBX-021" in acode("show", session_id).stdout
    assert (root / ".git" / "config").read_bytes() == config
    assert sorted(p.name for p in (root / ".git" / "hooks").iterdir()) == hooks
    git("status")
    git("commit", "-q", "--allow-empty", "-m", "the user's commit")
    assert not marker.exists(), "a planted payload ran in the user's git"
