"""The model's own words: under the progress lines as a session runs (``--verbose``), and in
full (``acode show SESSION --answers``).

The events say what a turn did (``turn_answered`` counts its tool calls and tokens), not
what the model wrote; its answers are recorded by persistence (the model-answer cache that
replays read, redacted as stored) and read back with ``GetModelAnswers``. An answer is
recorded in the same transaction as the progress event it led to (or before it), so when
``acode run`` sees a ``turn_answered`` it can print the executor's next answer (a turn is
one model call; the answers come in their places' order), and when it sees a
``stage_finished`` (every stage: the planner's plan, the verifier's and the reviewer's
verdicts, a stage's corrections) the answers of that stage not shown yet.
:class:`ModelText` prints them below the event's line: the text,
then each tool call the model made (name and arguments on one line), cut at
:data:`MAX_LINES` lines of :data:`MAX_WIDTH` characters with a note of the command that
shows all of it. A replayed answer (a stage run again after a crash) was shown when it was
first recorded and is not shown again.

Model text is untrusted: every line goes out through :func:`cli.render.echo`, which escapes
control and bidi characters, so an answer cannot move the cursor, recolour the terminal or
hide text. Not with ``--json``: its lines are the session's events only (``acode show
--answers --json`` gives the answers).
"""

from __future__ import annotations

import json
from typing import Any

from acode.connection import Connection
from cli.render import echo
from protocol.messages import GetModelAnswers, RecordedAnswer
from protocol.plans.stages import STAGES, Stage
from protocol.sessions.events import Event, StageFinished, TurnAnswered

__all__ = ["MAX_LINES", "MAX_WIDTH", "ModelText", "answer_lines", "full_lines", "read_answers"]

MAX_LINES = 12  # of one answer under a progress line
MAX_WIDTH = 200  # characters of one line
_INDENT = " " * 12  # under the text after the stage tag ("[EXECUTOR]  ")
_PAGE = 1_000


def _call_line(name: str, arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True) if isinstance(arguments, dict | list) \
        else str(arguments)
    return f"[call] {name} {text}"


def _lines(recorded: RecordedAnswer) -> list[str]:
    """An answer's text lines, then its tool calls and the server's complaint, if any."""
    answer = recorded.answer
    lines = answer.content.strip("\n").split("\n") if answer.content.strip() else []
    lines += [_call_line(call.name, call.arguments) for call in answer.tool_calls]
    if answer.format_error:
        lines.append(f"[the server could not parse it: {answer.format_error}]")
    return lines or ["[no text and no tool call]"]


def answer_lines(recorded: RecordedAnswer, session_id: str, *, indent: str = _INDENT) -> list[str]:
    """An answer under a progress line: at most :data:`MAX_LINES` lines of :data:`MAX_WIDTH`
    characters, and what was left out with the command that shows it."""
    lines = _lines(recorded)
    shown = [line if len(line) <= MAX_WIDTH else line[:MAX_WIDTH - 3] + "..." for line in lines[:MAX_LINES]]
    out = [f"{indent}> {line}" for line in shown]
    cut = len(lines) - len(shown)
    if cut or any(len(line) > MAX_WIDTH for line in lines[:MAX_LINES]):
        more = f"{cut} more line(s)" if cut else "long lines cut"
        out.append(f"{indent}> [... {more}: `acode show {session_id[:8]} --answers --stage {recorded.stage}` "
                   "has every answer in full]")
    return out


def full_lines(recorded: RecordedAnswer) -> list[str]:
    """``acode show --answers``: one answer whole, under a head naming its stage and place."""
    return [f"{recorded.stage} answer {recorded.seq + 1}:", *[f"  {line}" for line in _lines(recorded)]]


def read_answers(connection: Connection, session_id: str, stage: Stage | None = None) -> list[RecordedAnswer]:
    """Every recorded answer of the session's ``stage`` (every stage: planner's first, then
    the executor's, ...), each stage's in their places' order, page by page."""
    answers: list[RecordedAnswer] = []
    for one in (stage,) if stage is not None else STAGES:
        after = -1
        while True:
            page = connection.persistence(GetModelAnswers(session_id=session_id, stage=one, after_seq=after,
                                                          limit=_PAGE), timeout=30.0).answers
            answers += page
            if len(page) < _PAGE:
                break
            after = page[-1].seq
    return answers


class ModelText:
    """``--verbose``: prints each stage's new answers below the event that follows them.

    ``fresh``: a session just submitted (everything recorded is new); otherwise what is
    recorded when this is made was shown before (or is the past ``acode attach`` replays)
    and is left out: make it before the request that lets the session go on."""

    def __init__(self, connection: Connection, session_id: str, *, fresh: bool = False):
        self.connection = connection
        self.session_id = session_id
        self.shown: dict[str, int] = {}  # stage -> the last place shown
        if not fresh:
            self.shown = dict(connection.persistence(GetModelAnswers(session_id=session_id, limit=0)).last)

    def after(self, event: Event) -> None:
        """Print what the model wrote that led to ``event``: for a turn answered, the
        executor's next answer; for a stage finished, the stage's answers not shown yet."""
        match event:
            case TurnAnswered():
                stage: Stage = "executor"
                limit = 1  # a turn is one answer; the follower may lag, so later ones may be recorded already
            case StageFinished():
                stage, limit = event.stage, _PAGE
            case _:
                return
        while True:
            reply = self.connection.persistence(GetModelAnswers(
                session_id=self.session_id, stage=stage, after_seq=self.shown.get(stage, -1), limit=limit))
            for recorded in reply.answers:
                for line in answer_lines(recorded, self.session_id):
                    echo(line)
                self.shown[stage] = recorded.seq
            if len(reply.answers) < _PAGE:
                return
