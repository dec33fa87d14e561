"""run_terminal with real processes, under every isolation this machine offers.

Each test runs once per variant: bubblewrap, Landlock, process-level with a PID
namespace, and process-level with the subreaper fallback. A variant this machine cannot
give is skipped with the reason (CI installs bubblewrap, so it runs them all there).
Processes a command leaves behind are found by a unique marker in their command line,
since under a PID namespace the pids a command prints are not the host's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.confinement.isolation import Isolation, PidsCgroup, command_env, detect
from actors.sandbox.tools.output import Outcome
from actors.sandbox.tools.terminal import SCRATCH_PREFIX, Terminal, sweep_scratch
from protocol.calls.tools import RunTerminal
from protocol.errors import SandboxError
from protocol.policy.sandbox import SandboxPolicy
from tests.actors.sandbox.conftest import CANARY, Tree
from tests.harness import wait_until

# Tests use sh and inline Python to build their attacks; the policy's own refusals are
# tested in test_policy.py.
OPEN = SandboxPolicy(allow_inline_code=True, extra_commands=["sh", "sleep", "yes", "cat", "touch", "dd", "head"])
PY = "python -c"
Run = Callable[..., Outcome]

_FOUND: dict[str, Isolation | None] = {}


def _variant(name: str) -> Isolation | None:
    if name not in _FOUND:
        full = detect()
        pids = full.pids
        _FOUND["bubblewrap"] = full if full.level == "bubblewrap" else None
        no_bwrap = detect(bubblewrap=False)
        _FOUND["landlock"] = no_bwrap if no_bwrap.level == "landlock" else None
        _FOUND["pidns"] = Isolation(level="process", pidns=True, pids=pids) if full.pidns else None
        _FOUND["subreaper"] = Isolation(level="process", pidns=False, pids=pids)
    return _FOUND[name]


_WHY = {"bubblewrap": "bwrap is not on the PATH or the kernel refuses its namespaces (apt install bubblewrap)",
        "landlock": "this kernel has no Landlock (5.13+ with Landlock enabled)",
        "pidns": "this machine refuses PID namespaces (not root and no unprivileged user namespaces)"}


@pytest.fixture(params=["bubblewrap", "landlock", "pidns", "subreaper"])
def isolation(request: pytest.FixtureRequest) -> Isolation:
    found = _variant(request.param)
    if found is None:
        pytest.skip(_WHY[request.param])
    return found


@pytest.fixture
def terminal(isolation: Isolation) -> Iterator[Terminal]:
    terminal = Terminal(isolation)
    yield terminal
    terminal.close()


@pytest.fixture
def run(terminal: Terminal, tree: Tree) -> Iterator[Run]:
    with Workspace(str(tree.root)) as ws:
        def run(command: str, *, timeout_s: float = 20.0, max_bytes: int = 64_000,
                policy: SandboxPolicy = OPEN) -> Outcome:
            return terminal.run(ws, RunTerminal(command=command), timeout_s=timeout_s, max_bytes=max_bytes,
                                policy=policy)
        yield run


def _marked(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if marker in " ".join(process.info["cmdline"] or ()) and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def _marker() -> str:
    """A sleep duration nobody else uses: its command line identifies our process."""
    return f"{1000 + uuid.uuid4().int % 10**6 / 1000:.3f}"


# Python that double-forks a grandchild into its own session (the classic daemon escape);
# the grandchild sleeps for ``marker`` seconds.
def _daemon(marker: str) -> str:
    return (f"{PY} \"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\n"
            "time.sleep(0.2)\nprint('parent done')\"")


# --- what every variant does -----------------------------------------------------------------

def test_a_command_reports_its_exit_code_and_combined_output(run: Run, isolation: Isolation) -> None:
    outcome = run("sh -c 'echo out; echo err >&2; exit 3'")
    assert (outcome.exit_code, outcome.ok, outcome.output) == (3, False, "out\nerr\n")
    assert outcome.isolation == isolation.describe()
    # killed by a signal: minus the signal, as subprocess says; bubblewrap says 128 + signal, as a shell does
    assert run("sh -c 'kill -9 $$'").exit_code == (137 if isolation.level == "bubblewrap" else -9)


def test_a_command_runs_in_the_workspace_in_its_own_session_with_stdin_empty(run: Run, tree: Tree) -> None:
    outcome = run(f"{PY} \"import os, sys; print(os.getcwd()); print(os.getsid(0) == os.getpgid(0)); "
                  "print(repr(sys.stdin.read()))\"")
    assert outcome.output == f"{os.path.realpath(tree.root)}\nTrue\n''\n"


def test_interactive_commands_see_end_of_input_instead_of_waiting(run: Run) -> None:
    outcome = run(f"{PY} \"input('name? ')\"", timeout_s=10)
    assert outcome.error is None  # it did not wait for the deadline
    assert outcome.exit_code == 1 and "EOFError" in outcome.output
    assert run("cat").output == ""


def test_output_over_the_limit_keeps_head_and_tail_and_marks_the_cut(run: Run) -> None:
    outcome = run(f"{PY} \"print('a' * 5000); print('b' * 5000)\"", max_bytes=1024)
    assert outcome.output == "a" * 512 + "\n[… truncated: 8978 bytes cut from the middle …]\n" + "b" * 511 + "\n"


def test_endless_output_stays_bounded_until_the_deadline(run: Run) -> None:
    outcome = run("yes", timeout_s=1, max_bytes=2048)
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-006"
    assert outcome.output.startswith("y\ny\n") and "bytes cut from the middle" in outcome.output
    assert len(outcome.output) < 2200


def test_one_ten_megabyte_line_is_capped(run: Run) -> None:
    outcome = run(f"{PY} \"import sys; sys.stdout.write('x' * 10_000_000)\"", max_bytes=4096)
    assert outcome.exit_code == 0
    assert outcome.output == "x" * 2048 + "\n[… truncated: 9995904 bytes cut from the middle …]\n" + "x" * 2048


def test_binary_output_is_made_safe_text(run: Run) -> None:
    outcome = run(f"{PY} \"import sys; sys.stdout.buffer.write(bytes(range(256)) + b'\\x1b[31mred\\x1b[0m "
                  "\\x1b]0;title\\x07end')\"")
    text = outcome.output
    assert "red" in text and "end" in text and "title" not in text
    assert not any(ch in text for ch in "\x1b\x00\x07\x7f\x9b")  # escapes and controls stripped
    assert "\ufffd" in text  # invalid UTF-8 replaced


def test_a_timeout_kills_the_whole_tree_including_a_double_forked_daemon(run: Run) -> None:
    marker = _marker()
    outcome = run(f"{PY} \"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                  f"        os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\nprint('started', flush=True)\n"
                  "time.sleep(100)\"", timeout_s=1.5)
    assert outcome.error is not None and outcome.error.code == "ACODE-SBX-006"
    assert "killed with every process it started" in outcome.error.message
    assert outcome.output == "started\n"
    wait_until(lambda: not _marked(marker), timeout=5, what="the setsid grandchild killed")


def test_background_and_double_forked_children_die_when_the_command_exits(run: Run) -> None:
    marker, other = _marker(), _marker()
    assert run(_daemon(marker)).output == "parent done\n"
    assert run(f"sh -c 'sleep {other} & echo started'").output == "started\n"
    wait_until(lambda: not _marked(marker) and not _marked(other), timeout=5, what="leftover children killed")


def test_kill_all_ends_running_commands(terminal: Terminal, tree: Tree) -> None:
    outcomes: list[Outcome] = []
    with Workspace(str(tree.root)) as ws:
        thread = threading.Thread(target=lambda: outcomes.append(
            terminal.run(ws, RunTerminal(command="sleep 100"), timeout_s=60, max_bytes=1024, policy=OPEN)))
        thread.start()
        wait_until(lambda: terminal._running, what="command running")
        time.sleep(0.2)  # past the launcher's start
        terminal.kill_all()
        thread.join(10)
    assert outcomes and outcomes[0].exit_code is not None and outcomes[0].exit_code != 0


def test_concurrent_calls_each_get_their_own_output(terminal: Terminal, tree: Tree) -> None:
    results: dict[int, Outcome] = {}
    with Workspace(str(tree.root)) as ws:
        def one(i: int) -> None:
            for wave in range(2):  # ends and starts overlap: one's end may not undo another's mounts
                results[i + 8 * wave] = terminal.run(
                    ws, RunTerminal(command=f"sh -c 'sleep 0.{i}; echo call-{i + 8 * wave}'"), timeout_s=30,
                    max_bytes=1024, policy=OPEN)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert {i: r.output for i, r in results.items()} == {i: f"call-{i}\n" for i in range(16)}
    assert not (tree.root / ".git").exists() and not (tree.root / ".agent").exists()  # mount points gone


def test_a_memory_hog_hits_its_limit(run: Run) -> None:
    outcome = run(f"{PY} \"x = bytearray(2 * 2**30)\"", policy=OPEN.__class__(
        allow_inline_code=True, memory_limit_mb=512))
    assert outcome.exit_code == 1 and "MemoryError" in outcome.output


def test_a_disk_fill_stops_at_the_file_size_limit(run: Run, tree: Tree) -> None:
    policy = SandboxPolicy(allow_inline_code=True, file_size_limit_mb=1)
    outcome = run(f"{PY} \"import signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                  "with open('big', 'wb') as f: f.write(b'x' * 5_000_000)\"", policy=policy)
    assert outcome.exit_code == 1 and "File too large" in outcome.output
    assert (tree.root / "big").stat().st_size <= 2**20


def test_a_fork_bomb_stops_at_the_process_limit(run: Run, isolation: Isolation) -> None:
    if isolation.pids == "none":
        pytest.skip("no pids cgroup and RLIMIT_NPROC does not bind root: a fork bomb here would hurt the machine")
    policy = SandboxPolicy(allow_inline_code=True, max_processes=32)
    outcome = run(f"{PY} \"import os, time\nfailed = 0\nfor _ in range(200):\n    try:\n"
                  "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
                  "    except OSError:\n        failed += 1\nprint('refused', failed)\"", policy=policy, timeout_s=20)
    assert outcome.exit_code == 0
    refused = int(outcome.output.split()[-1])
    assert refused >= 200 - 32  # the rest were refused: the limit held


def test_the_environment_is_an_allowlist_with_a_scratch_home(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_TEST_TOKEN", "leak-me")
    monkeypatch.setenv("UNLISTED_SETTING", "leak-me-too")
    outcome = run(f"{PY} \"import os, sys; print(sys.executable); print(sorted(os.environ))\n"
                  "print(os.environ['HOME'], os.environ['TMPDIR'], os.environ['GIT_CONFIG_GLOBAL'])\n"
                  "open(os.environ['HOME'] + '/x', 'w').write('ok')\"")
    executable, names, dirs = outcome.output.splitlines()
    assert executable == sys.executable
    assert "SANDBOX_TEST_TOKEN" not in names and "UNLISTED_SETTING" not in names
    home, tmp, git = dirs.split()
    assert home.endswith("/home") and tmp.endswith("/tmp") and git == "/dev/null"
    assert not os.path.exists(home)  # the scratch dir is gone after the call


def test_command_env_drops_secret_names_even_when_passed() -> None:
    env = command_env(Path("/s"), base={"PATH": "/usr/bin", "OPENAI_API_KEY": "k", "MY_TOKEN": "t", "LC_ALL": "C",
                                        "FOO": "f", "BAR_PASSWORD": "p"}, extra=frozenset({"FOO", "BAR_PASSWORD"}))
    assert {k: env[k] for k in ("LC_ALL", "FOO", "HOME", "TMPDIR")} == {"LC_ALL": "C", "FOO": "f",
                                                                          "HOME": "/s/home", "TMPDIR": "/s/tmp"}
    assert not {"OPENAI_API_KEY", "MY_TOKEN", "BAR_PASSWORD"} & set(env)


def test_a_missing_executable_cannot_start_and_is_named(run: Run, tree: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        run("no-such-command-4d1 --help", policy=SandboxPolicy(extra_commands=["no-such-command-4d1"]))
    assert str(info.value) == ("command 'no-such-command-4d1' was not found on PATH; install it or run a command "
                               "that exists (ACODE-SBX-005)")


# --- what only the stronger layers do ----------------------------------------------------------

def _confining(isolation: Isolation) -> None:
    if isolation.level == "process":
        pytest.skip("process-level isolation does not confine writes or the network")


def test_writes_outside_the_workspace_are_refused(run: Run, tree: Tree, isolation: Isolation) -> None:
    _confining(isolation)
    target = tree.outside / "canary.txt"
    outcome = run(f"{PY} \"open({str(target)!r}, 'w').write('pwned')\"")
    # refused, or (bubblewrap, whose /tmp is fresh) not even visible
    assert outcome.exit_code == 1 and any(why in outcome.output for why in (
        "Read-only file system", "Permission denied", "No such file or directory"))
    assert target.read_text() == CANARY
    assert run(f"{PY} \"open('inside.txt', 'w').write('ok')\"").exit_code == 0
    assert (tree.root / "inside.txt").read_text() == "ok"


def test_the_network_is_out_of_reach(run: Run, isolation: Isolation) -> None:
    _confining(isolation)
    if isolation.level == "landlock" and isolation.landlock_abi < 4:
        pytest.skip("Landlock before ABI 4 does not restrict TCP")
    with socket.socket() as listener:  # a host service on loopback the command must not reach
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        outcome = run(f"{PY} \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\"")
    assert outcome.exit_code == 1
    assert "Connection refused" in outcome.output or "Permission denied" in outcome.output


def test_hidden_paths_are_invisible_under_bubblewrap(terminal: Terminal, tree: Tree, isolation: Isolation) -> None:
    if isolation.level != "bubblewrap":
        pytest.skip("only bubblewrap hides paths")
    terminal.hide(str(tree.outside))
    with Workspace(str(tree.root)) as ws:
        outcome = terminal.run(ws, RunTerminal(command=f"cat {tree.outside / 'canary.txt'}"), timeout_s=10,
                               max_bytes=4096, policy=OPEN)
    assert outcome.exit_code == 1 and CANARY not in outcome.output


def test_a_required_level_that_is_missing_refuses_to_run(tree: Tree) -> None:
    terminal = Terminal(Isolation(level="process", pidns=True))
    with Workspace(str(tree.root)) as ws:
        for minimum in ("landlock", "bubblewrap"):
            with pytest.raises(SandboxError) as info:
                terminal.run(ws, RunTerminal(command="touch ran"), timeout_s=5, max_bytes=1024,
                             policy=SandboxPolicy(require_isolation=minimum, extra_commands=["touch"]))
            assert info.value.code == "ACODE-SBX-015"
            assert f"isolation '{minimum}' is required" in str(info.value) and "offers 'process'" in str(info.value)
    assert not (tree.root / "ran").exists()
    terminal.close()


def test_the_pids_cgroup_is_removed_after_each_command(tree: Tree) -> None:
    if PidsCgroup.base() is None:
        pytest.skip("no writable pids cgroup here")
    terminal = Terminal(detect(bubblewrap=False))
    with Workspace(str(tree.root)) as ws:
        terminal.run(ws, RunTerminal(command="sleep 0.1"), timeout_s=5, max_bytes=1024, policy=OPEN)
    cgroups = terminal._cgroups
    assert cgroups is not None and cgroups.root.exists() and not [p for p in cgroups.root.iterdir() if p.is_dir()]
    terminal.close()
    assert not cgroups.root.exists()


def test_a_scratch_directory_left_by_a_dead_sandbox_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f"{SCRATCH_PREFIX}{dead.pid}-abc"
    (left / "home").mkdir(parents=True)
    (left / "home" / "secret").write_text("what a command left")
    live = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    live.mkdir()
    unrelated = tmp_path / f"{SCRATCH_PREFIX}notapid"
    unrelated.mkdir()
    assert sweep_scratch(tmp_path) == 1
    assert not left.exists() and live.exists() and unrelated.exists()
