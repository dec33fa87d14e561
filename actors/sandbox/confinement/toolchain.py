"""Which ``python``, ``pip`` and ``pytest`` a command finds: the workspace's, as in the user's shell.

A command's PATH is the user's: the PATH of the ``acode run`` that started the session
(:attr:`~protocol.policy.sandbox.SandboxPolicy.path`), else the sandbox's own (``acode up``'s),
with relative and empty entries dropped (they would name whatever directory a command
runs in). acode's own installation is never put on it: with ``pipx install`` acode's
interpreter has none of the workspace's packages (a ``python -m pytest`` there fails with
"No module named pytest").

When the workspace has its own virtualenv (:data:`VENV_DIRS` at its root, with a
``pyvenv.cfg`` and a ``bin/python``), its ``bin`` comes first and ``VIRTUAL_ENV`` names
it, as ``source .venv/bin/activate`` would. The virtualenv is workspace content, so
untrusted: a ``.venv`` that is a symlink, or whose ``bin`` lies outside the workspace, is
not used; its executables are never followed to decide what a command may see (nor are
the workspace's directories on the user's PATH: :func:`outside`). Only the
interpreter it was made from is made visible (read-only), and only when that is a Python
installation (:func:`actors.sandbox.confinement.visible.python_home`): a venv cannot name an arbitrary
directory to be bound. Running the venv's programs inside the sandbox is what running
the workspace's tests does anyway.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["VENV_DIRS", "Toolchain", "command_path", "outside", "user_path", "workspace_venv"]

VENV_DIRS = (".venv", "venv")


def user_path(path: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``path`` (the user's PATH, from the client) or this process's PATH, absolute entries only."""
    raw = path if path is not None else (os.environ if environ is None else environ).get("PATH", os.defpath)
    return os.pathsep.join(entry for entry in raw.split(os.pathsep) if os.path.isabs(entry))


def outside(path: str, root: str) -> str:
    """``path`` without its entries in the workspace ``root`` (a user's activated ``.venv/bin``):
    what a command may see is never decided by following the workspace's own files."""
    real_root = os.path.realpath(root)
    return os.pathsep.join(entry for entry in path.split(os.pathsep)
                           if not any(_within(candidate, top) for candidate in (entry, os.path.realpath(entry))
                                      for top in (root, real_root)))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def workspace_venv(root: str) -> str | None:
    """The workspace's own virtualenv directory, or None (see the module docstring)."""
    real_root = os.path.realpath(root)
    for name in VENV_DIRS:
        venv = os.path.join(root, name)
        if os.path.islink(venv) or not os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
            continue
        bindir = os.path.realpath(os.path.join(venv, "bin"))
        if not _within(bindir, real_root) or bindir == real_root:
            continue  # bin is a symlink out of the workspace
        if os.path.exists(os.path.join(venv, "bin", "python")):
            return venv
    return None


class Toolchain:
    """A command's PATH and the environment that goes with it, for one workspace."""

    def __init__(self, path: str, venv: str | None):
        self.venv = venv
        self.path = os.pathsep.join([os.path.join(venv, "bin"), path]) if venv else path

    def env(self) -> dict[str, str]:
        """What to set in a command's environment besides PATH."""
        return {"VIRTUAL_ENV": self.venv} if self.venv else {}

    @property
    def origin(self) -> str:
        """Where ``python`` comes from, for people (``acode doctor``)."""
        return f"the workspace's {os.path.basename(self.venv)}" if self.venv else "your PATH"


def command_path(root: str, path: str | None, environ: Mapping[str, str] | None = None) -> Toolchain:
    """The toolchain a command in the workspace ``root`` gets, for the user's PATH ``path``."""
    return Toolchain(user_path(path, environ), workspace_venv(root))
