"""The tool sandbox: the only acode process that touches a workspace.

Modules, from the wire inwards::

    actor.py     SandboxActor: serves "sandbox", a thread pool of 4, clients to persistence
    journal.py   the idempotency protocol (begin → run or replay or "unknown" → finish)
    dispatch.py  RunTool → validated ToolCall → ToolResult (refusals are results)
    files.py     read_file, write_file, modify_file, create_directory, pre-images
    edits.py     modify_file's search/replace edits, newline style, closest-region hints
    patch.py     modify_file's unified-diff form: header checks, hunks placed by context
    protected.py writes into .git and .agent refused, acode's home never reached, on the kernel-resolved location
    search.py    list_directory, search_code (regex with a time budget), search_code_terms (one walk, many queries)
    baseline.py  internal tools baseline_workspace, diff_workspace: the session's starting point and its diff
    gitsnap.py   git snapshots on a private ref, with plumbing a hostile repository config cannot hijack
    manifest.py  content manifest and difflib diff, for a workspace that is not a git work tree
    snapshot.py  the files and symlinks a snapshot sees, read without following a link
    ignore.py    .gitignore rules for the tree tools (pathspec), read through fds
    terminal.py  run_terminal (launcher.py: the exec helper a command starts through)
    confine.py   every path resolved beneath the workspace root (openat2 or a safe walk)
    output.py    Outcome and output caps
    clients.py   one broker client per handler thread

``python -m actors.sandbox --spec <json>`` runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.sandbox.actor import SandboxActor

__all__ = ["SandboxActor"]


def __getattr__(name: str) -> Any:
    """``SandboxActor`` is loaded on first use: a process that needs one sandbox module
    (the CLI reads :mod:`actors.sandbox.isolation`'s names) does not load the actor."""
    if name == "SandboxActor":
        from actors.sandbox.actor import SandboxActor

        return SandboxActor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
