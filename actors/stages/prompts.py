"""System prompts and the rendering of stage inputs into chat messages.

Everything a stage shows the model is built here, deterministically (no timestamps, no
attempt numbers), so a replayed stage produces byte-identical requests and is answered
from the record.
"""

from __future__ import annotations

from protocol.plan import PlanStep, PlanTask, TaskPlan
from protocol.results import StageResult, ToolResult
from protocol.session import Feedback

__all__ = [
    "EXECUTOR",
    "PLANNER",
    "REVIEWER",
    "VERIFIER",
    "render_feedback",
    "render_plan",
    "render_step",
    "render_tool_result",
    "render_verification",
]

PLANNER = """You are the planner of acode, a coding agent that changes a local workspace.
Turn the task into tasks and steps that another agent will carry out with file tools
(read_file, write_file, modify_file, create_directory, list_directory, search_code) and run_terminal.

Answer with one JSON object and nothing else, in this shape:
{"goal": "what the change achieves", "status": "ready",
 "tasks": [{"label": "T1", "title": "short title", "description": "what to change and why",
            "complexity": 3, "depends_on": [],
            "resources": {"read": ["src/app.py"], "write": ["src/app.py"], "directories": [],
                          "commands": ["python -m pytest -q"]},
            "acceptance": [{"label": "A1", "description": "what must be true afterwards",
                            "check": {"command": "python -m pytest -q", "expect_exit": 0, "expect_output": "passed"}}],
            "steps": [{"label": "S1", "title": "short title", "description": "what to do",
                       "action": "modify_file", "expected_output": "what the step leaves behind",
                       "depends_on": []}]}],
 "questions": []}

Rules:
- Labels: tasks T1, T2, ...; steps S1, S2, ... in each task; criteria A1, A2, ... unique in the plan.
- A task's depends_on names other tasks; a step's names steps of the same task. No cycles.
- action: read_file, write_file, modify_file, create_directory, run_command, analyze_code or generate_code.
- complexity is 1, 2, 3, 5, 8, 13, 21 or 34: 1 trivial, 3 a small change, 8 several files.
- Paths are relative to the workspace root: never absolute, never "..", never in .git or .agent.
- Commands run without a shell: one program and its arguments, like "python -m pytest -q".
  No pipes, &&, ;, redirections, $VARIABLES, cd, or "python -c"; put code in a file and run it.
- Give a criterion a check whenever a command can decide it; expect_output is text the output
  must contain (leave it out if any output will do).
- Use the fewest tasks and steps that do the job (at most 50 steps).
- Plan from the files shown. If the task needs something that does not exist, plan to create it.
- Only if the task cannot be planned without the user, answer "status": "needs_clarification",
  "tasks": [] and specific questions: {"label": "Q1", "question": "...", "options": ["...", "..."],
  "free_text": false}.
- When revising a plan: keep tasks marked completed as they are, fix every issue in the
  feedback, and add "change_summary": what you changed and why."""

EXECUTOR = """You are the executor of acode. Carry out exactly one step of a plan in the workspace using
the tools provided (paths are relative to the workspace root). When the step is done, call
step_complete with a one-line summary; if it cannot be done, call step_failed with the reason.
Do not do work that belongs to other steps."""

VERIFIER = """You are the verifier of acode. Decide, for each acceptance criterion listed, whether the
change meets it, using the evidence given. Answer with one JSON object only:
{"passed": bool, "summary": str, "criteria": [{"label": "A1", "passed": bool, "evidence": str}]}"""

REVIEWER = """You are the reviewer of acode. Judge the whole change against the user's request, the plan
and the verification results. Approve it, or ask for a re-plan citing the criterion concerned.
Answer with one JSON object only:
{"decision": "approve" | "replan", "summary": str,
 "issues": [{"criterion": "A1", "problem": str, "suggestion": str}]}"""


def render_feedback(feedback: Feedback | None) -> str:
    if feedback is None:
        return ""
    lines = [f"Feedback from the {feedback.source}: {feedback.summary}"]
    lines += [f"- {item.label}: {item.problem}. {item.detail}".rstrip() for item in feedback.items]
    return "\n".join(lines)


def render_plan(plan: TaskPlan) -> str:
    lines = [f"Goal: {plan.goal} (plan version {plan.version})"]
    for task in plan.tasks:
        lines.append(f"{task.label} [{task.status}] {task.title}: {task.description}".rstrip(": "))
        for step in task.steps:
            lines.append(f"  {step.label} ({step.action}) {step.title}")
        for criterion in task.acceptance:
            check = f" [check: {criterion.check.command}]" if criterion.check else ""
            lines.append(f"  {criterion.label}: {criterion.description}{check}")
    return "\n".join(lines)


def render_step(plan: TaskPlan, task: PlanTask, step: PlanStep, feedback: Feedback | None) -> str:
    lines = [
        f"Goal: {plan.goal}",
        f"Task {task.label}: {task.title}",
        task.description,
        f"Step {step.label}: {step.title}",
        step.description,
        f"Action: {step.action}",
    ]
    if step.expected_output:
        lines.append(f"Expected output: {step.expected_output}")
    if task.resources.write or task.resources.read:
        lines.append(f"Files: read {task.resources.read}, write {task.resources.write}")
    if task.acceptance:
        lines.append("Acceptance criteria:")
        lines += [f"- {c.label}: {c.description}" for c in task.acceptance]
    text = render_feedback(feedback)
    if text:
        lines.append(text)
    return "\n".join(line for line in lines if line)


def render_tool_result(result: ToolResult) -> str:
    if result.error is not None:
        head = f"error {result.error.code}: {result.error.message}"
        return f"{head}\n{result.output}" if result.output else head
    if result.exit_code is not None:
        return f"exit code {result.exit_code}\n{result.output}"
    return result.output


def render_verification(previous: StageResult | None) -> str:
    verdict = previous.verification if previous else None
    if verdict is None:
        return "Verification: none recorded"
    lines = [f"Verification {'passed' if verdict.passed else 'failed'}: {verdict.summary}"]
    lines += [f"- {c.label}: {'passed' if c.passed else 'FAILED'} {c.evidence}".rstrip() for c in verdict.criteria]
    return "\n".join(lines)
