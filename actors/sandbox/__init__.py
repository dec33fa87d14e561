"""The tool sandbox: the only acode process that touches a workspace.

Its code is in rooms, imports running one way (core → tools → workspace → confinement;
tools may also reach confinement directly; no room imports the core)::

    actor.py      SandboxActor: serves "sandbox", a thread pool of 4, clients to persistence
    gate.py       the approval gate: a call that needs a human runs only with a durable record
    journal.py    the idempotency protocol (begin → run or replay or "unknown" → finish)
    dispatch.py   RunTool → validated ToolCall → ToolResult (refusals are results)
    tools/        what each tool does: files, edits, patch, search, terminal, baseline, output
    workspace/    the workspace's state: git snapshots, content manifests, what a snapshot
                  sees, .gitignore rules
    confinement/  how a command or a file access is confined: paths beneath the root,
                  protected paths, command policy, isolation levels, the read boundary,
                  sealed git paths and their tripwire, the launcher, the toolchain

``python -m actors.sandbox --spec <json>`` runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.sandbox.actor import SandboxActor

__all__ = ["SandboxActor"]


def __getattr__(name: str) -> Any:
    """``SandboxActor`` is loaded on first use: a process that needs one sandbox module
    (the CLI reads :mod:`actors.sandbox.confinement.isolation`'s names) does not load the actor."""
    if name == "SandboxActor":
        from actors.sandbox.actor import SandboxActor

        return SandboxActor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
