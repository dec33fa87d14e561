"""``acode doctor``: is everything a session needs in place? One line per check.

Checks, in the order a user would fix them: the configuration resolves; the model server
answers, has the configured model(s), their context length, and the model produces a
tool call the executor can run (native, or written as JSON text) and a valid JSON-schema
answer on a tiny probe (delegated to :mod:`actors.llm.doctor`); the sandbox's isolation
level (from the running sandbox when acode is up, else probed here) and what it protects;
what a command may see (the configured ``read_paths``/``write_paths``, ``/opt``, the
toolchain prefixes found on this PATH); files of the workspace with a hard link outside
it; which ``python`` and ``pytest`` a command in the workspace gets, failing when the
workspace has Python tests they could not run (:mod:`cli.toolcheck`); who can read
acode's home and database (modes and owner); the actors' health; and each configured MCP
server (:mod:`cli.mcpcheck`). A failed check carries a one-line ``fix``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec

from acode.config.loader import resolve
from acode.config.settings import provider_spec, sandbox_policy, session_settings
from acode.connection import Connection, coordinator_pid
from actors import private
from actors.paths import RunPaths
from cli.render import echo
from protocol.errors import AcodeError
from protocol.messages import GetStatus, StatusReport
from protocol.sessions.session import ScriptedProvider

__all__ = ["Check", "configured_paths", "diagnose", "render_checks"]


class Check(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # ok, but worth a look (e.g. process-level isolation)


def _model_checks(paths: RunPaths, workspace: Path) -> list[Check]:
    notices: list[str] = []
    try:
        config = resolve(home=paths.home, workspace=workspace, notices=notices)
        spec = provider_spec(config)
    except AcodeError as exc:
        return [Check(name="config", ok=False, detail=str(exc), fix="correct the setting named above")]
    ignored = [n.split(" sets ", 1)[1].split(":", 1)[0] for n in notices if " sets " in n and "ACODE-CFG-005" in n]
    for notice in notices:
        if "ACODE-CFG-005" not in notice:
            echo(f"acode: {notice}", err=True)  # a deprecation, as every command prints it
    if ignored:  # a workspace file that would loosen the user's safety settings (acode.config.trust)
        checks = [Check(name="config", ok=True, warning=True,
                        detail=f"resolved for workspace {workspace}; its .agent/config.yml would loosen "
                               f"{', '.join(ignored)}: ignored (ACODE-CFG-005)",
                        fix=f"if you trust that file: acode trust {workspace}")]
    else:
        checks = [Check(name="config", ok=True, detail=f"resolved for workspace {workspace}")]
    if spec is None:
        return [*checks, Check(name="model", ok=False, detail="no model configured",
                               fix="set model.provider and model.model in .agent/config.yml or "
                                   "~/.acode/config.yml (README 'Models')")]
    if isinstance(spec, ScriptedProvider):
        return [*checks, Check(name="model", ok=True, detail=f"scripted model {spec.script_name} (no server)")]
    from actors.llm.doctor import probe
    from protocol.sessions.budgets import prompt_budgets

    for result in probe(spec, prompt_budgets=prompt_budgets(session_settings(config))):
        checks.append(Check(name=result.name, ok=result.ok, detail=result.detail, fix=result.fix or "",
                            warning=bool(getattr(result, "warning", False))))
    return checks


def _status(paths: RunPaths) -> StatusReport | None:
    if coordinator_pid(paths) is None:
        return None
    try:
        with Connection(paths.home) as connection:
            report: StatusReport = connection.coordinator(GetStatus(), timeout=5.0)
            return report
    except AcodeError:
        return None


def _sandbox_checks(paths: RunPaths, workspace: Path, report: StatusReport | None) -> list[Check]:
    """The isolation level and what it protects; the paths commands see; hard links out."""
    described = ""
    if report is not None:
        for actor in report.actors:
            if actor.actor == "sandbox" and actor.info.get("isolation"):
                described = actor.info["isolation"]
    if not described:
        from actors.sandbox.confinement.isolation import detect

        described = detect().describe()
    level = described.split(";")[0]
    if level == "process":
        checks = [Check(name="sandbox", ok=True, warning=True, detail=f"isolation {described}",
                        fix="install bubblewrap (e.g. apt install bubblewrap), or use Linux 5.13+ with Landlock, so "
                            "commands cannot read outside the workspace and their toolchains")]
    else:
        checks = [Check(name="sandbox", ok=True, detail=f"isolation {described}")]
    return [*checks, _protected_check(level, pidns="pid namespace" in described),
            _paths_check(paths, workspace, level), _hardlink_check(workspace)]


def _protected_check(level: str, *, pidns: bool) -> Check:
    """How this level keeps commands off git's config and hooks, .agent and acode's config."""
    from actors.sandbox.confinement.sealed import enforcement

    detail = enforcement(level, pidns=pidns)
    if level == "bubblewrap" or pidns:
        return Check(name="protected paths", ok=True, detail=detail)
    return Check(name="protected paths", ok=True, warning=True, detail=detail,
                 fix="install bubblewrap (e.g. apt install bubblewrap), or allow unprivileged user namespaces, so "
                     "the kernel refuses these writes")


def _paths_check(paths: RunPaths, workspace: Path, level: str) -> Check:
    from actors.sandbox.actor import describe_view
    from actors.sandbox.confinement.isolation import Isolation
    from actors.sandbox.tools.terminal import Terminal

    try:
        policy = sandbox_policy(resolve(home=paths.home, workspace=workspace, notices=[]), home=paths.home)
    except AcodeError as exc:
        return Check(name="sandbox paths", ok=False, detail=str(exc), fix="correct sandbox.read_paths or write_paths")
    terminal = Terminal(Isolation(level="process" if level == "process" else "bubblewrap"))
    terminal.hide(str(paths.home), str(paths.sock_dir))
    try:
        sees = describe_view(terminal, policy)
    except AcodeError as exc:
        return Check(name="sandbox paths", ok=False, detail=str(exc), fix="correct sandbox.read_paths or write_paths")
    configured = (f"read_paths {', '.join(policy.read_paths) or 'none'}; write_paths "
                  f"{', '.join(policy.write_paths) or 'none'}; /opt {'seen' if policy.read_opt else 'not seen'}")
    if level == "process":
        return Check(name="sandbox paths", ok=True, warning=True,
                     detail=f"{configured}; NOT enforced at the process level: commands read {sees}",
                     fix="install bubblewrap or use Linux 5.13+ with Landlock")
    return Check(name="sandbox paths", ok=True, detail=f"{configured}; commands see {sees}")


def configured_paths(paths: RunPaths, workspace: Path) -> str:
    """The configured read and write paths for ``workspace``, in one line (``acode status``)."""
    try:
        policy = sandbox_policy(resolve(home=paths.home, workspace=workspace, notices=[]), home=paths.home)
    except AcodeError as exc:
        return f"sandbox paths for {workspace}: configuration error: {exc}"
    return (f"sandbox paths for {workspace}: read_paths {', '.join(policy.read_paths) or 'none'} (read-only); "
            f"write_paths {', '.join(policy.write_paths) or 'none'} (read-write); "
            f"/opt {'seen' if policy.read_opt else 'not seen'}; minimum isolation {policy.require_isolation}")


def _hardlink_check(workspace: Path) -> Check:
    from actors.sandbox.confinement.hardlinks import outside

    if not workspace.is_dir():
        return Check(name="hard links", ok=True, detail=f"workspace {workspace} does not exist; nothing to check")
    found = outside(str(workspace))
    walked = f"{found.walked} entries walked" + ("" if found.complete else ", stopped at the limit")
    if not found.paths:
        return Check(name="hard links", ok=True, detail=f"no file in {workspace} has a hard link outside it ({walked})")
    shown = ", ".join(found.paths[:10]) + (f" and {len(found.paths) - 10} more" if len(found.paths) > 10 else "")
    return Check(name="hard links", ok=True, warning=True,
                 detail=f"{len(found.paths)} file(s) in {workspace} have another name outside it: {shown} ({walked}); "
                        "read_file shows their content (writes to them are refused)",
                 fix="if one should not be readable, replace it with a copy (cp --remove-destination) or remove it")


def _home_check(paths: RunPaths) -> Check:
    """Who can read acode's home and database: they hold the user's code and model answers."""
    parts, loose, foreign = [], [], []
    for path in (paths.home, paths.database):
        try:
            info = path.stat()
        except FileNotFoundError:
            parts.append(f"{path} not created yet")
            continue
        except OSError as exc:
            parts.append(f"{path} {private.describe(path)}")
            loose.append(f"{path} ({exc.strerror})")
            continue
        parts.append(f"{path} {private.describe(path)}")
        if info.st_uid != os.getuid():
            foreign.append(str(path))
        elif stat.S_IMODE(info.st_mode) & 0o077:
            loose.append(str(path))
    detail = "; ".join(parts)
    if foreign:
        return Check(name="home", ok=False, detail=detail,
                     fix=f"{', '.join(foreign)} belongs to another user: use your own home (--home or ACODE_HOME)")
    if loose:
        return Check(name="home", ok=False, detail=detail,
                     fix=f"other users can read {', '.join(loose)}: `acode up` makes the home private (0700/0600)")
    return Check(name="home", ok=True, detail=detail + " (private to you)")


def _actor_checks(paths: RunPaths, report: StatusReport | None) -> list[Check]:
    if report is None:
        return [Check(name="actors", ok=False, detail=f"acode is not running for {paths.home}",
                      fix="start it with `acode up --detach`")]
    bad = [a for a in report.actors if a.state != "ready"]
    if bad:
        names = ", ".join(f"{a.instance} {a.state}" + (f" ({a.reason})" if a.reason else "") for a in bad)
        return [Check(name="actors", ok=False, detail=names,
                      fix="see `acode status` and `acode logs <actor>`; `acode down` then `acode up` restarts all")]
    return [Check(name="actors", ok=True, detail=f"{len(report.actors)} ready, coordinator pid {report.pid}")]


def diagnose(paths: RunPaths, workspace: Path) -> list[Check]:
    # structlog is imported here, not with the module: ``acode status`` imports this module
    # for :func:`configured_paths` and must not pay structlog's 50 ms (README "Performance").
    import logging

    import structlog

    # The providers log every answer at info level; the doctor's lines say what matters.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    report = _status(paths)
    return [*_model_checks(paths, workspace), *_sandbox_checks(paths, workspace, report),
            *_toolchain_checks(paths, workspace), _home_check(paths), *_actor_checks(paths, report),
            *_mcp_checks(paths, workspace, report)]


def _mcp_checks(paths: RunPaths, workspace: Path, report: StatusReport | None) -> list[Check]:
    """One line per configured MCP server, from the running mcp actor (:mod:`cli.mcpcheck`)."""
    from cli.mcpcheck import mcp_checks

    return [Check(name=name, ok=ok, detail=detail, fix=fix, warning=warning)
            for name, ok, detail, fix, warning in mcp_checks(paths, workspace, report)]


def _toolchain_checks(paths: RunPaths, workspace: Path) -> list[Check]:
    """Which python and pytest a session's commands get in ``workspace`` (:mod:`cli.toolcheck`)."""
    from cli.toolcheck import toolchain_checks

    return [Check(name=name, ok=ok, detail=detail, fix=fix) for name, ok, detail, fix in toolchain_checks(
        paths, workspace)]


def render_checks(checks: list[Check]) -> str:
    width = max((len(c.name) for c in checks), default=0)
    lines = []
    for check in checks:
        mark = "ok  " if check.ok and not check.warning else ("warn" if check.ok else "FAIL")
        lines.append(f"{mark}  {check.name:<{width}}  {check.detail}")
        if check.fix and (not check.ok or check.warning) and check.fix not in check.detail:
            lines.append(f"      {'':<{width}}  fix: {check.fix}")
    return "\n".join(lines)
