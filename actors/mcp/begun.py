"""At most once: the MCP calls the ``mcp`` actor began, by request id, on disk.

Requests through the broker are delivered at least once: a client resends a request until
it is answered, and when the worker handling it dies the broker tells the client, which
resends at once. For an MCP call that would run the call again in the restarted actor,
and a call is a side effect acode cannot undo. So right before a call is sent to its
server its request id is appended here (fsync'd); a request whose id is already here is a
resend of a call that began in an earlier life of the actor, and is answered ACODE-MCP-007
("not re-run") without calling anything. A call refused before it was sent (a changed
definition, a server that would not start) is not recorded: its resend is answered afresh.
Within one life the worker's own duplicate handling (:mod:`broker.worker`) already absorbs
resends.

The file (``$ACODE_HOME/run/mcp-calls``) is one id a line; past :data:`KEEP` × 2 lines it
is rewritten atomically with the newest :data:`KEEP` (a resend comes within a request's
deadline, seconds to minutes, not thousands of calls later).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

__all__ = ["KEEP", "Begun"]

KEEP = 2_048


class Begun:
    """The ids of the calls begun (by this actor and its predecessors)."""

    def __init__(self, path: Path, *, keep: int = KEEP):
        self.path = path
        self.keep = keep
        self._lock = threading.Lock()
        self._ids: OrderedDict[str, None] = OrderedDict()
        try:
            for line in path.read_text().splitlines():
                if line:
                    self._ids[line] = None
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def seen(self, request_id: str) -> bool:
        """Whether ``request_id`` was begun (in this life or an earlier one)."""
        with self._lock:
            return request_id.replace("\n", " ") in self._ids

    def begin(self, request_id: str) -> bool:
        """Record ``request_id`` as begun, durably; False when it already was (a resend)."""
        line = request_id.replace("\n", " ")
        with self._lock:
            if line in self._ids:
                return False
            self._ids[line] = None
            os.write(self._fd, (line + "\n").encode())
            os.fsync(self._fd)
            if len(self._ids) > 2 * self.keep:
                self._compact()
            return True

    def _compact(self) -> None:
        while len(self._ids) > self.keep:
            self._ids.popitem(last=False)
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        with open(temporary, "w") as handle:
            handle.write("".join(f"{key}\n" for key in self._ids))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
