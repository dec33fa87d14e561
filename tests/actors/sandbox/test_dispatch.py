"""From RunTool to ToolResult: output limits applied once, the timeout ceiling, refusals."""

from __future__ import annotations

from typing import Any

from actors.sandbox.dispatch import ToolCall
from actors.sandbox.tools.terminal import Terminal
from protocol import codec
from protocol.messages import RunTool
from protocol.results import ToolResult
from tests.actors.sandbox.conftest import Tree


def _run(tree: Tree, tool: str, *, limit: int = 64_000, request_timeout_s: float = 120.0,
         **arguments: Any) -> ToolResult:
    request = RunTool(key="k", session_id="s", workspace=str(tree.root), tool=tool, arguments=arguments,
                      output_limit_bytes=limit, timeout_s=request_timeout_s)
    with ToolCall(request) as call:
        return call.run(Terminal())


def test_a_capped_read_carries_one_marker_with_the_true_count(tree: Tree) -> None:
    (tree.root / "big.txt").write_text("z" * 5000)
    result = _run(tree, "read_file", limit=1024, path="big.txt")
    assert result.output == ("     1\t" + "z" * 1017 + "\n[… truncated: 3983 more bytes; line 1 alone is longer than "
                             "the output limit; continue with offset=1]")
    assert (result.ok, result.path, result.risk) == (True, "big.txt", "read")


def test_a_long_listing_is_capped_in_bytes_too(tree: Tree) -> None:
    for i in range(300):
        (tree.root / f"{'n' * 40}{i:03d}").touch()
    result = _run(tree, "list_directory", limit=1024)
    assert len(result.output.encode()) < 1024 + 40
    assert result.output.endswith(" more bytes]")


def test_the_model_cannot_raise_the_timeout_above_the_requests(tree: Tree) -> None:
    result = _run(tree, "run_terminal", request_timeout_s=0.3, command="sleep 30", timeout_s=100)
    assert result.error is not None and result.error.code == "ACODE-SBX-006"
    assert "did not finish within 0.3s" in result.error.message
    assert (result.ok, result.risk) == (False, "execute")


def test_a_missing_workspace_is_a_result_naming_it(tree: Tree) -> None:
    request = RunTool(key="k", session_id="s", workspace=str(tree.base / "gone"), tool="list_directory")
    with ToolCall(request) as call:
        result = call.run(Terminal())
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "ACODE-SBX-004", f"workspace {tree.base / 'gone'} does not exist; point the session at an existing directory")


def test_secrets_in_files_and_command_output_are_redacted_in_the_result(tree: Tree) -> None:
    token = "ghp_" + "A1b2C3d4" * 5  # built here so no token-shaped literal sits in the repository
    (tree.root / "settings.py").write_text(f"GITHUB = '{token}'\n")
    read = _run(tree, "read_file", path="settings.py")
    assert token not in read.output and "[REDACTED:github-token]" in read.output
    found = _run(tree, "search_code", query="GITHUB")
    assert token not in found.output and "[REDACTED:github-token]" in found.output
    ran = _run(tree, "run_terminal", command="cat settings.py")
    assert ran.ok and token not in ran.output and "[REDACTED:github-token]" in ran.output
    assert (tree.root / "settings.py").read_text() == f"GITHUB = '{token}'\n"  # the file itself is untouched


def test_a_lone_surrogate_that_reaches_the_dispatcher_is_refused_with_sbx_007_and_nothing_runs(tree: Tree) -> None:
    """The executor refuses such calls first (ACODE-EXEC-007) and msgpack cannot carry one;
    a caller in the sandbox's own process still meets the same refusal, never an OSError."""
    result = _run(tree, "write_file", path="a\udcff.txt", content="x")
    assert result.error is not None and result.error.code == "ACODE-SBX-007"
    assert result.error.message.startswith("arguments of write_file rejected: `$.path` holds a lone UTF-16 surrogate "
                                           "(\\udcff) at character offset 1, which is not text")
    assert codec.encode(result) and not list(tree.root.glob("a*"))
