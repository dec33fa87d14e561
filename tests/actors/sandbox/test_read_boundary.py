"""The read boundary (actors/sandbox/confinement/visible.py) against real processes and real canaries.

Canaries sit where secrets really live: a fresh directory under the *real* home directory
(``~/.acode-canary-<random>/`` with an ``id_rsa``-style key, a ``.env``, a git repository
and a project next to the workspace), ``/var/tmp``, ``/opt`` and a sibling of the
workspace under ``/tmp``; one more is in the test process's own environment, for
``/proc/<pid>/environ``. They are removed by the fixture's finalizer whatever happens.

Under each level that confines reads (bubblewrap and Landlock, each forced), one batch of
commands tries every way we know to read them: ``cat``, ``head``, a Python script in the
workspace (opens each path, walks ``~`` and the real home, globs ``/home/*``, scans
``/proc/*/environ`` and ``/proc/*/root``), ``node`` when present, ``git -C <outside> log``,
``grep -r`` and ``find /``, symlinks and hard links the command makes, ``/proc/1/root/…``,
``/proc/self/cwd/../…``. Not one byte of a canary may come back. In the same batch,
control markers in the workspace, in a configured ``read_paths`` directory and in
``/opt`` (visible unless ``read_opt: false``) must come back, a ``write_paths``
directory must take a write, and real toolchains must work: ``python -m pytest``, a
``python -m venv`` used afterwards, ``git status``/``git diff``, ``node``, a toolchain
installed under the home directory behind a pyenv-style shim, and acode's own interpreter
(pyenv under ``/root`` on the development machine). The same attacks at the process
level *do* leak, which is what proves the search works.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.confinement.isolation import READS_NOT_CONFINED, Isolation, detect
from actors.sandbox.tools.output import Outcome
from actors.sandbox.tools.terminal import Terminal
from protocol.calls.tools import RunTerminal
from protocol.policy.sandbox import SandboxPolicy

HOME = os.path.expanduser("~")
NODE = shutil.which("node")


@dataclass
class Site:
    token: str
    canary: str  # the secret's marker; also its bare hex is searched for
    control: str
    home_dir: Path  # ~/.acode-canary-<token>
    workspace: Path
    sibling: Path  # ~/.acode-canary-<token>/projects/other (a project next to the workspace)
    var_dir: Path
    opt_dir: Path | None
    tmp_dir: Path  # a sibling under /tmp
    read_dir: Path  # sandbox.read_paths
    write_dir: Path  # sandbox.write_paths
    tool_root: Path  # a pyenv-style manager under the real home
    secrets: list[Path] = field(default_factory=list)

    def key(self) -> str:
        return (f"# {self.canary}\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
                "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
                "-----END OPENSSH PRIVATE KEY-----\n")

    def leaked(self, text: str) -> bool:
        return self.canary in text or self.canary.removeprefix("CANARY-") in text


def _git(cwd: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _build(token: str, tmp: Path) -> Site:
    canary, control = f"CANARY-{secrets.token_hex(16)}", f"CONTROL-{secrets.token_hex(16)}"
    home_dir = Path(HOME) / f".acode-canary-{token}"
    opt_dir: Path | None = Path(f"/opt/acode-canary-{token}")
    try:
        opt_dir.mkdir()  # type: ignore[union-attr]
    except OSError:
        opt_dir = None  # /opt not writable here: that location is left out
    site = Site(token=token, canary=canary, control=control, home_dir=home_dir,
                workspace=home_dir / "projects" / "ws", sibling=home_dir / "projects" / "other",
                var_dir=Path(f"/var/tmp/acode-canary-{token}"), opt_dir=opt_dir, tmp_dir=tmp / "sibling",
                read_dir=Path(f"/var/tmp/acode-readpath-{token}"), write_dir=Path(f"/var/tmp/acode-writepath-{token}"),
                tool_root=Path(HOME) / f".acode-tool-{token}")
    for d in (site.workspace, site.sibling, home_dir / "ssh", site.var_dir, site.tmp_dir, site.read_dir,
              site.write_dir):
        d.mkdir(parents=True)
    site.secrets = [home_dir / "ssh" / "id_rsa", home_dir / ".env", site.sibling / ".env", site.var_dir / "secret.txt",
                    site.tmp_dir / "secret.txt"]
    (home_dir / "ssh" / "id_rsa").write_text(site.key())
    for env_file in (home_dir / ".env", site.sibling / ".env"):
        env_file.write_text(f"PROJECT_NOTE={canary}\n")
    for plain in (site.var_dir / "secret.txt", site.tmp_dir / "secret.txt"):
        plain.write_text(f"note {canary}\n")
    repo = home_dir / "repo"
    repo.mkdir()
    (repo / "notes.txt").write_text(f"{canary}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "notes.txt")
    _git(repo, "commit", "-q", "-m", f"add {canary}")
    site.secrets.append(repo / "notes.txt")
    if opt_dir is not None:
        (opt_dir / "secret.txt").write_text(f"opt {canary}\n")  # visible only while read_opt is true
    (site.read_dir / "control.txt").write_text(f"read-path {control}\n")
    # a toolchain installed under the home behind a pyenv-style shim
    versions = site.tool_root / "versions" / "1" / "bin"
    versions.mkdir(parents=True)
    (site.tool_root / "shims").mkdir()
    real = versions / "acodetool"
    real.write_text("#!/bin/sh\necho \"tool ok from $PYENV_ROOT\"\n")
    real.chmod(0o755)
    shim = site.tool_root / "shims" / "acodetool"
    shim.write_text("#!/usr/bin/env sh\nexec \"$PYENV_ROOT/versions/1/bin/acodetool\" \"$@\"\n")
    shim.chmod(0o755)
    return site


def _workspace(site: Site) -> None:
    ws = site.workspace
    (ws / "control.txt").write_text(f"workspace {site.control}\n")
    (ws / "id_rsa_control").write_text(site.key().replace(site.canary, site.control))
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    targets = [str(p) for p in site.secrets] + [f"/proc/1/root{p}" for p in site.secrets]
    targets += [f"/proc/self/root{p}" for p in site.secrets] + ["/proc/self/cwd/../other/.env"]
    if site.opt_dir is not None:
        targets.append(str(site.opt_dir / "secret.txt"))
    (ws / "attack.py").write_text(textwrap.dedent(f"""\
        import glob, os, pwd, sys
        found = []
        def look(path):
            try:
                with open(path, 'rb') as f:
                    data = f.read(4096)
            except OSError as exc:
                return
            if b'CANARY-' in data or b'CONTROL-' in data:
                found.append(path + ': ' + data.decode('utf-8', 'replace'))
        for path in {targets!r}:
            look(path)
        roots = ['.', os.path.expanduser('~'), pwd.getpwuid(os.getuid()).pw_dir, {HOME!r}, '/home', '/root', '/var',
                 '/opt', '/tmp', '/srv', '/mnt', {str(site.home_dir)!r}]
        roots += glob.glob('/home/*')
        seen = 0
        for root in roots:
            for top, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if d not in ('.pyenv', '.rustup', 'pypi', 'pypi-more', 'wheels')]
                for name in files:
                    seen += 1
                    if seen < 20000:
                        look(os.path.join(top, name))
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                look('/proc/' + pid + '/environ')
                look('/proc/' + pid + '/root' + {str(site.secrets[0])!r})
        # links the command makes itself
        for i, target in enumerate({[str(p) for p in site.secrets]!r}):
            try:
                os.symlink(target, 'made-link-%d' % i)
            except OSError:
                pass
            look('made-link-%d' % i)
            try:
                os.link(target, 'made-hard-%d' % i)
                look('made-hard-%d' % i)
            except OSError as exc:
                print('hard link refused:', exc.strerror)
        print('\\n'.join(found))
        print('walked', seen)
        """))
    (ws / "reach.py").write_text(textwrap.dedent(f"""\
        print(open({str(site.read_dir / 'control.txt')!r}).read())
        open({str(site.write_dir / 'written.txt')!r}, 'w').write('written from the sandbox')
        import sys; print('base', sys.base_prefix)
        """))
    (ws / "attack.js").write_text(textwrap.dedent(f"""\
        const fs = require('fs');
        for (const p of {[str(p) for p in site.secrets]!r}) {{
          try {{ console.log(fs.readFileSync(p, 'utf8')); }} catch (e) {{ console.log('refused', e.code); }}
        }}
        try {{ console.log(fs.readdirSync({HOME!r}).join(' ')); }} catch (e) {{ console.log('refused', e.code); }}
        console.log(fs.readFileSync('control.txt', 'utf8'));
        """))
    _git(ws, "init", "-q")
    _git(ws, "add", "calc.py", "control.txt")
    _git(ws, "commit", "-q", "-m", "start")
    (ws / "calc.py").write_text("def add(a, b):\n    return b + a\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    token = secrets.token_hex(6)
    tmp = tmp_path_factory.mktemp("readfence")
    made = [Path(HOME) / f".acode-canary-{token}", Path(f"/var/tmp/acode-canary-{token}"),
            Path(f"/opt/acode-canary-{token}"), Path(f"/var/tmp/acode-readpath-{token}"),
            Path(f"/var/tmp/acode-writepath-{token}"), Path(HOME) / f".acode-tool-{token}", tmp / "sibling"]
    try:
        built = _build(token, tmp)
        _workspace(built)
        os.environ["ACODE_TEST_CANARY_ENV"] = built.canary  # for /proc/<pid>/environ
        yield built
    finally:
        os.environ.pop("ACODE_TEST_CANARY_ENV", None)
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        assert not any(path.exists() for path in made)


def _levels() -> dict[str, Isolation | None]:
    full = detect()
    landlock = detect(bubblewrap=False)
    return {"bubblewrap": full if full.level == "bubblewrap" else None,
            "landlock": landlock if landlock.level == "landlock" else None}


LEVELS = _levels()


def _policy(site: Site, *, read_opt: bool = False) -> SandboxPolicy:
    return SandboxPolicy(allow_inline_code=True, extra_commands=["sh", "acodetool", "pydoc3"],
                         read_paths=[str(site.read_dir)], write_paths=[str(site.write_dir)], read_opt=read_opt)


def _attacks(site: Site) -> list[str]:
    rel_sibling = "../other/.env"
    commands = [f"cat {p}" for p in site.secrets] + [f"head -c 300 {p}" for p in site.secrets]
    commands += [f"cat {rel_sibling}", f"cat /proc/1/root{site.secrets[0]}", f"cat /proc/self/cwd/{rel_sibling}",
                 f"cat /proc/self/root{site.secrets[0]}", "python attack.py",
                 f"sh -c 'git -C {site.home_dir / 'repo'} log -p'", f"git log -p -- {site.home_dir / 'repo'}",
                 f"sh -c 'cd {site.home_dir / 'repo'} && git show HEAD'",
                 f"grep -r -s {site.canary} / --exclude-dir=usr --exclude-dir=proc --exclude-dir=sys "
                 "--exclude-dir=dev --exclude-dir=.pyenv --exclude-dir=.rustup --exclude-dir=.venv",
                 "find / -name *canary* -not -path /proc/*", f"find {HOME} {site.home_dir} /var/tmp /tmp -name *.env",
                 f"ls -la {HOME} {site.home_dir} /var/tmp /home",
                 f"sh -c 'ln -s {site.secrets[0]} sl && cat sl; ln {site.secrets[0]} hl && cat hl'",
                 "sh -c 'cat /proc/*/environ'", f"tar -cf - {site.home_dir}", f"cp {site.secrets[0]} stolen.txt"]
    if site.opt_dir is not None:
        commands.append(f"cat {site.opt_dir / 'secret.txt'}")
    if NODE:
        commands.append("node attack.js")
    return commands


def _run(terminal: Terminal, site: Site, command: str, policy: SandboxPolicy, timeout_s: float = 60) -> Outcome:
    with Workspace(str(site.workspace)) as ws:
        return terminal.run(ws, RunTerminal(command=command), timeout_s=timeout_s, max_bytes=200_000, policy=policy)


@pytest.mark.parametrize("level", list(LEVELS))
def test_no_command_reads_a_canary_while_controls_and_toolchains_work(
        level: str, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    isolation = LEVELS[level]
    if isolation is None:
        pytest.skip(f"this machine does not offer {level}")
    monkeypatch.setenv("PATH", f"{site.tool_root / 'shims'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYENV_ROOT", str(site.tool_root))  # a pyenv-style manager under the real home
    terminal = Terminal(isolation)
    terminal.hide(str(site.home_dir / "acode-home"))
    policy = _policy(site)
    leaks: list[tuple[str, str]] = []
    try:
        for command in _attacks(site):
            outcome = _run(terminal, site, command, policy)
            text = outcome.output + (outcome.error.message if outcome.error else "")
            if site.leaked(text):
                leaks.append((command, text[:300]))
            if command.split()[0] in ("find", "ls"):  # not even the secrets' names
                assert not [p for p in site.secrets if str(p) in text or p.name in text.split()], (command, text)
            assert outcome.isolation.startswith(f"{level};")
        bounded = _run(terminal, site, f"grep -r -s -l {site.canary} /", policy, timeout_s=8)  # whole root, bounded
        if site.leaked(bounded.output):
            leaks.append(("grep -r /", bounded.output[:300]))
        assert leaks == [], f"canary read under {level}: {leaks}"
        stolen = site.workspace / "stolen.txt"
        assert not stolen.exists() or not site.leaked(stolen.read_text())

        # controls: the same ways of reading do find what the command may see
        attack = _run(terminal, site, "python attack.py", policy)
        assert attack.exit_code == 0 and f"workspace {site.control}" in attack.output, attack.output
        assert f"workspace {site.control}" in _run(terminal, site, "cat control.txt", policy).output
        assert site.control in _run(terminal, site, "cat id_rsa_control", policy).output  # the key shape survives
        reach = _run(terminal, site, "python reach.py", policy)
        assert f"read-path {site.control}" in reach.output, reach.output
        assert (site.write_dir / "written.txt").read_text() == "written from the sandbox"
        assert f"base {sys.base_prefix}" in reach.output  # acode's own interpreter (pyenv under ~ here)
        grep = _run(terminal, site, f"grep -r -l {site.control} . {site.read_dir}", policy)
        assert sorted(grep.output.split()) == sorted(["./control.txt", "./id_rsa_control",
                                                      str(site.read_dir / "control.txt")]), grep.output
        if site.opt_dir is not None:  # /opt is seen by default, and not with read_opt: false
            seen = _run(terminal, site, f"cat {site.opt_dir / 'secret.txt'}", _policy(site, read_opt=True))
            assert site.leaked(seen.output), seen.output
        if NODE:
            node = _run(terminal, site, "node attack.js", policy)
            assert f"workspace {site.control}" in node.output and node.exit_code == 0, node.output

        # real toolchains, in the same run
        pytest_run = _run(terminal, site, "python -m pytest -q -p no:cacheprovider test_calc.py", policy)
        assert pytest_run.exit_code == 0 and "1 passed" in pytest_run.output, pytest_run.output
        venv = _run(terminal, site, "python -m venv --without-pip .venv", policy)
        assert venv.exit_code == 0, venv.output
        used = _run(terminal, site, ".venv/bin/python reach.py", policy)
        assert used.exit_code == 0 and f"read-path {site.control}" in used.output, used.output
        prefix = _run(terminal, site, ".venv/bin/python -c \"import sys; print(sys.prefix)\"", policy)
        assert prefix.output.strip() == str(site.workspace / ".venv"), prefix.output
        status = _run(terminal, site, "git status --porcelain", policy)
        assert status.exit_code == 0 and " M calc.py" in status.output, status.output
        diff = _run(terminal, site, "git diff", policy)
        assert "+    return b + a" in diff.output, diff.output
        tool = _run(terminal, site, "acodetool", policy)  # a shim under the home, its manager's root bound
        assert tool.output == f"tool ok from {site.tool_root}\n", tool.output
        if NODE:
            assert _run(terminal, site, "node -e \"console.log(6 * 7)\"", policy).output == "42\n"
        if shutil.which("cargo"):  # rustup's proxy in ~/.cargo/bin, its toolchains in ~/.rustup (RUSTUP_HOME set)
            cargo = _run(terminal, site, "cargo --version", policy)
            assert cargo.exit_code == 0 and cargo.output.startswith("cargo "), cargo.output
    finally:
        terminal.close()
        for made in site.workspace.glob("made-*"):
            made.unlink()
        shutil.rmtree(site.workspace / ".venv", ignore_errors=True)


def test_the_process_level_does_leak_and_says_so(site: Site) -> None:
    """The same search finds the canary where reads are not confined: the test can fail."""
    terminal = Terminal(Isolation(level="process", pidns=False))
    try:
        outcome = _run(terminal, site, f"cat {site.secrets[0]}", _policy(site))
        assert site.leaked(outcome.output)
        assert READS_NOT_CONFINED in outcome.isolation
        (site.workspace / "made-open.py").write_text(f"print(open({str(site.secrets[1])!r}).read())\n")
        attack = _run(terminal, site, "python made-open.py", _policy(site))  # attack.py's first move, alone
        assert site.leaked(attack.output)
    finally:
        terminal.close()
        for made in site.workspace.glob("made-*"):
            made.unlink()


@pytest.mark.skipif(not os.path.isdir(os.path.join(HOME, ".pyenv", "shims")), reason="no pyenv under the home here")
def test_a_real_pyenv_shim_under_the_home_works_inside(site: Site) -> None:
    """This machine's python is pyenv's, under /root: its shims run inside (PYENV_ROOT is set)."""
    shim = os.path.join(HOME, ".pyenv", "shims", "pydoc3")
    if not os.path.exists(shim):
        pytest.skip("pyenv has no pydoc3 shim")
    for isolation in (i for i in LEVELS.values() if i is not None):
        terminal = Terminal(isolation)
        try:
            outcome = _run(terminal, site, "pydoc3 math.floor", _policy(site))
        finally:
            terminal.close()
        assert outcome.exit_code == 0 and "floor" in outcome.output, (isolation.level, outcome.output)


@pytest.mark.parametrize("level", list(LEVELS))
def test_a_linked_worktree_keeps_working_and_its_main_checkout_stays_out_of_reach(level: str, tmp_path: Path) -> None:
    isolation = LEVELS[level]
    if isolation is None:
        pytest.skip(f"this machine does not offer {level}")
    main, linked = tmp_path / "main", tmp_path / "linked"
    main.mkdir()
    (main / "a.txt").write_text("a\n")
    _git(main, "init", "-q", "-b", "trunk")
    _git(main, "config", "user.name", "t")
    _git(main, "config", "user.email", "t@t")
    _git(main, "add", "a.txt")
    _git(main, "commit", "-q", "-m", "a")
    _git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    secret = f"CANARY-{secrets.token_hex(8)}"
    (main / "untracked-secret.txt").write_text(secret)  # in the main checkout, not in git
    (linked / "a.txt").write_text("changed\n")
    terminal = Terminal(isolation)
    policy = SandboxPolicy(extra_commands=["sh"])
    try:
        with Workspace(str(linked)) as ws:
            def run(command: str) -> Outcome:
                return terminal.run(ws, RunTerminal(command=command), timeout_s=30, max_bytes=20_000, policy=policy)
            assert run("git status --porcelain").output == " M a.txt\n"
            done = run("git commit -qam change")  # git itself: a shell running git gets .git read-only
            assert done.exit_code == 0, done.output
            assert "change" in run("git log --oneline").output
            leak = run(f"cat {main / 'untracked-secret.txt'}")
            assert leak.exit_code != 0 and secret not in leak.output
    finally:
        terminal.close()
    assert "change" in subprocess.run(["git", "log", "--oneline", "side"], cwd=main, capture_output=True,
                                      text=True, check=True).stdout


@pytest.mark.parametrize("level", list(LEVELS))
def test_no_device_node_or_kernel_memory_is_readable(level: str, tmp_path: Path) -> None:
    isolation = LEVELS[level]
    if isolation is None:
        pytest.skip(f"this machine does not offer {level}")
    disks = [str(p) for p in Path("/dev").iterdir() if p.is_block_device()][:5] if os.path.isdir("/dev") else []
    (tmp_path / "probe.py").write_text(textwrap.dedent(f"""\
        import os, stat
        for path in {[*disks, "/dev/mem", "/dev/kmem", "/proc/kcore", "/dev/port"]!r}:
            try:
                with open(path, 'rb') as f:
                    print('READ', path, len(f.read(512)))
            except OSError as exc:
                print('refused', path, exc.errno)
        try:
            os.mknod('disk', stat.S_IFBLK | 0o600, os.makedev(8, 0))
            print('MADE a block device')
        except OSError as exc:
            print('mknod refused', exc.errno)
        os.mkdir('devices')
        libc = __import__('ctypes').CDLL(None, use_errno=True)
        if libc.mount(b'none', b'devices', b'devtmpfs', 0, None) == 0:
            print('MADE a devtmpfs mount:', sorted(os.listdir('devices'))[:5])
            libc.umount2(b'devices', 2)
        else:
            print('mount refused', __import__('ctypes').get_errno())
        os.rmdir('devices')
        print('zero', len(open('/dev/zero', 'rb').read(8)), 'urandom', len(open('/dev/urandom', 'rb').read(8)))
        open('/dev/null', 'w').write('x')
        """))
    terminal = Terminal(isolation)
    try:
        with Workspace(str(tmp_path)) as ws:
            outcome = terminal.run(ws, RunTerminal(command="python probe.py"), timeout_s=30, max_bytes=20_000,
                                   policy=SandboxPolicy())
    finally:
        terminal.close()
    assert outcome.exit_code == 0, outcome.output
    assert "READ" not in outcome.output and "MADE" not in outcome.output, outcome.output
    assert "mknod refused" in outcome.output and "mount refused" in outcome.output
    assert "zero 8 urandom 8" in outcome.output


@pytest.mark.parametrize("level", list(LEVELS))
def test_a_host_unix_socket_cannot_be_reached_by_its_path(level: str, tmp_path: Path) -> None:
    """acode's broker, an ssh-agent or the D-Bus session bus answer whoever connects: a
    socket outside the workspace must be out of reach as a file is (Landlock alone would
    let a command connect by path, so a seccomp filter refuses AF_UNIX sockets there)."""
    isolation = LEVELS[level]
    if isolation is None:
        pytest.skip(f"this machine does not offer {level}")
    import socket
    import threading

    secret = f"CANARY-{secrets.token_hex(8)}"
    sock_dir = Path(f"/var/tmp/acode-sock-{secrets.token_hex(4)}")
    sock_dir.mkdir()
    path = sock_dir / "agent.sock"
    server = socket.socket(socket.AF_UNIX)
    stop = threading.Event()
    try:
        server.bind(str(path))
        server.listen()
        server.settimeout(0.2)

        def serve() -> None:
            while not stop.is_set():
                try:
                    connection, _ = server.accept()
                except OSError:
                    continue
                with connection:
                    connection.sendall(secret.encode())
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "dial.py").write_text(textwrap.dedent(f"""\
            import socket
            a, b = socket.socketpair()  # a pair of its own still works
            a.sendall(b'pair ok'); print(b.recv(10).decode())
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect({str(path)!r})
                print('GOT', s.recv(100).decode())
            except OSError as exc:
                print('refused', exc.errno)
            """))
        terminal = Terminal(isolation)
        try:
            with Workspace(str(workspace)) as ws:
                outcome = terminal.run(ws, RunTerminal(command="python dial.py"), timeout_s=30, max_bytes=20_000,
                                       policy=SandboxPolicy())
        finally:
            terminal.close()
        assert secret not in outcome.output and "GOT" not in outcome.output, outcome.output
        assert "pair ok" in outcome.output and "refused" in outcome.output
        with socket.socket(socket.AF_UNIX) as control:  # the server does answer whoever reaches it
            control.connect(str(path))
            assert control.recv(100).decode() == secret
    finally:
        stop.set()
        server.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
