"""From RunTool to ToolResult: output limits applied once, the timeout ceiling, refusals,
a write's content hash."""

from __future__ import annotations

import hashlib
from typing import Any

from actors.sandbox.dispatch import ToolCall
from actors.sandbox.tools.terminal import Terminal
from actors.stages.execution.turnwatch import unnumbered
from protocol import codec
from protocol.messages import RunTool
from protocol.plans.results import ToolResult
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


def _read_hash(tree: Tree, path: str) -> str:
    """The hash the executor gives a file it read whole (TurnWatch.start_try: read_file's
    numbered text, unnumbered, as UTF-8): what a write's hash is compared with."""
    text = unnumbered(_run(tree, "read_file", path=path).output)
    assert text is not None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def test_a_search_replace_says_the_hash_of_the_text_it_left(tree: Tree) -> None:
    """The executor cannot know what a search/replace made (Qwen2.5-Coder-1.5B flipped a line
    back and forth with modify_file, unseen by edit_undone): the sandbox says it."""
    (tree.root / "a.py").write_text("x = 'café'\ny = 1\n")
    result = _run(tree, "modify_file", path="a.py", edits=[{"search": "y = 1", "replace": "y = 2"}])
    assert result.ok and result.sha256 == hashlib.sha256("x = 'café'\ny = 2\n".encode()).hexdigest()
    assert result.sha256 == hashlib.sha256((tree.root / "a.py").read_bytes()).hexdigest() == _read_hash(tree, "a.py")
    diffed = _run(tree, "modify_file", path="a.py", diff="@@ -2 +2 @@\n-y = 2\n+y = 3\n")
    whole = _run(tree, "modify_file", path="a.py", content="y = 4\n")
    assert [r.sha256 for r in (diffed, whole)] == [
        hashlib.sha256("x = 'café'\ny = 3\n".encode()).hexdigest(), hashlib.sha256(b"y = 4\n").hexdigest()]


def test_a_write_file_says_the_hash_the_executor_gives_its_content_and_a_read_of_it(tree: Tree) -> None:
    content = "naïve = '日本語'\t# ünïcödé\n"
    result = _run(tree, "write_file", path="n.py", content=content)
    assert result.ok and result.sha256 == hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    assert result.sha256 == _read_hash(tree, "n.py")


def test_a_crlf_file_with_a_bom_hashes_as_a_read_shows_it_whole(tree: Tree) -> None:
    """read_file shows a CRLF line without its CR and keeps a BOM, so the executor's hash of
    a read does; the hash of the same file written must be that one, not its bytes'."""
    (tree.root / "w.txt").write_bytes("\ufeffone\r\ntwo é\r\nlast\r".encode())
    result = _run(tree, "modify_file", path="w.txt", edits=[{"search": "two", "replace": "deux"}])
    assert (tree.root / "w.txt").read_bytes() == "\ufeffone\r\ndeux é\r\nlast\r".encode()
    assert result.sha256 == _read_hash(tree, "w.txt") == hashlib.sha256(
        "\ufeffone\ndeux é\nlast\r".encode()).hexdigest()


def test_reads_commands_and_failed_writes_say_no_hash(tree: Tree) -> None:
    (tree.root / "a.txt").write_text("a\n")
    failed = _run(tree, "modify_file", path="a.txt", edits=[{"search": "zzz", "replace": "b"}])
    others = [_run(tree, "read_file", path="a.txt"), _run(tree, "create_directory", path="d"), failed]
    assert not failed.ok and [r.sha256 for r in others] == ["", "", ""]
