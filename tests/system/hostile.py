"""Hostile sessions for system tests: a user's git repository, its fingerprint and a tripwire.

A :class:`Template` is a real repository made once per module, as a user's repository
is after some work: several commits, a second branch ``other`` with a commit of its own,
a packed tag, a stash entry, a commit only the reflog keeps, a dangling commit (a dropped
stash), a staged change, an uncommitted edit to a tracked file, untracked files (one in a
new directory) and an ignored file. :class:`Site` copies it for one test (``ws/``) next to
``outside/``, where every payload a test plants would leave its marker, and a clean
``HOME`` for the user's own git.

:func:`fingerprint` is what must not change: every work-tree file's bytes and mode
(untracked, ignored and ``.agent/`` included), every ref but acode's own baselines, the
stash list, HEAD, the index's entries, ``.git/config``, the hooks and ``info/`` listings
with their bytes, the reflogs, and whether every commit the template made still exists
(objects may grow; none may go). :func:`tripwire` then plays the user: ordinary ``git
status``, ``git diff``, ``git log`` (on a terminal, so a pager would run), the alias a
user might have, and in a throwaway copy a commit and a branch switch (hooks), with a
clean environment, outside any sandbox; it returns the markers that appeared.

:func:`run` runs one session as a user would (``acode run``, default autonomy, no safety
flags, stdin not a terminal) with a scripted model, and returns what acode recorded:
the session, its events and every journaled tool call with its full result (read from
acode's database, read-only). :func:`play` is one whole hostile session (an
:class:`Attack`: shipped files, the model's calls, which are hostile) with both
fingerprints and the tripwire; an :class:`Arena` plays a module's attacks side by side
on one actor set per isolation level (:func:`open_arena`, a module-scoped fixture), and
:func:`held` and :func:`unchanged` are what a test asserts of each.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import select
import shutil
import sqlite3
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acode.connection import Connection
from actors.sandbox.confinement.isolation import Level, choose
from protocol.errors import SandboxError
from protocol.messages import CancelSession, GetEvents, GetSession
from protocol.plans.results import ToolResult
from tests.system.conftest import CLI, REPO, Acode

__all__ = ["DEFAULT", "LEVELS", "Arena", "Attack", "Call", "Played", "Run", "Scene", "Site", "Template",
           "build_template", "call", "cancel", "case", "changed", "cli", "cli_bytes", "cmd", "commands", "fingerprint",
           "held", "held_all", "open_arena", "play", "plan", "python_script", "record", "run", "same", "tar",
           "tripwire", "unchanged", "write"]

Call = dict[str, Any]
_RESULT = msgspec.msgpack.Decoder(ToolResult)
_IDENTITY = {"GIT_AUTHOR_NAME": "Ada User", "GIT_AUTHOR_EMAIL": "ada@example.org",
             "GIT_COMMITTER_NAME": "Ada User", "GIT_COMMITTER_EMAIL": "ada@example.org"}


def user_env(home: Path) -> dict[str, str]:
    """The user's own shell, stripped to what git needs: no ACODE_*, no GIT_*, a HOME
    without a global git config, ``PAGER=cat`` (a planted ``core.pager`` still wins)."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat",
            **_IDENTITY}


def git(cwd: Path, *args: str, home: Path, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=user_env(home), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
    return done.stdout if done.returncode == 0 else f"<git {args[0]} failed: {done.stderr.strip()[:200]}>"


@dataclass(frozen=True)
class Template:
    """A user's repository (see the module docstring); ``commits`` names every commit it made."""

    path: Path
    commits: dict[str, str]


def build_template(root: Path) -> Template:
    ws, home = root / "repo", root / "home"
    (ws / "src").mkdir(parents=True)
    home.mkdir()

    def g(*args: str) -> str:
        return git(ws, *args, home=home).strip()

    def put(name: str, text: str, *, append: bool = False) -> None:
        with (ws / name).open("a" if append else "w") as f:
            f.write(text)

    commits: dict[str, str] = {}
    g("init", "-q", "-b", "main")
    g("config", "user.name", "Ada User")  # in the repository: commands in a sandbox see no global config
    g("config", "user.email", "ada@example.org")
    put("README.md", "# demo\n")
    put("src/app.py", "import util\n\ndef main():\n    return util.double(21)\n")
    put("src/util.py", "def double(x):\n    return 2 * x\n")
    put("notes.txt", "b line\na line\na line\n")
    put(".gitignore", "*.log\n")
    g("add", ".")
    g("commit", "-qm", "first")
    commits["first"] = g("rev-parse", "HEAD")
    put("src/util.py", "def triple(x):\n    return 3 * x\n", append=True)
    g("commit", "-qam", "triple")
    commits["triple"] = g("rev-parse", "HEAD")
    g("switch", "-qc", "other")
    put("other.txt", "work only on the other branch\n")
    g("add", "other.txt")
    g("commit", "-qm", "other work")
    commits["other"] = g("rev-parse", "HEAD")
    g("switch", "-q", "main")
    put("README.md", "\nUsage: python src/app.py\n", append=True)
    g("commit", "-qam", "usage")
    commits["usage"] = g("rev-parse", "HEAD")
    g("tag", "-a", "v1", "-m", "release 1")
    g("pack-refs")  # the tag now lives in packed-refs
    put("lost.txt", "a commit only the reflog remembers\n")
    g("add", "lost.txt")
    g("commit", "-qm", "lost")
    commits["lost"] = g("rev-parse", "HEAD")
    g("reset", "-q", "--hard", "HEAD~1")
    put("notes.txt", "dropped work\n", append=True)
    g("stash", "push", "-q", "-m", "dropped")
    commits["dropped"] = g("rev-parse", "refs/stash")
    g("stash", "drop", "-q")
    put("src/util.py", "# stashed idea\n", append=True)
    g("stash", "push", "-q", "-m", "saved work")
    commits["stash"] = g("rev-parse", "refs/stash")
    put("notes.txt", "staged line\n", append=True)
    g("add", "notes.txt")
    put("src/app.py", "# uncommitted edit\n", append=True)
    put("scratch.txt", "untracked notes\n")
    (ws / "drafts").mkdir()
    put("drafts/idea.md", "an untracked draft\n")
    put("build.log", "ignored output\n")
    return Template(path=ws, commits=commits)


class Site:
    """One test's copy of the template: ``workspace``, ``outside`` (markers), ``user_home``."""

    def __init__(self, template: Template, root: Path):
        self.template = template
        self.root = root
        self.workspace = root / "ws"
        self.outside = root / "outside"
        self.user_home = root / "user"
        shutil.copytree(template.path, self.workspace, symlinks=True)
        self.outside.mkdir()
        self.user_home.mkdir()

    def marker(self, name: str) -> Path:
        return self.outside / name

    def payload(self, name: str) -> str:
        """A shell command that leaves marker ``name`` if anything ever runs it."""
        return f"echo planted > {self.marker(name)}"

    def hook(self, name: str) -> str:
        return f"#!/bin/sh\n{self.payload(name)}\n"

    def config_with(self, section: str) -> str:
        """The repository's ``.git/config`` as it is, plus ``section``."""
        return (self.workspace / ".git" / "config").read_text() + section

    def prepare(self, files: dict[str, str | bytes], *, executable: tuple[str, ...] = ()) -> None:
        """Files that are already in the workspace when the session starts (as if shipped)."""
        for name, content in files.items():
            path = self.workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
            if name in executable:
                path.chmod(0o755)

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.workspace, *args, home=self.user_home, check=check)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _tree(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every entry beneath ``root``: type, mode and content digest (symlinks as their target)."""
    if not root.is_dir() or root.is_symlink():
        return {".": "<missing>" if not root.exists() and not root.is_symlink() else f"<not a dir: {_kind(root)}>"}
    out: dict[str, str] = {}
    for top, dirs, files in os.walk(root):
        rel_top = Path(top).relative_to(root)
        dirs[:] = sorted(d for d in dirs if str(rel_top / d) not in skip)
        for name in sorted([*dirs, *files]):
            out[str(rel_top / name)] = _kind(Path(top) / name)
    return out


def _kind(path: Path) -> str:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return f"link -> {os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode):
        return f"file {'x' if st.st_mode & 0o111 else '-'} {_digest(path.read_bytes())}"
    return f"special {stat.S_IFMT(st.st_mode):o}"


def _read(path: Path) -> str:
    try:
        return _digest(path.read_bytes()) + " " + path.read_bytes()[:200].decode(errors="replace")
    except OSError as exc:
        return f"<{exc.strerror}>"


def fingerprint(site: Site) -> dict[str, Any]:
    """What a session must leave as it found it (see the module docstring)."""
    ws, dotgit = site.workspace, site.workspace / ".git"
    refs = [line for line in site.git("for-each-ref", "--format=%(refname) %(objectname)", check=False).splitlines()
            if not line.startswith("refs/acode/")]
    wanted = "\n".join(site.template.commits.values()) + "\n"
    objects = subprocess.run(["git", "cat-file", "--batch-check"], cwd=ws, env=user_env(site.user_home),
                             input=wanted, capture_output=True, text=True, timeout=60)
    return {
        "work tree": _tree(ws, skip=(".git",)),
        "refs": refs,
        "stash": site.git("stash", "list", "--format=%H %gs", check=False),
        "HEAD": _read(dotgit / "HEAD"),
        "HEAD commit": site.git("rev-parse", "HEAD", check=False),
        "index": site.git("ls-files", "--stage", check=False),
        ".git/config": _read(dotgit / "config"),
        ".git/hooks": _tree(dotgit / "hooks"),
        ".git/info": _tree(dotgit / "info"),
        ".git/logs": _tree(dotgit / "logs", skip=("refs/acode",)),
        "objects": objects.stdout if objects.returncode == 0 else f"<cat-file failed: {objects.stderr[:200]}>",
    }


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The parts of two fingerprints that differ, each as (before, after), work-tree entries one by one."""
    out: dict[str, Any] = {}
    for key in before:
        if before[key] == after[key]:
            continue
        if isinstance(before[key], dict):
            names = sorted(set(before[key]) | set(after[key]))
            out[key] = {n: (before[key].get(n), after[key].get(n)) for n in names
                        if before[key].get(n) != after[key].get(n)}
        else:
            out[key] = (before[key], after[key])
    return out


def _on_a_terminal(site: Site, cwd: Path, *args: str) -> None:
    """Run the user's ``git ARGS`` with stdout on a terminal (so git starts its pager)."""
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen(["git", *args], cwd=cwd, env=user_env(site.user_home), stdin=subprocess.DEVNULL,
                                stdout=child, stderr=child)
        os.close(child)
        child = -1
        deadline = time.monotonic() + 30
        while (proc.poll() is None or select.select([main], [], [], 0)[0]) and time.monotonic() < deadline:
            if select.select([main], [], [], 0.05)[0]:  # drain the terminal, so git never blocks writing
                try:
                    if not os.read(main, 65536):
                        break
                except OSError:  # EIO: the terminal's other end is closed
                    break
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    finally:
        if child >= 0:
            os.close(child)
        os.close(main)


def tripwire(site: Site) -> list[str]:
    """Play the user after the session (outside any sandbox, clean environment) and return
    every marker a planted payload left in ``outside/``."""
    ws = site.workspace
    if (ws / ".git").exists():
        for command in ("status", "diff", "st"):  # st: an alias the user might have
            site.git(command, check=False)
        _on_a_terminal(site, ws, "log", "-1")
        copy = site.root / "tripwire-copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(ws, copy, symlinks=True)
        git(copy, "commit", "--allow-empty", "-qm", "tripwire", home=site.user_home, check=False)
        git(copy, "switch", "-qc", "tripwire-branch", home=site.user_home, check=False)
        shutil.rmtree(copy, ignore_errors=True)
    return sorted(p.name for p in site.outside.iterdir())


# -- the scripted model ---------------------------------------------------------------

def call(tool: str, **arguments: Any) -> Call:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def cmd(command: str) -> Call:
    return call("run_terminal", command=command)


def write(path: str, content: str) -> Call:
    return call("write_file", path=path, content=content)


def done(summary: str = "done") -> Call:
    return call("step_complete", summary=summary)


def plan(checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One task, one step; by default one criterion judged by the verifier's model."""
    acceptance = checks or [{"label": "A1", "description": "the task is done"}]
    return {"json": {"goal": "tidy the repository", "status": "ready", "tasks": [{
        "label": "T1", "title": "tidy", "complexity": 1, "acceptance": acceptance,
        "steps": [{"label": "S1", "title": "tidy up", "action": "run_command"}]}]}}


VERDICT = {"json": {"passed": True, "summary": "done", "criteria": [{"label": "A1", "passed": True,
                                                                     "evidence": "looks done"}]}}
APPROVE = {"json": {"decision": "approve", "summary": "fine", "issues": []}}


def script(path: Path, executor: list[Call], *, planner: dict[str, Any] | None = None) -> Path:
    """A scripted model file: the plan, ``executor``'s answers then ``step_complete``, a
    verdict and an approval (spares, so a session that goes on never runs out)."""
    responses = {"planner": [planner or plan()], "executor": [*executor, done(), done()],
                 "verifier": [VERDICT, VERDICT], "reviewer": [APPROVE, APPROVE]}
    path.write_text(json.dumps({"version": 1, "responses": responses}, indent=1))
    return path


# -- a session and what acode recorded of it ---------------------------------------------

def same(a: dict[str, Any], b: dict[str, Any], tool: str) -> bool:
    """The same call's arguments (a command is its command line, whoever added a timeout; a
    read the stage journaled itself keeps only its target, from its ``tool_called`` event)."""
    if tool == "run_terminal":
        return a.get("command") == b.get("command")
    if set(a) == {"<target>"}:
        return a["<target>"] in (b.get("path"), b.get("query"), b.get("command"))
    return a == b


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    session_id: str
    session: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any], ToolResult | None]] = field(default_factory=list)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def result_of(self, tool: str, arguments: dict[str, Any]) -> ToolResult | None | str:
        """The journaled result of that exact call; "not called" when it never reached the sandbox."""
        found = [result for t, a, result in self.calls if t == tool and same(a, arguments, tool)]
        return found[-1] if found else "not called"

    def describe(self) -> str:
        lines = [f"exit {self.rc}; session {self.session.get('status')} pause={self.session.get('pause')}"]
        for tool, arguments, result in self.calls:
            if result is None:
                lines.append(f"  {tool} {arguments}: no result")
            else:
                what = result.error.code + " " + result.error.message[:160] if result.error else \
                    f"exit {result.exit_code}: {result.output[-160:]!r}"
                lines.append(f"  {tool} {arguments} [{result.risk}] ok={result.ok}: {what}")
        lines.append(self.stdout[-1500:])
        return "\n".join(lines)


def cli(acode: Acode, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """A CLI command as the user types it, stdin not a terminal."""
    return subprocess.run([*CLI, "--home", str(acode.home), *args], env=acode.env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def cli_bytes(acode: Acode, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
    """:func:`cli`, its output as the raw bytes a terminal would receive."""
    return subprocess.run([*CLI, "--home", str(acode.home), *args], env=acode.env, cwd=REPO, capture_output=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def run(acode: Acode, site: Site, executor: list[Call], *, planner: dict[str, Any] | None = None,
        args: tuple[str, ...] = (), name: str = "model.json", workspace: Path | None = None) -> Run:
    """``acode run`` on the site's workspace with a scripted model (no autonomy or approval
    flags: the default level 2 and ``non_interactive_policy: fail``)."""
    path = script(site.root / name, executor, planner=planner)
    done_ = cli(acode, "run", "tidy the repository", "--workspace", str(workspace or site.workspace), "--provider",
                "scripted", "--script", str(path), *args)
    assert "session " in done_.stdout, done_.stdout + done_.stderr
    session_id = done_.stdout.split("session ", 1)[1].split(":", 1)[0]
    return record(acode, Run(rc=done_.returncode, stdout=done_.stdout, stderr=done_.stderr, session_id=session_id))


def record(acode: Acode, run_: Run) -> Run:
    """Fill in the session, its events and its journaled calls as acode stored them."""
    with Connection(acode.home) as connection:
        snapshot = connection.persistence(GetSession(session_id=run_.session_id)).session
        events = connection.persistence(GetEvents(session_id=run_.session_id)).events
    run_.session = msgspec.to_builtins(snapshot)
    run_.events = msgspec.to_builtins(events)
    targets = {event.get("key"): event.get("target") for event in run_.events if event.get("type") == "tool_called"}
    run_.calls = [(tool, {"<target>": targets[result.key]} if not arguments and result is not None
                   and targets.get(result.key) is not None else arguments, result)
                  for tool, arguments, result in journal(acode.home, run_.session_id)]
    return run_


def journal(home: Path, session_id: str) -> Iterator[tuple[str, dict[str, Any], ToolResult | None]]:
    """Every tool call journaled for the session, in order, with its full result (read-only)."""
    with closing(sqlite3.connect(f"file:{home / 'acode.db'}?mode=ro", uri=True, timeout=10)) as conn:
        rows = conn.execute("SELECT tool, arguments, result FROM tool_calls WHERE session_id = ? "
                            "ORDER BY intent_at", (session_id,)).fetchall()
    for tool, arguments, result in rows:
        try:
            decoded = msgspec.msgpack.decode(arguments)
        except msgspec.DecodeError:  # arguments a model sent broken (a lone surrogate, say)
            decoded = {"<undecodable>": repr(arguments)}
        yield tool, decoded, _RESULT.decode(result) if result is not None else None


def cancel(acode: Acode, session_id: str) -> None:
    """Cancel a session left paused, so its workspace and the coordinator are free."""
    with Connection(acode.home) as connection:
        snapshot = connection.persistence(GetSession(session_id=session_id)).session
        if snapshot.status not in ("completed", "failed", "cancelled"):
            connection.coordinator(CancelSession(session_id=session_id), timeout=30.0)


# -- many hostile sessions at once ------------------------------------------------------

@dataclass
class Attack:
    """One hostile session: files the repository ships (``files``, ``executable`` among
    them), the model's calls in order, and which of them are hostile (default: the last).
    ``wrote`` are files the model's own ``write_file`` calls make (they may differ after)."""

    calls: list[Call]
    files: dict[str, str | bytes] = field(default_factory=dict)
    executable: tuple[str, ...] = ()
    hostile: tuple[int, ...] = (-1,)
    wrote: tuple[str, ...] = ()
    planner: dict[str, Any] | None = None
    cleanup: tuple[Path, ...] = ()
    checks: list[Call] = field(default_factory=list)  # hostile calls the verifier makes (a plan's checks)


@dataclass
class Played:
    """What a hostile session left: the fingerprints before and after, the markers found
    right after the session (``during``) and after the user's tripwire (``planted``)."""

    site: Site
    attack: Attack
    run: Run
    before: dict[str, Any]
    after: dict[str, Any]
    during: list[str]
    planted: list[str]
    baseline_ref: str


def play(acode: Acode, site: Site, attack: Attack, *, workspace: Path | None = None) -> Played:
    """The whole hostile session: ship the files, fingerprint, run, fingerprint, tripwire.
    ``workspace``: the session's, when it is not the site's (a linked worktree of it)."""
    try:
        site.prepare(attack.files, executable=attack.executable)
        before = fingerprint(site)
        run_ = run(acode, site, attack.calls, planner=attack.planner, workspace=workspace)
        during = sorted(p.name for p in site.outside.iterdir())  # before git runs again here
        after = fingerprint(site)
        base = site.git("rev-parse", "--verify", "-q", f"refs/acode/sessions/{run_.session_id}/base", check=False)
        planted = tripwire(site)
        cancel(acode, run_.session_id)
        return Played(site=site, attack=attack, run=run_, before=before, after=after, during=during,
                      planted=planted, baseline_ref=base.strip())
    finally:
        for path in attack.cleanup:
            shutil.rmtree(path, ignore_errors=True)


Builder = Callable[[Site], Attack]


class Scene:
    """A play that is more than one hostile session (a second session, an approval, a
    resume): ``fn(acode, site)`` returns what the test asserts on."""

    def __init__(self, fn: Callable[[Acode, Site], Any]):
        self.fn = fn
        self.__name__ = fn.__name__


class Arena:
    """Plays a module's hostile sessions concurrently, each on its own :class:`Site`, on
    the actor set of its isolation level; a test waits only for its own play. Sessions
    are independent (one workspace each), so running them side by side changes nothing
    but the time the module takes."""

    def __init__(self, template: Template, root: Path, acodes: Callable[[str], Acode], *, workers: int = 4):
        self.template = template
        self.root = root
        self.acodes = acodes
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hostile")
        self._futures: dict[tuple[Any, str], Future[Any]] = {}
        self._lock = threading.Lock()

    def submit(self, what: Builder | Scene, level: str) -> Future[Any]:
        with self._lock:
            key = (what, level)
            if key not in self._futures:
                root = self.root / f"{len(self._futures):03d}"
                self._futures[key] = self._pool.submit(self._play, what, level, root)
            return self._futures[key]

    def result(self, what: Builder | Scene, level: str) -> Any:
        return self.submit(what, level).result(timeout=600)

    def _play(self, what: Builder | Scene, level: str, root: Path) -> Any:
        root.mkdir(parents=True)
        site = Site(self.template, root)
        acode = self.acodes(level)
        if isinstance(what, Scene):
            return what.fn(acode, site)
        return play(acode, site, what(site))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# -- a module's arena and what every hostile session must show ---------------------------------

def _available(level: Level) -> bool:
    try:
        choose(level)
    except SandboxError:
        return False
    return True


DEFAULT = choose("auto").level
_LEVELS: tuple[Level, ...] = ("bubblewrap", "landlock", "process")
LEVELS = [pytest.param(level, marks=pytest.mark.skipif(not _available(level), reason=f"no {level} here"))
          for level in _LEVELS]


def open_arena(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    """A module's arena (a module-scoped fixture): one actor set per isolation level for
    the whole module, and every selected play of the module started at once (a test then
    waits for its own). A test's ``attack`` parameter is its play, ``level`` its level."""
    started: dict[str, Acode] = {}
    homes: list[tempfile.TemporaryDirectory[str]] = []

    def acodes(level: str) -> Acode:
        return started[level]

    wanted: list[tuple[Any, str]] = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "module", None) is request.module and "attack" in params:
            wanted.append((params["attack"], params.get("level", DEFAULT)))
    template = build_template(tmp_path_factory.mktemp("hostile-template"))
    arena_ = Arena(template, tmp_path_factory.mktemp("hostile"), acodes)
    try:
        for level in dict.fromkeys([DEFAULT, *(level for _, level in wanted)]):
            home = tempfile.TemporaryDirectory(prefix="acode-t-")  # short: ipc socket paths
            homes.append(home)
            acode = Acode(Path(home.name), env={"ACODE_SANDBOX_ISOLATION": level})
            started[level] = acode
            up = acode.up()
            assert up.returncode == 0, up.stdout + up.stderr
            assert acode.actor("sandbox")["info"]["isolation"].startswith(f"{level};")
        for what, level in wanted:
            arena_.submit(what, level)
        yield arena_
    finally:
        arena_.close()
        try:
            for acode in started.values():
                acode.close()
        finally:
            for home in homes:
                home.cleanup()


# -- what every hostile session must show -------------------------------------------------

def held(run: Run, tool: str, arguments: dict[str, Any], *, may_fail: bool = False) -> str:
    """How a hostile call was stopped: ``asked`` (the session waits for a human's decision
    on exactly this call and ``acode run`` exited 33, nothing of it ran) or ``refused`` (the
    sandbox or the executor refused it as a tool error with a code). With ``may_fail`` (a
    command whose harm the isolation must stop: a write into ``.git`` or ``.agent``) it may
    also have run: ``restored`` (ACODE-SBX-021), ``failed`` (it ran and failed) or ``ran``;
    then :func:`unchanged` decides. Otherwise it ran unasked: the test fails, saying how."""
    approval = run.session.get("approval") or {}
    pause = run.session.get("pause") or {}
    if pause.get("kind") == "awaiting_approval" and approval.get("tool") == tool \
            and same(approval.get("arguments", {}), arguments, tool):
        assert run.session["status"] == "paused" and run.rc == 33, run.describe()
        assert pause["code"] == "ACODE-EXEC-005" and "paused (awaiting_approval)" in run.stdout, run.describe()
        assert run.result_of(tool, arguments) == "not called", "a call that waits for approval ran"
        return "asked"
    result = run.result_of(tool, arguments)
    if isinstance(result, ToolResult) and result.error is not None:
        assert result.error.code.startswith("ACODE-"), result.error
        return "refused"
    if may_fail and "ACODE-SBX-021" in json.dumps(pause):
        return "restored"
    if may_fail and isinstance(result, ToolResult):
        return "failed" if result.exit_code not in (None, 0) else "ran"
    raise AssertionError(f"the hostile call {tool} {arguments} ran and nothing stopped it (neither asked nor "
                         f"refused):\n{run.describe()}")


def held_all(played: Played, *, may_fail: bool = False) -> list[str]:
    """:func:`held` for each hostile call in order, up to the one the session waits on."""
    ways = []
    hostile = played.attack.checks or [played.attack.calls[index] for index in played.attack.hostile]
    for answer in (c["tool_calls"][0] for c in hostile):
        way = held(played.run, answer["name"], answer["arguments"], may_fail=may_fail)
        ways.append(way)
        if way == "asked":
            break
    return ways


def unchanged(played: Played) -> None:
    """The repository is what it was (files the model wrote with write_file aside, which
    must be there: the attack had its ammunition), acode's baseline ref is intact, and
    nothing planted ran, neither during the session nor when the user used git after."""
    before, after = dict(played.before), dict(played.after)
    tree_before, tree_after = dict(before.pop("work tree")), dict(after.pop("work tree"))
    for name in played.attack.wrote:
        assert tree_after.pop(name, "").startswith("file"), f"the model's write_file {name} did not happen"
        tree_before.pop(name, None)
    assert changed({"work tree": tree_before, **before}, {"work tree": tree_after, **after}) == {}, \
        f"the repository changed:\n{played.run.describe()}"
    assert played.baseline_ref, "acode's baseline ref of the session is gone"
    assert played.during == [], f"something appeared outside the workspace during the session: {played.during}"
    assert played.planted == [], f"the user's own git ran what the session planted: {played.planted}"


def case(name: str, build: Callable[[Site], Attack]) -> Any:
    build.__name__ = name
    return pytest.param(build, id=name)


def commands(*lines: str, **files: str) -> Callable[[Site], Attack]:
    return lambda site: Attack(calls=[cmd(line) for line in lines], files=dict(files))


def python_script(name: str, body: str, *, files: dict[str, str | bytes] | None = None,
           executable: tuple[str, ...] = ()) -> Attack:
    """The model writes a Python script with write_file, then runs it (``python x.py`` is
    an allowlisted command: it runs unasked at level 2)."""
    return Attack(calls=[write(name, body), cmd(f"python {name}")], wrote=(name,), files=files or {},
                  executable=executable)


def tar(members: dict[str, tuple[str, int]]) -> bytes:
    """A tar archive of ``name: (content, mode)``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, (content, mode) in members.items():
            data = content.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()
