"""A session's checkpoints read from the stores in acode's home (no actor needed): what
``acode checkpoints`` lists and ``Client.checkpoints`` returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.errors import CliError

__all__ = ["checkpoint_store", "listed"]


def checkpoint_store(home: Path, session: str) -> tuple[str, str, str, list[Any]]:
    """The session (full id) whose id starts with ``session``, its workspace, its store, and
    every record of that store, from the stores in acode's home (ACODE-CLI-002 if none or many)."""
    from actors.paths import RunPaths, checkpoint_stores
    from actors.sandbox.workspace.checkpoints import Checkpoints

    found: dict[str, tuple[str, str, list[Any]]] = {}
    for directory, workspace in checkpoint_stores(RunPaths.for_home(home).checkpoints):
        records = Checkpoints(directory, workspace).records()
        for record in records:
            if record.meta.session.startswith(session):
                found[record.meta.session] = (workspace, directory, records)
    if not found:
        raise CliError(f"no checkpoints of a session starting with {session!r}; a session has them once it has "
                       "made a call that can change its workspace (`acode sessions` lists sessions)",
                       code="ACODE-CLI-002")
    if len(found) > 1:
        raise CliError(f"{len(found)} sessions with checkpoints start with {session!r}; give more characters",
                       code="ACODE-CLI-002")
    [(full, (workspace, directory, records))] = found.items()
    return full, workspace, directory, records


def listed(session: str, records: list[Any]) -> list[dict[str, Any]]:
    """The session's checkpoints as ``acode checkpoints`` shows them: the start, one before
    each call, one before each undo; ``files``: changed since the previous one listed."""
    rows: list[dict[str, Any]] = []
    changed = 0
    for record in records:
        changed += record.files
        if record.meta.session != session or record.meta.kind == "after":
            continue
        meta = record.meta
        rows.append({"id": record.id, "kind": meta.kind, "stage": meta.stage, "task": meta.task, "step": meta.step,
                     "call": meta.call, "key": meta.key, "at": record.at, "took_ms": record.took_ms,
                     "files": changed if rows else record.files, "skipped": record.skipped})
        changed = 0
    return rows
