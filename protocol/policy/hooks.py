"""Hooks: the user's own scripts and webhooks at a session's turning points (seed 001, features 6.1-6.3).

A session carries the hooks of the user's config (``hooks:`` in ``$ACODE_HOME/config.yml``;
a workspace config's only when the user trusted it), fixed when it was submitted, like its
autonomy level. Each hook point has its facts (:data:`FACTS`: names and types), which a
hook's ``condition`` may test (:mod:`protocol.policy.conditions`) and which a script gets as
``ACODE_<NAME>`` environment variables and, with the point's name, as JSON on stdin.

What a hook answers (:class:`HookDecision`), the convention coding-agent users know:

- a **script** exits 0 with no output: no decision (``continue``); exit 0 with a JSON
  object on stdout: that decision (``{"decision": "deny", "reason": "..."}``); exit 2:
  **block**, stderr the reason (``deny`` at ``pre_tool``, ``pause`` elsewhere); any other
  exit, a timeout (the process group is killed) or unreadable output: the hook failed.
- a **webhook** is POSTed the same JSON; a 2xx answer with a JSON object is its decision,
  any other 2xx none; anything else, or no answer within ``timeout``: failed.
- **confirm** pauses the session with the hook's ``message`` (a human decides: ``acode
  resume``); **pause** does the same without asking.

A failed ``pre_tool`` hook denies the call (fail closed) unless it says
``on_failure: allow``; a failed hook elsewhere is recorded and the session goes on. A
hook may tighten what the autonomy level decided, never loosen it: ``allow`` is no
decision, ``ask`` makes a call that would run unasked wait for a human, ``deny`` refuses
it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["DECISIONS", "FACTS", "POINTS", "Decision", "HookDecision", "HookPoint", "HookSettings", "HookSpec",
           "point_hooks"]

HookPoint = Literal["session_start", "session_end", "stage_start", "stage_end", "step_start", "step_end",
                    "pre_tool", "post_tool", "on_pause", "on_resume"]
POINTS: tuple[HookPoint, ...] = ("session_start", "session_end", "stage_start", "stage_end", "step_start",
                                 "step_end", "pre_tool", "post_tool", "on_pause", "on_resume")
Decision = Literal["continue", "pause", "abort", "restart_stage", "modify_context", "allow", "deny", "ask"]
DECISIONS: tuple[Decision, ...] = ("continue", "pause", "abort", "restart_stage", "modify_context", "allow", "deny",
                                   "ask")

_SESSION: dict[str, type] = {"session": str, "task": str, "workspace": str, "status": str, "stage": str,
                             "iteration": int}
#: What each point tells a hook: names a condition may use, ``ACODE_<NAME>`` variables, the JSON's keys.
FACTS: dict[HookPoint, dict[str, type]] = {
    "session_start": _SESSION,
    "session_end": {**_SESSION, "exit_code": int},
    "stage_start": {**_SESSION, "visit": int},
    "stage_end": {**_SESSION, "visit": int, "ok": bool, "summary": str},
    "step_start": {**_SESSION, "visit": int, "step": str},
    "step_end": {**_SESSION, "visit": int, "step": str, "status": str, "summary": str},
    "pre_tool": {**_SESSION, "step": str, "tool": str, "args": str, "path": str, "command": str, "risk": str},
    "post_tool": {**_SESSION, "step": str, "tool": str, "args": str, "path": str, "command": str, "risk": str,
                  "ok": bool, "output": str},
    "on_pause": {**_SESSION, "kind": str, "code": str, "message": str, "command": str},
    "on_resume": {**_SESSION, "reason": str},
}


class HookSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One hook of a point, as the config says it (checked at load, cli/hooks_config)."""

    action: Literal["script", "webhook", "confirm", "pause"]
    run: list[Annotated[str, msgspec.Meta(min_length=1)]] = []  # script: argv, no shell
    url: str = ""  # webhook
    condition: str = ""
    timeout: Annotated[float, msgspec.Meta(gt=0, le=3_600)] | None = None  # default: 30 s script, 60 s webhook
    message: str = ""  # confirm, pause: what the pause says
    on_failure: Literal["deny", "allow", "continue"] | None = None  # default: deny at pre_tool, continue elsewhere
    name: str = ""  # how events and messages name it (default: the point and its place, pre_tool[0])

    @property
    def timeout_s(self) -> float:
        return self.timeout if self.timeout is not None else 60.0 if self.action == "webhook" else 30.0


class HookSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The hooks a session runs, by point; ``allow_hosts``: hosts a webhook may reach
    besides loopback (the user's config only)."""

    session_start: list[HookSpec] = []
    session_end: list[HookSpec] = []
    stage_start: list[HookSpec] = []
    stage_end: list[HookSpec] = []
    step_start: list[HookSpec] = []
    step_end: list[HookSpec] = []
    pre_tool: list[HookSpec] = []
    post_tool: list[HookSpec] = []
    on_pause: list[HookSpec] = []
    on_resume: list[HookSpec] = []
    allow_hosts: list[str] = []

    def any(self) -> bool:
        return any(point_hooks(self, point) for point in POINTS)


def point_hooks(settings: HookSettings, point: HookPoint) -> list[HookSpec]:
    hooks: list[HookSpec] = getattr(settings, point)
    return hooks


class HookDecision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one hook answered (or the failure that stands for its answer)."""

    decision: Decision = "continue"
    reason: str = ""
    context: str = ""  # modify_context: text fenced into the next model turn
    failed: str = ""  # why the hook failed (then ``decision`` is what its on_failure says)
    exit_code: int | None = None
    duration_ms: float = 0.0
