"""Checkpoints in the sandbox: before and after every call that can change a workspace, and the undo.

The store of each workspace is ``<home>/checkpoints/<key>`` (:func:`actors.paths.checkpoint_store`: the key is
a hash of the workspace's resolved path), written by
:class:`~actors.sandbox.workspace.checkpoints.Checkpoints`: in acode's home, which no
tool or command of a session can reach (the sandbox hides it), so a session cannot
destroy its own undo.

**When.** The journal (:mod:`actors.sandbox.journal`) calls :meth:`Checkpointing.before`
for every call with side effects it is about to run (every call that is not
:attr:`~actors.sandbox.dispatch.ToolCall.rerun_safe`: the write-class file tools,
every command, read-only or not, and every MCP call but a trusted read-only one: a server
with ``writes: true`` may change the workspace), once the call's intent is journaled and never for a
call answered from the journal; and :meth:`Checkpointing.after` once it ran. Before a
session's first such call comes its ``start`` checkpoint, what ``acode undo SESSION``
goes back to: everything the session changed comes after it, and a session that only
reads (W1) takes none at all. A checkpoint that cannot be taken refuses the call
(ACODE-SBX-023): nothing runs that could not be undone.

**Whose change is whose.** The ``after`` checkpoints make the undo exact about who
changed what: between a call's ``before`` and ``after`` the session changed the
workspace; between its ``after`` and the session's next checkpoint (or now) someone else
did (the user, during a pause). :meth:`Checkpointing.restore` walks these spans after the
target in order and leaves alone every path someone else changed last (unless
``force``), so an edit made by the user during a paused session survives ``acode undo``.

**A linked worktree or a submodule** keeps HEAD, its index, the refs and the stash in a
git directory outside the workspace (its ``.git`` is a file). The checkpoints cover the
directories :func:`~actors.sandbox.confinement.visible.git_dirs` finds, the same ones a
``git`` command of the session may write (:attr:`Scope.roots`), so ``git branch -D`` in a
worktree is undone like any other change; what a restore lists of them is shown at
their real paths.

**The undo is undoable and journaled.** A restore first takes a ``restore`` checkpoint
(``acode undo --to`` it brings the tree back) and its ``after`` when done; the restore
itself is journaled in the store (``restore/``), so a ``kill -9`` of the sandbox
mid-restore leaves a journal that :meth:`Checkpointing.resume` completes when the
sandbox starts again (``acode up``, or the coordinator's restart). The CLI asking for the
undo may die at any time: the sandbox does the work.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import msgspec

from actors.paths import checkpoint_store, checkpoint_stores
from actors.sandbox.confinement import visible
from actors.sandbox.dispatch import ToolCall
from actors.sandbox.workspace import restore as restoring
from actors.sandbox.workspace.checkpoints import Checkpoints, Meta, Record
from actors.sandbox.workspace.scan import GITDIRS, Scope, root_key
from protocol.basics.ids import new_id
from protocol.errors import NotFoundError, SandboxError
from protocol.messages import Commit, GetSession, Restored, RestoreWorkspace, SessionFound
from protocol.policy.checkpoints import CallSite, CheckpointSettings
from protocol.sessions.events import CheckpointTaken, WorkspaceRestored

__all__ = ["Checkpointing"]

_MIB = 1024 * 1024
_WORKSPACE = "workspace"  # the store's workspace path, for listings
_JOURNAL = "restore"  # the store's restore journal directory


def _shown(left: list[str], roots: list[str]) -> list[str]:
    """What a restore left alone, as the user is told: git's loose objects left out. Objects
    written since by someone else (the sandbox's own diff of the workspace, or the user's
    commit during a pause, whose refs are listed) are left in place, never deleted, and
    harm nothing: a ``git gc`` drops those no ref reaches."""
    return [path for path in _real(left, roots) if not path.startswith(".git/objects/")
            and not any(path.startswith(os.path.join(root, "objects", "")) for root in roots)]


def _real(paths: list[str], roots: list[str]) -> list[str]:
    """Paths as the user knows them: one under ``<GITDIRS>/<key>/`` at its git directory's real path."""
    where = {os.fsdecode(GITDIRS + b"/" + root_key(root)) + "/": root for root in roots}
    out = []
    for path in paths:
        prefix = path[:len(GITDIRS) + 18]
        out.append(os.path.join(where[prefix], path[len(prefix):]) if prefix in where else path)
    return out


def _roots(workspace: str, hidden: tuple[str, ...], also: list[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
    """The git directories outside ``workspace`` its checkpoints cover: those a session's
    ``git`` may write now, and ``also``; one inside another is covered by the other."""
    found = sorted({*(os.path.realpath(d) for d in visible.git_dirs(workspace, hidden=hidden)), *also})
    return tuple(d for d in found if not any(d != o and visible.inside(d, o) for o in found))


def scope_of(settings: CheckpointSettings, exclude: tuple[str, ...] = ()) -> Scope:
    return Scope(max_file_bytes=int(settings.max_file_mb * _MIB), skip_dirs=frozenset(settings.skip_dirs),
                 exclude=exclude)


class _Store:
    def __init__(self, checkpoints: Checkpoints):
        self.checkpoints = checkpoints
        self.lock = threading.Lock()  # one take or restore at a time in this process (the store's flock: across them)
        self.exclude = checkpoints.scope.exclude
        self.started: set[str] = set()  # sessions whose start checkpoint is in the store


class Checkpointing:
    """The sandbox's checkpoints of every workspace it works in (see the module)."""

    def __init__(self, root: str, send: Any, *, hidden: tuple[str, ...] = (), log: Any = None):
        self.root = root
        self._send = send  # one request to persistence (the sandbox's)
        self._hidden = hidden
        self._log = log
        self._lock = threading.Lock()
        self._stores: dict[str, _Store] = {}

    # -- taking -------------------------------------------------------------------------

    def _start(self, store: _Store, session: str, settings: CheckpointSettings) -> CheckpointTaken | None:
        """The session's ``start`` checkpoint, once, just before its first call that can change
        the workspace (a session that only reads takes none), as its event; the store's lock is held."""
        if session in store.started:
            return None
        store.started.add(session)
        if any(r.meta.session == session for r in store.checkpoints.records()):  # once per session and process
            return None
        taken = self._take(store, settings, Meta(session=session, call="session start", kind="start"))
        return CheckpointTaken(id=new_id(), session_id=session, at=time.time(), checkpoint=taken.id,
                               target="session start", took_ms=taken.took_ms, files=len(taken.changed),
                               skipped=len(taken.skipped))

    def before(self, call: ToolCall) -> list[CheckpointTaken]:
        """The checkpoint before ``call`` runs, as its event, after the session's ``start``
        checkpoint's when this is its first such call; none when the session takes none.
        ACODE-SBX-023 (a :class:`SandboxError`) when one cannot be taken."""
        request = call.request
        settings = request.policy.checkpoints
        if not settings.enabled or call.refusal is not None:
            return []
        site = request.site or CallSite()
        meta = Meta(session=request.session_id, stage=site.stage, task=site.task, step=site.step,
                    call=f"{request.tool} {call.target}".strip(), key=request.key)
        try:
            store = self._store(request.workspace)
            with store.lock:
                start = self._start(store, request.session_id, settings)
                taken = self._take(store, settings, meta)
        except OSError as exc:
            raise SandboxError(f"the checkpoint before {request.tool} could not be taken: {exc}; the call did not "
                               f"run (free space in {self.root}, or turn checkpoints off with checkpoints.enabled: "
                               "false)", code="ACODE-SBX-023") from exc
        return [*([start] if start is not None else []), CheckpointTaken(
            id=new_id(), session_id=request.session_id, at=time.time(), checkpoint=taken.id, key=request.key,
            tool=request.tool, target=call.target, stage=site.stage, task=site.task, step=site.step,
            took_ms=taken.took_ms, files=len(taken.changed), skipped=len(taken.skipped))]

    def after(self, call: ToolCall) -> None:
        """The checkpoint after ``call`` ran: what it changed is the session's (see the module).
        A failure is logged, never raised: the call has run, and its result must be journaled."""
        request = call.request
        try:
            store = self._store(request.workspace)
            with store.lock:
                self._take(store, request.policy.checkpoints,
                           Meta(session=request.session_id, call=request.tool, key=request.key, kind="after"))
        except (OSError, SandboxError) as exc:
            if self._log is not None:
                self._log.warning("checkpoint_after_failed", key=request.key, error=str(exc))

    def _take(self, store: _Store, settings: CheckpointSettings, meta: Meta, also: list[str] | None = None) -> Any:
        roots = _roots(store.checkpoints.workspace, self._hidden, also or ())
        store.checkpoints.scope = msgspec.structs.replace(scope_of(settings, store.exclude), roots=roots)
        return store.checkpoints.take(meta)

    # -- restoring ----------------------------------------------------------------------

    def restore(self, body: RestoreWorkspace) -> Restored:
        """Plan (``apply`` false) or make a restore to one of the session's checkpoints (see the module)."""
        found = self._send(GetSession(session_id=body.session_id))
        if isinstance(found, SessionFound) and found.session.status == "running":  # the CLI asked; a resume raced it
            raise SandboxError(f"session {body.session_id} is running: its calls would race the restore; pause it "
                               "first", code="ACODE-SBX-026")
        store = self._store(body.workspace)
        checkpoints = store.checkpoints
        with store.lock:
            self._resume(store)  # a restore a kill interrupted completes first
            checkpoints.scope = scope_of(body.policy.checkpoints, store.exclude)
            records = checkpoints.records()
            mine = [r for r in records if r.meta.session == body.session_id]
            target = self._target(checkpoints, mine, body)
            journal = os.path.join(checkpoints.root, _JOURNAL)
            roots = target.roots
            if not body.apply:
                leave = [] if body.force else self._others(checkpoints, records, body.session_id, target, None)
                plan = checkpoints.plan_restore(target.id, leave=leave)
                return Restored(target=target.id, write=_real(plan.write, roots), delete=_real(plan.delete, roots),
                                left=_shown(plan.left, roots))
            key = new_id()
            pre = self._take(store, body.policy.checkpoints, Meta(
                session=body.session_id, call=f"{body.by} to {target.id[:12]}", key=key, kind="restore"),
                also=roots)
            leave = [] if body.force else self._others(checkpoints, records, body.session_id, target, pre.id)
            try:
                plan = checkpoints.restore(target.id, journal_dir=journal, leave=leave)
            except OSError as exc:
                raise SandboxError(f"the restore of {body.workspace} to {target.id[:12]} stopped: {exc}; it is "
                                   "journaled and completes at the next `acode up` or `acode undo`",
                                   code="ACODE-SBX-025") from exc
            self._take(store, body.policy.checkpoints, Meta(session=body.session_id, call=body.by, key=key,
                                                            kind="after"), also=roots)
        left = _shown(plan.left, roots)
        event = WorkspaceRestored(id=new_id(), session_id=body.session_id, at=time.time(), to=target.id,
                                  checkpoint=pre.id, written=len(plan.write), deleted=len(plan.delete),
                                  left=left[:50], forced=body.force, by=body.by)
        self._send(Commit(session_id=body.session_id, events=[event]))
        return Restored(target=target.id, applied=True, write=_real(plan.write, roots),
                        delete=_real(plan.delete, roots), left=left, kept=_real(plan.kept, roots), checkpoint=pre.id)

    @staticmethod
    def _target(checkpoints: Checkpoints, mine: list[Record], body: RestoreWorkspace) -> Record:
        marks = [r for r in mine if r.meta.kind != "after"]
        if not marks:
            raise SandboxError(f"session {body.session_id} has no checkpoints of {body.workspace}; it made no change "
                               "there, or ran with checkpoints.enabled: false", code="ACODE-SBX-024")
        if body.to:
            try:
                found = checkpoints.find(body.to)
            except NotFoundError as exc:
                raise SandboxError(str(exc), code="ACODE-SBX-024") from exc
            if found.meta.session != body.session_id or found.meta.kind == "after":
                raise SandboxError(f"checkpoint {body.to!r} is not one of session {body.session_id}'s; "
                                   f"`acode checkpoints {body.session_id}` lists them", code="ACODE-SBX-024")
            return found
        if body.last:
            calls = [r for r in marks if r.meta.kind == "before"]
            if not calls:
                raise SandboxError(f"session {body.session_id} made no call that changes the workspace",
                                   code="ACODE-SBX-024")
            return calls[-1]
        return next((r for r in marks if r.meta.kind == "start"), marks[0])

    @staticmethod
    def _others(checkpoints: Checkpoints, records: list[Record], session: str, target: Record,
                now: str | None) -> list[str]:
        """Paths someone other than ``session`` changed last since ``target`` (see the module):
        the session's spans after ``target`` in order, its own (while one of its calls runs:
        from a call's before to its after, parallel checks overlapping) clearing a path, any
        other span marking it; ``now``: a checkpoint of the tree as it is (None: compared
        with the workspace itself)."""
        after = records[records.index(target):]
        mine = [r for r in after if r.meta.session == session]
        others: set[str] = set()
        running: set[str] = set()  # the session's calls between their before and after (checks run in parallel)
        for one, two in zip(mine, mine[1:], strict=False):
            if one.meta.kind in ("before", "restore"):
                running.add(one.meta.key)
            elif one.meta.kind == "after":
                running.discard(one.meta.key)
            changed = checkpoints.between(one.id, two.id)
            if running:
                others.difference_update(changed)
            else:
                others.update(changed)
        last = mine[-1]
        others.update(checkpoints.between(last.id, now) if now is not None else checkpoints.changed_since(last.id))
        return sorted(others)

    def resume(self) -> list[str]:
        """Complete every restore a kill interrupted (the sandbox's start); the workspaces done."""
        done: list[str] = []
        for directory, workspace in checkpoint_stores(self.root):
            if os.path.exists(os.path.join(directory, _JOURNAL, restoring.JOURNAL)):
                with self._store(workspace).lock:
                    if restoring.resume(os.path.join(directory, _JOURNAL)) is not None:
                        done.append(workspace)
        return done

    def _resume(self, store: _Store) -> None:
        restoring.resume(os.path.join(store.checkpoints.root, _JOURNAL))

    # -- the stores ---------------------------------------------------------------------

    def _store(self, workspace: str) -> _Store:
        real = os.path.realpath(workspace)
        with self._lock:
            store = self._stores.get(real)
            if store is None:
                directory = checkpoint_store(self.root, real)
                exclude = tuple(os.path.relpath(path, real) for path in self._hidden
                                if not os.path.relpath(path, real).startswith(".."))
                store = _Store(Checkpoints(directory, real, scope=Scope(exclude=exclude)))
                marker = os.path.join(directory, _WORKSPACE)
                if not os.path.exists(marker):
                    with open(marker + ".tmp", "w", encoding="utf-8") as file:
                        file.write(real + "\n")
                    os.rename(marker + ".tmp", marker)
                self._stores[real] = store
            return store
