"""The verifier stage against a real broker, persistence and sandbox, with a scripted model.

Checks (the plan's and the workspace's verification commands) run in parallel through the
sandbox; the model is asked only about what no command decides; a failure's evidence
(command, exit code, output tail) reaches the executor's next step message.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.coordinator import machine
from actors.stages.judging import verifier
from actors.stages.prompting import prompts
from protocol.errors import ModelError, OrchestrationError
from protocol.plans.plan import PlanStep, PlanTask, TaskPlan
from protocol.plans.results import ExecutionReport, StageResult, StepRecord
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.events import CheckRan
from protocol.sessions.session import OllamaProvider, SessionSnapshot
from tests.actors.stages.conftest import Stack
from tests.modelserver import Json, ModelServer

# Each copy marks that it started, then waits for its partner's mark: two copies pass only
# if they run at the same time.
RENDEZVOUS = """import os, sys, time
mine, other = sys.argv[1], sys.argv[2]
open(mine, "w").close()
deadline = time.monotonic() + 5
while not os.path.exists(other):
    if time.monotonic() > deadline:
        print(f"{other} never appeared: the checks ran one after the other")
        sys.exit(1)
    time.sleep(0.01)
print(f"met {other}")
"""

FAIL = """import sys
for i in range(300):
    print(f"noise line {i:03d}")
print("AssertionError: 'Bye' != 'Goodbye'")
sys.exit(3)
"""


def plan(*criteria: dict[str, Any]) -> dict[str, Any]:
    return {"goal": "the goal", "status": "ready", "tasks": [{
        "label": "T1", "title": "the task", "acceptance": list(criteria),
        "steps": [{"label": "S1", "title": "write it", "action": "write_file"}]}]}


def check(label: str, command: str, **more: Any) -> dict[str, Any]:
    return {"label": label, "description": f"{command} passes", "check": {"command": command, **more}}


def test_checks_and_verify_commands_run_in_parallel_and_the_model_is_not_asked(stack: Stack) -> None:
    run = stack.stage("verifier", [], plan(check("A1", "python rendezvous.py a b")),
                      files={"rendezvous.py": RENDEZVOUS}, verify_commands=["python rendezvous.py b a"])

    started = time.monotonic()
    result = verifier.run(run.ctx)
    elapsed = time.monotonic() - started

    answer = result.verification
    assert answer is not None and answer.passed, answer
    assert [(c.label, c.passed) for c in answer.criteria] == [("A1", True), ("V1", True)]
    assert answer.criteria[1].evidence == "`python rendezvous.py b a` exited 0"
    assert answer.summary == "all 2 criteria passed"
    assert run.spy.requests == []  # every criterion had a command
    ran = [(e.label, e.command, e.passed) for e in run.events() if isinstance(e, CheckRan)]
    assert ran == [("A1", "python rendezvous.py a b", True), ("V1", "python rendezvous.py b a", True)]
    assert elapsed < 5  # neither waited out its partner
    assert result.metrics.tool_calls == 3  # the checks, counted from both threads, and the diff after them
    assert result.changes is not None  # what the checks' commands made is in the change
    assert [(c.status, c.path) for c in result.changes.files] == [("added", "a"), ("added", "b")]
    assert len(stack.clients._slots) == 1  # the check threads closed their broker clients; the stage's remains


def test_a_failed_check_carries_its_command_exit_code_and_output_tail_to_the_executor(stack: Stack) -> None:
    run = stack.stage("verifier", [], plan(check("A1", "python fail.py"), check("A2", "python ok.py")),
                      files={"fail.py": FAIL, "ok.py": "print('fine')\n"})

    result = verifier.run(run.ctx)

    answer = result.verification
    assert answer is not None and not answer.passed
    a1, a2 = answer.criteria
    assert a1.evidence.startswith("`python fail.py` exited 3 (expected 0); output: …")
    assert a1.evidence.endswith("noise line 299\nAssertionError: 'Bye' != 'Goodbye'\n")
    assert "noise line 000" not in a1.evidence  # the tail, not the whole output
    assert (a2.passed, a2.evidence) == (True, "`python ok.py` exited 0")
    assert answer.summary == "A1 failed: `python fail.py` exited 3 (expected 0)"

    # the coordinator turns the verdict into feedback; the executor's next step message shows it
    snapshot = SessionSnapshot(id=run.ctx.session_id, task="t", workspace=str(run.workspace), stage="verifier",
                               visits={"verifier": 1})
    decision = machine.on_result(snapshot, result, now=time.time())
    feedback = decision.snapshot.feedback
    assert decision.snapshot.stage == "executor" and feedback is not None
    [item] = feedback.items
    assert item.label == "A1" and item.detail == a1.evidence
    the_plan = run.ctx.request.plan
    assert isinstance(the_plan, TaskPlan)
    task: PlanTask = the_plan.tasks[0]
    first: PlanStep = task.steps[0]
    shown = prompts.render_step(the_plan, task, first, feedback, fence=run.ctx.fence)
    assert "- A1: criterion not met" in shown
    assert "`python fail.py` exited 3 (expected 0); output: …" in shown and "AssertionError: 'Bye'" in shown


def test_a_failing_verify_command_fails_the_verification_as_its_own_criterion(stack: Stack) -> None:
    run = stack.stage("verifier", [], plan(check("A1", "python ok.py")), files={"ok.py": "print('fine')\n"},
                      verify_commands=["python missing_script.py"])

    answer = verifier.run(run.ctx).verification

    assert answer is not None and not answer.passed
    assert [(c.label, c.passed) for c in answer.criteria] == [("A1", True), ("V1", False)]
    assert answer.criteria[1].evidence.startswith("`python missing_script.py` exited 2 (expected 0); output: ")
    assert "No such file or directory" in answer.criteria[1].evidence


def test_the_model_judges_only_criteria_without_a_check_and_sees_the_check_results_fenced(stack: Stack) -> None:
    verdict = {"json": {"passed": True, "summary": "tidy",
                        "criteria": [{"label": "A2", "passed": True, "evidence": "names are clear"}]}}
    run = stack.stage("verifier", [verdict], plan(check("A1", "python ok.py", expect_output="fine"),
                                                  {"label": "A2", "description": "the code is tidy"}),
                      files={"ok.py": "print('fine')\n"})
    baseline = run.ctx.tool(f"{run.ctx.session_id}:baseline", "baseline_workspace", {})
    assert baseline.ok, baseline
    (run.workspace / "notes.txt").write_text("tidy names\n")

    answer = verifier.run(run.ctx).verification

    assert answer is not None and answer.passed
    assert [(c.label, c.passed, c.evidence) for c in answer.criteria] == [
        ("A1", True, "`python ok.py` exited 0 and printed 'fine'"), ("A2", True, "names are clear")]
    [request] = run.spy.requests
    user = request.messages[1].content
    nonce = run.ctx.fence.nonce
    assert "Criteria to judge:\n- A2: the code is tidy\n" in user and "- A1: python ok.py passes" not in user
    assert f"- A1: passed\n<<untrusted evidence A1 {nonce}>>\n`python ok.py` exited 0" in user
    assert f"<<untrusted change {nonce}>>\nbaseline: " in user, "the model sees the diff since the baseline"
    assert "A  notes.txt" in user and "+tidy names" in user
    assert f"<<untrusted task {nonce}>>\nthe test's task\n" in user


def test_an_answer_that_is_not_a_verdict_goes_back_to_the_model_with_the_problem(stack: Stack) -> None:
    verdict = {"json": {"passed": True, "summary": "tidy",
                        "criteria": [{"label": "A2", "passed": True, "evidence": "names are clear"}]}}
    run = stack.stage("verifier", [{"content": "I think it is fine!"}, {"content": '{"passed": "maybe"}'}, verdict],
                      plan({"label": "A2", "description": "the code is tidy"}))

    answer = verifier.run(run.ctx).verification

    assert answer is not None and answer.passed
    first, second, third = run.spy.requests
    assert [r.call_site for r in (first, second, third)] == ["judge", "judge/retry1", "judge/retry2"]
    assert "That answer was refused" in second.messages[-1].content
    assert second.messages[-2].content == "I think it is fine!"
    assert "Expected `bool`" in third.messages[-1].content


def test_three_answers_that_are_not_verdicts_fail_with_llm_003(stack: Stack) -> None:
    run = stack.stage("verifier", [{"content": "no"}, {"content": "still no"}, {"content": "never"}],
                      plan({"label": "A2", "description": "the code is tidy"}))
    with pytest.raises(ModelError) as info:
        verifier.run(run.ctx)
    assert info.value.code == "ACODE-LLM-003"
    assert len(run.spy.requests) == 3


def test_a_failing_test_suite_reruns_the_step_that_changed_the_file_its_output_names(stack: Stack) -> None:
    two = {"goal": "g", "status": "ready", "tasks": [
        {"label": "T1", "title": "calc", "steps": [{"label": "S1", "title": "calc.py", "action": "write_file"}]},
        {"label": "T2", "title": "docs", "steps": [{"label": "S1", "title": "docs.md", "action": "write_file"}]}]}
    suite = "import sys\nprint('FAILED test_calc.py - calc.py:2: AssertionError')\nsys.exit(1)\n"
    run = stack.stage("verifier", [], two, files={"suite.py": suite}, verify_commands=["python suite.py"])
    records = [StepRecord(session_id=run.ctx.session_id, visit=1, task=t, step="S1", status="completed",
                          files_changed=[f]) for t, f in (("T1", "calc.py"), ("T2", "docs.md"))]
    previous = StageResult(session_id=run.ctx.session_id, stage="executor", visit=1, attempt=1, ok=True,
                           execution=ExecutionReport(steps=records))
    run.ctx.request = msgspec.structs.replace(run.ctx.request, previous=previous)
    result = verifier.run(run.ctx)
    assert result.rework is not None
    assert (result.rework.rule, result.rework.rerun, result.rework.kept) == ("files", ["T1/S1"], ["T2/S1"])
    assert result.rework.completed_tasks == ["T2"]
    assert result.rework.reason == ("V1 failed, owned by no task; its output names files changed by T1/S1: those "
                                    "run again")


def test_checks_that_pass_do_not_verify_a_workspace_whose_git_directory_is_gone(stack: Stack,
                                                                                tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "ok.py").write_text("print('fine')\n")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    run = stack.stage("verifier", [], plan(check("A1", "python ok.py")), workspace=workspace)
    (workspace / ".git").rename(tmp_path / "moved-git")

    with pytest.raises(OrchestrationError) as caught:
        verifier.run(run.ctx)

    assert caught.value.code == "ACODE-ORCH-012"
    short = run.ctx.session_id[:8]
    assert caught.value.message == (
        f"the workspace's changes since the session's baseline cannot be computed: the workspace {workspace} is no "
        f"longer a git work tree; its baseline ({_commit(run)} on refs/acode/sessions/{run.ctx.session_id}/base) is "
        f"in {workspace / '.git'}, so the change cannot be shown (ACODE-SBX-018); so the work can be neither "
        "verified nor reviewed, and the session cannot complete; put back what is missing (a moved or replaced "
        f".git, the baseline in acode's home), then `acode resume {short}` compares again, or `acode cancel "
        f"{short}` ends the session")
    assert [e.passed for e in run.events() if isinstance(e, CheckRan)] == [True]  # the check ran, and passed


def _commit(run: Any) -> str:
    record = json.loads((run.stack.home / "run" / "baselines" / run.ctx.session_id / "baseline.json").read_text())
    return str(record["commit"])[:12]


# --- the files the task names, where it names them (issue 25 #7) ------------------------------------

HELLO = "Create hello.py that prints hello"


def _hello_plan() -> dict[str, Any]:
    return plan({"label": "A1", "description": "hello.py prints hello"})


def test_a_file_the_task_names_written_in_another_directory_fails_f1_even_when_the_model_accepts_it(
        stack: Stack) -> None:
    # The real session: the model wrote src/hello.py for "Create hello.py", and the verifier's
    # model (shown the diff) and the reviewer both accepted it.
    with ModelServer() as server:
        server.by_stage(verifier=[Json({"passed": True, "summary": "prints hello", "criteria": [
            {"label": "A1", "passed": True, "evidence": "src/hello.py prints hello"}]})])
        run = stack.stage("verifier", [], _hello_plan(), task=HELLO,
                          provider=OllamaProvider(base_url=server.url, model="test-model", num_ctx=8_192))
        (run.workspace / "src").mkdir()
        (run.workspace / "src" / "hello.py").write_text("print('hello')\n")
        record = StepRecord(session_id=run.ctx.session_id, visit=1, task="T1", step="S1", status="completed",
                            files_changed=["src/hello.py"])
        previous = StageResult(session_id=run.ctx.session_id, stage="executor", visit=1, attempt=1, ok=True,
                               execution=ExecutionReport(steps=[record]))
        run.ctx.request = msgspec.structs.replace(run.ctx.request, previous=previous)
        result = verifier.run(run.ctx)
        assert [r.stage for r in server.chats] == ["verifier"]
    answer = result.verification
    assert answer is not None and not answer.passed
    assert [(c.label, c.passed) for c in answer.criteria] == [("A1", True), ("F1", False)]
    assert answer.criteria[1].evidence == (
        "the task names hello.py, but no file hello.py exists at the workspace root; this session wrote src/hello.py "
        "instead: the file belongs at hello.py (move it there, or write it there and delete the other)")
    assert answer.summary.startswith("F1 failed: the task names hello.py, but no file hello.py exists")
    assert result.rework is not None and (result.rework.rule, result.rework.rerun) == ("files", ["T1/S1"])
    snapshot = SessionSnapshot(id=run.ctx.session_id, task=HELLO, workspace=str(run.workspace), stage="verifier",
                               visits={"verifier": 1})
    decision = machine.on_result(snapshot, result, now=time.time())
    assert decision.snapshot.stage == "executor"  # not the reviewer: the file goes where the task said
    assert decision.snapshot.feedback is not None and decision.snapshot.feedback.items[-1].label == "F1"


@pytest.mark.parametrize(("task", "files", "written"), [
    (HELLO, {}, {"hello.py": "print('hello')\n"}),  # written this session
    (HELLO, {"hello.py": "print('hello')\n"}, {}),  # there before, unchanged
    ("Create hello.py in src", {}, {"src/hello.py": "print('hello')\n"}),  # the task places it
    ("Delete hello.py and create greet.py", {"hello.py": "x\n"}, {}),  # a task that deletes: nothing required
], ids=["written", "unchanged", "placed", "deletes"])
def test_a_file_at_the_path_the_task_names_or_a_task_that_is_not_certain_adds_no_criterion(
        stack: Stack, task: str, files: dict[str, str], written: dict[str, str]) -> None:
    run = stack.stage("verifier", [], plan(check("A1", "python -c pass")), files=files, task=task,
                      sandbox=SandboxPolicy(allow_inline_code=True))
    for name, text in written.items():
        (run.workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (run.workspace / name).write_text(text)
    if task.startswith("Delete"):
        (run.workspace / "hello.py").unlink()
    result = verifier.run(run.ctx)
    assert result.verification is not None and result.verification.passed, result.verification
    assert [c.label for c in result.verification.criteria] == ["A1"]


def test_a_verdict_labelled_with_its_criterions_description_counts_for_that_criterion(stack: Stack) -> None:
    # Qwen2.5-Coder-1.5B echoed the prompt's "- A2: <description>" line as the label, twice;
    # read as no verdict, A2 failed and the session paused on "the same failure twice"
    label = "A2: Add a --top N option to wordcount/cli.py that prints only the N most common words"
    verdict = {"json": {"passed": True, "summary": "ok", "criteria": [
        {"label": label, "passed": True, "evidence": "the option is added"},
        {"label": "**A3**", "passed": False, "evidence": "not yet"}]}}
    run = stack.stage("verifier", [verdict], plan({"label": "A2", "description": "the --top option works"},
                                                  {"label": "A3", "description": "the README says so"}))

    answer = verifier.run(run.ctx).verification

    assert answer is not None
    assert [(c.label, c.passed, c.evidence) for c in answer.criteria] == [
        ("A2", True, "the option is added"), ("A3", False, "not yet")]
