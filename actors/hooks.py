"""Running one hook (:mod:`protocol.policy.hooks`): a script on the host, a webhook, a pause; its answer read.

Used where each hook point occurs: the coordinator's thread pool runs the session's and
stages' points and ``on_pause``/``on_resume``, the executor runs ``step_*`` and the
pipeline ``pre_tool``/``post_tool``. Each of them records what a hook answered as a
``hook_ran`` event under an id stable for the occurrence (:func:`event_id`), and a replay
reads that record instead of running the hook again.

**A script** is the user's own program (their config named it), so it runs on the host as
the user, not in the sandbox: argv as configured (no shell), the workspace as its
directory, the session's facts as ``ACODE_<NAME>`` variables and as JSON on stdin, in a
process group of its own that is killed (SIGKILL) at its timeout. Its output is read up
to :data:`OUTPUT_CAP`. **A webhook** gets the JSON as a POST, to a loopback address unless
the user's config lists the host in ``hooks.allow_hosts``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

import msgspec

from protocol.basics.ids import stable_id
from protocol.policy.conditions import compile_condition
from protocol.policy.hooks import (
    DECISIONS,
    FACTS,
    Decision,
    HookDecision,
    HookPoint,
    HookSettings,
    HookSpec,
    point_hooks,
)
from protocol.sessions.events import HookRan, HookStarted

__all__ = ["OUTPUT_CAP", "SCHEMA_VERSION", "event_id", "hook_name", "payload", "recorded", "run_hook", "run_point",
           "started_id",
           "webhook_host_allowed"]

OUTPUT_CAP = 64 * 1024  # of a script's stdout and stderr each
SCHEMA_VERSION = 1  # of the JSON a hook gets (README "Hooks")
_BLOCK = 2  # a script's exit code that blocks (the convention of other coding agents' hooks)


def hook_name(point: HookPoint, index: int, spec: HookSpec) -> str:
    return spec.name or f"{point}[{index}]"


def started_id(session_id: str, point: HookPoint, occurrence: str, index: int) -> str:
    """The ``hook_started`` event's id (the intent) of the hook :func:`event_id` names."""
    return stable_id(session_id, "hook-started", point, occurrence, str(index))


def event_id(session_id: str, point: HookPoint, occurrence: str, index: int) -> str:
    """The ``hook_ran`` event's id of hook ``index`` at one occurrence of ``point`` (e.g. a
    tool call's key, a pause's event id): the same for a replay, so it is written once."""
    return stable_id(session_id, "hook", point, occurrence, str(index))


def recorded(ran: HookRan) -> HookDecision:
    """What a ``hook_ran`` record says the hook answered (a replay acts on it)."""
    decision: Decision = ran.decision if ran.decision in DECISIONS else "continue"
    return HookDecision(decision=decision, reason=ran.reason, context=ran.context, failed=ran.failed,
                        exit_code=ran.exit_code, duration_ms=ran.duration_ms)


def payload(point: HookPoint, facts: Mapping[str, object]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "hook_point": point, **facts}


def run_point(settings: HookSettings, point: HookPoint, facts: Mapping[str, object], *, session_id: str,
              occurrence: str, cwd: str, recorded: Mapping[str, HookDecision] | None = None,
              begun: Collection[str] = (), started: Callable[[HookStarted], None] | None = None,
              now: float | None = None) -> list[HookRan]:
    """Run every hook of ``point`` whose condition holds, in order, and answer their
    ``hook_ran`` events (a hook recorded in ``recorded``, by event id, is not run again:
    its record is answered). Stops after the first that decides something other than
    ``continue``/``allow``: a later hook cannot undo a denial or a pause.

    A script or webhook's intent goes to ``started`` first, which makes it durable; a hook
    whose intent is in ``begun`` (``hook_started`` ids) but whose result is not recorded
    may have run before a crash: it is not run again but answered as failed, its outcome
    unknown (deny at ``pre_tool`` unless it says otherwise), so it fires at most once."""
    ran: list[HookRan] = []
    for index, spec in enumerate(point_hooks(settings, point)):
        identity = event_id(session_id, point, occurrence, index)
        decision = (recorded or {}).get(identity)
        if decision is None:
            if spec.condition:
                outcome = compile_condition(spec.condition, FACTS[point], where=point).evaluate(facts)
                if not outcome.value:
                    continue  # false, or could not be evaluated (the hook is skipped: seed 001)
            intent = started_id(session_id, point, occurrence, index)
            if intent in begun:
                decision = _failed(spec, point, HookDecision(
                    failed="its outcome is unknown: acode stopped while it ran, so it is not run again"))
            else:
                if started is not None and spec.action in ("script", "webhook"):
                    started(HookStarted(id=intent, session_id=session_id, at=time.time(), point=point,
                                        hook=hook_name(point, index, spec), occurrence=occurrence))
                decision = run_hook(spec, point, facts, cwd=cwd, allow_hosts=settings.allow_hosts)
        ran.append(HookRan(id=identity, session_id=session_id, at=now if now is not None else time.time(),
                           point=point, hook=hook_name(point, index, spec), occurrence=occurrence,
                           decision=decision.decision, reason=decision.reason[:2_000],
                           context=decision.context[:8_000], failed=decision.failed[:2_000],
                           exit_code=decision.exit_code, duration_ms=decision.duration_ms, action=spec.action))
        if decision.decision not in ("continue", "allow"):
            break
    return ran


def run_hook(spec: HookSpec, point: HookPoint, facts: Mapping[str, object], *, cwd: str,
             allow_hosts: list[str] | tuple[str, ...] = ()) -> HookDecision:
    """What one hook answers (never raises: a failure is the hook's ``on_failure`` decision)."""
    started = time.monotonic()
    match spec.action:
        case "script":
            decision = _script(spec, point, facts, cwd)
        case "webhook":
            decision = _webhook(spec, point, facts, allow_hosts)
        case "confirm" | "pause":
            decision = HookDecision(decision="pause", reason=spec.message or f"a {spec.action} hook at {point}")
    return msgspec.structs.replace(_failed(spec, point, decision),
                                   duration_ms=round((time.monotonic() - started) * 1000, 1))


def _failed(spec: HookSpec, point: HookPoint, decision: HookDecision) -> HookDecision:
    """A failed hook's decision: its ``on_failure`` (deny at ``pre_tool``, continue elsewhere)."""
    if not decision.failed:
        return decision
    fallback = spec.on_failure or ("deny" if point == "pre_tool" else "continue")
    return msgspec.structs.replace(decision, decision=fallback,
                                   reason=decision.reason or f"the hook failed: {decision.failed}")


def _script(spec: HookSpec, point: HookPoint, facts: Mapping[str, object], cwd: str) -> HookDecision:
    env = {**os.environ, **{f"ACODE_{name.upper()}": _env_value(value) for name, value in facts.items()},
           "ACODE_HOOK_POINT": point}
    stdin = json.dumps(payload(point, facts)).encode()
    try:
        proc = subprocess.Popen(spec.run, cwd=cwd if os.path.isdir(cwd) else None, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return HookDecision(failed=f"{spec.run[0]!r} could not start: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(stdin, timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)  # the script and everything it started in its group
        return HookDecision(failed=f"{spec.run[0]!r} did not finish within {spec.timeout_s:g}s (killed)")
    said, out_text = _text(err), _text(out).strip()
    if proc.returncode == _BLOCK:
        block: Decision = "deny" if point == "pre_tool" else "pause"
        return HookDecision(decision=block, reason=said.strip() or f"{spec.run[0]!r} exited 2", exit_code=_BLOCK)
    if proc.returncode != 0:
        return HookDecision(failed=f"{spec.run[0]!r} exited {proc.returncode}: {said.strip()[-500:]}",
                            exit_code=proc.returncode)
    if not out_text:
        return HookDecision(exit_code=0)
    return _answer(out_text, point, exit_code=0)


def _webhook(spec: HookSpec, point: HookPoint, facts: Mapping[str, object],
             allow_hosts: list[str] | tuple[str, ...]) -> HookDecision:
    if not webhook_host_allowed(spec.url, allow_hosts):
        return HookDecision(failed=f"webhook {spec.url!r} is not on this machine; list its host in hooks.allow_hosts "
                                   "(user config) to allow it")
    import httpx  # only a session with a webhook pays for it

    try:
        with httpx.Client(timeout=spec.timeout_s, trust_env=False, follow_redirects=False) as client:
            response = client.post(spec.url, json=payload(point, facts))
    except httpx.HTTPError as exc:
        return HookDecision(failed=f"webhook {spec.url} did not answer: {exc}")
    if not 200 <= response.status_code < 300:
        return HookDecision(failed=f"webhook {spec.url} answered {response.status_code}")
    text = response.text[:OUTPUT_CAP].strip()
    if not text.startswith("{"):
        return HookDecision()
    return _answer(text, point)


def webhook_host_allowed(url: str, allow_hosts: list[str] | tuple[str, ...]) -> bool:
    """A loopback address, ``localhost``, or a host the user listed (``hooks.allow_hosts``)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host:
        return False
    if host == "localhost" or host in allow_hosts:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _answer(text: str, point: HookPoint, *, exit_code: int | None = None) -> HookDecision:
    """A hook's JSON answer: ``{"decision": ..., "reason": ..., "context": ...}``; also the
    shapes other agents' hooks print (``"block"``/``"approve"``, ``"continue": false``,
    ``hookSpecificOutput.permissionDecision``)."""
    try:
        data = json.loads(text)
    except ValueError:
        return HookDecision(failed=f"its output is not JSON: {text[:200]!r}", exit_code=exit_code)
    if not isinstance(data, dict):
        return HookDecision(failed=f"its output is not a JSON object: {text[:200]!r}", exit_code=exit_code)
    special = data.get("hookSpecificOutput")
    said = data.get("decision")
    if isinstance(special, dict) and special.get("permissionDecision"):
        said = special["permissionDecision"]
    if said is None and data.get("continue") is False:
        said = "pause"
    said = {"block": "deny" if point == "pre_tool" else "pause", "approve": "allow"}.get(str(said), said)
    if said is None:
        said = "modify_context" if data.get("context") else "continue"
    if said not in DECISIONS:
        return HookDecision(failed=f"it decided {said!r}; a hook decides one of {', '.join(DECISIONS)}",
                            exit_code=exit_code)
    reason = data.get("reason") or data.get("stopReason") or (special or {}).get("permissionDecisionReason") or ""
    return HookDecision(decision=said, reason=str(reason)[:2_000], context=str(data.get("context") or "")[:8_000],
                        exit_code=exit_code)


def _env_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)[:32_000]


def _text(data: bytes | None) -> str:
    return (data or b"")[:OUTPUT_CAP].decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the group the script leads (its pid is the group's id while it is unreaped)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()
