"""The task benchmark's own parts: tasks that can fail and pass, the judge, the counting proxy.

The benchmark itself runs against a real model (minutes a task); here every task is shown
to be a real test (its hidden tests fail on the untouched workspace and pass on the
reference solution), and the ``direct`` system runs end to end against the stand-in model
server through the recording proxy, counted as a llama.cpp server reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.modelserver import ModelServer, Text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_tasks  # noqa: E402
import task_set  # noqa: E402

# every edit, and a HumanEval problem whose check uses the prompt's own helper (poly)
TASKS = [*task_set.edit_tasks(), *task_set.humaneval_tasks((32,))]


@pytest.fixture(autouse=True)
def _hidden_tests_without_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's pytest (it inherits this environment) loads none of the plugins installed
    beside pytest: the hidden tests need none, and hypothesis alone takes about a second to
    import at every judging (a task's check took 6 s, 1 s without them)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_a_task_fails_untouched_and_passes_with_its_reference(task: task_set.Task, tmp_path: Path) -> None:
    task.create(tmp_path)
    assert not task_set.judge(task, tmp_path).passed
    for name, text in task.reference.items():
        (tmp_path / name).write_text(text)
    verdict = task_set.judge(task, tmp_path)
    assert verdict.passed, verdict.detail


def test_the_subset_is_fixed_and_at_least_twenty_problems() -> None:
    tasks = task_set.select("humaneval")
    assert [t.id for t in tasks] == [f"he/{n}" for n in range(0, 164, 8)]
    assert all("NotImplementedError" in t.files["solution.py"] for t in tasks)
    assert len(task_set.select("all")) == 21 + 5


def test_editing_the_visible_test_does_not_pass_the_hidden_one(tmp_path: Path) -> None:
    task = task_set.select("he/8")[0]
    task.create(tmp_path)
    (tmp_path / "test_solution.py").write_text("def test_nothing():\n    pass\n")
    assert not task_set.judge(task, tmp_path).passed


def test_usage_is_read_from_llama_cpp_timings_and_from_openai_usage() -> None:
    llama = ('data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
             'data: {"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7},'
             '"timings":{"prompt_n":20,"cache_n":100,"predicted_n":7,"prompt_ms":50.0,"predicted_ms":700.0}}\n\n'
             'data: [DONE]\n\n')
    usage = bench_tasks.usage_of(llama.encode())
    assert (usage.prompt_evaluated, usage.prompt_cached, usage.completion_tokens) == (20, 100, 7)
    openai = 'data: {"usage":{"prompt_tokens":90,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":80}}}\n'
    usage = bench_tasks.usage_of(openai.encode())
    assert (usage.prompt_evaluated, usage.prompt_cached, usage.completion_tokens) == (10, 80, 3)
    assert bench_tasks.usage_of(b"data: [DONE]\n").unreported == 1


def test_the_direct_system_runs_through_the_proxy_and_is_judged(tmp_path: Path) -> None:
    task = task_set.select("he/8")[0]
    right = "```python\n" + task.reference["solution.py"] + "```\n"
    with ModelServer(models=["m"]) as server:
        server.queue(Text("Here it is:\n" + right), Text("```python\ndef sum_product(numbers):\n    return 0\n```"))
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_tasks.py"), "--base-url",
                               server.openai_url, "--model", "m", "--tasks", "he/8,he/8", "--systems", "direct"],
                              capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)["systems"]["direct"]
    assert [r["passed"] for r in figures["results"]] == [True, False]
    assert figures["passed"] == 1 and figures["requests"] == 2
    # the stand-in reports llama.cpp's timings: the second prompt's shared head came from its cache
    assert figures["prompt_evaluated"] + figures["prompt_cached"] == sum(c.prompt_tokens for c in server.chats) > 0
    assert figures["prompt_cached"] > 0
    assert figures["prompt_evaluated_per_passed"] == figures["prompt_evaluated"]


def test_a_remote_server_is_refused_and_leaves_nothing_behind(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_tasks.py"), "--base-url",
                           "http://192.0.2.1:8080/v1", "--model", "m", "--tasks", "he/0", "--systems", "direct"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode != 0 and "not a loopback address" in done.stderr
    assert list(tmp_path.iterdir()) == []  # no workspace root made for a run refused at its start
