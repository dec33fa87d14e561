"""The files a step changed are files: a directory the model created is not one of them
(issue 25 #9: ``files changed`` listed ``src/``), empty or not."""

from __future__ import annotations

from actors.stages.execution import executor
from tests.actors.stages.conftest import Stack
from tests.actors.stages.test_executor import call, done, plan, step


def test_a_created_directory_is_not_a_changed_file_and_the_file_written_in_it_is(stack: Stack) -> None:
    responses = [call("create_directory", path="src"), call("create_directory", path="empty"),
                 call("write_file", path="src/hello.py", content="print('hello')\n"), done("wrote src/hello.py")]
    run = stack.stage("executor", responses, plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    assert (run.workspace / "empty").is_dir() and (run.workspace / "src" / "hello.py").is_file()
    assert result.execution is not None and result.execution.files_changed == ["src/hello.py"]
    assert result.execution.steps[0].files_changed == ["src/hello.py"]
    assert result.summary == "1 step(s) done, 1 file(s) changed so far"
