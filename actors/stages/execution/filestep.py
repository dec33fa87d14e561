"""A step answered as one whole file: how a small model changes a file (issue 25).

Qwen2.5-Coder-1.5B solves 4 of 5 HumanEval problems when asked, in one chat turn, for the
complete file in a code block, and aider (whole-file edits, tests run after each answer)
solves half the benchmark's tasks with it. In acode's tool loop the same model solved
none: it echoed the step's message, broke the file inside a JSON string, repeated one
useless call. So under a profile whose ``step_style`` is ``file`` (the built-in small
profile's), a step that changes exactly one file is not a tool loop. Each turn asks the
model for that file's complete new content in one fenced block, with the files the step
names shown; acode writes the answer with an ordinary ``write_file`` call and runs the
task's checks (its criteria's commands) itself, both through the same
:class:`actors.stages.calls.pipeline.CallPipeline` as a model's calls (autonomy, approvals,
sandbox, journal). When every check passes the step is complete; when one fails, the
model is asked afresh (the plain ask, or the full one with the failure said). The model
chooses no command and no path: it can write only the file the plan names, and only the
plan's checks run.

The pure parts are their own modules: what the step asks and answers a turn with
(:mod:`actors.stages.execution.fileprompt`: :data:`~actors.stages.execution.fileprompt.SYSTEM`,
:func:`~actors.stages.execution.fileprompt.render`, the plain ask), and when the style applies and
what of an answer is written (:mod:`actors.stages.execution.fileanswer`:
:func:`~actors.stages.execution.fileanswer.target`, :func:`~actors.stages.execution.fileanswer.answered_file`,
and :func:`~actors.stages.execution.fileanswer.problem`: no block, the file unchanged, a syntax
error, code left out). This module is the loop: :class:`FileStyleStep`, which extends the
tool loop's :class:`actors.stages.execution.toolloop.ToolLoopStep` and keeps it for any other step.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from actors.llm.provider import ModelRequest
from actors.stages.calls.judge import judge
from actors.stages.execution.conversation import Conversation
from actors.stages.execution.fileanswer import CHANGING_ACTIONS, answered_file, problem, target, whole
from actors.stages.execution.fileprompt import EARLIER, SYSTEM, render, render_plain, render_problem
from actors.stages.execution.step import REPEATS, Outcome, retry_note, step_timed_out
from actors.stages.execution.toolloop import ToolLoopStep
from actors.stages.execution.turnwatch import Watched
from actors.stages.prompting import prompts
from protocol.plans.plan import Check
from protocol.plans.results import ModelToolCall

__all__ = ["FileStyleStep"]

_WARMER = 0.6  # the temperature after a file sent back unchanged
_CHECK_FLOOR_S = 30.0  # the checks after a change get at least this long


class FileStyleStep(ToolLoopStep):
    """A :class:`~actors.stages.execution.toolloop.ToolLoopStep` whose tries answer a step that changes
    one file, seen whole, as that file when the profile's step style is ``file``; any other
    step keeps the tool loop."""

    found: dict[str, str | None] | None = None  # the step's files as its first try found them
    fresh_asks = 0  # the conversations begun afresh after a failed answer came back unchanged, all tries

    def _loop(self, key: str, site: str, listing: str, files: list[tuple[str, str | None]], attempt: int,
              limit: int, failure: Outcome | None) -> Outcome:
        path = target(self.task, self.step) if self.ctx.request.settings.profile.step_style == "file" else ""
        if path and self.mcp is not None and self.mcp.asked_for(self.ctx.request.task, self.task, self.step):
            path = ""  # the request asks for an MCP tool, which only the tool loop offers
        shown = whole(files, path) if path else None
        if shown is None:  # several files, none, or one the model cannot see whole: the tool loop
            return super()._loop(key, site, listing, files, attempt, limit, failure)
        return self._file_try(key, site, path, shown, attempt, limit, failure)

    def _file_try(self, key: str, site: str, path: str, files: list[tuple[str, str | None]], attempt: int, limit: int,
                  failure: Outcome | None) -> Outcome:
        """One try of a step that changes one file, under the ``file`` step style
        (:mod:`actors.stages.execution.filestep`): each turn asks for the whole file, writes what the
        model answered (write_file, through the pipeline) and runs the task's checks (run_terminal,
        through the pipeline); the step is complete when they pass, or after the write when
        the task has none. What cannot be written (no block, unchanged, not Python, code left
        out) is answered without writing; the same problem three times in a row ends the try.
        The file is always shown as the step found it; a failed answer sent back unchanged is
        asked afresh: a new conversation, every other time the plain ask
        (:func:`~actors.stages.execution.fileprompt.render_plain`), else the full one with the failure
        said and the failed file not shown, sampled warmer."""
        request = self.ctx.request
        assert request.plan is not None
        plan = request.plan
        current = dict(files).get(path)
        # every prompt shows the file as the step found it: shown its own failed answer, the model
        # sent that answer back unchanged in every later turn and try (HumanEval/72, 120, 128)
        if self.found is None:
            self.found = dict(files)
        original = self.found.get(path, current)
        view = [(name, original if name == path else text) for name, text in files]
        system = SYSTEM + "\n" + self.ctx.fence.preamble() + self.instructions
        # the task's checks hold when its last change is made: an earlier step's file alone
        # (core.py renamed, cli.py not yet) fails them, and the model could only undo its change
        changing = [s.label for s in self.task.steps if s.action in CHANGING_ACTIONS]
        last = not changing or changing[-1] == self.step.label
        checks = [c.check for c in self.task.acceptance if c.check is not None] if last else []
        # how the checks fail now: "fix the code so that the test passes" names no error; the test's
        # output does (a file not written yet: nothing to learn)
        self.slowest_check_ms = 0.0
        before = self._run_checks(f"{key}:before", 0, checks) if checks and current is not None else []
        if isinstance(before, Outcome):
            return before
        # a model's answer can loop forever: after the change the checks get ten times what they
        # took before it (30 s at least), not the whole command timeout each time
        check_timeout = max(_CHECK_FLOOR_S, 10 * self.slowest_check_ms / 1000) if self.slowest_check_ms else None
        note = retry_note(attempt, limit, failure, self.earlier_failure, tools=False)

        def fresh(failing: Sequence[tuple[Check, str]], said: str) -> Conversation:
            return Conversation(system, render(plan, self.task, self.step, path, view, request.feedback,
                                               self.ctx.fence, runs_checks=last, failing=failing, note=note,
                                               failing_said=said))

        def afresh(failing: Sequence[tuple[Check, str]], *, repeated: bool) -> bool:
            """A new conversation after a failed answer (``repeated``: sent back unchanged),
            every other time the plain ask: a different way to ask, not only a warmer one.
            Whether to sample it warmer: the first plain ask is asked as the model alone is,
            a later one would answer as that one did; the full ask, after a repeated answer."""
            self.fresh_asks += 1
            plain = self.fresh_asks % 2 == 1
            self.conversation = Conversation(system, render_plain(plan, self.step, path, original, self.ctx.fence,
                                                                          view)
                                             ) if plain else fresh(failing, EARLIER)
            return self.fresh_asks > 1 if plain else repeated

        self.conversation = fresh(before, EARLIER if current != original else "")
        self.watch.tools = False  # no step_failed to call in this style
        self.watch.start_try([])  # each write says what the file was before it
        failed_last: list[tuple[Check, str]] = []  # the last write's failed checks, while nothing else came since
        warm = False  # the next ask is sampled at _WARMER: asked the same way, the model answers the same
        self.attempt = attempt
        timeout = request.settings.step_timeout_s
        started = time.monotonic()
        last_problem, repeats = "", 0
        turns = request.settings.max_turns_per_step
        for turn in range(1, turns + 1):
            answer = None
            if time.monotonic() - started <= timeout:
                self.turns += 1
                warmer = _WARMER if warm and self._temperature() < _WARMER else None
                asked = self._asked(ModelRequest(stage="executor", call_site=f"{site}/turn{turn}",
                                                 nonce=self.ctx.fence.nonce, temperature=warmer,
                                                 messages=self.conversation.messages(self.budget)), started, timeout,
                                    turn)
                if isinstance(asked, Outcome):
                    return asked
                answer = asked
            if answer is None:
                return step_timed_out(timeout, started, turn, turns)
            self.conversation.answer(answer.content, [])
            content = answered_file(answer.content, path, self.ctx.fence)
            kind = problem(content, current, path, files, found=original)
            if kind:
                repeats = repeats + 1 if kind == last_problem else 1
                last_problem = kind
                said = render_problem(kind, path, plan.goal)
                if kind == "unchanged" and failed_last:  # its failed answer again: asked afresh, not shown it
                    said = f"asked afresh: the failed {path} came back unchanged"
                self._turn(turn, answer, 0, said)
                if repeats >= REPEATS:
                    self.watch.turn(self.turns, attempt, limit, answer, invalid=(answer.content, said), answered=False)
                    return Outcome("failed", f"the model's answer could not be written {REPEATS} times in a row: "
                                              f"{said[:200]} (ACODE-EXEC-008)", code="ACODE-EXEC-008")
                if kind == "unchanged" and failed_last:
                    warm = afresh(failed_last, repeated=True)
                else:
                    warm = kind in ("unchanged", "reverted")  # asked again the same way, it is sampled
                    self.conversation.reply_user(said)
                    self.conversation.note(f"{path} not written: {kind.split(':')[0]}")
                    failed_last = []
                ended = self._heed_file(self.watch.turn(self.turns, attempt, limit, answer,
                                                        invalid=(answer.content, said)))
                if ended is not None:
                    return ended
                continue
            assert content is not None
            last_problem, repeats, warm = "", 0, False
            write = ModelToolCall(id=f"file{turn}", name="write_file", arguments={"path": path, "content": content})
            passed = self.pipeline.run(f"{key}:t{turn}:c0", write, task=self.task.label, step=self.step.label)
            self.watch.ran(write, passed.result, before=_sha(current))
            if passed.result is None or not passed.result.ok:
                self.denied = self.denied or passed.result is None
                said = passed.denied if passed.result is None else prompts.render_tool_result(
                    passed.result, self.ctx.fence, self.result_limit)
                self._turn(turn, answer, 1, said)
                if passed.result is None:  # a human or the policy said no: asking again would not change that
                    self.watch.turn(self.turns, attempt, limit, answer, answered=False)
                    return Outcome("failed", f"writing {path} was denied: {said[:300]}", code="ACODE-EXEC-005")
                self.conversation.reply_user(said)
                self.conversation.note(f"write_file {path} -> failed")
                ended = self._heed_file(self.watch.turn(self.turns, attempt, limit, answer))
                if ended is not None:
                    return ended
                continue
            self.calls += 1
            self.wrote = True
            current = content
            if path not in self.files:
                self.files.append(path)
            failed = self._run_checks(key, turn, checks, timeout=check_timeout)
            self._turn(turn, answer, 1 + len(checks), "" if not failed else f"{len(failed)} check(s) failed")
            if isinstance(failed, Outcome) or not failed:
                self.watch.turn(self.turns, attempt, limit, answer, answered=False)
            if isinstance(failed, Outcome):
                return failed
            failed_last = failed
            if not failed:
                ran = f"; {', '.join(f'`{c.command}`' for c in checks)} passed" if checks else (
                    "" if last else "; the task's checks run after its last step")
                return Outcome("completed", f"wrote {path}{ran}")
            # asked afresh, not in the same conversation: shown its failed file and the failure, the
            # model sent that file back unchanged every time (HumanEval/8, 64, 72, 88 and 32 in one run:
            # each recovery came from a fresh ask, none from the turn that showed it its answer)
            warm = afresh(failed, repeated=False)
            ended = self._heed_file(self.watch.turn(self.turns, attempt, limit, answer))
            if ended is not None:
                return ended
        return Outcome("failed", f"the checks still failed after {turns} answers, each a new {path} "
                                  "(ACODE-EXEC-003); raise max_turns_per_step, or steer the step",
                        code="ACODE-EXEC-003")

    def _heed_file(self, watched: Watched) -> Outcome | None:
        """:meth:`actors.stages.execution.step.Step._heed` for the file style, whose conversation may
        have just begun afresh: then the notes go into its message, before what to answer
        (kept last)."""
        if self.conversation.turns or not watched.notes:
            return self._heed(watched)
        ended = self._heed(watched._replace(notes=[]))
        if ended is None:
            self.conversation.step = _before_ask(self.conversation.step, "\n\n".join(watched.notes))
        return ended

    def _run_checks(self, key: str, turn: int, checks: list[Check],
                    timeout: float | None = None) -> list[tuple[Check, str]] | Outcome:
        """Run ``checks`` as run_terminal calls through the pipeline (``timeout``: each one's,
        never above the session's command timeout; the sandbox takes the lower); the ones that
        failed with their evidence (:func:`actors.stages.calls.judge.judge`), or the outcome of a
        denied one (the step cannot be checked as the plan says). The slowest run is kept in
        ``slowest_check_ms``."""
        failed: list[tuple[Check, str]] = []
        for index, check in enumerate(checks, start=1):
            arguments: dict[str, Any] = {"command": check.command}
            if timeout is not None:
                arguments["timeout_s"] = round(timeout, 1)
            call = ModelToolCall(id=f"check{turn}.{index}", name="run_terminal", arguments=arguments)
            passed = self.pipeline.run(f"{key}:t{turn}:c{index}", call, task=self.task.label, step=self.step.label)
            if turn:  # a check after the model's answer (not those before its first): part of its turn
                self.watch.ran(call, passed.result)
            if passed.result is None:
                self.denied = True
                return Outcome("failed", f"the check `{check.command}` was denied: {passed.denied[:300]}",
                                code="ACODE-EXEC-005")
            self.calls += 1
            self.slowest_check_ms = max(self.slowest_check_ms, passed.result.duration_ms)
            ok, evidence = judge(check, passed.result)
            if not ok:
                failed.append((check, evidence))
        return failed


def _sha(text: str | None) -> str:
    """The content hash a write's ``before`` is (None: no file, '')."""
    return "" if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _before_ask(message: str, note: str) -> str:
    """``message`` with ``note`` put before its last paragraph (what to answer stays last)."""
    head, sep, ask = message.rpartition("\n\n")
    return f"{head}\n\n{note}\n\n{ask}" if sep else f"{note}\n\n{message}"
