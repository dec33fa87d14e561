"""Transient tool failures: retried under their own keys, then shown to the model.

The sandbox here is the real one with a fault hook (tests/actors/stages/flaky_sandbox.py):
``write_file`` of ``flaky<N>…`` fails transiently N times per call.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.stages.execution import executor
from actors.stages.request.context import TOOL_RETRY_WAITS
from protocol.sessions.events import ToolCalled
from tests.actors.stages.conftest import Stack
from tests.actors.stages.test_executor import call, done, plan, step, tool_messages


@pytest.fixture(scope="module")
def flaky() -> Iterator[Stack]:
    with tempfile.TemporaryDirectory(prefix="acode-st-") as path:
        stack = Stack(Path(path))
        try:
            yield stack.start(sandbox_module="tests.actors.stages.flaky_sandbox")
        finally:
            stack.close()


def test_the_retry_waits_are_one_two_and_four_seconds() -> None:
    assert TOOL_RETRY_WAITS == (1.0, 2.0, 4.0)  # seed 004 FR-064/065; tests run with FAST_RETRIES


def test_a_transient_failure_is_retried_under_new_keys_and_the_model_never_sees_it(flaky: Stack) -> None:
    run = flaky.stage("executor", [call("write_file", path="flaky2.txt", content="x\n"), done()], plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "flaky2.txt").read_text() == "x\n"
    [(role, content)] = tool_messages(run, 1)
    assert role == "tool" and content.startswith("write_file: ok\n")
    [written] = [e for e in run.events() if isinstance(e, ToolCalled) and ":ctx" not in e.key]  # context reads
    assert written.key.endswith(":e1:T1/S1:t1:c0:retry2") and written.ok
    assert result.execution.steps[0].tool_calls == 1  # type: ignore[union-attr]  # one call of the model's


def test_a_failure_that_outlasts_three_retries_goes_to_the_model(flaky: Stack) -> None:
    run = flaky.stage("executor", [call("write_file", path="flaky9.txt", content="x\n"),
                                   call("step_failed", reason="the disk stays busy")], plan(step("S1")),
                        step_retry_limit=1)

    result = executor.run(run.ctx)

    assert not result.ok
    [(role, content)] = tool_messages(run, 1)
    assert role == "tool" and content.startswith("write_file failed (ACODE-EXEC-002)\n<<untrusted write_file result")
    assert "simulated transient failure: the disk was busy" in content
    assert not (run.workspace / "flaky9.txt").exists()
