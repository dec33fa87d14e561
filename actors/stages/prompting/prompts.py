"""System prompts and the rendering of stage inputs into chat messages.

Everything a stage shows the model is built here, deterministically (no timestamps, no
attempt numbers), so a replayed stage produces byte-identical requests and is answered
from the record.
"""

from __future__ import annotations

from collections.abc import Collection

from actors.llm import toolcalls
from actors.stages.prompting.untrusted import Fence
from protocol.calls.tools import TOOL_ARGS
from protocol.plans.plan import PlanStep, PlanTask, TaskPlan
from protocol.plans.results import ModelToolCall, StageResult, ToolResult
from protocol.sessions.session import Feedback

__all__ = [
    "EXECUTOR",
    "NO_TOOL_CALL",
    "PLANNER",
    "REVIEWER",
    "VERIFIER",
    "executor_system",
    "file_block_example",
    "render_feedback",
    "render_history",
    "render_format_error",
    "render_from_block",
    "render_plan",
    "render_pushback",
    "render_repaired",
    "render_repeated",
    "render_step",
    "render_tool_result",
    "render_unnamed_block",
    "render_verification",
    "truncate",
]

PLANNER = """You are the planner of acode, a coding agent that changes a local workspace.
Turn the task into tasks and steps that another agent will carry out with file tools
(read_file, write_file, modify_file, create_directory, list_directory, search_code) and run_terminal.

Answer with one JSON object and nothing else, in this shape (<...> are placeholders for your
text; a command never holds one: write the real command, or leave the check out):
{"goal": "<what the change achieves>", "status": "ready",
 "tasks": [{"label": "T1", "title": "<short title>", "description": "<what to change and why>",
            "complexity": 1, "depends_on": [],
            "resources": {"read": ["<path>"], "write": ["<path>"], "directories": [],
                          "commands": ["python -m pytest -q"]},
            "acceptance": [{"label": "A1", "description": "<what must be true afterwards>",
                            "check": {"command": "python -m pytest -q", "expect_exit": 0}}],
            "steps": [{"label": "S1", "title": "<short title>", "description": "<what to do>",
                       "action": "modify_file", "depends_on": []}]}],
 "questions": []}

Rules:
- Use only the paths the task and the files shown name: never add a directory the task did
  not state (a file the task names without a directory goes at the workspace root).
- Never plan to change tests unless the task asks for it: tests the task names are checks.
- The goal says what the task says; add nothing it did not ask.
- Labels: tasks T1, T2, ...; steps S1, S2, ... in each task; criteria A1, A2, ... unique in the plan.
- A task's depends_on names other tasks; a step's names steps of the same task. No cycles.
- action: read_file, write_file, modify_file, create_directory, run_command, analyze_code or generate_code.
- complexity is 1, 2, 3, 5, 8, 13, 21 or 34: 1 trivial, 3 a small change, 8 several files.
- Paths are relative to the workspace root: never absolute, never "..", never in .git or .agent.
- Commands run without a shell: one program and its arguments.
  No pipes, &&, ;, redirections, $VARIABLES, cd, or "python -c"; put code in a file and run it.
- Give a criterion a check whenever a command can decide it; expect_output is text the output
  must contain (leave it out if any output will do).
- Use the fewest tasks and steps that do the job: one task with one step for a one-file change.
- Plan from the files shown. If the task needs something that does not exist, plan to create it.
- Only if the task cannot be planned without the user, answer "status": "needs_clarification",
  "tasks": [] and specific questions about the task (never about these rules): {"label": "Q1",
  "question": "...", "options": ["...", "..."], "free_text": false}.
- When revising a plan: keep tasks marked completed as they are, fix every issue in the
  feedback, and add "change_summary": what you changed and why."""

_FILE_TOOLS = ("write_file", "modify_file", "create_directory")


def _executor_rules(offered: Collection[str], compact: bool, file_blocks: bool = False, path: str = "") -> str:
    """The executor's rules for the tools ``offered``: a tool that is not offered is not named
    (a small model calls what it reads about); ``compact``: the shorter rules of the compact
    prompt style; ``file_blocks``: a file is written as a file block, other tools are called as
    JSON. Every tool offered gives :data:`EXECUTOR`, the prompt acode has always sent."""
    write, modify, read = ("write_file" in offered), ("modify_file" in offered), ("read_file" in offered)
    if file_blocks and write:
        return _file_block_rules(offered, compact, path)
    if compact:
        lines = ["You are the executor of acode: carry out ONE step of a plan by calling tools. Rules:",
                 "- Paths are relative to the workspace root, exactly as the step names them."]
        if write and not modify:
            lines.append("- To change a file, write the whole new file with write_file"
                         + (" (read it first if its content is not shown)." if read else "."))
        elif write:
            lines.append("- write_file replaces the whole file: give the complete content.")
        if modify:
            lines.append("- For a small change use modify_file with edits whose search text is copied exactly from "
                         "the file.")
        if "run_terminal" in offered:
            lines.append("- run_terminal runs one program and its arguments, without a shell: no pipes, &&, ;, "
                         "redirections, $VARIABLES or cd.")
        lines += ["- When the step is done, call step_complete with a one-line summary; if it cannot be done, "
                  "call step_failed with the reason.",
                  '- Without function calls, answer with only one JSON object: {"name": "<tool>", "arguments": '
                  "{...}}"]
        return "\n".join(lines)
    shown = "read_file shows" if read else "shown with the file"
    lines = ["You are the executor of acode, a coding agent. You carry out ONE step of a plan in a",
             "workspace by calling tools. Rules:",
             "- Paths are relative to the workspace root, never absolute, never outside it. Use the",
             "  paths the step and the task name, exactly as they name them."]
    if write and modify:
        lines += ["- write_file replaces the whole file: give the complete content. For a small change use",
                  "  modify_file with edits whose search text is copied exactly from the file (without the",
                  f"  line numbers {shown})."]
    elif write:
        lines += ["- To change a file, write the whole new file with write_file (read it first if its",
                  "  content is not shown): give its complete content, not only the lines that change."] if read \
            else ["- To change a file, write the whole new file with write_file: give its complete",
                  "  content, not only the lines that change."]
    elif modify:
        lines += ["- To change a file use modify_file with edits whose search text is copied exactly from",
                  f"  the file (without the line numbers {shown})."]
    if "run_terminal" in offered:
        lines += ["- run_terminal runs one program with its arguments, without a shell: no pipes, &&, ;,",
                  "  redirections, $VARIABLES or cd. Example: python -m pytest -q"]
    if read and modify:
        lines.append("- Read a file before you change it if its content is not shown to you.")
    lines += ["- Do this step only. When it is done, call step_complete with a one-line summary. If it",
              "  cannot be done, call step_failed with the reason.",
              "- Call tools as function calls. If you cannot, answer with only one JSON object:",
              '  {"name": "<tool>", "arguments": {...}}']
    return "\n".join(lines)


EXECUTOR = _executor_rules(TOOL_ARGS, compact=False)

def file_block_example(path: str = "") -> str:
    """A file block for ``path``, the step's own file: a small model copies an example's path
    (Qwen2.5-Coder-1.5B wrote its change to ``path/to/file.py``, the old example), so the
    example is the file to write or, without one, ``<path>``, which is no path a file block
    accepts."""
    target = path or "<path>"
    language = "python" if target.endswith(".py") or not path else ""
    return f"{target}\n```{language}\n<the complete file>\n```"


def _file_block_rules(offered: Collection[str], compact: bool, path: str = "") -> str:
    """The executor's rules under whole-file edits: a file is written as a file block (its
    path on a line, then its content fenced: :func:`actors.llm.toolcalls.file_blocks`), as
    small models write a file far more reliably than inside a JSON string; the other tools
    are called as JSON. The example is ``path``'s (:func:`file_block_example`)."""
    if compact:
        lines = ["You are the executor of acode: carry out ONE step of a plan. Rules:",
                 "- Paths are relative to the workspace root, exactly as the step names them."]
    else:
        lines = ["You are the executor of acode, a coding agent. You carry out ONE step of a plan in a",
                 "workspace. Rules:",
                 "- Paths are relative to the workspace root, never absolute, never outside it. Use the",
                 "  paths the step and the task name, exactly as they name them."]
    lines += ["- To write a file, answer with its path on one line and then its complete new content in a "
              "fenced code block:", file_block_example(path),
              "  Give the whole file, not only the lines that change."
              + (" Read it first if its content is not shown." if "read_file" in offered else "")]
    if "run_terminal" in offered:
        lines.append("- run_terminal runs one program and its arguments, without a shell: no pipes, &&, ;, "
                     "redirections, $VARIABLES or cd.")
    lines += ["- Call other tools as function calls or as one JSON object: "
              '{"name": "<tool>", "arguments": {...}}',
              "- When the step is done, call step_complete with a one-line summary; if it cannot be done, "
              "call step_failed with the reason."]
    return "\n".join(lines)

NO_TOOL_CALL = ("No tool call found in your answer. Call one of the tools now (as a function call, or as one "
                'JSON object {"name": "<tool>", "arguments": {...}}). When the step is done call step_complete; '
                "if it cannot be done call step_failed.")

VERIFIER = """You are the verifier of acode. Decide, for each acceptance criterion listed, whether the
change meets it, using the evidence given. A file the task names must be at the path it names.
Answer with one JSON object only:
{"passed": bool, "summary": str, "criteria": [{"label": "<criterion label>", "passed": bool, "evidence": str}]}"""

REVIEWER = """You are the reviewer of acode. Judge the whole change against the user's request, the plan
and the verification results, and decide:
- "approve": the change does what was asked.
- "request_changes": the approach is right but details need fixing (naming, a missed case,
  tidying); list each change as an issue. The executor makes them, then you review again.
- "replan": the approach is wrong; list the issues, each citing the acceptance criterion it
  concerns. The planner revises the plan.
Check that every file the task names is at the path it names (not in another directory).
Answer with one JSON object only:
{"decision": "approve" | "request_changes" | "replan", "summary": str,
 "issues": [{"criterion": "<criterion label>", "problem": str, "suggestion": str}]}"""


def render_feedback(feedback: Feedback | None) -> str:
    if feedback is None:
        return ""
    lines = [f"Feedback from the {feedback.source}: {feedback.summary}"]
    lines += [f"- {item.label}: {item.problem}. {item.detail}".rstrip() for item in feedback.items]
    return "\n".join(lines)


def render_history(history: list[Feedback]) -> str:
    """A session's earlier cycles for the reviewer, oldest first: verifier failures, review
    issues, re-plan change summaries ("" when there were none)."""
    if not history:
        return ""
    lines = ["Earlier cycles of this session, oldest first:"]
    for entry in history:
        if entry.source == "planner":
            lines.append(f"- re-plan: {entry.summary}")
            continue
        kind = "verify" if entry.source == "verifier" else "review"
        where = f" -> {entry.target}" if entry.target else ""
        lines.append(f"- {kind} cycle {entry.cycle} ({entry.source}{where}): {entry.summary}")
        lines += [f"  - {item.label}: {item.problem}" + (f" ({item.detail})" if item.detail and entry.source ==
                                                         "reviewer" else "") for item in entry.items]
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


def executor_system(fence: Fence, offered: Collection[str] | None = None, *, compact: bool = False,
                    file_blocks: bool = False, path: str = "") -> str:
    """The executor's system prompt: its rules for the tools ``offered`` (None: every tool),
    shorter when ``compact`` (the profile's ``prompt_style``), asking for files as file
    blocks when ``file_blocks`` (whole-file edits) and write_file is offered (the example
    is ``path``, the step's file), then the fence's preamble. Deterministic: the same tools,
    style and path give the same bytes."""
    rules = EXECUTOR if offered is None and not compact and not file_blocks else _executor_rules(
        TOOL_ARGS if offered is None else frozenset(offered), compact, file_blocks, path)
    return f"{rules}\n{fence.preamble()}"


def render_step(plan: TaskPlan, task: PlanTask, step: PlanStep, feedback: Feedback | None,
                files: list[tuple[str, str | None]] | None = None, fence: Fence | None = None,
                listing: str = "", offered: Collection[str] | None = None) -> str:
    """The step's message: what to do, the task's criteria, the workspace's files
    (``listing``, list_directory's output), the files the step names (``(path, text)``,
    text None for a file that does not exist yet; fenced when ``fence`` is given) and the
    verifier's feedback on a cycle back. A ``modify_file`` action when modify_file is not
    among the tools ``offered`` (None: every tool) reads as a whole-file write_file."""
    action: str = step.action
    if action == "modify_file" and offered is not None and action not in offered and "write_file" in offered:
        action = "write_file (the whole new content of the file)"
    lines = [
        f"Goal: {plan.goal}",
        f"Task {task.label}: {task.title}",
        task.description,
        f"Your step, {step.label}: {step.title}",
        step.description,
        f"Action: {action}",
    ]
    if step.expected_output:
        lines.append(f"Expected output: {step.expected_output}")
    if step.verification:
        lines.append(f"How it will be checked: {step.verification}")
    others = [s for s in task.steps if s.label != step.label]
    if others:
        lines.append("Other steps of this task (not yours): " + "; ".join(f"{s.label} {s.title}" for s in others))
    if task.resources.write or task.resources.read:
        lines.append(f"Files: read {task.resources.read}, write {task.resources.write}")
    if task.acceptance:
        lines.append("Acceptance criteria of the task:")
        lines += [f"- {c.label}: {c.description}" + (f" (checked by running `{c.check.command}`)" if c.check else "")
                  for c in task.acceptance]
    if listing:
        lines.append("Files in the workspace (list_directory ., depth 3; directories end with /):")
        lines.append(fence.wrap("workspace listing", listing) if fence else listing)
    for path, text in files or []:
        if text is None:
            lines.append(f"Current content of {path}: none, the file does not exist yet")
            continue
        lines.append(f"Current content of {path} (line numbers are not part of it):")
        lines.append(fence.wrap(f"file {path}", text) if fence else text)
    if feedback is not None:
        lines.append(f"This step runs again because the {feedback.source} found problems: {feedback.summary}")
        for item in feedback.items:
            lines.append(f"- {item.label}: {item.problem}")
            if item.detail:
                lines.append(fence.wrap(f"evidence {item.label}", item.detail) if fence else item.detail)
        lines.append("Fix what belongs to your step; if your step is already right, call step_complete.")
    return "\n".join(line for line in lines if line)


def render_pushback(step: PlanStep, offered: Collection[str] | None = None, *, file_blocks: bool = False) -> str:
    """The answer to a step_complete that changed nothing in a step that should have; it
    names the file tools ``offered`` (None: every tool), or with ``file_blocks`` the file
    block that writes a file."""
    tools = [tool for tool in _FILE_TOOLS if offered is None or tool in offered] or ["the file tools"]
    named = tools[0] if len(tools) == 1 else f"{', '.join(tools[:-1])} or {tools[-1]}"
    if file_blocks:
        named = "a file block (the file's path on one line, then its complete content in a fenced code block)"
    hidden = offered is not None and step.action in TOOL_ARGS and step.action not in offered
    kind = "a step that changes files" if hidden else f"a {step.action} step"
    return (f"step_complete refused once: step {step.label} is {kind} but no file was written or "
            f"changed in it. Make the change with {named}, then call "
            "step_complete. If the workspace already has exactly the right content, call step_complete again.")


def truncate(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail, with a note of what was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    note = (f"\n[… {cut:,} characters (~{cut // 4:,} tokens) cut here; {len(text):,} in all. Ask for less: "
            "read_file with offset/limit, a narrower search_code, or a command with less output …]\n")
    return text[:head] + note + (text[-tail:] if tail else "")


def render_tool_result(result: ToolResult, fence: Fence | None = None, limit: int | None = None) -> str:
    """A tool result for the model: its status, then its message and output (fenced when
    ``fence`` is given, cut to ``limit`` characters with a note when given)."""
    if fence is None and limit is None:
        if result.error is not None:
            head = f"error {result.error.code}: {result.error.message}"
            return f"{head}\n{result.output}" if result.output else head
        if result.exit_code is not None:
            return f"exit code {result.exit_code}\n{result.output}"
        return result.output
    body = result.output
    if result.error is not None:
        status = f"{result.tool} failed ({result.error.code})"
        body = f"{result.error.message}\n{body}" if body else result.error.message
    elif result.exit_code is not None:
        status = f"{result.tool}: exit code {result.exit_code}"
    else:
        status = f"{result.tool}: ok"
    if limit is not None:
        body = truncate(body, limit)
    if not body:
        return f"{status} (no output)"
    return f"{status}\n{fence.wrap(result.tool + ' result', body) if fence else body}"


def render_verification(previous: StageResult | None) -> str:
    verdict = previous.verification if previous else None
    if verdict is None:
        return "Verification: none recorded"
    lines = [f"Verification {'passed' if verdict.passed else 'failed'}: {verdict.summary}"]
    lines += [f"- {c.label}: {'passed' if c.passed else 'FAILED'} {c.evidence}".rstrip() for c in verdict.criteria]
    return "\n".join(lines)


def render_format_error(complaint: str) -> str:
    """The correction for an answer the server could not parse into a tool call."""
    said = " ".join(complaint.split())[:300]
    return (f"error: the model server could not read your answer as a tool call ({said}); call exactly one tool "
            f"with JSON arguments and no other text, e.g. {toolcalls.CALL_EXAMPLE} (ACODE-EXEC-007)")


def render_repeated(correction: str, tool: str, path: str, *, file_blocks: bool = False) -> str:
    """The correction for an invalid answer the model sent twice in a row: not the same
    words again, but the exact call to send, for the tool it tried (its path filled in);
    with ``file_blocks`` (whole-file edits), a write_file as a file block."""
    said = correction.removeprefix("error: ")
    if file_blocks and tool == "write_file":
        return (f"error: you sent the same invalid answer again ({said[:300]}). Do not send it a third time. To "
                "write the file, answer with its path on one line and then its complete content in a fenced code "
                f"block, no JSON:\n{file_block_example(path)}")
    return (f"error: you sent the same invalid answer again ({said[:300]}). Do not send it a third time. Answer "
            "with only this one JSON object, changed to what you mean (inside a JSON string write every \" as "
            "\\\" and every line break as \\n; a Python docstring may use single quotes):\n"
            + toolcalls.example_call(tool, path))


def render_unnamed_block(path: str) -> str:
    """The correction for an answer, under whole-file edits, whose code block had no path
    line before it: nothing was written (code shown may be an explanation, never a guess)."""
    return ("No tool call found in your answer, and your code block was not written: it had no path line "
            "before it. To write a file, answer with its path alone on one line and then its complete content "
            f"in a fenced code block:\n{file_block_example(path)}\nCall other tools as "
            "one JSON object. When the step is done call step_complete; if it cannot be done call step_failed.")


def render_from_block(call: ModelToolCall, result: ToolResult) -> str:
    """The note before the result of a write_file call read from a file block."""
    path = call.arguments.get("path", "")
    if not result.ok:
        return f"note: your file block for {path} was run as write_file and failed.\n"
    return (f"note: acode wrote {path} from your file block. If the step is done, call step_complete; to change "
            "a file again, send its whole content as a file block.\n")


def render_repaired(call: ModelToolCall) -> str:
    """The note before the result of a call whose broken JSON acode repaired."""
    given = ", ".join(sorted(call.arguments)) or "no arguments"
    return (f"note: your {call.name} call was not valid JSON; acode repaired it and ran it with {given}. Check "
            "the result; next time escape quotes (\\\") and line breaks (\\n) inside JSON strings.\n")
