"""The sandbox settings a session carries to every run_terminal call.

They come from the ``sandbox`` section of the configuration (README "Configuration")
and travel in :class:`~protocol.messages.RunTool`, because the sandbox is started once
by ``acode up`` while each workspace may configure its own commands and limits.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.policy.checkpoints import CheckpointSettings

__all__ = ["IsolationLevel", "SandboxPolicy"]

IsolationLevel = Literal["process", "landlock", "bubblewrap"]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class SandboxPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How commands may run. Defaults are the safe ones; see actors/sandbox/confinement/policy.py."""

    allowed_commands: list[Name] | None = None  # replaces the default allowlist when set
    extra_commands: list[Name] = []  # added to the allowlist
    allow_inline_code: bool = False  # python -c, node -e, ...
    shell_commands: list[Annotated[str, msgspec.Meta(min_length=1, max_length=8_000)]] = []  # run by /bin/sh -c
    require_isolation: IsolationLevel = "process"  # fail closed below this level
    network: bool = False  # under bubblewrap: keep the host network (default: none)
    memory_limit_mb: Annotated[int, msgspec.Meta(ge=0, le=1_048_576)] = 4_096  # address space; 0: none
    file_size_limit_mb: Annotated[int, msgspec.Meta(ge=0, le=1_048_576)] = 1_024  # largest file; 0: none
    max_processes: Annotated[int, msgspec.Meta(ge=8, le=100_000)] = 512  # per command tree
    pass_env: list[Name] = []  # more environment names a command may inherit (never secrets)
    # The read boundary (actors/sandbox/confinement/visible.py): more paths a command may see, read-only
    # or read-write (absolute, existing, checked again by the sandbox), and whether /opt is seen.
    read_paths: list[Annotated[str, msgspec.Meta(min_length=1, max_length=4_096)]] = []
    write_paths: list[Annotated[str, msgspec.Meta(min_length=1, max_length=4_096)]] = []
    read_opt: bool = True
    # The user's PATH (the ``acode run`` client's, never a config file's): what ``python``,
    # ``pytest`` and the like resolve on, after the workspace's own virtualenv
    # (actors/sandbox/confinement/toolchain.py). None: the sandbox's own PATH (``acode up``'s).
    path: Annotated[str, msgspec.Meta(max_length=65_536)] | None = None
    # What the checkpoint before each call that can change the workspace covers (config
    # section ``checkpoints:``; protocol/policy/checkpoints.py)
    checkpoints: CheckpointSettings = CheckpointSettings()
