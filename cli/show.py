"""``acode show SESSION`` with ``--stage``, ``--cycle`` or ``--answers``: the view asked for,
in words (:mod:`cli.viewtext`, :mod:`cli.modeltext`) or as one JSON line (``--json``).

``--stage STAGE``: every visit of the stage; ``--cycle N``: each stretch of cycle N (both:
only that stage's visits in it); ``--answers``: the model's recorded answers in full (with
``--stage``: that stage's). A stage name that is not one, or a cycle the session never
reached, is refused (ACODE-CLI-012) naming what there is.
"""

from __future__ import annotations

from acode.connection import Connection
from cli.follow import print_json
from cli.modeltext import full_lines, read_answers
from cli.render import echo
from cli.views import check_stage, cycles_numbered, visits
from cli.viewtext import cycle_text, stage_text
from protocol.errors import CliError
from protocol.plans.stages import Stage
from protocol.sessions.events import Event

__all__ = ["print_view"]


def print_view(connection: Connection, session_id: str, events: list[Event], *, stage: str | None, cycle: int | None,
               answers: bool, json_out: bool) -> None:
    """``acode show`` with ``--stage``, ``--cycle`` or ``--answers`` (text, or one JSON line)."""
    chosen_stage: Stage | None = check_stage(stage) if stage is not None else None
    if answers:
        if cycle is not None:
            raise CliError("--answers takes --stage, not --cycle: the recorded answers are kept per stage; "
                           f"`acode show {session_id[:8]} --cycle {cycle}` shows the cycle", code="ACODE-CLI-003")
        recorded = read_answers(connection, session_id, chosen_stage)
        if json_out:
            print_json({"session_id": session_id, "answers": recorded})
        elif not recorded:
            echo(f"session {session_id}: no model answer recorded" + (f" for the {stage}" if stage else ""))
        else:
            echo("\n".join(line for one in recorded for line in full_lines(one)))
        return
    start = events[0].at if events else 0.0
    if cycle is not None:
        chosen = cycles_numbered(events, cycle, session_id=session_id)
        if json_out:
            print_json({"session_id": session_id, "cycle": cycle, "stage": stage, "parts": [
                {**vars(part), "visits": [v for v in part.visits if stage is None or v.stage == stage]}
                for part in chosen]})
        else:
            echo(cycle_text(chosen, start, session_id, stage))
        return
    assert stage is not None
    found = [visit for visit in visits(events) if visit.stage == stage]
    if json_out:
        print_json({"session_id": session_id, "stage": stage, "visits": found})
    else:
        echo(stage_text(stage, found, start, session_id))
