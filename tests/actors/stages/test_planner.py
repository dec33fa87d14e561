"""The planner stage as a process: broker, persistence, sandbox and planner over real sockets.

Each test stores a session, sends the planner a RunStage as the coordinator would (the
scripted model in its settings) and reads the StageResult and the planner's log. The
actors are shared by the module's tests; every test has its own session and workspace.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.stages.execution.fileanswer import target
from protocol import codec
from protocol.basics.ids import new_id
from protocol.messages import Commit, RunStage, StageDone
from protocol.plans.plan import TaskPlan, finalize
from protocol.plans.results import StageResult
from protocol.policy.sandbox import SandboxPolicy
from protocol.sessions.profiles import ModelProfile, profile_for
from protocol.sessions.session import (
    Clarification,
    Feedback,
    FeedbackItem,
    OllamaProvider,
    ScriptedProvider,
    SessionSettings,
    SessionSnapshot,
)
from tests.actors.stages.conftest import write
from tests.actors.stages.replays import CONTRACTIONS, TESTS_ONLY
from tests.harness import Harness, wait_until
from tests.modelserver import Json, ModelServer


@pytest.fixture(scope="module")
def actors() -> Iterator[Harness]:
    with tempfile.TemporaryDirectory(prefix="acode-t-") as home:
        harness = Harness(Path(home))
        try:
            for actor in ("broker", "persistence", "sandbox", "planner"):
                harness.start(actor)
            yield harness
        finally:
            harness.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write(tmp_path / "w", {"README.md": "# greet\n\nRun the tests with `python -m unittest`.\n",
                                  "greet.py": "def greet(name):\n    return f'Hello, {name}!'\n"})


def _task(label: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {"label": label, "title": f"task {label}", "complexity": 2, "depends_on": list(deps),
            "steps": [{"label": "S1", "title": "change greet.py", "action": "modify_file"}], **extra}


def _plan(*tasks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"json": {"goal": "farewell()", "status": "ready", "tasks": list(tasks), **extra}}


GOOD = _plan(_task("T1", resources={"write": ["greet.py"], "commands": ["python -m unittest -q"]},
                   acceptance=[{"label": "A1", "description": "tests pass",
                                "check": {"command": "python -m unittest -q"}}]),
             _task("T2", "T1"))


class Planner:
    def __init__(self, actors: Harness, workspace: Path, responses: list[dict[str, Any]], *,
                 task: str = "Add farewell(name) to greet.py", sandbox: SandboxPolicy | None = None,
                 server: ModelServer | None = None, profile: ModelProfile | None = None):
        self.actors = actors
        self.client = actors.client()
        self.workspace = workspace
        self.task = task
        self.session_id = new_id()
        script = json.dumps({"version": 1, "responses": {"planner": responses}})  # JSON is YAML
        provider = (OllamaProvider(base_url=server.url, model="test-model", num_ctx=8_192) if server is not None
                    else ScriptedProvider(script_yaml=script, script_name="planner.yaml"))
        self.settings = SessionSettings(provider=provider, sandbox=sandbox or SandboxPolicy(),
                                        profile=profile or ModelProfile())
        snapshot = SessionSnapshot(id=self.session_id, task=task[:100], workspace=str(workspace),
                                   settings=self.settings)
        self.client.call("persistence", Commit(session_id=self.session_id, snapshot=snapshot), timeout=10,
                         decoder=codec.PERSISTENCE_REPLY)

    def run(self, *, visit: int = 1, attempt: int = 1, **fields: Any) -> StageResult:
        body = RunStage(session_id=self.session_id, stage="planner", visit=visit, attempt=attempt, task=self.task,
                        workspace=str(self.workspace), settings=self.settings, **fields)
        reply = self.client.call("planner", body, timeout=60, decoder=codec.STAGE_REPLY)
        assert isinstance(reply, StageDone)
        if reply.result.requires is not None:  # as the coordinator does: act only once they are durable
            self.client.call("persistence", Commit(session_id=self.session_id, events=[],
                                                   requires=reply.result.requires),
                             timeout=10, decoder=codec.PERSISTENCE_REPLY)
        return reply.result

    def log(self, event: str) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.actors.log("planner").splitlines() if line.startswith("{")]
        return [e for e in lines if e.get("event") == event and e.get("session_id") == self.session_id]


def test_a_cyclic_plan_goes_back_to_the_model_and_the_corrected_one_is_used(actors: Harness, workspace: Path) -> None:
    planner = Planner(actors, workspace, [_plan(_task("T1", "T2"), _task("T2", "T1")), GOOD])
    result = planner.run()
    assert result.ok, result.error
    assert result.summary == "plan v1: 2 task(s), 2 step(s) (after 1 correction)"
    assert result.plan is not None and [t.depends_on for t in result.plan.tasks] == [[], ["T1"]]
    [rejected] = planner.log("plan_rejected")
    assert rejected["call_site"] == "plan" and rejected["retrying"] is True
    assert rejected["problems"] == ["tasks depend on each other in a cycle: T1 -> T2 -> T1"]
    [created] = planner.log("plan_created")
    assert (created["version"], created["corrections"], created["complexity"]) == (1, 1, 4)
    assert result.metrics.model_calls == 2 and result.metrics.tool_calls >= 3


def test_a_redispatched_planner_replays_the_whole_exchange_from_the_records(actors: Harness, workspace: Path) -> None:
    planner = Planner(actors, workspace, [_plan(_task("T1", "T2"), _task("T2", "T1")), GOOD])
    first = planner.run()
    again = planner.run(attempt=2)  # the script has no third answer: both must come from the record
    assert again.ok, again.error
    assert (again.metrics.model_calls, again.metrics.replayed_model_calls) == (2, 2)
    assert first.plan is not None and again.plan is not None
    assert [t.title for t in again.plan.tasks] == [t.title for t in first.plan.tasks]
    calls = first.metrics.tool_calls + again.metrics.tool_calls

    def replayed() -> list[bool] | None:  # the sandbox writes the line just after its reply
        sandbox = [json.loads(line) for line in actors.log("sandbox").splitlines() if line.startswith("{")]
        lines = [e["replayed"] for e in sandbox
                 if e.get("event") == "tool_call_answered" and e["key"].startswith(planner.session_id)]
        return lines if len(lines) >= calls else None

    answered: list[bool] = wait_until(replayed, what="the sandbox's tool_call_answered lines")
    assert len(answered) == calls
    assert answered[first.metrics.tool_calls:] == [True] * again.metrics.tool_calls  # from the journal


def test_a_command_the_sandbox_would_refuse_is_corrected_and_a_refused_check_is_dropped(
        actors: Harness, workspace: Path) -> None:
    # Issue 25: a refused check is dropped (its criterion is the verifier's to judge); a refused
    # resources command is still the model's to correct (it may mean something the task needs).
    refused = _plan(_task("T1", acceptance=[{"label": "A1", "description": "prints bye",
                                             "check": {"command": "python greet.py | grep bye"}}],
                          resources={"commands": ["curl -s https://example.com"]}))
    planner = Planner(actors, workspace, [refused, GOOD])
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert result.plan.tasks[0].acceptance[0].check is not None
    assert result.plan.tasks[0].acceptance[0].check.command == "python -m unittest -q"
    [rejected] = planner.log("plan_rejected")
    assert [p.split(":")[0] for p in rejected["problems"]] == [
        "task T1 resources.commands[0] would be refused by the sandbox"]


def test_a_command_the_sessions_policy_allows_is_accepted(actors: Harness, workspace: Path) -> None:
    plan = _plan(_task("T1", resources={"commands": ["curl -s https://example.com"]}))
    planner = Planner(actors, workspace, [plan], sandbox=SandboxPolicy(extra_commands=["curl"]))
    result = planner.run()
    assert result.ok and result.summary == "plan v1: 1 task(s), 1 step(s)", result.error


def test_three_bad_plans_fail_the_stage_with_plan_004_listing_the_last_problems(
        actors: Harness, workspace: Path) -> None:
    planner = Planner(actors, workspace, [
        {"content": "First I would like to read greet.py."},
        _plan(_task("T1", complexity=40)),
        _plan(_task("T1"), _task("T2", "T9", resources={"write": ["../x.py"]})),
    ])
    result = planner.run()
    assert not result.ok and result.error is not None
    assert result.error.code == "ACODE-PLAN-004"
    assert result.error.message == (
        "the model gave no usable plan in 3 answers; the last one still had 2 problem(s): task T2 depends on unknown "
        "task 'T9'; task T2 resources.write path '../x.py' leads outside the workspace; name a path inside it; try a "
        "clearer or smaller task, or a stronger model")
    assert [(e["call_site"], e["retrying"]) for e in planner.log("plan_rejected")] == [
        ("plan", True), ("plan/retry1", True), ("plan/retry2", False)]
    assert planner.log("plan_rejected")[0]["problems"][0].startswith("the answer is not one JSON object")
    assert planner.log("plan_rejected")[1]["problems"] == ["Invalid enum value 40 - at `$.tasks[0].complexity`"]
    assert result.metrics.model_calls == 3


def test_a_task_over_10000_characters_is_refused_before_anything_runs(actors: Harness, workspace: Path) -> None:
    planner = Planner(actors, workspace, [GOOD], task="x" * 10_001)
    result = planner.run()
    assert not result.ok and result.error is not None
    assert (result.error.code, result.error.message) == (
        "ACODE-PLAN-001", "the task is 10,001 characters; the limit is 10,000. Shorten it, or write the details to a "
                          "file in the workspace and name that file in the task")
    assert (result.metrics.model_calls, result.metrics.tool_calls) == (0, 0)
    assert Planner(actors, workspace, [GOOD], task="x" * 10_000).run().ok


def test_a_replan_keeps_completed_tasks_and_says_what_changed(actors: Harness, workspace: Path) -> None:
    draft = msgspec.convert({**GOOD["json"], "tasks": [*GOOD["json"]["tasks"], _task("T3")]}, TaskPlan)
    first = finalize(draft, version=1)
    done = msgspec.structs.replace(first.tasks[0], status="completed")
    previous = msgspec.structs.replace(first, tasks=[done, *first.tasks[1:]])
    revised = _plan(_task("T2", "T1", description="now with a test"), _task("T4", "T2"),
                    change_summary="T2 gets a test, T3 is not needed")
    planner = Planner(actors, workspace, [revised])
    feedback = Feedback(source="reviewer", summary="no unit test for farewell()",
                        items=[FeedbackItem(label="A1", problem="farewell() is untested")])
    answers = [Clarification(label="Q1", question="Which file?", answer="greet.py")]
    result = planner.run(visit=2, plan=previous, feedback=feedback, clarifications=answers)
    assert result.ok and result.plan is not None, result.error
    plan = result.plan
    assert plan.version == 2 and plan.id != previous.id
    assert [(t.label, t.status) for t in plan.tasks] == [("T1", "completed"), ("T2", "pending"), ("T4", "pending")]
    assert plan.tasks[0] == done
    assert plan.change_summary == ("tasks added: T4; removed: T3; changed: T2; unchanged: T1; why: T2 gets a test, "
                                   "T3 is not needed")
    [replanned] = planner.log("plan_replanned")
    assert replanned["reason"] == "no unit test for farewell()" and replanned["version"] == 2
    [prepared] = planner.log("context_prepared")
    assert prepared["sections"][-4:] == ["plan:v1", "feedback:reviewer", "clarifications:answers", "task:task"]


# --- what a small model writes (issue 25): the stand-in server plays the real answers ---------------


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _criterion(label: str, what: str) -> dict[str, Any]:
    return {"label": label, "description": what, "check": {"command": "python -m unittest -q"}}


def test_duplicate_criterion_labels_are_renumbered_without_asking_anyone(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    # Qwen2.5-Coder-1.5B numbered each task's criteria from A1; acode's correction then got a
    # question back ("What is the correct criterion label?") and the session paused for the user.
    answer = _plan(_task("T1", acceptance=[_criterion("A1", "farewell exists"), _criterion("A2", "tests pass")]),
                   _task("T2", "T1", acceptance=[_criterion("A1", "greet still works")]))["json"]
    server.by_stage(planner=[Json(answer)])
    planner = Planner(actors, workspace, [], server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert [[c.label for c in t.acceptance] for t in result.plan.tasks] == [["A1", "A2"], ["A3"]]
    assert [c.description for c in result.plan.criteria()] == ["farewell exists", "tests pass", "greet still works"]
    assert len(server.chats) == 1 and planner.log("plan_rejected") == []
    note = "acode renumbered the criterion labels (the model used 'A1' more than once)"
    assert result.summary == f"plan v1: 2 task(s), 2 step(s); {note}"
    assert planner.log("plan_repaired")[0]["notes"] == [note]


def test_a_step_depending_on_a_task_label_is_read_as_the_task_dependency_it_means(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    steps = [{"label": "S1", "title": "write farewell", "action": "modify_file", "depends_on": ["T1"]},
             {"label": "S2", "title": "run the tests", "action": "run_command", "depends_on": ["T1"]}]
    answer = _plan(_task("T1"), _task("T2", steps=steps))["json"]
    answer["tasks"][0]["steps"][0]["depends_on"] = ["T1"]  # its own task: nothing to wait for
    server.by_stage(planner=[Json(answer)])
    planner = Planner(actors, workspace, [], server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    t1, t2 = result.plan.tasks
    assert (t1.depends_on, [s.depends_on for s in t1.steps]) == ([], [[]])
    assert (t2.depends_on, [s.depends_on for s in t2.steps]) == (["T1"], [[], []])
    assert len(server.chats) == 1
    assert planner.log("plan_repaired")[0]["notes"] == [
        "acode dropped step T1/S1's dependency on its own task T1",
        "acode made task T2 depend on task T1 (step S1 depended on 'T1')",
        "acode made task T2 depend on task T1 (step S2 depended on 'T1')"]


def test_a_step_depending_on_the_tool_call_it_makes_is_repaired_not_sent_back(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    # The real 1.5B model, told the session's MCP tools, answered this three times running
    # (the correction "depends on unknown step" changed nothing) and the session paused.
    answer = {"goal": "Look up the word 'acode' with the notes lookup tool and write what the notes say into "
                      "answer.txt", "status": "ready", "questions": [], "tasks": [{
        "label": "T1", "title": "Lookup acode with notes lookup tool", "complexity": 1, "depends_on": [],
        "description": "Use the mcp__notes__lookup tool to look up the word 'acode' and write the result into "
                       "answer.txt",
        "resources": {"read": ["README.md"], "write": ["answer.txt"], "directories": [], "commands": []},
        "acceptance": [{"label": "A1", "description": "The content of answer.txt should contain the notes"}],
        "steps": [{"label": "S1", "title": "Use mcp__notes__lookup to look up acode", "action": "run_command",
                   "depends_on": ["mcp__notes__lookup(acode)"]}]}]}
    server.by_stage(planner=[Json(answer)])
    planner = Planner(actors, workspace, [], server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert result.plan.tasks[0].steps[0].depends_on == []
    assert len(server.chats) == 1 and planner.log("plan_rejected") == []
    assert planner.log("plan_repaired")[0]["notes"] == [
        "acode dropped step T1/S1's dependency 'mcp__notes__lookup(acode)', which names no step or task and is "
        "not a label"]


def test_a_question_about_acodes_plan_rules_goes_back_to_the_model_never_to_the_user(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    asked = {"goal": "farewell()", "status": "needs_clarification", "tasks": [],
             "questions": [{"label": "Q1", "question": "What is the correct criterion label?"}]}
    server.by_stage(planner=[Json(asked), Json(GOOD["json"])])
    planner = Planner(actors, workspace, [], server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert result.plan.status == "ready" and result.plan.questions == []
    assert result.summary == "plan v1: 2 task(s), 2 step(s) (after 1 correction)"
    first, second = server.chats
    told = second.messages[-1]["content"]
    assert "'What is the correct criterion label?'" in told and "criteria A1, A2, ... unique in the whole plan" in told
    assert [e["questions"] for e in planner.log("plan_rules_question")] == [["What is the correct criterion label?"]]


def test_the_real_sequence_a_correction_then_a_question_about_labels_ends_in_a_plan_not_a_pause(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    # Issue 25 #6 as it happened: a plan with a duplicate A1 (and here a real problem beside it,
    # so a correction is sent), then a question about the label instead of a plan.
    first = _plan(_task("T1", "T9", acceptance=[_criterion("A1", "a")]),
                  _task("T2", acceptance=[_criterion("A1", "b")]))["json"]
    asked = {"goal": "farewell()", "status": "needs_clarification", "tasks": [],
             "questions": [{"label": "Q1", "question": "What is the correct criterion label?"}]}
    server.by_stage(planner=[Json(first), Json(asked), Json(GOOD["json"])])
    planner = Planner(actors, workspace, [], server=server)
    result = planner.run()
    assert result.ok and result.plan is not None and result.plan.status == "ready", result.error
    assert len(server.chats) == 3
    corrections = [r.messages[-1]["content"] for r in server.chats[1:]]
    assert "task T1 depends on unknown task 'T9'" in corrections[0]
    assert "used more than once" not in corrections[0]  # acode renumbered it: nobody is asked about it
    assert "are about acode's plan rules, which the user does not decide" in corrections[1]


def test_a_real_question_still_reaches_the_user_and_a_rules_one_beside_it_is_left_out(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    asked = {"goal": "farewell()", "status": "needs_clarification", "tasks": [],
             "questions": [{"label": "Q1", "question": "Should farewell() say 'Bye' or 'Goodbye'?"},
                           {"label": "Q2", "question": "Which label should A1 get?"}]}
    server.by_stage(planner=[Json(asked)])
    result = Planner(actors, workspace, [], server=server).run()
    assert result.ok and result.plan is not None, result.error
    assert result.plan.status == "needs_clarification"
    assert [q.question for q in result.plan.questions] == ["Should farewell() say 'Bye' or 'Goodbye'?"]


@pytest.mark.parametrize(("task", "files", "write", "check", "expect"), [
    ("implement `has_close_elements` in solution.py so that test_solution.py passes",
     {"solution.py": "def has_close_elements(numbers, threshold):\n    pass\n",
      "test_solution.py": "from solution import has_close_elements\n"},
     "solution.py", "python -m pytest -q test_solution.py", None),
    ("Create hello.py that prints hello", {}, "hello.py", "python hello.py", "hello"),
], ids=["humaneval", "hello"])
def test_a_task_that_names_its_file_and_check_is_planned_without_a_model_call(
        actors: Harness, tmp_path: Path, server: ModelServer, task: str, files: dict[str, str], write: str,
        check: str, expect: str | None) -> None:
    server.by_stage()  # no answer queued: a request would fail the test
    planner = Planner(actors, write_dir(tmp_path / "w", files), [], task=task, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert server.chats == [] and result.metrics.model_calls == 0
    assert result.summary == "plan v1: 1 task(s), 1 step(s) (derived from the task without a model call)"
    plan = result.plan
    [task_] = plan.tasks
    assert plan.goal == task and (task_.resources.write, len(task_.steps)) == ([write], 1)
    [criterion] = plan.criteria()
    assert criterion.check is not None and (criterion.check.command, criterion.check.expect_output) == (check, expect)
    assert "src" not in json.dumps(msgspec.to_builtins(plan))  # nothing the task did not state
    assert planner.log("plan_derived")[0]["write"] == [write]


def test_a_task_naming_a_test_file_that_does_not_exist_is_planned_by_the_model(
        actors: Harness, workspace: Path, server: ModelServer) -> None:
    server.by_stage(planner=[Json(GOOD["json"])])
    planner = Planner(actors, workspace, [], task="implement farewell in greet.py so that test_greet.py passes",
                      server=server)
    result = planner.run()
    assert result.ok and len(server.chats) == 1 and planner.log("plan_derived") == []


def write_dir(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write(root, files)


# --- the wordcount repository's real failures (issue 25) --------------------------------------------

WORDCOUNT = {
    "README.md": "# wordcount\n\nCount words: `python -m wordcount.cli FILE`.\n",
    "wordcount/__init__.py": "",
    "wordcount/core.py": "import re\n\n\ndef count_words(text):\n    counts = {}\n"
                         "    for word in re.findall(r'[a-z]+', text.lower()):\n"
                         "        counts[word] = counts.get(word, 0) + 1\n    return counts\n",
    "wordcount/cli.py": "import sys\n\nfrom wordcount.core import count_words\n\n\ndef main(argv=None):\n"
                        "    args = sys.argv[1:] if argv is None else argv\n"
                        "    with open(args[0]) as f:\n        counts = count_words(f.read())\n"
                        "    for word, n in sorted(counts.items(), key=lambda kv: -kv[1]):\n"
                        "        print(word, n)\n",
    "tests/test_core.py": "from wordcount.core import count_words\n\n\ndef test_counts():\n"
                          "    assert count_words('a b a') == {'a': 2, 'b': 1}\n\n\n"
                          "def test_contractions_are_one_word():\n"
                          "    assert count_words(\"don't stop\") == {\"don't\": 1, 'stop': 1}\n",
}
TOP = ("Add a --top N option to wordcount/cli.py that prints only the N most common words (without --top it "
       "prints every word, as now).")
PLACEHOLDER = "python -m wordcount.cli --top 2 <path to test file>"
# Qwen2.5-Coder-1.5B's plan for TOP: the placeholder copied from the PLANNER prompt's example
TOP_PLAN = {"goal": "Add a --top N option to wordcount/cli.py", "status": "ready",
            "tasks": [{"label": "T1", "title": "Add --top option", "complexity": 2,
                       "description": "Add a --top N option to wordcount/cli.py",
                       "resources": {"read": ["wordcount/cli.py"], "write": ["wordcount/cli.py"],
                                     "commands": [PLACEHOLDER]},
                       "acceptance": [{"label": "A1", "description": "--top 2 prints only the 2 most common words",
                                       "check": {"command": PLACEHOLDER, "expect_exit": 0}}],
                       "steps": [{"label": "S1", "title": "Add --top option", "action": "modify_file",
                                  "description": "Add the --top option to the argument parsing"}]}]}


def test_the_top_n_task_in_the_wordcount_repository_is_planned_without_a_model_call(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # The real session spent 121 s in the planner and paused with ACODE-PLAN-004.
    server.by_stage()  # no answer queued: a request would fail the test
    planner = Planner(actors, write_dir(tmp_path / "w", WORDCOUNT), [], task=TOP, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert server.chats == [] and result.metrics.model_calls == 0
    [task] = result.plan.tasks
    assert (result.plan.goal, task.resources.write) == (TOP.rstrip("."), ["wordcount/cli.py"])
    assert [(c.label, c.check.command if c.check else None) for c in task.acceptance] == [
        ("A1", "python -m pytest -q"), ("A2", None)]


def test_a_check_with_a_placeholder_is_dropped_not_sent_back_to_the_model(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # The model's own plan for TOP (here in a workspace without tests, so the model plans):
    # before, the sandbox refused the check, three answers went by and the stage failed.
    files = {k: v for k, v in WORDCOUNT.items() if not k.startswith("tests/")}
    server.by_stage(planner=[Json(TOP_PLAN)])
    planner = Planner(actors, write_dir(tmp_path / "w", files), [], task=TOP, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert len(server.chats) == 1 and planner.log("plan_rejected") == []
    [task] = result.plan.tasks
    [criterion] = task.acceptance
    assert (criterion.description, criterion.check) == ("--top 2 prints only the 2 most common words", None)
    assert task.resources.commands == []
    note = (f"acode dropped criterion A1's check {PLACEHOLDER!r} (it holds a <...> placeholder); the verifier judges "
            "the criterion from the evidence")
    assert planner.log("plan_repaired")[0]["notes"][0] == note and note in result.summary
    system = server.chats[0].messages[0]["content"]
    assert '"check": {"command": "python -m pytest -q"' in system and "<check command>" not in system


def test_a_plan_that_edits_the_failing_test_is_made_to_change_the_code_it_tests(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # The real session: the executor edited tests/test_core.py, as the plan told it. (Three
    # sentences: not derived, the model plans; CONTRACTIONS itself is derived, below.)
    task_text = CONTRACTIONS + " Keep the change small."
    server.by_stage(planner=[Json(TESTS_ONLY)])
    planner = Planner(actors, write_dir(tmp_path / "w", WORDCOUNT), [], task=task_text, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert len(server.chats) == 1 and planner.log("plan_rejected") == []
    plan = result.plan
    [task] = plan.tasks
    assert plan.goal == task_text
    assert (task.resources.write, task.resources.read) == (["wordcount/core.py"],
                                                          ["wordcount/core.py", "tests/test_core.py"])
    [criterion] = task.acceptance
    command = "python -m pytest -q tests/test_core.py::test_contractions_are_one_word"
    assert criterion.check is not None and criterion.check.command == command
    assert "acode made task T1 change wordcount/core.py instead of tests/test_core.py" in result.summary
    assert (tmp_path / "w" / "tests/test_core.py").read_text() == WORDCOUNT["tests/test_core.py"]


def test_a_failing_test_to_fix_is_planned_without_a_model_call(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # the benchmark's failing-test task: the model's plan took 21 s and named the test as the file to change
    planner = Planner(actors, write_dir(tmp_path / "w", WORDCOUNT), [], task=CONTRACTIONS, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert server.chats == [] and "derived from the task without a model call" in result.summary
    [task] = result.plan.tasks
    assert (task.resources.write, task.resources.read) == (["wordcount/core.py"],
                                                          ["wordcount/core.py", "tests/test_core.py"])
    [criterion] = task.acceptance
    assert criterion.check is not None
    assert criterion.check.command == "python -m pytest -q tests/test_core.py::test_contractions_are_one_word"


def test_when_the_test_imports_two_modules_the_model_is_told_once_and_its_next_plan_stands(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    files = dict(WORDCOUNT)
    files["tests/test_core.py"] = "from wordcount.cli import main\n" + files["tests/test_core.py"]
    server.by_stage(planner=[Json(TESTS_ONLY), Json(TESTS_ONLY)])
    planner = Planner(actors, write_dir(tmp_path / "w", files), [], task=CONTRACTIONS, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert len(server.chats) == 2
    told = server.chats[1].messages[-1]["content"]
    assert ("the plan writes only test files (tests/test_core.py), but the task does not ask to change tests: they "
            "are the check; the code they test is in wordcount/cli.py, wordcount/core.py") in told
    assert result.plan.tasks[0].resources.write == ["tests/test_core.py"]  # told once; the model's plan stands


def test_a_task_that_asks_for_a_test_still_plans_to_write_the_test_file(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # two sentences: not derived (actors/stages/planning/derive.py), the model plans
    task = "Add a test of count_words with an empty string to tests/test_core.py. Keep it short."
    plan = json.loads(json.dumps(TESTS_ONLY))
    plan["goal"] = task
    server.by_stage(planner=[Json(plan)])
    planner = Planner(actors, write_dir(tmp_path / "w", WORDCOUNT), [], task=task, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert len(server.chats) == 1 and planner.log("plan_repaired") == []
    assert result.plan.tasks[0].resources.write == ["tests/test_core.py"]


def test_a_tests_only_plan_in_the_last_answer_is_used_rather_than_failing_the_stage(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    files = dict(WORDCOUNT)
    files["tests/test_core.py"] = "from wordcount.cli import main\n" + files["tests/test_core.py"]
    cyclic = _plan(_task("T1", "T2"), _task("T2", "T1"))["json"]
    server.by_stage(planner=[Json(cyclic), Json(cyclic), Json(TESTS_ONLY)])
    planner = Planner(actors, write_dir(tmp_path / "w", files), [], task=CONTRACTIONS, server=server)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    assert len(server.chats) == 3 and result.plan.tasks[0].resources.write == ["tests/test_core.py"]


def _replayed(actors: Harness, workspace: Path, server: ModelServer, plan: dict[str, Any], task: str,
              profile: ModelProfile | None = None) -> tuple[Planner, TaskPlan]:
    """The planner's plan when the model answers ``plan`` (a real model's) for ``task``."""
    server.by_stage(planner=[Json(plan)])
    planner = Planner(actors, workspace, [], task=task, server=server, profile=profile)
    result = planner.run()
    assert result.ok and result.plan is not None, result.error
    return planner, result.plan


TODO = {"todo/__init__.py": "", "todo/cli.py": "import sys\n\n\ndef main(argv=None):\n    return 0\n"}
DONE_5 = ("python -m todo.cli done 5 crashes with IndexError: list index out of range when the list has fewer than "
          "5 items. Make it print 'no item 5' (the number given) and exit 1 instead.")
# Qwen2.5-Coder-1.5B's plan for DONE_5 (a hand run): the words say exit 1, the check expects 0
DONE_5_PLAN = {"goal": "Modify the `todo/cli.py` file to print 'no item 5' when the list has fewer than 5 items and "
                       "exit 1 instead of crashing.", "status": "ready",
               "tasks": [{"label": "T1", "title": "Modify the `todo/cli.py` file to handle the IndexError",
                          "complexity": 3, "resources": {"read": ["todo/cli.py"], "write": ["todo/cli.py"]},
                          "acceptance": [{"label": "A1", "description": "The program should print 'no item 5' when "
                                          "the list has fewer than 5 items and exit 1.",
                                          "check": {"command": "python -m todo.cli done 5",
                                                    "expect_output": "no item 5"}}],
                          "steps": [{"label": "S1", "title": "Modify the `todo/cli.py` file to handle the IndexError",
                                     "action": "modify_file"}]}]}


def test_a_check_the_request_and_its_criterion_say_exits_1_expects_1(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # The hand run: expecting 0, the check failed the model's right answer (it printed
    # "no item 5" and exited 1) six times, and the session paused (EXEC-008).
    planner, plan = _replayed(actors, write_dir(tmp_path / "w", TODO), server, DONE_5_PLAN, DONE_5)
    [criterion] = plan.tasks[0].acceptance
    assert criterion.check is not None
    assert (criterion.check.expect_exit, criterion.check.expect_output) == (1, "no item 5")
    note = ("acode made criterion A1's check 'python -m todo.cli done 5' expect exit code 1, as the criterion and "
            "the request say (it expected 0)")
    assert note in planner.log("plan_repaired")[0]["notes"]


STORE = {"todo/__init__.py": "", "todo/store.py": "import json\n\n\nclass Store:\n    pass\n",
         "tests/__init__.py": "", "tests/test_store.py": "from todo.store import Store\n\n\ndef test_x():\n    pass\n"}
EMPTY = ("Store.load in todo/store.py crashes with json.decoder.JSONDecodeError when todo.json exists but is empty. "
         "Treat an empty file as an empty list, and add a test for that to tests/test_store.py.")
# Qwen2.5-Coder-1.5B's plan for EMPTY (a hand run): the goal fixes store.py, the one step writes the test
EMPTY_PLAN = {"goal": "Fix the `Store.load` method in `todo/store.py` to handle an empty file gracefully by returning "
                      "an empty list.", "status": "ready",
              "tasks": [{"label": "T1", "title": "Add a test for empty todo.json", "complexity": 2,
                         "resources": {"read": ["tests/test_store.py"], "write": ["tests/test_store.py"],
                                       "commands": ["python -m pytest -q"]},
                         "acceptance": [{"label": "A1", "description": "The test should pass and not crash.",
                                         "check": {"command": "python -m pytest -q"}}],
                         "steps": [{"label": "S1", "title": "Modify `tests/test_store.py` to add a test for empty "
                                                            "todo.json", "action": "modify_file"}]}]}


def test_a_plan_that_tests_a_fix_it_never_makes_gets_a_step_making_it(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # The hand run: the test could pass only with store.py as it was; the model wrote it
    # back unchanged and the session completed with nothing done (then, refused that, paused).
    planner, plan = _replayed(actors, write_dir(tmp_path / "w", STORE), server, EMPTY_PLAN, EMPTY)
    [task] = plan.tasks
    assert task.resources.write == ["todo/store.py", "tests/test_store.py"]
    assert [(s.label, s.title, s.action) for s in task.steps] == [
        ("S1", "change todo/store.py as the request says", "modify_file"),
        ("S2", "Modify `tests/test_store.py` to add a test for empty todo.json", "modify_file")]
    assert task.steps[0].description == "", "naming the test file too, it was no one-file step"
    assert [target(task, step) for step in task.steps] == ["todo/store.py", "tests/test_store.py"]
    note = ("acode gave task T1 a first step changing todo/store.py, which the task names and the plan did not "
            "change (it wrote only tests/test_store.py)")
    assert note in planner.log("plan_repaired")[0]["notes"] and len(server.chats) == 1


# Qwen2.5-Coder-1.5B's second plan for EMPTY (the same hand run, again): no write resources at all
EMPTY_PLAN_2 = {"goal": "Treat an empty todo.json as an empty list", "status": "ready", "tasks": [
    {"label": "T1", "title": "Modify `Store.load` to handle empty files", "complexity": 2,
     "steps": [{"label": "S1", "title": "Modify `Store.load` to handle empty files", "action": "modify_file"}]},
    {"label": "T2", "title": "Add a test for `Store.load` in `tests/test_store.py`", "complexity": 2,
     "depends_on": ["T1"],
     "acceptance": [{"label": "A1", "description": "the tests pass", "check": {"command": "python -m pytest -q"}}],
     "steps": [{"label": "S2", "title": "Add a test for `Store.load` in `tests/test_store.py`",
                "action": "modify_file"}]}]}


def test_tasks_that_change_files_but_write_none_get_the_files_they_and_the_request_name(
        actors: Harness, tmp_path: Path, server: ModelServer) -> None:
    # Both steps went to the tool loop (no one file to answer as), which wrote a 135-byte store.py.
    _, standing = _replayed(actors, write_dir(tmp_path / "d", STORE), server, EMPTY_PLAN_2, EMPTY)
    assert [t.resources.write for t in standing.tasks] == [[], []], "the tool loop needs no write resource"
    planner, plan = _replayed(actors, write_dir(tmp_path / "w", STORE), server, EMPTY_PLAN_2, EMPTY,
                              profile=profile_for("qwen2.5-coder:1.5b"))
    assert [t.resources.write for t in plan.tasks] == [["todo/store.py"], ["tests/test_store.py"]]
    notes = planner.log("plan_repaired")[0]["notes"]
    assert "acode gave task T2 the write resource(s) tests/test_store.py, which it names (it had none)" in notes
    assert ("acode gave task T1 the write resource todo/store.py, which the task names and no other plan task "
            "writes (it had none)") in notes
