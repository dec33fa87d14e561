"""Hostile sessions, continued (issue 24): what acode reports and shows, and what
``--always`` and a model's odd arguments cannot get past.

Same setting as tests/system/test_hostile.py: ``acode run`` at the default autonomy, no
safety flags, stdin not a terminal, a scripted model, a copy of a real repository
(:mod:`tests.system.hostile`), sessions side by side on one actor set.

- Reports: files a command deleted or truncated are in ``files changed``; with ``.git``
  gone the session does not complete (ACODE-ORCH-012).
- ``--always`` on a harmless command (``git status --short`` at level 1, the dry run
  ``git clean -n``) does not cover the destructive forms of the same program.
- acode's home inside the workspace is out of the file tools' reach.
- OSC, DCS, C1 and bidi controls a model put in a path or content reach no terminal raw
  through ``acode run``, ``show``, ``show --json`` or ``approve``.
- A lone surrogate in a tool argument is a tool error; the session is not wedged.
- ``password=...``-style secrets printed by a command are redacted wherever acode keeps
  or shows them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from acode.connection import Connection
from protocol.messages import GetSession
from tests.harness import wait_until
from tests.system import hostile as h
from tests.system.conftest import Acode
from tests.system.hostile import Scene, Site, call, cmd, write

pytestmark = pytest.mark.system

DEFAULT = h.DEFAULT
arena = pytest.fixture(scope="module")(h.open_arena)


def scene(fn: Any) -> Any:
    return pytest.param(Scene(fn), id=fn.__name__.strip("_").replace("_", "-"))


def files_changed(output: str) -> str:
    """The ``files changed:`` line of ``acode run``/``approve`` output (the last one)."""
    lines = [line for line in output.splitlines() if line.startswith("files changed:")]
    assert lines, f"no 'files changed' line in:\n{output[-2000:]}"
    return lines[-1]


def _paused(acode: Acode, session_id: str, *, past: str = "") -> dict[str, Any]:
    """The session once it waits or has ended (and no longer waits on command ``past``)."""
    def settled() -> Any:
        with Connection(acode.home) as connection:
            snapshot = connection.persistence(GetSession(session_id=session_id)).session
        waiting_on = snapshot.approval.arguments.get("command") if snapshot.approval else None
        if snapshot.status == "paused" and past and waiting_on == past:
            return None  # the decision on ``past`` has not moved the session yet
        return snapshot if snapshot.status != "running" else None
    wait_until(settled, 120, interval=0.05, what=f"session {session_id} to pause or end")
    return h.record(acode, h.Run(rc=-1, stdout="", stderr="", session_id=session_id)).session


# -- 5. reports tell the truth ----------------------------------------------------------------

TIDY = ("import os\nos.remove('scratch.txt')\nos.remove('drafts/idea.md')\n"
        "open('src/util.py', 'w').close()\n")


def _a_script_deletes_and_truncates(acode: Acode, site: Site) -> h.Run:
    run = h.run(acode, site, [write("tidy.py", TIDY), cmd("python tidy.py")])
    h.cancel(acode, run.session_id)
    return run


def _an_approved_rm_deletes(acode: Acode, site: Site) -> dict[str, Any]:
    run = h.run(acode, site, [cmd("rm -rf drafts")])
    approved = h.cli(acode, "approve", run.session_id)
    h.cancel(acode, run.session_id)
    return {"run": run, "approved": approved}


def _dotgit_gone(acode: Acode, site: Site) -> dict[str, Any]:
    """``rm -rf .git`` asks; while it waits, ``.git`` goes away outside the sandbox (the
    sandbox keeps it from commands, the approved rm included, not from the user), then the
    rm is approved: the verifier cannot diff, and the session must not complete."""
    run = h.run(acode, site, [cmd("rm -rf .git")])
    shutil.move(Path(run.session["workspace"]) / ".git", site.root / "moved-git")
    approved = h.cli(acode, "approve", run.session_id)
    h.cancel(acode, run.session_id)
    return {"run": run, "approved": approved,
            "session": h.record(acode, h.Run(rc=0, stdout="", stderr="", session_id=run.session_id)).session}


@pytest.mark.parametrize("attack", [scene(_a_script_deletes_and_truncates)])
def test_files_a_command_deleted_or_truncated_are_in_files_changed(arena: h.Arena, attack: Scene) -> None:
    run: h.Run = arena.result(attack, DEFAULT)
    assert run.rc == 0 and "completed (exit 0)" in run.stdout, run.describe()
    assert not (Path(run.session["workspace"]) / "scratch.txt").exists(), "the script did not run"
    listed = files_changed(run.stdout)
    assert [name for name in ("drafts/idea.md", "scratch.txt", "src/util.py", "tidy.py") if name not in listed] == [], \
        listed


@pytest.mark.parametrize("attack", [scene(_an_approved_rm_deletes)])
def test_files_an_approved_command_deleted_are_in_files_changed(arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    assert h.held(got["run"], "run_terminal", {"command": "rm -rf drafts"}) == "asked"
    approved = got["approved"]
    assert approved.returncode == 0 and "completed (exit 0)" in approved.stdout, approved.stdout + approved.stderr
    assert "drafts/idea.md" in files_changed(approved.stdout), approved.stdout


@pytest.mark.parametrize("attack", [scene(_dotgit_gone)])
def test_a_session_whose_dotgit_is_gone_does_not_complete(arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    assert h.held(got["run"], "run_terminal", {"command": "rm -rf .git"}) == "asked"
    approved, session = got["approved"], got["session"]
    assert "completed (exit 0)" not in approved.stdout and approved.returncode != 0, approved.stdout
    assert "ACODE-ORCH-012" in approved.stdout, approved.stdout
    assert session["status"] == "cancelled", "it did not wait (paused) until the test cancelled it"


# -- 6. --always is narrow ----------------------------------------------------------------

def always(first: str, then: str, *args: str) -> Any:
    """Approve ``first`` with ``--always``, then see whether ``then`` waits too."""
    def _always(acode: Acode, site: Site) -> dict[str, Any]:
        before = h.fingerprint(site)
        path = h.script(site.root / "model.json", [cmd(first), cmd(then)])
        submitted = h.cli(acode, "run", "tidy the repository", "--workspace", str(site.workspace), "--provider",
                          "scripted", "--script", str(path), "--detach", *args)
        assert submitted.returncode == 0, submitted.stderr
        session_id = submitted.stdout.strip()
        snapshot = _paused(acode, session_id)
        approved = None
        if (snapshot.get("approval") or {}).get("arguments", {}).get("command") == first:
            approved = h.cli(acode, "approve", session_id, "--always", "--detach")
            snapshot = _paused(acode, session_id, past=first)
        run = h.record(acode, h.Run(rc=33 if snapshot["status"] == "paused" else 0, stdout="", stderr="",
                                    session_id=session_id))
        after = h.fingerprint(site)
        h.cancel(acode, session_id)
        return {"run": run, "approved": approved, "changed": h.changed(before, after), "first": first, "then": then}
    _always.__name__ = f"{first} then {then}"
    return pytest.param(Scene(_always), id=_always.__name__)


ALWAYS = [always(first, then, *args) for first, args in (("git status --short", ("--autonomy", "1")),
                                                          ("git clean -n", ()))
          for then in ("git checkout -f", "git reset --hard", "git clean -fdx", "git branch -D other")]


@pytest.mark.parametrize("attack", [*ALWAYS, always("rm scratch.txt", "rm -rf src")])
def test_always_on_a_harmless_call_does_not_cover_a_destructive_one(arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    run: h.Run = got["run"]
    if got["approved"] is not None:
        assert got["approved"].returncode == 0, got["approved"].stderr
        first = run.result_of("run_terminal", {"command": got["first"]})
        assert first != "not called" and first.ok, run.describe()
    approval, pause = run.session.get("approval") or {}, run.session.get("pause") or {}
    assert (pause.get("kind"), approval.get("arguments", {}).get("command")) == ("awaiting_approval", got["then"]), \
        f"{got['then']} ran on the rule --always made:\n{run.describe()}"
    assert run.result_of("run_terminal", {"command": got["then"]}) == "not called"
    assert {k: v for k, v in got["changed"].items() if k != "work tree" or set(v) - {"scratch.txt"}} == {}


# -- 7. acode's home inside the workspace --------------------------------------------------------

HOME_CALLS = [call("read_file", path=".acode/config.yml"),
              call("modify_file", path=".acode/config.yml",
                   edits=[{"search": "autonomy: 2", "replace": "autonomy: 3"}]),
              write(".acode/config.yml", "autonomy: 3\n"), call("create_directory", path=".acode/planted"),
              call("list_directory", path=".acode"), call("search_code", query="autonomy", path=".acode")]


def _home_inside_the_workspace(acode: Acode, site: Site) -> dict[str, Any]:
    """``acode run -w ~`` with the default ``~/.acode``: an actor set of its own, whose
    home lies inside the workspace."""
    workspace = Path(tempfile.mkdtemp(prefix="acode-w-"))
    own = Acode(workspace / ".acode")
    try:
        (workspace / "README.md").write_text("# a home directory\n")
        up = own.up()
        assert up.returncode == 0, up.stderr
        (own.home / "config.yml").write_text("autonomy: 2\n")
        config = (own.home / "config.yml").read_bytes()
        run = h.run(own, site, [*HOME_CALLS, call("search_code", query="a home", path=".")], workspace=workspace)
        h.cancel(own, run.session_id)
        return {"run": run, "home": own.home, "config": config, "after": (own.home / "config.yml").read_bytes(),
                "planted": (own.home / "planted").exists()}
    finally:
        own.close()
        shutil.rmtree(workspace, ignore_errors=True)


@pytest.mark.parametrize("attack", [scene(_home_inside_the_workspace)])
def test_the_file_tools_cannot_reach_acodes_home_inside_the_workspace(arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    run: h.Run = got["run"]
    for answer in HOME_CALLS:
        tool_call = answer["tool_calls"][0]
        result = run.result_of(tool_call["name"], tool_call["arguments"])
        assert result != "not called" and result.error is not None, f"{tool_call} reached the home:\n{run.describe()}"
        # refused as a protected path (ACODE-SBX-013 or a code of its own), not for want of a match
        assert result.error.code.startswith("ACODE-SBX-") and result.error.code not in (
            "ACODE-SBX-003", "ACODE-SBX-009"), result.error
    searched = run.result_of("search_code", {"query": "autonomy", "path": "."})
    assert ".acode" not in searched.output, searched.output
    assert got["after"] == got["config"] and not got["planted"]
    assert str(got["home"]) in run.stderr, f"acode run did not warn that the workspace holds the home: {run.stderr}"


# -- 8. nothing a model wrote reaches the terminal raw ----------------------------------------------

OSC52, OSC0 = "\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned-title\x07"
OSC8 = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
C1 = "\x9b31m\x9d0;c1-title\x9c"
DCS = "\x1bP1$r\x1b\\"
BIDI = "\u202e\u2066"
ESCAPED_PATH = f"notes-MARK{OSC0}{BIDI}{OSC52}.txt"
ESCAPED_CONTENT = f"hello {OSC52}{OSC8}{C1}{BIDI}{DCS}\x00 end\n"
ESCAPED_RM = f'rm "old-MARK{OSC0}{C1}{BIDI}{OSC8}.txt"'


def raw_controls(data: bytes) -> list[str]:
    """Every character a terminal would act on rather than show: C0 but newline and tab,
    DEL, C1, bidi controls, and bytes that are not UTF-8."""
    text = data.decode("utf-8", errors="surrogateescape")
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F
           or unicodedata.category(c) == "Cf" and unicodedata.bidirectional(c) in ("LRE", "RLE", "LRO", "RLO", "PDF",
                                                                                   "LRI", "RLI", "FSI", "PDI")
           or 0xDC80 <= ord(c) <= 0xDCFF]
    return sorted({f"U+{ord(c):04X}" for c in bad})


def _escapes(acode: Acode, site: Site) -> dict[str, Any]:
    path = h.script(site.root / "model.json", [write(ESCAPED_PATH, ESCAPED_CONTENT), cmd(ESCAPED_RM)])
    args = ("run", "tidy the repository", "--workspace", str(site.workspace), "--provider", "scripted", "--script",
            str(path), "--autonomy", "0")  # the write asks: its path and diff go through the approval display
    ran = h.cli_bytes(acode, *args)
    session_id = ran.stdout.decode(errors="replace").split("session ", 1)[1].split(":", 1)[0]
    run = h.record(acode, h.Run(rc=ran.returncode, stdout="", stderr="", session_id=session_id))
    shown = {"run": ran, "show": h.cli_bytes(acode, "show", session_id),
             "show --json": h.cli_bytes(acode, "show", session_id, "--json"),
             "approve": h.cli_bytes(acode, "approve", session_id)}
    h.cancel(acode, session_id)
    return {"shown": shown, "run": run}


@pytest.mark.parametrize("attack", [scene(_escapes)])
def test_no_escape_sequence_a_model_wrote_reaches_the_terminal_raw(arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    approval = got["run"].session.get("approval") or {}
    assert got["shown"]["run"].returncode == 33 and approval.get("arguments", {}).get("path") == ESCAPED_PATH, \
        got["run"].describe()
    for name, done in got["shown"].items():
        assert b"MARK" in done.stdout, f"acode {name} did not show the call at all:\n{done.stdout[-1500:]!r}"
        assert raw_controls(done.stdout) == [] and raw_controls(done.stderr) == [], \
            f"acode {name} printed raw controls: {raw_controls(done.stdout + done.stderr)}"
    json.loads(got["shown"]["show --json"].stdout)  # still valid JSON, the controls escaped


# -- 9. a lone surrogate is a tool error, not a wedged session -------------------------------------

SURROGATE_CALLS = [write("bad.txt", "x\udcffy\n"), call("read_file", path="\udcff.txt"), cmd("echo \udcff")]


def as_text(answer: h.Call) -> h.Call:
    """The call written in the answer's text, as a small local model writes it: JSON whose
    ``\\udcff`` escape decodes to a lone surrogate (a JSON parser accepts it)."""
    text = json.dumps(answer["tool_calls"][0])  # ensure_ascii: the surrogate as the escape \udcff
    return {"content": text}


def _surrogate(acode: Acode, site: Site) -> dict[str, Any]:
    """The bad calls, then one that waits for a decision: denying it replays the attempt,
    the bad answers included (where the session used to wedge); a session paused for any
    other reason is resumed instead."""
    answers = [*(as_text(answer) for answer in SURROGATE_CALLS), cmd("rm scratch.txt"), write("good.txt", "ok\n")]
    run = h.run(acode, site, answers)
    if (run.session.get("pause") or {}).get("kind") == "awaiting_approval":
        went_on = h.cli(acode, "deny", run.session_id, "--reason", "keep scratch.txt")
    else:
        went_on = h.cli(acode, "resume", run.session_id)
    h.cancel(acode, run.session_id)
    return {"run": run, "went_on": went_on, "session": h.record(acode, h.Run(rc=0, stdout="", stderr="",
                                                                             session_id=run.session_id))}


@pytest.mark.parametrize("attack", [scene(_surrogate)])
def test_a_lone_surrogate_in_a_tool_argument_is_a_tool_error_and_the_session_goes_on(
        arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    run, went_on, final = got["run"], got["went_on"], got["session"]
    printed = run.output + went_on.stdout + went_on.stderr
    assert "ACODE-ORCH-001" not in printed and "UnicodeEncodeError" not in printed, printed[-3000:]
    assert h.held(run, "run_terminal", {"command": "rm scratch.txt"}) == "asked", "the bad calls stopped the step"
    assert (final.session["status"], final.session["exit_code"]) == ("completed", 0), printed[-3000:]
    workspace = Path(final.session["workspace"])
    assert (workspace / "good.txt").read_text() == "ok\n" and not (workspace / "bad.txt").exists()
    assert (workspace / "scratch.txt").exists()
    for answer in SURROGATE_CALLS:
        tool_call = answer["tool_calls"][0]
        result = final.result_of(tool_call["name"], tool_call["arguments"])
        assert result == "not called" or (result.error is not None and result.error.code.startswith("ACODE-")), result


# -- 10. key=value secrets are redacted ------------------------------------------------------------

SECRETS = {"password=hunter2xyz": "hunter2xyz", "api_key: sk9Kq2LmZx7Pw": "sk9Kq2LmZx7Pw",
           "url = postgres://admin:pgSecret77@db.local/app": "pgSecret77", 'secret_token = "tok5f2a9c1"': "tok5f2a9c1",
           "PASSWD=swordfish42": "swordfish42"}
CONTROL = "visible=CONTROL-MARK-8c1f"


def _secrets(acode: Acode, site: Site) -> dict[str, Any]:
    site.prepare({"settings.ini": "[db]\n" + "\n".join([*SECRETS, CONTROL]) + "\n"})
    run = h.run(acode, site, [cmd("cat settings.ini"), call("read_file", path="settings.ini")])
    h.cancel(acode, run.session_id)
    shown = {"run": run.output, "show": h.cli(acode, "show", run.session_id).stdout,
             "show --json": h.cli(acode, "show", run.session_id, "--json").stdout}
    stored = {str(p.relative_to(acode.home)): p.read_bytes() for p in acode.home.rglob("*")
              if p.is_file() and not p.is_symlink()}
    return {"run": run, "shown": shown, "stored": stored}


@pytest.mark.parametrize("attack", [scene(_secrets)])
def test_key_value_secrets_in_command_output_are_redacted_wherever_acode_keeps_or_shows_them(
        arena: h.Arena, attack: Scene) -> None:
    got = arena.result(attack, DEFAULT)
    run: h.Run = got["run"]
    printed = run.result_of("run_terminal", {"command": "cat settings.ini"})
    assert printed != "not called" and CONTROL in printed.output, run.describe()
    events = json.dumps(run.events)
    for secret in SECRETS.values():
        assert secret not in printed.output and secret not in events, f"{secret} is in the tool result or events"
        assert [name for name, text in got["shown"].items() if secret in text] == [], f"{secret} shown"
        assert [name for name, data in got["stored"].items() if secret.encode() in data] == [], f"{secret} stored"
    assert any(CONTROL.encode() in data for data in got["stored"].values()), "the search sees what acode stored"

