"""Where acode keeps its files: ``$ACODE_HOME`` (default ``~/.acode``).

::

    $ACODE_HOME/acode.db            SQLite database (WAL), owned by the persistence actor
    $ACODE_HOME/config.yml          user configuration (optional)
    $ACODE_HOME/run/coordinator.pid pid of the running coordinator
    $ACODE_HOME/run/coordinator.lock held (flock) while a coordinator runs
    $ACODE_HOME/run/endpoints.json  where clients find the broker
    $ACODE_HOME/run/epoch           last epoch issued to an actor
    $ACODE_HOME/run/logs/*.log      one log per actor instance (rotated to *.log.1 ...: actors/logrotate.py)
    $ACODE_HOME/run/sock/           ipc sockets, mode 0700
    $ACODE_HOME/run/baselines/<session>/  a session's workspace baseline (the sandbox's; 0700)
    $ACODE_HOME/checkpoints/<key>/  a workspace's checkpoints (the sandbox's; actors/sandbox/checkpointing.py)
    $ACODE_HOME/mcp-pins.json       the approved MCP tool definitions, by hash (the mcp actor's)
    $ACODE_HOME/run/mcp-calls       the MCP calls begun, by request id (the mcp actor's)
    $ACODE_HOME/mcp-definitions/<hash>.json  each MCP tool definition a call ran against (the sandbox's)

Everything beneath the home is private to the user who runs acode (directories 0700,
files 0600; :mod:`actors.private`).

A Unix socket path is limited to ~107 bytes; when the home is deep, the sockets live in
``/tmp/acode-<uid>-<hash of the home>`` instead (also 0700, checked to be ours).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from actors.private import Tightened, secure_home
from protocol.errors import ConfigError
from protocol.transport.spec import Endpoints

__all__ = ["RunPaths", "acode_home"]

_MAX_IPC_PATH = 100


def acode_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The acode home: ``explicit``, else ``$ACODE_HOME``, else ``~/.acode``."""
    raw = explicit or os.environ.get("ACODE_HOME") or Path.home() / ".acode"
    return Path(raw).expanduser().absolute()


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(f"socket directory {path} is not a directory owned by you; remove it "
                          "or set ACODE_HOME elsewhere", code="ACODE-CFG-001")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


@dataclass(frozen=True)
class RunPaths:
    home: Path

    @classmethod
    def for_home(cls, explicit: str | os.PathLike[str] | None = None) -> RunPaths:
        return cls(acode_home(explicit))

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def database(self) -> Path:
        return self.home / "acode.db"

    @property
    def user_config(self) -> Path:
        return self.home / "config.yml"

    @property
    def baselines(self) -> Path:
        return self.run_dir / "baselines"

    @property
    def checkpoints(self) -> Path:
        return self.home / "checkpoints"

    @property
    def mcp_pins(self) -> Path:
        """The approved MCP tool definitions (the mcp actor's: actors/mcp/pins.py)."""
        return self.home / "mcp-pins.json"

    @property
    def mcp_calls(self) -> Path:
        """The MCP calls the mcp actor began (never begun twice: actors/mcp/begun.py)."""
        return self.run_dir / "mcp-calls"

    @property
    def mcp_definitions(self) -> Path:
        """Each MCP tool definition a call was sent with, by its hash: what ``acode mcp approve``
        shows a change against (the sandbox's: actors/sandbox/mcpcalls.py)."""
        return self.home / "mcp-definitions"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "coordinator.pid"

    @property
    def lock_file(self) -> Path:
        return self.run_dir / "coordinator.lock"

    @property
    def epoch_file(self) -> Path:
        return self.run_dir / "epoch"

    @property
    def sock_dir(self) -> Path:
        local = self.run_dir / "sock"
        if len(str(local / "events-out.ipc")) <= _MAX_IPC_PATH:
            return local
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:16]
        return Path("/tmp") / f"acode-{os.getuid()}-{digest}"

    def log_file(self, instance: str) -> Path:
        return self.logs / f"{instance}.log"

    def prepare(self) -> list[Tightened]:
        """Create the directories a running actor set needs, private to us (see
        :mod:`actors.private`); refuse a home another user owns. Returns the paths of an
        older, looser home that were made private."""
        changed = secure_home(self.home)
        self.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        _private_dir(self.sock_dir)
        return changed

    def endpoints(self) -> Endpoints:
        sock = self.sock_dir
        return Endpoints(
            broker=f"ipc://{sock / 'broker.ipc'}",
            events_in=f"ipc://{sock / 'events-in.ipc'}",
            events_out=f"ipc://{sock / 'events-out.ipc'}",
            supervisor=f"ipc://{sock / 'supervisor.ipc'}",
        )


def checkpoint_store(root: str | os.PathLike[str], workspace: str) -> str:
    """The checkpoint store of ``workspace`` under ``root`` (``RunPaths.checkpoints``): a
    hash of its resolved path names it (actors/sandbox/checkpointing.py writes it)."""
    real = os.path.realpath(workspace)
    return os.path.join(root, hashlib.sha256(os.fsencode(real)).hexdigest()[:16])


def tree_bytes(root: str | os.PathLike[str]) -> int:
    """The bytes of every file under ``root`` (one that goes while it is walked counts 0)."""
    total = 0
    for base, _, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except FileNotFoundError:  # a take or a gc renamed it meanwhile
                pass
    return total


def checkpoint_stores(root: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Every checkpoint store under ``root``: (its directory, the workspace it records, from
    the store's ``workspace`` file). Light: ``acode status`` lists them without the sandbox's code."""
    found: list[tuple[str, str]] = []
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return found
    for name in names:
        try:
            with open(os.path.join(root, name, "workspace"), encoding="utf-8") as file:
                found.append((os.path.join(root, name), file.read().strip()))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return found
