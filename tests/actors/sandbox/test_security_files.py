"""The file tools under attack: every argument is hostile, every answer is checked for leaks.

Each attack runs on real files, with both confinement methods, through every tool that
takes a path, and asserts three things: the call is refused with the expected code, the
canary (random content in ``outside/`` and the sibling ``ws-evil/``) appears in neither
the output nor the error message, and the canary files are unchanged.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.dispatch import ToolCall
from actors.sandbox.tools import files, search
from actors.sandbox.tools.terminal import Terminal
from protocol.calls.tools import (
    CreateDirectory,
    ListDirectory,
    ModifyFile,
    ReadFile,
    SearchCode,
    WriteFile,
    decode_args,
)
from protocol.errors import ErrorInfo, SandboxError
from protocol.messages import RunTool
from tests.actors.sandbox.conftest import CANARY, Tree, exchange, link

LIMIT = 64_000


def call(ws: Workspace, tool: str, **arguments: Any) -> tuple[str, ErrorInfo | None]:
    """Run one tool as the sandbox would: ``(output, error)``, refusals included."""
    args = decode_args(tool, arguments)
    try:
        match args:
            case ReadFile():
                outcome = files.read_file(ws, args, LIMIT)
            case WriteFile():
                outcome = files.write_file(ws, args)
            case ModifyFile():
                outcome = files.modify_file(ws, args)
            case CreateDirectory():
                outcome = files.create_directory(ws, args)
            case ListDirectory():
                outcome = search.list_directory(ws, args, LIMIT)
            case SearchCode():
                outcome = search.search_code(ws, args, LIMIT)
            case _:
                raise AssertionError(f"not a file tool: {tool}")
    except SandboxError as exc:
        return "", exc.info()
    return outcome.output, outcome.error


def no_leak(tree: Tree, output: str, error: ErrorInfo | None) -> None:
    assert CANARY not in output
    assert error is None or CANARY not in error.message
    assert tree.canaries_intact()


def refused(tree: Tree, code: str, result: tuple[str, ErrorInfo | None]) -> ErrorInfo:
    output, error = result
    no_leak(tree, output, error)
    assert error is not None, f"not refused: {output[:200]!r}"
    assert error.code == code, error.message
    return error


# Every tool that takes a path, with arguments that would do harm if the path got through.
TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {},
    "write_file": {"content": "pwned"},
    "modify_file": {"edits": [{"search": "CANARY", "replace": "pwned"}]},
    "modify_file/diff": {"diff": "@@ -1 +1 @@\n-x\n+pwned\n"},
    "create_directory": {},
    "list_directory": {},
    "search_code": {"query": "CANARY"},
}


def attack(ws: Workspace, tool: str, path: str) -> tuple[str, ErrorInfo | None]:
    return call(ws, tool.split("/")[0], path=path, **TOOLS[tool])


# -- escapes: lexical and through links --------------------------------------------------------


@pytest.fixture
def links(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    """Every kind of symlink out of the workspace, the /proc ones included."""
    root, outside = tree.root, tree.outside
    monkeypatch.chdir(outside)  # /proc/self/cwd is then the canaries' directory
    fd = os.open(outside, os.O_RDONLY | os.O_DIRECTORY)
    try:
        link(root / "abs_link", outside / "canary.txt")
        link(root / "abs_dir", outside)
        link(root / "rel_link", "../outside/canary.txt")
        link(root / "chain1", "chain2")
        link(root / "chain2", "src/chain3")
        link(root / "src" / "chain3", "../../outside/canary.txt")
        link(root / "dir_link", "../outside")
        link(root / "src" / "deep_link", "../../outside")
        link(root / "proc_root", f"/proc/self/root{outside}/canary.txt")
        link(root / "proc_cwd", "/proc/self/cwd/canary.txt")
        link(root / "proc_fd", f"/proc/self/fd/{fd}/canary.txt")
        link(root / "climb_to_proc", "../" * 40 + "proc/self/cwd/canary.txt")
        link(root / "evil_link", "../ws-evil")
        link(root / "dev_zero", "/dev/zero")
        link(root / "loop1", "loop2")
        link(root / "loop2", "loop1")
        os.environ["ACODE_TEST_PROC_FD"] = str(fd)
        yield tree
    finally:
        os.environ.pop("ACODE_TEST_PROC_FD", None)
        os.close(fd)


ESCAPES = [
    # lexical
    "../outside/canary.txt", "src/../../outside/canary.txt", "./../outside/canary.txt", "..", "../",
    "{base}/outside/canary.txt", "{root}/../outside/canary.txt", "/etc/passwd", "/",
    # the sibling whose name has the workspace's as a prefix
    "{root}-evil/canary.txt", "../ws-evil/canary.txt", "evil_link/canary.txt",
    # /proc named directly
    "/proc/self/root{outside}/canary.txt", "/proc/self/cwd/canary.txt", "/proc/self/fd/{fd}/canary.txt",
    # symlinks of every kind
    "abs_link", "abs_dir/canary.txt", "abs_dir/new.txt", "rel_link", "chain1", "dir_link/canary.txt",
    "dir_link/new/deeper.txt", "src/deep_link/canary.txt", "proc_root", "proc_cwd", "proc_fd", "climb_to_proc",
    "dev_zero",
]


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("path", ESCAPES)
def test_every_escape_is_refused_by_every_tool_without_a_leak(ws: Workspace, links: Tree, tool: str,
                                                                path: str) -> None:
    path = path.format(base=links.base, root=links.root, outside=links.outside, fd=os.environ["ACODE_TEST_PROC_FD"])
    error = refused(links, "ACODE-SBX-002", attack(ws, tool, path))
    assert error.message.startswith("path ")
    assert not (links.outside / "new.txt").exists() and not (links.outside / "new").exists()


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize(("path", "why"), [
    ("src/a.py\0/../../../outside/canary.txt", "contains a NUL byte"),
    ("é" * 2049, "is 4098 bytes long, over the 4096-byte limit"),
    ("a" * 300, "has a component too long for the file system"),
    ("loop1", "goes through too many symlinks"),
])
def test_malformed_paths_are_refused_by_every_tool(ws: Workspace, links: Tree, tool: str, path: str, why: str) -> None:
    error = refused(links, "ACODE-SBX-002", attack(ws, tool, path))
    assert why in error.message


@pytest.mark.parametrize("path", ["../outside/canary.txt", "{root}-evil/canary.txt", "abs_link", "dir_link/canary.txt"])
@pytest.mark.parametrize("tool", list(TOOLS))
def test_escapes_are_refused_through_the_dispatcher_too(tree: Tree, links: Tree, tool: str, path: str) -> None:
    name, _, _ = tool.partition("/")
    request = RunTool(key="k", session_id="s", workspace=str(tree.root), tool=name,
                      arguments={"path": path.format(root=tree.root), **TOOLS[tool]})
    with ToolCall(request) as tool_call:
        result = tool_call.run(Terminal())
    assert result.error is not None and result.error.code == "ACODE-SBX-002"
    no_leak(tree, result.output, result.error)


def test_a_walk_never_follows_links_out_however_deep(ws: Workspace, links: Tree) -> None:
    listing, error = call(ws, "list_directory", path=".", depth=10)
    assert error is None
    assert {"abs_dir@", "dir_link@", "src/deep_link@", "proc_cwd@", "evil_link@"} <= set(listing.splitlines())
    found, error = call(ws, "search_code", query="CANARY")
    assert (found, error) == ("no matches for 'CANARY' in .", None)
    found, error = call(ws, "search_code", query="CAN.RY", regex=True)
    assert error is None and found == "no matches for 'CAN.RY' in ."
    no_leak(links, listing + found, None)


# -- races ----------------------------------------------------------------------------------------


def _race(swap: Path, other: Path, attempt: Any, rounds: int) -> set[str]:
    """Run ``attempt(i)`` ``rounds`` times while ``swap`` and ``other`` trade places."""
    swap_names = exchange()
    stop = threading.Event()
    flips = 0

    def swapper() -> None:
        nonlocal flips
        while not stop.is_set():
            swap_names(swap, other)
            flips += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    seen: set[str] = set()
    try:
        for i in range(rounds):
            seen.add(attempt(i))
    finally:
        stop.set()
        thread.join()
    assert flips > 100  # the swap really raced the calls
    return seen


def test_writes_edits_and_mkdirs_racing_a_swapped_in_link_never_land_outside(ws: Workspace, tree: Tree) -> None:
    swap, other = tree.root / "swap", tree.root / "other"
    swap.mkdir()
    (swap / "m.txt").write_text("CANARY\n")
    link(other, "../outside")  # "swap" flips between the real directory and this link

    def attempt(i: int) -> str:
        results = [
            call(ws, "write_file", path=f"swap/w{i % 3}", content="w"),
            call(ws, "modify_file", path="swap/m.txt" if i % 2 else "swap/canary.txt",
                 edits=[{"search": "CANARY", "replace": "CANARY"}]),
            call(ws, "modify_file", path="swap/f", diff="@@ -1 +1 @@\n-x\n+pwned\n"),
            call(ws, "create_directory", path=f"swap/d{i % 3}/e"),
        ]
        for output, error in results:
            no_leak(tree, output, error)
        return ",".join(error.code if error else "ok" for _, error in results)

    seen = _race(swap, other, attempt, 1500)
    codes = {code for outcome in seen for code in outcome.split(",")}
    assert codes <= {"ok", "ACODE-SBX-002", "ACODE-SBX-003", "ACODE-SBX-004", "ACODE-SBX-009"}
    assert "ok" in codes
    assert tree.canaries_intact()


def test_a_link_to_git_swapped_in_during_writes_never_lets_a_hook_through(ws: Workspace, tree: Tree) -> None:
    (tree.root / ".git" / "hooks").mkdir(parents=True)
    swap, other = tree.root / "x", tree.root / "y"
    (swap / "hooks").mkdir(parents=True)
    link(other, ".git")  # "x" flips between a plain directory and a link to .git

    def attempt(i: int) -> str:
        output, error = call(ws, "write_file", path="x/hooks/pre-commit", content="#!/bin/sh\necho pwned\n")
        dir_output, dir_error = call(ws, "create_directory", path=f"x/hooks/d{i % 2}")
        no_leak(tree, output + dir_output, error or dir_error)
        return f"{error.code if error else 'ok'},{dir_error.code if dir_error else 'ok'}"

    seen = _race(swap, other, attempt, 1500)
    codes = {code for outcome in seen for code in outcome.split(",")}
    assert codes <= {"ok", "ACODE-SBX-013", "ACODE-SBX-003", "ACODE-SBX-004"}  # a walk mid-swap may see ENOTDIR
    assert "ACODE-SBX-013" in ",".join(seen) and "ok" in ",".join(seen)
    assert sorted(os.listdir(tree.root / ".git" / "hooks")) == []


# -- hardlinks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["write_file", "modify_file", "modify_file/diff"])
def test_a_hardlink_to_a_file_outside_is_never_changed(ws: Workspace, tree: Tree, tool: str) -> None:
    os.link(tree.outside / "canary.txt", tree.root / "hard.txt")
    arguments = dict(TOOLS[tool])
    if tool == "modify_file/diff":
        arguments["diff"] = f"@@ -1 +1 @@\n-{CANARY}\n+pwned\n"
    error = refused(tree, "ACODE-SBX-014", call(ws, tool.split("/")[0], path="hard.txt", **arguments))
    assert "is a hard link: 2 names share this file and another may be outside the workspace" in error.message
    assert os.stat(tree.root / "hard.txt").st_ino == os.stat(tree.outside / "canary.txt").st_ino


# -- special files --------------------------------------------------------------------------------


def _within(seconds: float, job: Any) -> Any:
    """``job()``'s result, failing (not hanging) when it blocks past ``seconds``."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(job()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for over {seconds}s"
    return result[0]


def test_a_fifo_without_a_writer_never_blocks_a_tool(ws: Workspace, tree: Tree) -> None:
    os.mkfifo(tree.root / "pipe")
    for tool in ("read_file", "modify_file", "modify_file/diff", "write_file"):
        error = refused(tree, "ACODE-SBX-004", _within(10, lambda tool=tool: attack(ws, tool, "pipe")))
        assert error.message.startswith("path 'pipe' is a named pipe (FIFO)")
    listing, _ = _within(10, lambda: call(ws, "list_directory", path="."))
    assert "pipe" in listing.splitlines()
    assert _within(10, lambda: call(ws, "search_code", query="x")) == ("no matches for 'x' in .", None)
    assert _within(10, lambda: call(ws, "search_code", query="x", path="pipe")) == ("no matches for 'x' in pipe", None)
    assert stat.S_ISFIFO(os.lstat(tree.root / "pipe").st_mode)


def test_a_unix_socket_is_refused_and_never_replaced(ws: Workspace, tree: Tree) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tree.root / "sock"))
        for tool in ("read_file", "modify_file", "write_file"):
            refused(tree, "ACODE-SBX-004", _within(10, lambda tool=tool: attack(ws, tool, "sock")))
        assert stat.S_ISSOCK(os.lstat(tree.root / "sock").st_mode)


def test_a_device_node_inside_is_refused_without_being_read(ws: Workspace, tree: Tree) -> None:
    try:
        os.mknod(tree.root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: reading never ends
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    for tool in ("read_file", "modify_file", "write_file"):
        error = refused(tree, "ACODE-SBX-004", _within(10, lambda tool=tool: attack(ws, tool, "zero")))
        assert error.message.startswith("path 'zero' is a device")
    assert _within(10, lambda: call(ws, "search_code", query="x")) == ("no matches for 'x' in .", None)


# -- protected paths ------------------------------------------------------------------------------


PROTECTED = [
    ".git", ".git/config", ".git/hooks/pre-commit", ".git/new/dir/file", "a/../.git/config", "./.git//config",
    "src/../.git/hooks/post-checkout", "{root}/.git/config", ".GIT/config", ".Git/hooks/x", ".git./config",
    ".git \u200d/hooks/x", "GIT~1/config", "sub/.git/config", "sub/deeper/.git", ".agent", ".agent/config.yml",
    "./.agent/new.yml", "src/../.agent/config.yml", ".AGENT/config.yml", "{root}/.agent/x",
]
# Through links made inside the workspace: the resolved location is protected.
PROTECTED_VIA_LINKS = ["x/hooks/pre-commit", "x/config", "x", "gitcfg", "agentlink/config.yml", "agentlink",
                       "src/up/.git/config", "subgit/hooks/x"]


def _write_tools(path: str) -> list[tuple[str, dict[str, Any]]]:
    header = path if path.startswith("/") else f"b/{path}"
    return [("write_file", {"path": path, "content": "#!/bin/sh\necho pwned\n"}),
            ("modify_file", {"path": path, "edits": [{"search": "a", "replace": "pwned"}]}),
            ("modify_file", {"path": path, "diff": f"--- /dev/null\n+++ {header}\n@@ -0,0 +1 @@\n+pwned\n"}),
            ("create_directory", {"path": path})]


def _snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for base in (".git", ".agent", "sub"):
        for dirpath, dirnames, filenames in os.walk(root / base):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                out[str(full.relative_to(root))] = full.read_bytes() if full.is_file() else None
    return out


@pytest.fixture(params=["exists", "missing"])
def protected_tree(request: pytest.FixtureRequest, tree: Tree) -> Tree:
    root = tree.root
    if request.param == "exists":
        (root / ".git" / "hooks").mkdir(parents=True)
        (root / ".git" / "config").write_text("[core]\n")
        (root / ".agent").mkdir()
        (root / ".agent" / "config.yml").write_text("a: 1\n")
        (root / "sub" / ".git").mkdir(parents=True)
        (root / "sub" / ".git" / "config").write_text("[core]\n")
    link(root / "x", ".git")
    link(root / "gitcfg", ".git/config")
    link(root / "agentlink", ".agent")
    link(root / "src" / "up", "..")
    link(root / "subgit", "sub/.git")
    return tree


@pytest.mark.parametrize("path", PROTECTED)
def test_writes_into_git_or_agent_are_refused_whether_they_exist_or_not(
        ws: Workspace, protected_tree: Tree, path: str) -> None:
    path = path.format(root=protected_tree.root)
    before = _snapshot(protected_tree.root)
    for tool, arguments in _write_tools(path):
        error = refused(protected_tree, "ACODE-SBX-013", call(ws, tool, **arguments))
        assert error.message.startswith(f"path {path!r} ")
        assert "git's .git directory, whose hooks and config run code" in error.message or (
            "acode's own configuration" in error.message)
    assert _snapshot(protected_tree.root) == before


@pytest.mark.parametrize("path", PROTECTED_VIA_LINKS)
def test_writes_through_a_link_into_git_or_agent_are_refused(ws: Workspace, protected_tree: Tree, path: str) -> None:
    before = _snapshot(protected_tree.root)
    exists = (protected_tree.root / ".git").exists()
    for tool, arguments in _write_tools(path):
        output, error = call(ws, tool, **arguments)
        no_leak(protected_tree, output, error)
        assert error is not None, f"{tool} {path}: {output}"
        if exists:
            assert error.code == "ACODE-SBX-013", error.message
            assert "(it resolves to '" in error.message or ".git" in path.split("/")
        else:  # a dangling link: never created through, whatever the code says
            assert error.code in ("ACODE-SBX-013", "ACODE-SBX-003"), error.message
    assert _snapshot(protected_tree.root) == before
    assert not (protected_tree.root / ".git").exists() or exists


def test_git_and_agent_stay_readable(ws: Workspace, tree: Tree) -> None:
    (tree.root / ".git" / "hooks").mkdir(parents=True)
    (tree.root / ".git" / "config").write_text("[core]\n")
    (tree.root / ".agent").mkdir()
    (tree.root / ".agent" / "config.yml").write_text("a: 1\n")
    link(tree.root / "x", ".git")
    assert call(ws, "read_file", path=".git/config") == ("     1\t[core]\n", None)
    assert call(ws, "read_file", path="x/config") == ("     1\t[core]\n", None)
    assert call(ws, "read_file", path=".agent/config.yml") == ("     1\ta: 1\n", None)
    assert call(ws, "list_directory", path=".git") == (".git/config\n.git/hooks/", None)


@pytest.mark.parametrize("path", [".gitignore", ".github/workflows/ci.yml", ".gitx/y", "git/config", ".agentrc",
                                  "sub/.agent/x", "src/.agent", ".git-blame-ignore-revs", "..git/x"])
def test_names_that_only_look_like_git_or_agent_are_writable(ws: Workspace, tree: Tree, path: str) -> None:
    assert call(ws, "write_file", path=path, content="ok\n") == (f"wrote 3 bytes to {path}", None)
    assert (tree.root / path).read_text() == "ok\n"


# -- Unicode in names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["src/\u202eevil.txt", "\u200b../outside/canary.txt", "..\u200b/outside/canary.txt",
                                  "\uff0e\uff0e/outside/canary.txt", "..\u2024/canary.txt", " ../outside/canary.txt"])
def test_invisible_or_lookalike_characters_make_a_name_inside_not_an_escape(ws: Workspace, tree: Tree,
                                                                             name: str) -> None:
    output, error = call(ws, "write_file", path=name, content="inside\n")
    assert error is None and output == f"wrote 7 bytes to {name}"
    assert (tree.root / name).read_text() == "inside\n"  # the exact name, under the root
    assert call(ws, "read_file", path=name) == ("     1\tinside\n", None)
    no_leak(tree, output, error)


def test_nfc_and_nfd_spellings_are_different_names(ws: Workspace, tree: Tree) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "café.txt"), unicodedata.normalize("NFD", "café.txt")
    assert nfc != nfd
    call(ws, "write_file", path=nfc, content="composed\n")
    _, error = call(ws, "read_file", path=nfd)
    assert error is not None and error.code == "ACODE-SBX-003"  # no normalising: Linux names are bytes
    call(ws, "write_file", path=nfd, content="decomposed\n")
    assert sorted(p.name for p in tree.root.iterdir() if p.name.startswith("caf")) == sorted([nfc, nfd])
    assert (tree.root / nfc).read_text() == "composed\n"


# -- diff headers and gitignore cannot reach outside ---------------------------------------------


@pytest.mark.parametrize("header", ["--- a/../outside/canary.txt\n+++ b/../outside/canary.txt",
                                    "--- {root}-evil/canary.txt\n+++ {root}-evil/canary.txt",
                                    "--- /proc/self/cwd/canary.txt\n+++ /proc/self/cwd/canary.txt"])
def test_a_diff_header_naming_a_file_outside_changes_nothing(ws: Workspace, links: Tree, header: str) -> None:
    (links.root / "t.txt").write_text(f"{CANARY}\n")
    diff = header.format(root=links.root) + f"\n@@ -1 +1 @@\n-{CANARY}\n+pwned\n"
    refused(links, "ACODE-SBX-002", call(ws, "modify_file", path="t.txt", diff=diff))
    assert (links.root / "t.txt").read_text() == f"{CANARY}\n"


def test_a_gitignore_cannot_widen_a_walk(ws: Workspace, tree: Tree) -> None:
    (tree.root / ".gitignore").write_text("!../outside/\n!/../ws-evil/**\n!**/canary.txt\n")
    link(tree.root / "dir_link", "../outside")
    listing, _ = call(ws, "list_directory", path=".", depth=5)
    found, _ = call(ws, "search_code", query="CANARY")
    assert listing.splitlines() == [".gitignore", "dir_link@", "src/", "src/a.py"]
    assert found == "no matches for 'CANARY' in ."
    no_leak(tree, listing + found, None)
