"""Git snapshots of a workspace, and their diff, with git plumbing no repository setting can hijack.

The model can write anything in the workspace through ``run_terminal``, ``.git/config``
and ``.gitattributes`` included, so every git command acode runs here assumes the
repository is hostile: its config may name a ``core.fsmonitor`` program, a filter's
``clean`` command, a ``diff.external`` or textconv program, a pager, a gpg program;
its attributes may mark files ``-diff`` to hide their changes as "binary"; its
``refs/replace`` may swap one object for another.

Two git directories are involved:

- **the user's repository**, asked only what it alone knows: where it is
  (``rev-parse``), which files are tracked or untracked-but-not-ignored (``ls-files``),
  and given one private ref, ``refs/acode/sessions/<id>/base`` (``update-ref``), which
  keeps the baseline's objects from being pruned. Its branch, HEAD, index, stash and
  working tree are never written.
- **a scratch git directory** acode makes for each call (bare, a config of its own,
  nothing else) whose object store is the repository's (``GIT_OBJECT_DIRECTORY``).
  Blobs are written, trees built in a temporary index, the baseline commit made and
  trees diffed there, so the repository's config, attributes, hooks and replace refs
  play no part in them.

Every command runs with a minimal environment (no inherited ``GIT_*``; ``HOME`` and
``XDG_CONFIG_HOME`` on ``/dev/null``; ``GIT_CONFIG_GLOBAL=/dev/null``,
``GIT_CONFIG_NOSYSTEM=1``, ``GIT_ATTR_NOSYSTEM=1``, ``GIT_NO_REPLACE_OBJECTS=1``,
``GIT_TERMINAL_PROMPT=0``, ``GIT_OPTIONAL_LOCKS=0``, no pager, no transport allowed) and
with :data:`_OVERRIDES` on its command line, which win over every config file:
``core.fsmonitor=false``, ``core.hooksPath=/dev/null`` and the rest. Diffs add
``--no-ext-diff --no-textconv``; blobs are written with ``--no-filters``.

File contents never reach git by a workspace path: acode reads each file itself,
beneath the root and without following a link (:mod:`actors.sandbox.workspace.snapshot`), hashes
it to its blob id in Python, asks the object store which ids it lacks
(``cat-file --batch-check``), and writes only those, from copies in the scratch
directory (``hash-object -w --no-filters --stdin-paths``). A symlink is recorded as a
link (mode 120000, its target as the blob), never followed.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from actors.private import user_umask
from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.workspace import snapshot
from protocol.errors import SandboxError

__all__ = ["GIT_TIMEOUT_S", "Change", "Repo", "Scratch", "Snapshot", "discover"]

GIT_TIMEOUT_S = 300.0
_BATCH_BYTES = 64 << 20  # scratch copies written per hash-object run
_OVERRIDES = (
    "core.fsmonitor=false",  # a program git runs when it reads the index
    "core.hooksPath=/dev/null",  # reference-transaction and every other hook
    "core.pager=cat",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sshCommand=false",
    "protocol.allow=never",  # no transport, so no lazy fetch of a partial clone's objects
    "commit.gpgSign=false",  # gpg.program is a program
    "gc.auto=0",
    "maintenance.auto=false",
)
_IDENTITY = {"GIT_AUTHOR_NAME": "acode", "GIT_AUTHOR_EMAIL": "acode@localhost",
             "GIT_COMMITTER_NAME": "acode", "GIT_COMMITTER_EMAIL": "acode@localhost"}


def _error(message: str) -> SandboxError:
    return SandboxError(message, code="ACODE-SBX-018")


def _git_binary() -> str | None:
    return shutil.which("git")


def _env(**extra: str) -> dict[str, str]:
    git = _git_binary()
    path = os.pathsep.join(dict.fromkeys([*([os.path.dirname(git)] if git else []), "/usr/bin", "/bin"]))
    return {"PATH": path, "HOME": os.devnull, "XDG_CONFIG_HOME": os.devnull, "LC_ALL": "C", "LANG": "C",
            "TZ": "UTC", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_REPLACE_OBJECTS": "1", "GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1", **_IDENTITY,
            **extra}


def _command(args: Sequence[str]) -> list[str]:
    git = _git_binary()
    if git is None:
        raise _error("git is not installed; install it, or use a workspace that is not a git work tree")
    return [git, *(item for pair in _OVERRIDES for item in ("-c", pair)), *args]


def _run(args: Sequence[str], *, cwd: str, env: dict[str, str], stdin: bytes | None = None,
         check: bool = True) -> subprocess.CompletedProcess[bytes]:
    try:
        done = subprocess.run(_command(args), cwd=cwd, env=env, input=stdin, capture_output=True,
                              stdin=subprocess.DEVNULL if stdin is None else None, timeout=GIT_TIMEOUT_S,
                              umask=user_umask())  # objects in the user's repository, as git would make them
    except subprocess.TimeoutExpired as exc:
        raise _error(f"git {args[0]} did not finish within {GIT_TIMEOUT_S:g}s in {cwd}") from exc
    except OSError as exc:
        raise _error(f"git {args[0]} could not start: {exc}") from exc
    if check and done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _error(f"git {args[0]} failed in {cwd} (exit {done.returncode}): {said[-1] if said else 'no message'}")
    return done


@dataclass(frozen=True)
class Repo:
    """A git work tree whose top level is the workspace."""

    root: str
    git_dir: str  # this work tree's git directory (its index lives there)
    objects: str  # the object store, shared by every work tree of the repository
    object_format: str  # "sha1" or "sha256"

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        # GIT_DIR and GIT_WORK_TREE are explicit: core.worktree and a rewritten .git file cannot redirect them
        return _run(args, cwd=self.root, env=_env(GIT_DIR=self.git_dir, GIT_WORK_TREE=self.root), check=check)

    def listing(self) -> tuple[list[str], dict[str, str]]:
        """The paths of tracked and untracked-but-not-ignored files, grouped by directory,
        and the submodules (gitlinks) among them with the commit the index records."""
        paths: set[str] = set()
        gitlinks: dict[str, str] = {}
        for record in self.git("ls-files", "-z", "--stage").stdout.split(b"\0"):
            meta, _, raw = record.partition(b"\t")
            if not raw:
                continue
            path = os.fsdecode(raw)
            paths.add(path)
            mode, oid = meta.split(b" ")[:2]
            if mode == b"160000":
                gitlinks[path] = oid.decode()
        for raw in self.git("ls-files", "-z", "--others", "--exclude-standard").stdout.split(b"\0"):
            if raw and not raw.endswith(b"/"):  # "dir/" is an untracked nested repository
                paths.add(os.fsdecode(raw))
        return sorted(paths, key=posixpath.split), gitlinks

    def create_ref(self, ref: str, commit: str) -> str:
        """Point ``ref`` at ``commit`` unless it exists; the commit it points at either way."""
        done = self.git("update-ref", ref, commit, "", check=False)  # "": only if the ref does not exist
        if done.returncode == 0:
            return commit
        existing = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if existing.returncode == 0:
            return existing.stdout.decode().strip()
        said = done.stderr.decode("utf-8", "replace").strip()
        raise _error(f"git update-ref {ref} failed in {self.root}: {said or 'no message'}")


def discover(root: str) -> Repo | None:
    """The repository whose work tree is ``root``, or None (no ``.git`` in ``root``: not a
    work tree, or a subdirectory of one; git missing or refusing the repository).

    Discovery stops at ``root`` (``GIT_CEILING_DIRECTORIES``), and ``GIT_WORK_TREE`` is
    ``root``, so ``core.worktree`` or ``core.bare`` in the repository's config cannot point
    acode elsewhere."""
    if not os.path.lexists(os.path.join(root, ".git")) or _git_binary() is None:
        return None
    parent = os.path.dirname(os.path.realpath(root))
    done = _run(["rev-parse", "--absolute-git-dir", "--show-object-format", "--git-path", "objects"], cwd=root,
                env=_env(GIT_CEILING_DIRECTORIES=parent, GIT_WORK_TREE=root), check=False)
    lines = done.stdout.decode("utf-8", "surrogateescape").split("\n")
    if done.returncode != 0 or len(lines) != 4 or lines[3] != "":
        return None
    git_dir, object_format, objects = lines[:3]
    if object_format not in ("sha1", "sha256") or not (git_dir + objects).isprintable():
        return None  # a git directory whose name is not text: the manifest does without it
    return Repo(root=root, git_dir=git_dir, objects=os.path.normpath(os.path.join(root, objects)),
                object_format=object_format)


@dataclass(frozen=True)
class Change:
    """One line of ``--name-status``: A, D, M, T (type change) or R (``old`` renamed to ``path``)."""

    status: str
    path: str
    old: str = ""


@dataclass(frozen=True)
class Snapshot:
    tree: str
    files: int
    paths: tuple[str, ...] = ()  # what was listed (tracked, untracked-not-ignored, and ``also``)


class Scratch:
    """acode's own bare git directory in a temporary directory, on ``objects``."""

    def __init__(self, objects: str, object_format: str):
        self.dir = tempfile.mkdtemp(prefix="acode-git-")
        self.object_format = object_format
        git_dir = os.path.join(self.dir, "git")
        for sub in ("objects", "refs"):
            os.makedirs(os.path.join(git_dir, sub))
        with open(os.path.join(git_dir, "HEAD"), "w") as f:
            f.write("ref: refs/heads/main\n")
        sha256 = object_format == "sha256"
        version, extension = ("1", "[extensions]\n\tobjectformat = sha256\n") if sha256 else ("0", "")
        with open(os.path.join(git_dir, "config"), "w") as f:
            f.write(f"[core]\n\trepositoryformatversion = {version}\n\tbare = true\n\tquotepath = false\n{extension}")
        self._index = os.path.join(self.dir, "index")
        self._git_dir = git_dir
        self._env = _env(GIT_DIR=git_dir, GIT_OBJECT_DIRECTORY=objects, GIT_INDEX_FILE=self._index)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return _run(args, cwd=self._git_dir, env=self._env, stdin=stdin, check=check)

    def has(self, oid: str) -> bool:
        return self.git("cat-file", "-e", oid, check=False).returncode == 0

    # -- snapshot --------------------------------------------------------------------------

    def _blob_id(self, data: bytes) -> str:
        return hashlib.new(self.object_format, b"blob %d\0" % len(data) + data).hexdigest()

    def _file_id(self, fd: int) -> str:
        size = os.fstat(fd).st_size
        digest = hashlib.new(self.object_format, b"blob %d\0" % size)
        seen = 0
        while chunk := os.read(fd, snapshot.CHUNK):
            seen += len(chunk)
            digest.update(chunk)
        if seen == size:
            return digest.hexdigest()
        os.lseek(fd, 0, os.SEEK_SET)  # it changed while read: hash what one read sees
        return self._blob_id(b"".join(iter(lambda: os.read(fd, snapshot.CHUNK), b"")))

    def _missing(self, oids: set[str]) -> set[str]:
        if not oids:
            return set()
        out = self.git("cat-file", "--batch-check=%(objectname)", stdin="\n".join(sorted(oids)).encode() + b"\n")
        return {line.split(" ")[0] for line in out.stdout.decode().splitlines() if line.endswith(" missing")}

    def _write(self, ws: Workspace, wanted: dict[str, str], links: dict[str, bytes]) -> dict[str, str]:
        """Write the blobs of ``wanted`` (path → expected id) from scratch copies; the ids
        written (a file changed since it was hashed gets the id of what was copied)."""
        written: dict[str, str] = {}
        blobs = os.path.join(self.dir, "blobs")
        os.makedirs(blobs, exist_ok=True)
        batch: list[tuple[str, str]] = []  # (workspace path, scratch copy)
        size = 0

        def flush() -> None:
            nonlocal size
            if batch:
                out = self.git("hash-object", "-w", "--no-filters", "--stdin-paths",
                               stdin="".join(copy + "\n" for _, copy in batch).encode())
                ids = out.stdout.decode().split()
                if len(ids) != len(batch):  # seen once under load, cause unknown: one call per file says why
                    ids = [self.git("hash-object", "-w", "--no-filters", copy).stdout.decode().strip()
                           for _, copy in batch]
                written.update(zip((path for path, _ in batch), ids, strict=True))
                for _, copy in batch:
                    os.unlink(copy)
                batch.clear()
            size = 0

        for entry in snapshot.entries(ws, sorted(wanted, key=posixpath.split)):
            copy = os.path.join(blobs, str(len(written) + len(batch)))
            if entry.is_link:
                data = links.get(entry.path)
                if data is None:
                    continue
                with open(copy, "wb") as out_file:
                    out_file.write(data)
            else:
                fd = snapshot.open_file(entry)
                if fd is None:
                    continue
                with os.fdopen(fd, "rb") as src, open(copy, "wb") as out_file:
                    shutil.copyfileobj(src, out_file, snapshot.CHUNK)
            batch.append((entry.path, copy))
            size += os.path.getsize(copy)
            if size >= _BATCH_BYTES:
                flush()
        flush()
        return written

    def snapshot(self, ws: Workspace, repo: Repo, also: Iterable[str] = ()) -> Snapshot:
        """The tree of the workspace's tracked and untracked-but-not-ignored files, now, and
        of the files among ``also`` that exist (what the baseline's own ignore rules and
        files show: a rule added since cannot hide them)."""
        listed, gitlinks = repo.listing()
        paths = sorted(set(listed).union(p for p in also if p not in gitlinks), key=posixpath.split)
        ids: dict[str, tuple[str, str]] = {}  # path → (mode, blob id)
        links: dict[str, bytes] = {}
        for entry in snapshot.entries(ws, (p for p in paths if p not in gitlinks)):
            if entry.is_link:
                target = snapshot.read_link(entry)
                if target is None:
                    continue
                links[entry.path] = target
                ids[entry.path] = (entry.mode, self._blob_id(target))
                continue
            fd = snapshot.open_file(entry)
            if fd is None:
                continue
            try:
                ids[entry.path] = (entry.mode, self._file_id(fd))
            finally:
                os.close(fd)
        missing = self._missing({oid for _, oid in ids.values()})
        written = self._write(ws, {p: oid for p, (_, oid) in ids.items() if oid in missing}, links)
        for path, (mode, oid) in list(ids.items()):
            if oid in missing:
                if path in written:
                    ids[path] = (mode, written[path])
                else:
                    del ids[path]  # gone before it could be copied
        lines = [b"%s %s\t%s\0" % (mode.encode(), oid.encode(), os.fsencode(path)) for path, (mode, oid) in ids.items()]
        lines += [b"160000 %s\t%s\0" % (oid.encode(), os.fsencode(path)) for path, oid in gitlinks.items()]
        if os.path.exists(self._index):
            os.unlink(self._index)
        if lines:
            self.git("update-index", "-z", "--index-info", stdin=b"".join(lines))
        tree = self.git("write-tree").stdout.decode().strip()
        return Snapshot(tree=tree, files=len(ids), paths=tuple(paths))

    def tree_paths(self, tree: str) -> list[str]:
        """The file and symlink paths of ``tree`` (submodules left out)."""
        out = self.git("ls-tree", "-r", "-z", tree).stdout
        paths = []
        for record in out.split(b"\0"):
            meta, _, raw = record.partition(b"\t")
            if raw and not meta.startswith(b"160000"):
                paths.append(os.fsdecode(raw))
        return paths

    def commit(self, tree: str, message: str) -> str:
        return self.git("commit-tree", "--no-gpg-sign", "-m", message, tree).stdout.decode().strip()

    # -- diff ------------------------------------------------------------------------------

    _DIFF = ("diff-tree", "-r", "-M", "--no-ext-diff", "--no-textconv", "--no-color")

    def changes(self, base: str, current: str) -> list[Change]:
        out = self.git(*self._DIFF, "-z", "--name-status", base, current).stdout
        fields = [os.fsdecode(f) for f in out.split(b"\0")]
        result, i = [], 0
        while i + 1 < len(fields) and fields[i]:
            status = fields[i][0]
            if status == "R":  # "R<score>", old path, new path
                result.append(Change(status, fields[i + 2], fields[i + 1]))
                i += 3
            else:
                result.append(Change(status, fields[i + 1]))
                i += 2
        return result

    def patch(self, base: str, current: str, limit: int) -> tuple[bytes, int]:
        """The unified diff from ``base`` to ``current``: its first ``limit`` bytes and its total size."""
        args = _command([*self._DIFF, "-p", "--src-prefix=a/", "--dst-prefix=b/", base, current])
        kept = bytearray()
        total = 0
        with subprocess.Popen(args, cwd=self._git_dir, env=self._env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
            assert proc.stdout is not None
            while chunk := proc.stdout.read(snapshot.CHUNK):
                total += len(chunk)
                if len(kept) < limit:
                    kept += chunk[:limit - len(kept)]
            code = proc.wait(timeout=GIT_TIMEOUT_S)
        if code != 0:
            raise _error(f"git diff-tree failed (exit {code}) comparing {base} with {current}")
        return bytes(kept), total
