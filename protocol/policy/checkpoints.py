"""What a session's checkpoints are taken with, and what a call tells the sandbox about where it comes from.

The sandbox takes a checkpoint of the workspace before every call that can change it
(``actors/sandbox/checkpointing.py``). :class:`CheckpointSettings` travel in the session's
:class:`~protocol.policy.sandbox.SandboxPolicy` (config section ``checkpoints:``, README
"Checkpoints and undo"); :class:`CallSite` travels in :class:`~protocol.messages.RunTool`
and labels the checkpoint (``acode checkpoints`` lists it).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["DEFAULT_SKIP_DIRS", "CallSite", "CheckpointSettings"]

#: generated directories a checkpoint leaves out (at any depth, never inside ``.git``)
DEFAULT_SKIP_DIRS = ("node_modules", ".venv", "venv", "target", "build", "dist", "__pycache__", ".tox",
                     ".mypy_cache", ".pytest_cache")

DirName = Annotated[str, msgspec.Meta(min_length=1, max_length=255, pattern=r"^[^/\x00]+$")]


class CheckpointSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``enabled``: take them at all; ``max_file_mb``: an ignored or untracked file larger
    than this is left out (reported as skipped; git's own files are never capped);
    ``skip_dirs``: directory names left out at any depth."""

    enabled: bool = True
    max_file_mb: Annotated[float, msgspec.Meta(ge=0, le=100_000)] = 10.0
    skip_dirs: list[DirName] = msgspec.field(default_factory=lambda: list(DEFAULT_SKIP_DIRS))


class CallSite(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a tool call comes from: the stage, and the plan's task and step (the executor's);
    ``counted``: a call a model asked for (the pipeline's), which counts against the
    session's ``tool_calls`` budget (protocol.policy.budget), not one acode makes itself."""

    stage: Annotated[str, msgspec.Meta(max_length=32)] = ""
    task: Annotated[str, msgspec.Meta(max_length=64)] = ""
    step: Annotated[str, msgspec.Meta(max_length=64)] = ""
    counted: bool = False
