"""acode as a user runs it: up, run, show, sessions, cycles, limits, timeouts, cancel, down.

The tests that only run a session of their own and read what it did share one acode for
the module (``shared``: each has its own workspace, script and session); the others start
their own, for what they check of acode as a whole (its actors, its session list, a second
executor, a stage's timeout or a cancel, acode not running).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.coordinator.actor import mcp_installed
from actors.paths import RunPaths
from tests.harness import wait_until
from tests.system import workloads as w
from tests.system.conftest import Acode, json_lines, wait_exit

pytestmark = pytest.mark.system

HELLO_SCRIPT = """version: 1
responses:
  planner:
    - json:
        goal: hello.py prints hello
        status: ready
        tasks:
          - label: T1
            title: Write hello.py
            complexity: 1
            resources: {write: [hello.py], commands: ["python hello.py"]}
            acceptance:
              - label: A1
                description: prints hello
                check: {command: "python hello.py", expect_exit: 0, expect_output: hello}
            steps:
              - {label: S1, title: Write hello.py, action: write_file, expected_output: hello.py}
  executor:
    - tool_calls: [{name: write_file, arguments: {path: hello.py, content: "print('hello')\\n"}}]
    - tool_calls: [{name: step_complete, arguments: {summary: wrote hello.py}}]
  verifier:
    - json: {passed: true, summary: ok, criteria: []}
  reviewer:
    - json: {decision: approve, summary: looks right, issues: []}
"""


def _run(acode: Acode, workspace: Path, script: Path, *extra: str) -> tuple[int, str, str]:
    result = acode("run", "do the task", "--workspace", str(workspace), "--provider", "scripted",
                   "--script", str(script), *extra)
    return result.returncode, result.stdout, result.stderr


def _show(acode: Acode, session_id: str) -> dict:  # type: ignore[type-arg]
    result = acode("show", session_id, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _session_id(stdout: str) -> str:
    return stdout.split("session ", 1)[1].split(":", 1)[0]


def test_up_run_show_down_completes_a_scripted_task_with_every_transition_recorded(
        acode: Acode, tmp_path: Path) -> None:
    assert acode.up().returncode == 0
    status = acode.status()
    assert {a["instance"] for a in status["actors"]} == {
        "coordinator", "broker", "persistence", "sandbox", "planner", "executor", "verifier", "reviewer",
        *(("mcp",) if mcp_installed() else ())}
    assert all(a["state"] == "ready" and a["pid"] for a in status["actors"])
    workspace = tmp_path / "w"
    workspace.mkdir()
    script = tmp_path / "s.yaml"
    script.write_text(HELLO_SCRIPT)

    result = acode("run", "Create hello.py that prints hello", "--workspace", str(workspace),
                   "--provider", "scripted", "--script", str(script))

    assert result.returncode == 0, result.stdout + result.stderr
    assert (workspace / "hello.py").read_text() == "print('hello')\n"
    lines = result.stdout.splitlines()
    assert any(line.startswith("[PLANNER]") for line in lines)
    assert any("[VERIFIER]  A1 `python hello.py`: passed" in line for line in lines)
    end = lines.index("completed (exit 0)")
    assert lines[end + 1] == "files changed: hello.py (added)"
    assert lines[end + 2].split() == ["STAGE", "RUNS", "TOKENS", "IN", "TOKENS", "OUT", "MODEL", "STAGE", "TIME"]
    assert [line.split()[0] for line in lines[end + 3:]] == ["planner", "executor", "verifier", "reviewer", "total"]
    session_id = _session_id(result.stdout)
    shown = _show(acode, session_id)
    events = shown["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [(e["source"], e["target"]) for e in events if e["type"] == "transitioned"] == [
        ("start", "planner"), ("planner", "executor"), ("executor", "verifier"), ("verifier", "reviewer"),
        ("reviewer", "completed")]
    assert shown["session"]["status"] == "completed" and shown["session"]["exit_code"] == 0
    assert shown["plan"]["tasks"][0]["label"] == "T1" and len(shown["plan"]["id"]) == 36
    text = acode("show", session_id[:13]).stdout  # a unique prefix is enough
    assert "planner -> executor" in text and "reviewer -> completed" in text
    assert "finished in" in text and "files changed: hello.py (added)" in text
    listed = json.loads(acode("sessions", "--json").stdout)
    assert [s["id"] for s in listed] == [session_id]
    started = [json.loads(line) for stage in ("planner", "executor", "verifier", "reviewer")
               for line in RunPaths(acode.home).log_file(stage).read_text().splitlines()
               if '"stage_started"' in line]
    assert len(started) == 4 and all(line["replay"] == "carried" for line in started), started  # no index request


def test_a_verify_failure_cycles_back_to_the_executor_and_the_second_verification_passes(
        shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload()
    responses["executor"][4] = w.call("write_file", path="b.txt", content="wrong\n")  # visit 1 writes it wrong
    responses["executor"] += [w.done("a.txt fine"), w.done("slow.py ran already"),
                              w.call("write_file", path="b.txt", content="beta\n"), w.done("fixed b.txt")]
    responses["verifier"] *= 2  # the model judges A2 in both verifications
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 0, out + err
    assert "[VERIFIER]  -> executor (verify cycle 1): A1 failed: `python check.py` exited 1 (expected 0)" in out
    shown = _show(shared, _session_id(out))
    checks = [(e["passed"], e["evidence"]) for e in shown["events"] if e["type"] == "check_ran"]
    assert [passed for passed, _ in checks] == [False, True]
    assert "b.txt is wrong" in checks[0][1]
    assert shown["session"]["cycles"] == {"verify": 1}
    assert (workspace / "log.txt").read_text() == "ran\n"  # the second visit did not run slow.py again


def test_show_has_each_stage_visit_each_cycle_and_step_and_run_verbose_shows_the_models_text(
        shared: Acode, tmp_path: Path) -> None:
    """Issue 29 part 3: ``run --verbose`` prints the scripted model's text (escaped) under its
    turns and stages; ``show --stage``, ``--cycle``, ``--answers`` and the step timing."""
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload()
    responses["executor"][0] = {**responses["executor"][0], "content": "First a.txt.\nThen \x1b[31mslow.py."}
    responses["executor"][4] = w.call("write_file", path="b.txt", content="wrong\n")
    responses["executor"] += [w.done("a.txt fine"), w.done("slow.py ran already"),
                              w.call("write_file", path="b.txt", content="beta\n"), w.done("fixed b.txt")]
    responses["verifier"] *= 2
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses), "--verbose")
    assert code == 0, out + err
    lines = out.splitlines()
    turn = lines.index("[EXECUTOR]  T1/S1 turn 1: 1 tool call")
    assert lines[turn + 1:turn + 4] == ["            > First a.txt.", "            > Then \\x1b[31mslow.py.",
                                        '            > [call] write_file {"content": "alpha\\n", "path": "a.txt"}']
    assert "\x1b" not in out  # the model's escape sequence is shown, never sent to the terminal
    assert '            > [call] step_complete {"summary": "fixed b.txt"}' in lines
    assert any(line.startswith('            > {"passed":true,"summary":"tidy"') for line in lines)  # the verifier's
    session_id = _session_id(out)

    default = shared("show", session_id).stdout.splitlines()
    table = default.index("  VISIT  STEP   STATUS     TIME    TRIES  TURNS  CALLS  TOKENS")
    slow = default[table + 2].split()  # visit 1's T1/S2 ran slow.py, which sleeps a second
    assert slow[:3] == ["1", "T1/S2", "completed"] and 1.0 <= float(slow[3].rstrip("s")) < 10
    assert [row.split()[:2] for row in default[table + 1:table + 7]] == [
        ["1", "T1/S1"], ["1", "T1/S2"], ["1", "T1/S3"], ["2", "T1/S1"], ["2", "T1/S2"], ["2", "T1/S3"]]
    steps = _show(shared, session_id)["steps"]
    assert [(s["visit"], s["step"], s["turns"], s["tool_calls"]) for s in steps][:2] == [(1, "S1", 2, 2),
                                                                                       (1, "S2", 2, 2)]

    stage = shared("show", session_id, "--stage", "executor")
    assert stage.returncode == 0, stage.stderr
    assert "executor, 2 visit(s)" in stage.stdout and "executor visit 2: entered" in stage.stdout
    assert "from verifier, verify cycle 1" in stage.stdout and "run_terminal python slow.py (execute) -> ok" in \
        stage.stdout
    visits = json_lines(shared("show", session_id, "--stage", "executor", "--json").stdout)[0]["visits"]
    assert [(v["visit"], v["next"], len(v["steps"])) for v in visits] == [(1, "verifier", 3), (2, "verifier", 3)]

    cycle = shared("show", session_id, "--cycle", "1")
    assert cycle.returncode == 0, cycle.stderr
    assert "verify cycle 1: from +" in cycle.stdout and "verifier -> executor" in cycle.stdout
    assert "executor visit 2" in cycle.stdout and "reviewer visit 1" in cycle.stdout
    assert "executor visit 1" not in cycle.stdout and "A1 `python check.py` passed (exit 0)" in cycle.stdout
    part = json_lines(shared("show", session_id, "--cycle", "1", "--json").stdout)[0]["parts"][0]
    assert (part["kind"], [(v["stage"], v["visit"]) for v in part["visits"]]) == (
        "verify", [("executor", 2), ("verifier", 2), ("reviewer", 1)])

    never = shared("show", session_id, "--cycle", "2")
    assert never.returncode == 1 and never.stderr.strip() == (
        f"acode: session {session_id} never reached cycle 2: its cycles are verify 1; give --cycle 0 or 1 "
        "(0: the first pass) (ACODE-CLI-012)")
    wrong = shared("show", session_id, "--stage", "executer")
    assert wrong.returncode == 1 and "'executer' is not a stage; give one of planner, executor" in wrong.stderr
    assert "(ACODE-CLI-012)" in wrong.stderr
    full = shared("show", session_id, "--answers", "--stage", "executor").stdout
    assert full.startswith("executor answer 1:\n  First a.txt.\n  Then \\x1b[31mslow.py.\n")
    both = shared("run", "x", "--verbose", "--json")
    assert both.returncode == 1 and "drop one of them" in both.stderr and "(ACODE-CLI-003)" in both.stderr


def test_a_replan_review_cycles_to_the_planner_and_keeps_both_plan_versions(shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload()
    responses["reviewer"] = [
        {"json": {"decision": "replan", "summary": "needs a third file",
                  "issues": [{"criterion": "A2", "problem": "c.txt missing", "suggestion": "add it"}]}},
        {"json": {"decision": "approve", "summary": "good now", "issues": []}},
    ]
    second = w.plan(steps=[{"label": "S4", "title": "write c.txt", "action": "write_file"}],
                    checks=[{"label": "A3", "description": "c.txt exists",
                             "check": {"command": "true", "expect_exit": 0}}])
    responses["planner"].append(second)
    responses["executor"] += [w.call("write_file", path="c.txt", content="gamma\n"), w.done("wrote c.txt")]
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 0, out + err
    assert "-> planner (review cycle 1): needs a third file" in out
    session_id = _session_id(out)
    from acode.connection import Connection
    from protocol.messages import GetPlan
    with Connection(shared.home) as connection:
        v1 = connection.persistence(GetPlan(session_id=session_id, version=1)).plan
        v2 = connection.persistence(GetPlan(session_id=session_id, version=2)).plan
    assert (v1.version, v2.version) == (1, 2)
    assert [s.label for s in v1.tasks[0].steps] == ["S1", "S2", "S3"]
    assert [s.label for s in v2.tasks[0].steps] == ["S4"]
    assert v2.change_summary == "tasks added: none; removed: none; changed: T1; unchanged: none"
    assert (workspace / "c.txt").read_text() == "gamma\n"


def test_the_fourth_verify_cycle_pauses_the_session_with_exit_21(shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    # a failure that changes every time (the same failure twice would pause earlier, ACODE-ORCH-008)
    (workspace / "count.py").write_text("import pathlib\np = pathlib.Path('count.txt')\nn = int(p.read_text()) + 1 "
                                        "if p.exists() else 1\np.write_text(str(n))\nprint(f'run {n}')\nraise "
                                        "SystemExit(1)\n")
    failing = {"label": "A1", "description": "never true", "check": {"command": "python count.py"}}
    responses = {
        "planner": [w.plan(checks=[failing], steps=[{"label": "S1", "title": "try", "action": "analyze_code"}])],
        "executor": [w.done(f"attempt {i}") for i in range(4)],
        "verifier": [], "reviewer": [],
    }
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 21, out + err
    assert "paused (cycle_limit): verify cycle limit reached (3 of 3)" in out and "(ACODE-ORCH-003)" in out
    shown = _show(shared, _session_id(out))
    assert shown["session"]["status"] == "paused" and shown["session"]["exit_code"] == 21
    assert len([e for e in shown["events"] if e["type"] == "check_ran"]) == 4


def test_an_exhausted_script_pauses_the_session_naming_the_stage(shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload()
    responses["reviewer"] = []
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 22, out + err
    assert "paused (escalation): reviewer failed: " in out
    assert f"continue with: acode resume {_session_id(out)}" in out
    assert "the scripted model has no response left for the reviewer (it has 0, this is request 1" in out
    assert "(ACODE-LLM-002)" in out


def test_resume_verbose_shows_the_models_text_from_the_resume_on_not_what_it_wrote_before(
        shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    short = w.workload()
    short["executor"] = short["executor"][:4]  # S1 and S2; the script runs out at S3
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", short), "--verbose")
    assert code == 22, out + err
    assert '            > [call] run_terminal {"command": "python slow.py"}' in out.splitlines()
    full = w.script(tmp_path / "full.yaml", w.workload())
    resumed = shared("resume", _session_id(out), "--script", str(full), "--verbose")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    shown = [line.strip() for line in resumed.stdout.splitlines() if line.startswith("            > ")]
    assert shown == ['> [call] write_file {"content": "beta\\n", "path": "b.txt"}',
                     '> [call] step_complete {"summary": "wrote b.txt"}',
                     '> {"passed":true,"summary":"tidy","criteria":[{"label":"A2","passed":true,"evidence":'
                     '"looks tidy"}]}',
                     '> {"decision":"approve","summary":"all there","issues":[]}'], resumed.stdout


def test_a_stage_past_its_timeout_is_retried_then_pauses_with_exit_20(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload({"planner": 30.0})
    code, out, err = _run(acode, workspace, w.script(tmp_path / "s.yaml", responses), "--stage-timeout", "1")
    assert code == 20, out + err
    assert out.count("[PLANNER]   retrying, attempt") == 2
    assert "paused (stage_timeout): planner timed out 3 times (1s each)" in out and "ACODE-ORCH-002" in out


def test_cancel_stops_a_running_session_with_exit_23(acode: Acode, tmp_path: Path) -> None:
    acode.up()
    workspace = w.workspace(tmp_path / "w")
    script = w.script(tmp_path / "s.yaml", w.workload({"planner": 30.0}))
    run = acode.start("run", "slow task", "--workspace", str(workspace), "--provider", "scripted",
                      "--script", str(script))
    acode.wait_busy("planner")
    listed = json.loads(acode("sessions", "--json", "--status", "running").stdout)
    assert acode("cancel", listed[0]["id"]).stdout.strip() == f"session {listed[0]['id']} cancelled"
    code, out, err = wait_exit(run)
    assert code == 23, out + err
    assert "cancelled: cancelled by the user (ACODE-ORCH-007) (exit 23)" in out


def test_run_without_acode_up_says_how_to_start_it(acode: Acode, tmp_path: Path) -> None:
    script = w.script(tmp_path / "s.yaml", w.workload())
    code, out, err = _run(acode, tmp_path, script)
    assert code == 1
    assert err.strip() == (f"acode: acode is not running for {acode.home}; start it with `acode up --detach` "
                           "(ACODE-NET-003)")


def test_a_bad_script_is_refused_before_anything_runs(acode: Acode, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nresponses:\n  executor:\n    - tool_call: []\n")
    code, out, err = _run(acode, tmp_path, bad)
    assert code == 1
    assert err.startswith(f"acode: scripted model file {bad}: responses.executor[0]")
    assert "(ACODE-LLM-004)" in err and "Traceback" not in err


def test_a_typo_in_the_workspace_config_fails_loudly(acode: Acode, tmp_path: Path) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text("orchestration:\n  cycle_limt: 5\n")
    code, out, err = _run(acode, tmp_path, w.script(tmp_path / "s.yaml", w.workload()))
    assert code == 1
    assert f"config file {tmp_path}/.agent/config.yml is invalid" in err
    assert "cycle_limt" in err and "(ACODE-CFG-001)" in err


def test_two_executor_instances_serve_two_sessions_at_once(acode: Acode, tmp_path: Path) -> None:
    assert acode.up("--workers", "executor=2").returncode == 0
    assert {a["instance"] for a in acode.status()["actors"]} >= {"executor-1", "executor-2"}
    runs = []
    for name in ("one", "two"):
        workspace = w.workspace(tmp_path / name)
        script = w.script(tmp_path / f"{name}.yaml", w.workload({"executor": 1.5}))
        runs.append((workspace, acode.start("run", w.TASK, "--workspace", str(workspace), "--provider",
                                            "scripted", "--script", str(script))))
    wait_until(lambda: all(acode.actor(f"executor-{i}")["busy"] for i in (1, 2)), timeout=30,
               what="both executors busy at once")
    for workspace, run in runs:
        code, out, err = wait_exit(run)
        assert code == 0, out + err
        assert (workspace / "log.txt").read_text() == "ran\n"


def test_tool_calls_a_small_model_writes_as_text_complete_a_session_and_a_broken_one_is_corrected(
        shared: Acode, tmp_path: Path) -> None:
    workspace = w.workspace(tmp_path / "w")
    responses = w.workload()
    write_a = json.dumps({"name": "write_file", "arguments": {"path": "a.txt", "content": "alpha\n"}})
    responses["executor"] = [
        {"content": f"I will write a.txt.\n```json\n{write_a}\n```"},
        {"content": json.dumps({"name": "step_complete", "arguments": {"summary": "wrote a.txt"}})},
        {"content": '<tool_call>{"name": "run_terminal", "arguments": {"command": "python slow.py"}}</tool_call>'},
        {"content": json.dumps([{"function": {"name": "step_complete", "arguments": '{"summary": "ran slow.py"}'}}])},
        {"content": '{"name": "write_file", "arguments": {"path": "b.txt", "content": "beta\n}'},  # cut short
        {"content": json.dumps({"tool": "write_file", "args": {"path": "b.txt", "content": "beta\n"}})},
        w.done("wrote b.txt"),
    ]
    code, out, err = _run(shared, workspace, w.script(tmp_path / "s.yaml", responses))
    assert code == 0, out + err
    assert "[EXECUTOR]    write_file a.txt -> ok: wrote 6 bytes to a.txt" in out
    assert "[EXECUTOR]  T1/S3 completed: wrote b.txt" in out
    assert (workspace / "b.txt").read_text() == "beta\n" and (workspace / "log.txt").read_text() == "ran\n"
    steps = [e for e in _show(shared, _session_id(out))["events"] if e["type"] == "step_finished"]
    assert [e["status"] for e in steps] == ["completed"] * 3
