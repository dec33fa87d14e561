"""acode's home is never reachable by the file tools, wherever it lies (``acode run -w ~``).

Real files: a workspace that contains a fake acode home (a config, a database-like file,
logs), reached by every file tool through plain paths, ``..`` and absolute paths, and
through symlinks made inside the workspace; the tree tools leave it out.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.dispatch import ToolCall
from actors.sandbox.journal import Journal
from actors.sandbox.tools.terminal import Terminal
from protocol.messages import RunTool
from tests.actors.sandbox.conftest import METHODS
from tests.actors.sandbox.test_security_files import call

SECRET = "HOME-CANARY-7f3a"


class Site:
    """``user/`` is the workspace (a user's home directory), ``user/.acode/`` acode's home in it."""

    def __init__(self, base: Path):
        self.root = base / "user"
        self.home = self.root / ".acode"
        (self.home / "logs").mkdir(parents=True)
        (self.home / "config.yml").write_text(f"# {SECRET}\nautonomy: 2\n")
        (self.home / "acode.db").write_text(SECRET)
        (self.home / "logs" / "executor.log").write_text(SECRET + "\n")
        (self.root / "project").mkdir()
        (self.root / "project" / "main.py").write_text("print('hi')\n")
        self.before = self.state()

    def state(self) -> dict[str, bytes | None]:
        found: dict[str, bytes | None] = {}
        for dirpath, dirnames, filenames in os.walk(self.home):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                found[str(full.relative_to(self.home))] = full.read_bytes() if full.is_file() else None
        return found


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


@pytest.fixture(params=METHODS)
def ws(request: pytest.FixtureRequest, site: Site) -> Iterator[Workspace]:
    with Workspace(str(site.root), method=request.param, hidden=(str(site.home),)) as workspace:
        yield workspace


PATHS = [".acode", ".acode/config.yml", ".acode/acode.db", ".acode/logs/executor.log", ".acode/new.txt",
         ".acode/newdir/x", "./.acode//config.yml", "project/../.acode/config.yml", "{root}/.acode/config.yml",
         "{real}/.acode/acode.db"]
# symlinks made inside the workspace (relative, so confinement itself lets them through)
VIA_LINKS = ["h/config.yml", "h/acode.db", "h", "cfg", "project/up/.acode/config.yml", "logs/executor.log",
             "h/logs/new.log", "project/deep/new"]


def _links(site: Site) -> None:
    os.symlink(".acode", site.root / "h")
    os.symlink(".acode/config.yml", site.root / "cfg")
    os.symlink("..", site.root / "project" / "up")
    os.symlink(".acode/logs", site.root / "logs")
    os.symlink("../.acode/newdir", site.root / "project" / "deep")


def _every_tool(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "autonomy: 3\n"}),
            ("modify_file", {"path": path, "edits": [{"search": "autonomy: 2", "replace": "autonomy: 3"}]}),
            ("modify_file", {"path": path, "diff": "--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+autonomy: 3\n"}),
            ("create_directory", {"path": path}),
            ("list_directory", {"path": path}),
            ("search_code", {"query": "CANARY", "path": path})]


def _refused(ws: Workspace, site: Site, tool: str, arguments: dict[str, Any]) -> str:
    output, error = call(ws, tool, **arguments)
    assert error is not None, f"{tool} {arguments} was not refused: {output!r}"
    assert SECRET not in output + error.message
    assert site.state() == site.before, f"{tool} {arguments} changed acode's home"
    return f"{error.code} {error.message}"


@pytest.mark.parametrize("raw", PATHS)
def test_every_file_tool_refuses_acodes_home_by_its_path(ws: Workspace, site: Site, raw: str) -> None:
    path = raw.format(root=site.root, real=os.path.realpath(site.root))
    for tool, arguments in _every_tool(path):
        refusal = _refused(ws, site, tool, arguments)
        if tool == "modify_file" and "diff" in arguments:
            continue  # the diff's own header names another path: whichever refusal comes first
        assert refusal.startswith("ACODE-SBX-013 "), (tool, refusal)
        assert f"is inside acode's home {site.home}" in refusal


@pytest.mark.parametrize("path", VIA_LINKS)
def test_a_symlink_inside_the_workspace_does_not_lead_into_the_home(ws: Workspace, site: Site, path: str) -> None:
    _links(site)
    for tool, arguments in _every_tool(path):
        refusal = _refused(ws, site, tool, arguments)
        if tool == "modify_file" and "diff" in arguments:
            continue
        if path == "project/deep/new":
            assert refusal.startswith("ACODE-SBX-003 ")  # a dangling link: nothing there, nothing made
            continue
        assert refusal.startswith("ACODE-SBX-013 "), (tool, path, refusal)


def test_the_tree_tools_leave_the_home_out_and_the_rest_of_the_workspace_works(ws: Workspace, site: Site) -> None:
    (site.root / "notes.txt").write_text(f"a note that mentions {SECRET[:4]}\n")
    listed, error = call(ws, "list_directory", path=".")
    assert error is None and listed.splitlines() == ["notes.txt", "project/"]
    listed, error = call(ws, "list_directory", path=".", depth=5)
    assert error is None and listed.splitlines() == ["notes.txt", "project/", "project/main.py"]
    found, error = call(ws, "search_code", query="HOME", path=".")
    assert error is None and "notes.txt:1:" in found and SECRET not in found and ".acode" not in found
    # a link to the home is listed as the link it is, never walked into
    os.symlink(".acode", site.root / "h")
    listed, _ = call(ws, "list_directory", path=".")
    assert "h@" in listed.splitlines() and "acode.db" not in listed
    read, error = call(ws, "read_file", path="project/main.py")
    assert error is None and "print('hi')" in read
    written, error = call(ws, "write_file", path="project/new.py", content="x = 1\n")
    assert error is None and (site.root / "project" / "new.py").read_text() == "x = 1\n"


def test_a_home_named_through_a_symlink_is_refused_where_it_really_is(tmp_path: Path) -> None:
    site = Site(tmp_path)
    os.symlink(site.home, tmp_path / "home-link")  # ACODE_HOME=/…/home-link: the same directory
    with Workspace(str(site.root), hidden=(str(tmp_path / "home-link"),)) as workspace:
        output, error = call(workspace, "read_file", path=".acode/config.yml")
        assert error is not None and error.code == "ACODE-SBX-013" and SECRET not in output
        listed, _ = call(workspace, "list_directory", path=".")
        assert ".acode" not in listed


def test_without_a_home_inside_the_workspace_nothing_changes(tmp_path: Path) -> None:
    site = Site(tmp_path)
    with Workspace(str(site.root), hidden=(str(tmp_path / "elsewhere"),)) as workspace:
        output, error = call(workspace, "read_file", path=".acode/config.yml")
        assert error is None and SECRET in output


def test_the_sandboxs_journal_hands_the_home_to_every_tool_call(site: Site) -> None:
    request = RunTool(key="s:e1:1", session_id="s", tool="read_file", arguments={"path": ".acode/config.yml"},
                      workspace=str(site.root))
    with ToolCall(request, hidden=(str(site.home),)) as tool_call:
        result = tool_call.run(Terminal())
    assert result.error is not None and result.error.code == "ACODE-SBX-013"

    sent: list[Any] = []
    journal = Journal(lambda message: sent.append(message) or None, Terminal(),  # type: ignore[func-returns-value]
                      hidden=(str(site.home),))
    held = RunTool(key="s:e1:2", session_id="s", tool="read_file", arguments={"path": ".acode/config.yml"},
                   workspace=str(site.root), held=True)
    result, _ = journal.run_call(held)
    assert result.error is not None and result.error.code == "ACODE-SBX-013" and SECRET not in str(result)


def test_a_workspace_inside_acodes_home_keeps_its_own_files_but_the_home_itself_is_refused(tmp_path: Path) -> None:
    site = Site(tmp_path)
    project = site.home / "project"
    project.mkdir()
    (project / "a.py").write_text("a = 1\n")
    with Workspace(str(project), hidden=(str(site.home),)) as workspace:  # acode's own tests' layout
        output, error = call(workspace, "read_file", path="a.py")
        assert error is None and "a = 1" in output
        _, error = call(workspace, "read_file", path="../config.yml")
        assert error is not None and error.code == "ACODE-SBX-002"  # outside the workspace, as ever
    with Workspace(str(site.home), hidden=(str(site.home),)) as workspace:  # -w ~/.acode: all of it is the home
        output, error = call(workspace, "read_file", path="config.yml")
        assert error is not None and error.code == "ACODE-SBX-013" and SECRET not in output


def test_the_running_sandbox_refuses_its_own_home_inside_the_workspace(home: Path) -> None:
    """The real sandbox actor, its home inside the workspace (``acode run -w ~``)."""
    from protocol import codec
    from protocol.messages import ToolDone
    from tests.harness import Harness

    workspace = home / "user"
    harness = Harness(workspace / ".acode")
    try:
        harness.start("broker")
        harness.start("persistence", module="tests.actors.sandbox.journal_actor")
        harness.start("sandbox")
        (workspace / ".acode" / "config.yml").write_text(f"# {SECRET}\n")
        (workspace / "main.py").write_text("print('hi')\n")
        client = harness.client()

        def run(tool: str, key: str, **arguments: Any) -> Any:
            body = RunTool(key=key, session_id="s1", workspace=str(workspace), tool=tool, arguments=arguments)
            reply = client.call("sandbox", body, timeout=15.0, decoder=codec.SANDBOX_REPLY)
            assert isinstance(reply, ToolDone)
            return reply.result

        read = run("read_file", "k1", path=".acode/config.yml")
        assert read.error is not None and read.error.code == "ACODE-SBX-013" and SECRET not in str(read)
        wrote = run("write_file", "k2", path=".acode/config.yml", content="autonomy: 3\n")
        assert wrote.error is not None and wrote.error.code == "ACODE-SBX-013"
        assert (workspace / ".acode" / "config.yml").read_text() == f"# {SECRET}\n"
        listed = run("list_directory", "k3", path=".", depth=3)
        assert listed.ok and "main.py" in listed.output and ".acode" not in listed.output
    finally:
        harness.close()


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_the_sessions_baseline_and_its_diff_leave_the_home_out(tmp_path: Path, kind: str) -> None:
    import subprocess

    from actors.sandbox.tools.baseline import Baselines

    site = Site(tmp_path)
    if kind == "git":
        subprocess.run(["git", "init", "-q", str(site.root)], check=True)
    baselines = Baselines(tmp_path / "elsewhere" / "baselines")

    def tool(name: str) -> Any:
        request = RunTool(key=f"k-{name}", session_id="s1", workspace=str(site.root), tool=name, arguments={})
        with ToolCall(request, hidden=(str(site.home),)) as tool_call:
            return tool_call.run(Terminal(), baselines)

    assert tool("baseline_workspace").ok
    (site.home / "config.yml").write_text("autonomy: 3\n")
    (site.home / "logs" / "planner.log").write_text(SECRET + "\n")
    (site.root / "project" / "main.py").write_text("print('changed')\n")
    diff = tool("diff_workspace")
    assert diff.ok and "project/main.py" in diff.output and "+print('changed')" in diff.output
    assert ".acode" not in diff.output and SECRET not in diff.output and "autonomy" not in diff.output
