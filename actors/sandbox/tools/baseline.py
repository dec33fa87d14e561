"""baseline_workspace and diff_workspace: what changed in a workspace since its session began.

Two internal tools (:data:`protocol.calls.tools.INTERNAL_TOOLS`; the model never sees them).
The planner records the baseline when a session begins; the verifier and the reviewer ask
for the diff since. Both run through the journal like every tool, so a repeated key
answers the journaled result.

**The first call wins.** A session's baseline is recorded once: a later call (a planner
re-dispatched after a crash, a second planner visit after a re-plan) answers "already
recorded" and moves nothing. The record is ``<home>/run/baselines/<session>/baseline.json``
in acode's own store, created with ``link(2)`` (which fails if it exists) under a lock
per session, so two calls at once cannot both win. The record, not anything in the
workspace, says what the baseline is: a model that moves the private ref does not
move the baseline.

Two kinds, chosen when the baseline is recorded:

- **git** (the workspace is the top level of a git work tree): the tracked and
  untracked-but-not-ignored files as a commit of acode's, on the private ref
  ``refs/acode/sessions/<session>/base`` of the user's repository
  (:mod:`actors.sandbox.workspace.gitsnap`). The diff builds the current tree the same way and
  runs ``git diff-tree -p -M`` between the two trees.
- **manifest** (anything else): a content manifest in the session's store
  (:mod:`actors.sandbox.workspace.manifest`).

**Ignore rules cannot hide a change.** The model can edit ``.gitignore`` files,
``.git/info/exclude`` and ``.git/config`` (``core.excludesFile``) through commands. So the
baseline records the rules in force when it was made (every ``.gitignore`` it saw, with
``info/exclude`` and the excludes file beneath them) and a diff lists, besides what the
rules of now show, every file the baseline's own rules do not ignore and every file of
the baseline still on disk: a file made and then ignored, or untracked and ignored,
still shows with its content. The header names the rule files of ``.git`` changed since
(``.gitignore`` changes are in the diff itself).

The diff's output starts with a header (the baseline, then every changed file as
``A``/``M``/``D``/``T``/``R`` and its path, git's ``--name-status`` letters), then the
unified diff, cut at ``max_bytes`` with a marker counting what was cut. The same list goes
with the result as data (``ToolResult.changes``): it is what ``files changed`` reports. A
session with no baseline is ACODE-SBX-017; a baseline that can no longer be read (its git
objects pruned, the repository replaced, ``.git`` gone) is ACODE-SBX-018.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import msgspec

from actors.sandbox.confinement.confine import Workspace, quote
from actors.sandbox.tools.output import Outcome, utf8_stop
from actors.sandbox.workspace import gitsnap, ignore, manifest, snapshot
from actors.sandbox.workspace.gitsnap import Change
from protocol.errors import SandboxError
from protocol.plans.results import CHANGE_STATUS, FileChange, WorkspaceChanges

__all__ = ["MAX_LISTED", "Baselines", "Record", "changes_of", "ref_of"]

MAX_LISTED = 200  # changed files named in the header
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """What ``baseline.json`` holds: the baseline of one session."""

    session_id: str
    workspace: str
    kind: Literal["git", "manifest"]
    recorded_at: float
    files: int
    unstored: int = 0  # manifest: files kept as hash only
    git_dir: str = ""
    objects: str = ""
    object_format: str = "sha1"
    ref: str = ""
    commit: str = ""
    tree: str = ""
    # The ignore rules in force at the baseline (see "Ignore rules" above); a record made
    # before they were kept has rules_recorded False and diffs with today's rules only.
    rules_recorded: bool = False
    gitignores: dict[str, str] = {}  # directory ("." the root) -> its .gitignore text
    exclude_root: str = ""  # git: info/exclude and core.excludesFile, beneath every .gitignore
    rule_sources: dict[str, str] = {}  # git: .git/info/exclude, .git/config, core.excludesFile -> sha256


def ref_of(session_id: str) -> str:
    return f"refs/acode/sessions/{session_id}/base"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _describe(record: Record, store: Path) -> str:
    files = f"{record.files} file{'s' if record.files != 1 else ''}"
    if record.kind == "git":
        return f"git commit {record.commit[:12]} on {record.ref}, {files}"
    unstored = f" ({record.unstored} kept as hash only: over 1 MB, or past the store's cap)" if record.unstored else ""
    return f"content manifest in {store}, {files}{unstored}"


class Baselines:
    """The baselines of every session, under ``root`` (``<home>/run/baselines``)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._lock = threading.Lock()
        self._sessions: dict[str, threading.Lock] = {}

    @contextmanager
    def _held(self, session_id: str) -> Iterator[None]:
        with self._lock:
            lock = self._sessions.setdefault(session_id, threading.Lock())
        with lock:
            yield

    def store(self, session_id: str) -> Path:
        if not _SESSION.fullmatch(session_id):
            raise SandboxError(f"session id {quote(session_id, 60)} cannot name a baseline (letters, digits, '-' "
                               "and '_' only)", code="ACODE-SBX-007")
        return self.root / session_id

    def load(self, session_id: str) -> Record | None:
        path = self.store(session_id) / "baseline.json"
        try:
            return msgspec.json.decode(path.read_bytes(), type=Record)
        except FileNotFoundError:
            return None
        except msgspec.DecodeError as exc:
            raise SandboxError(f"the baseline record {path} is unreadable ({exc}); remove its directory to record "
                               "the baseline again", code="ACODE-SBX-018") from exc

    def _save(self, record: Record) -> Record:
        """Write ``record`` unless one exists (link(2) refuses to replace); the one that stands."""
        store = self.store(record.session_id)
        tmp = store / f"baseline.json.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_bytes(msgspec.json.encode(record))
        try:
            os.link(tmp, store / "baseline.json")
        except FileExistsError:
            existing = self.load(record.session_id)
            assert existing is not None
            return existing
        finally:
            tmp.unlink()
        return record

    # -- baseline_workspace ----------------------------------------------------------------

    def record(self, ws: Workspace, session_id: str) -> Outcome:
        store = self.store(session_id)
        with self._held(session_id):
            existing = self.load(session_id)
            if existing is not None:
                return Outcome(output=f"baseline already recorded at {_when(existing.recorded_at)}: "
                                      f"{_describe(existing, store)}; not moved")
            store.mkdir(parents=True, exist_ok=True, mode=0o700)
            repo = gitsnap.discover(ws.root)
            record = self._git(ws, repo, session_id) if repo is not None else self._manifest(ws, session_id)
            saved = self._save(record)
        how = "recorded" if saved is record else f"already recorded at {_when(saved.recorded_at)}"
        return Outcome(output=f"baseline {how}: {_describe(saved, store)}")

    def _git(self, ws: Workspace, repo: gitsnap.Repo, session_id: str) -> Record:
        ref = ref_of(session_id)
        with gitsnap.Scratch(repo.objects, repo.object_format) as scratch:
            snap = scratch.snapshot(ws, repo)
            gitignores = _gitignores(ws, snap.paths)
            exclude_root, sources = _git_rules(repo)
            commit = scratch.commit(snap.tree, f"acode baseline of session {session_id}\n\nworkspace {ws.root}\n")
            standing = repo.create_ref(ref, commit)
            tree = snap.tree
            if standing != commit:  # an earlier call made the ref, then stopped before its record
                tree = scratch.git("rev-parse", f"{standing}^{{tree}}").stdout.decode().strip()
                commit = standing
        return Record(session_id=session_id, workspace=ws.root, kind="git", recorded_at=time.time(), files=snap.files,
                      git_dir=repo.git_dir, objects=repo.objects, object_format=repo.object_format, ref=ref,
                      commit=commit, tree=tree, rules_recorded=True, gitignores=gitignores,
                      exclude_root=exclude_root, rule_sources=sources)

    def _manifest(self, ws: Workspace, session_id: str) -> Record:
        files, unstored = manifest.record(ws, str(self.store(session_id)))
        return Record(session_id=session_id, workspace=ws.root, kind="manifest", recorded_at=time.time(),
                      files=len(files), unstored=unstored, rules_recorded=True,
                      gitignores=_gitignores(ws, list(files)))

    # -- diff_workspace --------------------------------------------------------------------

    def diff(self, ws: Workspace, session_id: str, max_bytes: int) -> Outcome:
        record = self.load(session_id)
        if record is None:
            raise SandboxError(f"session {session_id} has no baseline to diff against; call baseline_workspace when "
                               "the session begins (before anything changes the workspace)", code="ACODE-SBX-017")
        if record.workspace != ws.root:
            raise SandboxError(f"session {session_id}'s baseline is of the workspace {record.workspace}, not "
                               f"{ws.root}; diff the workspace the session runs in", code="ACODE-SBX-017")
        rules = ignore.recorded_rules(record.gitignores, record.exclude_root) if record.rules_recorded else None
        notes: list[str] = []
        if record.kind == "git":
            changes, patch, total, notes = self._diff_git(ws, record, max_bytes, rules)
        else:
            base = manifest.load(str(self.store(session_id)))
            if base is None:
                raise SandboxError(f"the manifest of session {session_id}'s baseline is missing from "
                                   f"{self.store(session_id)}", code="ACODE-SBX-018")
            changes, patch, total = manifest.diff(ws, str(self.store(session_id)), base, max_bytes, rules=rules)
        return Outcome(output=_render(record, self.store(session_id), changes, patch, total, max_bytes, notes),
                       changes=changes_of(changes))

    def _diff_git(self, ws: Workspace, record: Record, limit: int,
                  rules: ignore.Rules | None) -> tuple[list[Change], str, int, list[str]]:
        repo = gitsnap.discover(ws.root)
        if repo is None or repo.git_dir != record.git_dir:
            now = "is no longer a git work tree" if repo is None else f"now uses the git directory {repo.git_dir}"
            raise SandboxError(f"the workspace {ws.root} {now}; its baseline ({record.commit[:12]} on {record.ref}) "
                               f"is in {record.git_dir}, so the change cannot be shown", code="ACODE-SBX-018")
        with gitsnap.Scratch(record.objects, record.object_format) as scratch:
            if not scratch.has(record.tree):
                raise SandboxError(f"the baseline tree {record.tree} of {record.ref} is missing from {record.objects} "
                                   "(pruned, or the repository was replaced); the change cannot be shown",
                                   code="ACODE-SBX-018")
            also = scratch.tree_paths(record.tree)  # a baseline file now untracked and ignored still counts
            if rules is not None:
                also += [entry.path for entry in snapshot.walk(ws, rules, nested_repos=False)]
            current = scratch.snapshot(ws, repo, also)
            changes = scratch.changes(record.tree, current.tree)
            patch, total = scratch.patch(record.tree, current.tree, limit)
        _, sources = _git_rules(repo)
        changed = [name for name in sorted(set(sources) | set(record.rule_sources))
                   if record.rules_recorded and sources.get(name) != record.rule_sources.get(name)]
        notes = [f"ignore rules changed since the baseline: {', '.join(changed)}; the files they would hide are "
                 "listed all the same"] if changed else []
        return changes, patch.decode("utf-8", "replace"), total, notes


def changes_of(changes: list[Change]) -> WorkspaceChanges:
    """The diff's header as data: the first :data:`MAX_LISTED` changes (paths that are not
    UTF-8 with U+FFFD, as the header shows them) and how many there are."""
    files = [FileChange(status=CHANGE_STATUS[change.status[0]], path=_text(change.path), old=_text(change.old))
             for change in changes[:MAX_LISTED]]
    return WorkspaceChanges(files=files, total=len(changes), at=time.time())


def _gitignores(ws: Workspace, paths: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The text of each ``.gitignore`` among ``paths``, by its directory ("." the root)."""
    found: dict[str, str] = {}
    wanted = [p for p in paths if posixpath.basename(p) == ".gitignore"]
    for entry in snapshot.entries(ws, wanted):
        text = None if entry.is_link else ignore.read_text(entry.name, entry.dir_fd)
        if text is not None:
            found[posixpath.dirname(entry.path) or "."] = text
    return found


def _git_rules(repo: gitsnap.Repo) -> tuple[str, dict[str, str]]:
    """The repository's own ignore patterns (``info/exclude``, then ``core.excludesFile``,
    which git reads first) as one text, and a sha256 of each rule source: those two files
    and ``.git/config``, which names the excludes file ("" when absent)."""
    excludes = repo.git("config", "--path", "--get", "core.excludesFile", check=False).stdout.decode(
        "utf-8", "surrogateescape").strip()
    texts = {".git/info/exclude": ignore.read_text(os.path.join(repo.git_dir, "info", "exclude")),
             ".git/config": ignore.read_text(os.path.join(repo.git_dir, "config")),
             "core.excludesFile": ignore.read_text(excludes) if os.path.isabs(excludes) else None}
    sources = {name: hashlib.sha256(text.encode()).hexdigest() if text is not None else ""
               for name, text in texts.items()}
    root = (texts["core.excludesFile"] or "") + "\n" + (texts[".git/info/exclude"] or "")
    return root, sources


def _render(record: Record, store: Path, changes: list[Change], patch: str, total: int, max_bytes: int,
            notes: list[str] | None = None) -> str:
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.status[0]] = counts.get(change.status[0], 0) + 1
    names = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "T": "type changed"}
    head = [f"baseline: {_describe(record, store)}, recorded {_when(record.recorded_at)}", *(notes or [])]
    if not changes:
        head.append("no changes since the baseline")
        return _text("\n".join(head) + "\n")
    summary = ", ".join(f"{counts[k]} {v}" for k, v in names.items() if k in counts)
    head.append(f"{len(changes)} file{'s' if len(changes) != 1 else ''} changed: {summary}")
    for change in changes[:MAX_LISTED]:
        head.append(f"{change.status[0]}  {change.old} -> {change.path}" if change.old
                    else f"{change.status[0]}  {change.path}")
    if len(changes) > MAX_LISTED:
        head.append(f"[… and {len(changes) - MAX_LISTED} more files]")
    header = _text("\n".join(head) + "\n\n")
    room = max(max_bytes - len(header.encode()), 0)
    body = patch.encode("utf-8", "surrogateescape")
    if total <= room and len(body) <= room:
        return header + _text(patch)
    cut = utf8_stop(body, room)
    return (header + body[:cut].decode("utf-8", "replace")
            + f"\n[… diff truncated: {max(total, len(body)) - cut} more bytes not shown; the file list above is "
            + ("complete" if len(changes) <= MAX_LISTED else "capped too") + "]")


def _text(text: str) -> str:
    """``text`` with undecodable path bytes (surrogate escapes) as U+FFFD, safe to encode anywhere."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
