"""A test-only ``sandbox``: the real one, except that some calls first fail transiently.

A ``write_file`` whose path starts with ``flaky<N>`` (``flaky2.txt``) is answered with a
retryable ACODE-EXEC-002 error the first N times it is asked under a key (retry keys
``<key>:retry<i>`` count as the same call), without running; then it runs for real. This
is the only way to make a transient failure on demand: the real tools fail for good.
"""

from __future__ import annotations

import re
import threading

from actors._base import main
from actors.sandbox.actor import SandboxActor
from broker.worker import Request
from protocol import codec
from protocol.errors import ErrorInfo
from protocol.messages import Message, RunTool, ToolDone
from protocol.plans.results import ToolResult

_FLAKY = re.compile(r"flaky(\d+)")
_RETRY = re.compile(r":retry\d+$")


class FlakySandbox(SandboxActor):
    def on_start(self) -> None:
        super().on_start()
        self._failed: dict[str, int] = {}
        self._failed_lock = threading.Lock()

    def handle(self, request: Request) -> Message:
        body = codec.SANDBOX_REQUEST.decode(request.body)
        match = _FLAKY.match(str(body.arguments.get("path", ""))) if isinstance(body, RunTool) else None
        if match is not None and body.tool == "write_file":
            base = _RETRY.sub("", body.key)
            with self._failed_lock:
                failed = self._failed.get(base, 0)
                flaky = failed < int(match.group(1))
                if flaky:
                    self._failed[base] = failed + 1
            if flaky:
                self.log.info("flaky_failure", key=body.key)
                return ToolDone(result=ToolResult(key=body.key, tool=body.tool, ok=False, error=ErrorInfo(
                    code="ACODE-EXEC-002", message="simulated transient failure: the disk was busy",
                    retryable=True)))
        return super().handle(request)


if __name__ == "__main__":
    main(FlakySandbox)
