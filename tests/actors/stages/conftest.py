"""Stage tests: the sandbox's own tool dispatch, in process, over real directory trees.

:class:`LocalTools` is the ``tool(key, name, arguments)`` function the planner's context
preparation takes, served by :class:`~actors.sandbox.dispatch.ToolCall` exactly as the
sandbox actor serves it (confinement, .gitignore, caps, redaction), without the broker
and the journal. It records every call, so tests can check keys and what was read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.sandbox.dispatch import ToolCall
from actors.sandbox.terminal import Terminal
from protocol.messages import RunTool
from protocol.results import ToolResult


class LocalTools:
    def __init__(self, workspace: Path | str, terminal: Terminal):
        self.workspace = str(workspace)
        self.terminal = terminal
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, key: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((key, tool, dict(arguments)))
        request = RunTool(key=key, session_id="s", workspace=self.workspace, tool=tool, arguments=arguments)
        with ToolCall(request) as call:
            return call.run(self.terminal)

    def paths_read(self) -> list[str]:
        return [arguments["path"] for _, tool, arguments in self.calls if tool == "read_file"]


@pytest.fixture(scope="module")
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    try:
        yield term
    finally:
        term.close()


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
