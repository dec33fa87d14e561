"""The hooks a stage runs itself: ``step_start``/``step_end`` (the executor), ``pre_tool``/``post_tool`` (the pipeline).

One :class:`StageHooks` per stage request. A hook point fires at an *occurrence* named
so a replay names it the same (a tool call's key; ``e<visit>:<task>/<step>`` for a step);
:func:`actors.hooks.run_point` runs the hooks whose condition holds, and what they
answered is committed (``hook_ran``) before the stage acts on it; a script or webhook's
intent (``hook_started``) is committed before it runs, so a stage killed while a hook ran
does not run it again (the replay records it failed, outcome unknown). A stage dispatched again
reads those records from its replay index instead of running the hooks again, and acts on
them as a replay must:

- ``deny``, ``ask``, ``modify_context``: the same again (the model saw the denial, a
  human's decision answers the ask, a note is kept once by its id);
- ``pause``, ``abort``, ``restart_stage``: only when the hook ran now. A recorded one was
  acted on already: the session paused, and a human resumed it past that point.

A ``pause`` (``confirm`` and exit 2 outside ``pre_tool`` too) ends the stage with
:class:`HookStopped` ACODE-ORCH-014 (the session pauses ``hook``), ``abort`` with
ACODE-ORCH-015 (the session is cancelled), ``restart_stage`` with ACODE-ORCH-016 (the stage
runs again afresh, within its retry limit).
"""

from __future__ import annotations

import json
from typing import Any

from actors import hooks as running
from protocol.calls.autonomy import target_of
from protocol.errors import HookStopped
from protocol.policy.hooks import HookPoint, point_hooks
from protocol.sessions.events import HookRan
from protocol.sessions.session import SteeringNote

__all__ = ["StageHooks", "stop_for"]

_STOPS = {"pause": "ACODE-ORCH-014", "abort": "ACODE-ORCH-015", "restart_stage": "ACODE-ORCH-016"}


def stop_for(event: HookRan) -> HookStopped | None:
    """The stage's end a hook's decision means (None: the stage goes on)."""
    code = _STOPS.get(event.decision)
    if code is None:
        return None
    verb = {"pause": "paused the session", "abort": "aborted the session", "restart_stage": "restarted the stage"}
    return HookStopped(f"hook {event.hook} at {event.point} {verb[event.decision]}: "
                       f"{event.reason or 'no reason given'}", code=code)


class StageHooks:
    """The hook points of one stage request (see the module)."""

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.settings = ctx.request.settings.hooks

    def has(self, point: HookPoint) -> bool:
        return bool(point_hooks(self.settings, point))

    def facts(self, **more: object) -> dict[str, object]:
        request = self.ctx.request
        return {"session": request.session_id, "task": request.task, "workspace": request.workspace,
                "status": "running", "stage": request.stage, "iteration": request.visit, **more}

    def fire(self, point: HookPoint, occurrence: str, facts: dict[str, object]) -> list[tuple[HookRan, bool]]:
        """Run (or read the record of) ``point``'s hooks at ``occurrence``; each answer, and
        whether it ran now. Records are durable when this returns. A ``modify_context``
        answer becomes guidance for the stage's next model turns (as ``acode steer``)."""
        if not self.has(point):
            return []
        index = self.ctx.replay_index()
        recorded = index.hooks
        ran = running.run_point(self.settings, point, facts, session_id=self.ctx.request.session_id,
                                occurrence=occurrence, cwd=self.ctx.request.workspace, recorded=recorded,
                                begun=frozenset(index.hooks_started),
                                started=lambda intent: self.ctx.commit([intent]))  # durable before it runs
        fresh = [event for event in ran if event.id not in recorded]
        if fresh:
            self.ctx.commit(fresh)  # durable before the stage acts on it
        for event in ran:
            if event.decision == "modify_context" and event.context:
                self.ctx.control.steer(SteeringNote(id=event.id, text=event.context[:4_000]))
        return [(event, event.id not in recorded) for event in ran]

    def stop(self, answers: list[tuple[HookRan, bool]]) -> None:
        """Raise the stage's end a hook that ran now decided (see the module)."""
        for event, now in answers:
            stop = stop_for(event) if now else None
            if stop is not None:
                raise stop

    def tool_facts(self, name: str, arguments: dict[str, Any], risk: str, *, task: str, step: str,
                   **more: object) -> dict[str, object]:
        command = arguments.get("command") if name == "run_terminal" else ""
        return self.facts(step=f"{task}/{step}" if task else step, tool=name,
                          args=json.dumps(arguments, sort_keys=True, default=str)[:16_000],
                          path=target_of(name, arguments) if name != "run_terminal" else "",
                          command=command if isinstance(command, str) else "", risk=risk, **more)
