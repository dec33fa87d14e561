"""run_terminal with real processes: exit codes, caps, timeouts, process trees, environment."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator

import psutil
import pytest

from actors.sandbox.confine import Workspace
from actors.sandbox.output import Outcome
from actors.sandbox.terminal import Terminal, command_env
from protocol.errors import SandboxError
from protocol.tools import RunTerminal
from tests.actors.sandbox.conftest import Tree
from tests.harness import wait_until

PY = "python -c"
Run = Callable[..., Outcome]


@pytest.fixture
def run(tree: Tree) -> Iterator[Run]:
    terminal = Terminal()
    with Workspace(str(tree.root)) as ws:
        def run(command: str, *, timeout_s: float = 20.0, max_bytes: int = 64_000) -> Outcome:
            return terminal.run(ws, RunTerminal(command=command), timeout_s=timeout_s, max_bytes=max_bytes)
        yield run


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_command_reports_its_exit_code_and_combined_output(run: Run, tree: Tree) -> None:
    outcome = run("sh -c 'echo out; echo err >&2; exit 3'")
    assert (outcome.exit_code, outcome.ok, outcome.output) == (3, False, "out\nerr\n")
    assert run("true").ok


def test_a_command_runs_in_the_workspace_in_its_own_session_with_stdin_empty(run: Run, tree: Tree) -> None:
    outcome = run(f"{PY} \"import os, sys; print(os.getcwd()); print(os.getsid(0) == os.getpid()); "
                  "print(repr(sys.stdin.read()))\"")
    assert outcome.output == f"{os.path.realpath(tree.root)}\nTrue\n''\n"


def test_output_over_the_limit_keeps_head_and_tail_and_marks_the_cut(run: Run) -> None:
    outcome = run(f"{PY} \"print('a' * 5000); print('b' * 5000)\"", max_bytes=1024)
    assert outcome.output == "a" * 512 + "\n[… truncated: 8978 bytes cut from the middle …]\n" + "b" * 511 + "\n"


def test_endless_output_stays_bounded_and_invalid_utf8_is_replaced(run: Run) -> None:
    outcome = run(f"{PY} \"import sys; sys.stdout.buffer.write(b'\\xff' + b'x' * 20_000_000)\"", max_bytes=2048)
    assert outcome.output.startswith("\ufffd" + "x" * 1023)
    assert "[… truncated: 19997953 bytes cut from the middle …]" in outcome.output
    assert len(outcome.output) < 2200


def test_a_timeout_kills_the_whole_process_tree_and_returns_the_output_so_far(run: Run) -> None:
    outcome = run("sh -c 'sleep 100 & echo $! $$; wait'", timeout_s=0.5)
    assert outcome.error is not None
    assert outcome.error.code == "ACODE-SBX-006"
    assert outcome.error.message == ("command \"sh -c 'sleep 100 & echo $! $$; wait'\" did not finish within 0.5s "
                                     "and was killed with its process group; make it faster or give it a larger "
                                     "timeout_s")
    assert not outcome.ok
    pids = [int(p) for p in outcome.output.split()]
    assert len(pids) == 2
    wait_until(lambda: all(_gone(pid) for pid in pids), timeout=5, what="sleep and sh killed")


def test_background_children_die_when_the_command_exits(run: Run) -> None:
    outcome = run("sh -c 'sleep 100 & echo $!'")  # the child keeps the pipe open after sh exits
    assert outcome.exit_code == 0
    wait_until(lambda: _gone(int(outcome.output)), timeout=5, what="background sleep killed")


def test_kill_all_ends_running_commands(tree: Tree) -> None:
    terminal = Terminal()
    outcomes: list[Outcome] = []
    with Workspace(str(tree.root)) as ws:
        thread = threading.Thread(target=lambda: outcomes.append(
            terminal.run(ws, RunTerminal(command="sleep 100"), timeout_s=60, max_bytes=1024)))
        thread.start()
        wait_until(lambda: terminal._running, what="command running")
        terminal.kill_all()
        thread.join(10)
    assert outcomes[0].exit_code == -9


def test_a_missing_executable_cannot_start_and_is_named(run: Run, tree: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        run("no-such-command-4d1 --help")
    assert str(info.value) == ("command 'no-such-command-4d1' was not found on PATH; install it or run a command "
                               "that exists (ACODE-SBX-005)")
    (tree.root / "script.sh").write_text("#!/bin/sh\necho hi\n")  # not executable
    for command, reason in (("./missing.sh", "No such file or directory (errno 2)"),
                            ("./script.sh", "Permission denied (errno 13)")):
        with pytest.raises(SandboxError) as info:
            run(command)
        assert str(info.value) == (f"command '{command}' could not start: {reason}; check that it exists and is "
                                   "executable (ACODE-SBX-005)")


def test_a_command_that_does_not_parse_is_invalid_arguments(run: Run) -> None:
    with pytest.raises(SandboxError) as info:
        run('echo "unterminated')
    assert str(info.value) == ("command 'echo \"unterminated' could not be parsed: No closing quotation; quote it "
                               "as a POSIX shell would (no shell runs it) (ACODE-SBX-007)")


def test_the_environment_drops_secrets_and_puts_acodes_python_first(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    env = command_env({"PATH": "/usr/bin", "OPENAI_API_KEY": "k", "gh_token": "t", "DB_PASSWORD": "p",
                       "MY_SECRET_X": "s", "HOME": "/h"})
    assert env == {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin", "HOME": "/h"}
    monkeypatch.setenv("SANDBOX_TEST_TOKEN", "leak-me")
    outcome = run(f"{PY} \"import os, sys; print(sys.executable); print('leak-me' in str(os.environ))\"")
    assert outcome.output == f"{sys.executable}\nFalse\n"
