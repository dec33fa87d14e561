"""The file tools: read_file, write_file, modify_file, create_directory, and pre-images.

Every path goes through :class:`~actors.sandbox.confinement.confine.Workspace`. Reads open the file
beneath the root with ``O_NONBLOCK | O_NOCTTY`` and check ``fstat`` before reading, so a
FIFO (even one with no writer), socket or device is refused (ACODE-SBX-004) without
blocking; the same check refuses them as modify_file or write_file targets.

read_file shows lines as ``cat -n`` does: a right-aligned 1-based number, a tab, the line
(a CRLF shown without its CR). ``offset`` is how many lines to skip, so the numbers are
always the file's own. A file with a NUL byte in its first 8 KiB (or in what would be
shown) is binary and refused; other invalid UTF-8 shows as U+FFFD. The output is capped
at the request's byte limit, cut on a character boundary, with a marker that counts the
bytes not shown and says which ``offset`` to continue from.

Writes are atomic: the new bytes go to a temporary file created (``O_EXCL |
O_NOFOLLOW``) in the resolved parent directory, are fsynced, then renamed over the target
and the directory is fsynced; a crash leaves the old file or the new one, never half of
one. ``rename`` replaces the directory entry, so a write never goes through a symlink.
Writes are refused

- into ``.git`` or ``.agent``, or anywhere in acode's home (ACODE-SBX-013,
  :mod:`actors.sandbox.confinement.protected`, which also refuses reading the home), checked on the
  path as given and again on the location the kernel resolved, before any missing parent
  is created;
- over a regular file with more than one hard link (ACODE-SBX-014): its other names may be
  outside the workspace, and a tool that silently split them would change what the
  user's other name sees. The rename would not write through, but the change would not
  be the one the model meant either.

modify_file takes search/replace ``edits`` (:mod:`actors.sandbox.tools.edits`) or a unified
``diff`` (:mod:`actors.sandbox.tools.patch`), exactly one of them (ACODE-SBX-007 otherwise).
Either applies whole or not at all. The file must be UTF-8; a BOM is kept. What small
models send instead (issue 25): ``content``, a whole new text, alone, replaces the whole
file, which must exist (as for edits), with every protection a write has (the protected
paths, hard links, the placeholder rule, the atomic rename; the journal records its
pre-image like any modify_file's); its BOM and line-ending style are kept, and the
result says the whole file was replaced.

A successful write (write_file, modify_file in every form) says the sha256 of the text it
left (:func:`written_digest`: the file as read_file shows it whole, numbers aside), so the
executor sees a file go A -> B -> A whichever tool wrote it (the ``edit_undone`` anomaly,
:mod:`actors.stages.execution.anomalies`): it has no other way to know what a search/replace made.

``image(ws, path)`` is the pre-image the journal records before a write: the sha256 of
the file's bytes, ``"absent"``, or None when the path is not a readable regular file.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat

from actors.private import workspace_mode
from actors.sandbox.confinement import protected
from actors.sandbox.confinement.confine import Workspace, quote
from actors.sandbox.tools import edits, patch
from actors.sandbox.tools.output import Outcome, utf8_stop
from protocol.basics.redact import placeholders_in
from protocol.calls.tools import CreateDirectory, ModifyFile, ReadFile, WriteFile
from protocol.errors import SandboxError

__all__ = ["ABSENT", "MAX_DIFF_BYTES", "content_digest", "create_directory", "image", "modify_file", "read_file",
           "write_file", "written_digest"]

ABSENT = "absent"
MAX_DIFF_BYTES = 1 << 20
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SNIFF = 8192  # like git: a NUL in the first 8 KiB means binary
_CHUNK = 65536
_BOM = "\ufeff"


def _kind(mode: int) -> tuple[str, str]:
    if stat.S_ISDIR(mode):
        return "a directory", "use list_directory to see what it holds"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)", "only regular files can be read or edited"
    if stat.S_ISSOCK(mode):
        return "a socket", "only regular files can be read or edited"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device", "only regular files can be read or edited"
    return "not a regular file", "only regular files can be read or edited"


def _not_regular(mode: int, path: str) -> SandboxError:
    what, hint = _kind(mode)
    return SandboxError(f"path {quote(path)} is {what}; {hint}", code="ACODE-SBX-004")


def _regular(fd: int, path: str) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(info.st_mode, path)
    return info


def _single_link(info: os.stat_result, path: str) -> None:
    if info.st_nlink > 1:
        raise SandboxError(f"path {quote(path)} is a hard link: {info.st_nlink} names share this file and another "
                           "may be outside the workspace, so the file tools will not change it; break the link "
                           "first (copy the file over itself under a new inode) or write to a new path",
                           code="ACODE-SBX-014")


def _binary(path: str) -> SandboxError:
    return SandboxError(f"path {quote(path)} looks binary (it contains NUL bytes); the file tools "
                        "handle text only", code="ACODE-SBX-004")


# -- read_file ----------------------------------------------------------------------------------


def _marker(omitted: int, line: int, partly: bool, first: bool) -> str:
    """The truncation marker; ``line`` is the 1-based number of the first line not shown whole."""
    if not partly:
        return f"[… truncated: {omitted} more bytes; continue with offset={line - 1}]"
    if first:
        return (f"[… truncated: {omitted} more bytes; line {line} alone is longer than the output limit; "
                f"continue with offset={line}]")
    return f"[… truncated: {omitted} more bytes, from line {line} on; continue with offset={line - 1}]"


def _nothing_shown(skip: int, lines: int, rel: str) -> Outcome:
    """read_file's answer when no line is shown: an offset past the end, or an empty file."""
    return Outcome(output=f"[offset {skip} is past the end: the file has {lines} lines]" if skip
                   else f"[{rel} is empty]", path=rel)


def _whole(data: bytes, args: ReadFile, rel: str, max_bytes: int) -> Outcome | None:
    """read_file's answer for a file read whole into ``data`` (at most one loop piece, so no
    line is split), in one pass instead of a loop turn per line; None when the output would
    be cut (the loop then cuts it: same text, same marker)."""
    skip = args.offset or 0
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the file ends with a newline, or is empty: no line after it
    if skip >= len(lines):
        return _nothing_shown(skip, len(lines), rel)
    shown = lines[skip:] if args.limit is None else lines[skip:skip + args.limit]
    unended = skip + len(shown) == len(lines) and not data.endswith(b"\n")  # shown as it is, CR and all
    parts = [b"%6d\t%s\n" % (number, line[:-1] if line.endswith(b"\r") else line)
             for number, line in enumerate(shown[:-1] if unended else shown, skip + 1)]
    if unended:
        parts.append(b"%6d\t%s" % (skip + len(shown), shown[-1]))
    out = b"".join(parts)
    if len(out) > max_bytes:
        return None
    if b"\0" in out:
        raise _binary(args.path)
    return Outcome(output=out.decode("utf-8", "replace"), path=rel)


def _small(fd: int, size: int) -> bytes | None:
    """The whole file behind ``fd`` when it holds at most one loop piece (``_CHUNK`` bytes),
    else None (it grew since ``fstat`` said ``size``)."""
    data = b""
    while chunk := os.read(fd, _CHUNK + 1 - len(data)):
        data += chunk
        if len(data) > _CHUNK:
            return None
        if len(data) == size:
            break  # all fstat saw, and more was asked for: no second read to meet the end
    return data


def read_file(ws: Workspace, args: ReadFile, max_bytes: int) -> Outcome:
    """Lines ``offset + 1`` to ``offset + limit``, numbered, within ``max_bytes`` of output."""
    rel = ws.relative(args.path)
    fd = protected.open_for_read(ws, args.path, _READ_FLAGS)
    try:
        size = _regular(fd, args.path).st_size  # before reading: a FIFO or directory is refused, not read
        data = _small(fd, size) if size <= _CHUNK else None
    except BaseException:
        os.close(fd)
        raise
    if data is not None:  # a small file (the common case): read in one go, shown without the loop's turns
        os.close(fd)
        if b"\0" in data[:_SNIFF]:
            raise _binary(args.path)
        whole = _whole(data, args, rel, max_bytes)
        if whole is not None:
            return whole
        size = len(data)
    elif size <= _CHUNK:
        os.lseek(fd, 0, os.SEEK_SET)  # it grew while _small read it: start again, as a large file
    skip = args.offset or 0
    out = bytearray()
    omitted = 0
    cut: tuple[int, bool, bool] | None = None  # (line, partly shown, first shown)
    with io.BytesIO(data) if data is not None else open(fd, "rb", buffering=_CHUNK) as f:
        if data is None:
            if b"\0" in f.read(_SNIFF):
                raise _binary(args.path)
            f.seek(0)
        number, start = 0, True  # lines begun so far; at the start of a line
        while number < skip:
            piece = f.readline(_CHUNK)
            if not piece:
                return _nothing_shown(skip, number if start else number + 1, rel)
            number += piece.endswith(b"\n")
            start = piece.endswith(b"\n")
        shown = 0
        while True:
            if start and args.limit is not None and shown == args.limit:
                break
            piece = f.readline(_CHUNK)
            if not piece:
                break
            if start:
                number += 1
                shown += 1
            ends = piece.endswith(b"\n")
            if cut is not None:
                omitted += len(piece)
                if args.limit is None:
                    omitted += max(0, size - f.tell())
                    break
            else:
                text = piece[:-2] if piece.endswith(b"\r\n") else piece[:-1] if ends else piece
                prefix = f"{number:>6}\t".encode() if start else b""
                room = max_bytes - len(out) - len(prefix)
                if len(text) + ends <= room:
                    out += prefix + text + (b"\n" if ends else b"")
                else:
                    keep = utf8_stop(text, max(room, 0)) if room > 0 else 0
                    if keep or not start:
                        out += prefix + text[:keep]
                    omitted += len(piece) - keep
                    cut = (number, bool(keep) or not start, shown == 1)
                    if args.limit is None:
                        omitted += max(0, size - f.tell())
                        break
            start = ends
    if b"\0" in out:
        raise _binary(args.path)
    output = out.decode("utf-8", "replace")
    if cut is not None:
        separator = "" if not output or output.endswith("\n") else "\n"
        output += separator + _marker(omitted, *cut)
    elif not output:
        return _nothing_shown(skip, number, rel)
    return Outcome(output=output, path=rel)


# -- writes -------------------------------------------------------------------------------------


def _encode(content: str, path: str) -> bytes:
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SandboxError(f"content for {quote(path)} is not valid Unicode text ({exc.reason} at "
                           f"character {exc.start}); send UTF-8 text", code="ACODE-SBX-007") from exc


def _replace(ws: Workspace, dir_fd: int, name: str, data: bytes, path: str) -> None:
    """Atomically make ``name`` in ``dir_fd`` hold ``data`` (keeping an existing file's mode).
    Refuses a directory, a FIFO, socket or device, and a hard-linked file."""
    mode = None
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            raise SandboxError(f"path {quote(path)} is a directory; name a file", code="ACODE-SBX-004")
        if stat.S_ISREG(info.st_mode):
            _single_link(info, path)
            mode = stat.S_IMODE(info.st_mode)
        elif not stat.S_ISLNK(info.st_mode):  # a symlink here was swapped in since open_parent: rename replaces it
            raise _not_regular(info.st_mode, path)
    except FileNotFoundError:
        pass
    # Named after the content, not at random: a write interrupted by a crash leaves this
    # file behind, and the retried write (same content) takes it over instead of leaving
    # litter in the user's workspace. A stale one is unlinked, never opened: it could be a
    # hard link planted to make us truncate a file elsewhere.
    tmp = f".{name[:48]}.{hashlib.sha256(data).hexdigest()[:16]}.acode.tmp"
    try:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            # An existing file keeps its mode; a new one gets what the user's umask gives it
            # (this process runs with umask 077 for acode's own files: actors.private).
            os.fchmod(fd, mode if mode is not None else workspace_mode(directory=False))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)
    except OSError as exc:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise ws.error(exc, path) from exc


def _parent_for_write(ws: Workspace, path: str, *, create: bool) -> tuple[int, str, str]:
    """``open_parent`` with the protected-path rule applied to the path as given and to
    every location the kernel resolves on the way."""
    protected.check_write(ws, path)
    return ws.open_parent(path, create=create, guard=protected.guard(ws, path))


def _no_new_placeholders(old: str, new: str, path: str) -> None:
    """Refuse a write whose text holds more redaction placeholders than the file did: the
    model saw ``[REDACTED:…]`` where the file holds a secret (every result it reads is
    redacted), and writing the placeholder back would destroy the user's real value. So a
    replayed answer, recorded redacted, cannot write one either (ACODE-SBX-022)."""
    added = placeholders_in(new) - placeholders_in(old)
    if added:
        shown = next(iter(added))
        raise SandboxError(f"the new text of {quote(path)} holds {shown}, a placeholder acode showed you in place of "
                           "a secret the file holds; writing it would replace the real value. Leave that line as it "
                           "is: change the other lines with modify_file, with search text that does not include the "
                           "placeholder", code="ACODE-SBX-022")


def write_file(ws: Workspace, args: WriteFile) -> Outcome:
    data = _encode(args.content, args.path)
    dir_fd, name, rel = _parent_for_write(ws, args.path, create=True)
    try:
        if "[REDACTED:" in args.content:
            try:
                old = _current_text(ws, dir_fd, name, args.path, missing_ok=True) or ""
            except SandboxError:
                old = ""  # not text the model could have read: every placeholder is new
            _no_new_placeholders(old, args.content, args.path)
        _replace(ws, dir_fd, name, data, args.path)
    finally:
        os.close(dir_fd)
    return Outcome(output=f"wrote {len(data)} bytes to {rel}", path=rel, sha256=written_digest(data))


# -- modify_file --------------------------------------------------------------------------------


def _current_text(ws: Workspace, dir_fd: int, name: str, path: str, *, missing_ok: bool) -> str | None:
    """The UTF-8 text of regular file ``name`` in ``dir_fd``; None when absent and ``missing_ok``."""
    try:
        fd = os.open(name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if missing_ok and exc.errno == errno.ENOENT:
            return None
        raise ws.error(exc, path) from exc
    try:
        _single_link(_regular(fd, path), path)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb") as f:
        data = f.read()
    if b"\0" in data:
        raise _binary(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SandboxError(f"path {quote(path)} is not valid UTF-8 (byte {exc.start}); modify_file edits UTF-8 "
                           "text only", code="ACODE-SBX-004") from exc


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _one_form(args: ModifyFile) -> None:
    """Refuse a call with none, or more than one, of edits, diff and content (ACODE-SBX-007)."""
    if args.content is not None:
        others = [name for name, value in (("edits", args.edits), ("diff", args.diff)) if value is not None]
        if others:
            raise SandboxError(f"modify_file of {quote(args.path)} got content (a whole new text) and "
                               f"{' and '.join(others)}; to replace the whole file send content alone (or use "
                               "write_file), to change part of it send edits or diff alone", code="ACODE-SBX-007")
        return
    if (args.edits is None) == (args.diff is None):
        given = "both" if args.edits is not None else "neither"
        raise SandboxError(f"modify_file of {quote(args.path)} got {given} of edits and diff; give exactly one: "
                           "edits (search/replace pairs) or diff (a unified diff of this file)",
                           code="ACODE-SBX-007")


def modify_file(ws: Workspace, args: ModifyFile) -> Outcome:
    """Apply every edit (each search matching exactly once, or at the match its ``line``
    picks), or every hunk of the diff, or nothing; or, given ``content``, replace the whole
    existing file with it (its BOM and its line-ending style kept); write atomically."""
    _one_form(args)
    protected.check_write(ws, args.path)  # before the diff: the clearer refusal first
    diff = None
    if args.diff is not None:
        size = len(args.diff.encode("utf-8", "surrogatepass"))
        if size > MAX_DIFF_BYTES:
            raise SandboxError(f"the diff for {quote(args.path)} is {size} bytes, over the {MAX_DIFF_BYTES}-byte "
                               "limit; split the change into several calls", code="ACODE-SBX-007")
        diff = patch.parse(args.diff, ws.relative(args.path), ws.relative)
    creates = diff is not None and diff.creates
    notes: list[str] = []
    dir_fd, name, rel = _parent_for_write(ws, args.path, create=creates)
    try:
        text = _current_text(ws, dir_fd, name, args.path, missing_ok=creates)
        if creates and text is not None:
            raise SandboxError(f"the diff creates {rel} ('--- /dev/null') but it already exists; make the diff "
                               "against its current text", code="ACODE-SBX-009")
        text = text or ""
        bom = _BOM if text.startswith(_BOM) else ""
        body = text[len(bom):]
        if diff is not None:
            new = patch.apply(body, diff, rel)
        elif args.content is not None:
            new = edits.in_style(args.content.removeprefix(_BOM), edits.newline_style(body))
        else:
            assert args.edits is not None
            new = edits.apply_edits(body, args.edits, rel, notes)
        _no_new_placeholders(body, new, args.path)
        data = _encode(bom + new, args.path)
        _replace(ws, dir_fd, name, data, args.path)
    finally:
        os.close(dir_fd)
    sha256 = written_digest(data)
    if diff is not None and creates:
        added = sum(len(hunk.new) for hunk in diff.hunks)
        return Outcome(output=f"created {rel} from a diff ({_plural(added, 'line')})", path=rel, sha256=sha256)
    if diff is not None:
        return Outcome(output=f"applied {_plural(len(diff.hunks), 'hunk')} to {rel}", path=rel, sha256=sha256)
    if args.content is not None:
        return Outcome(output=f"modify_file with content replaced the whole file: wrote {len(data)} bytes to {rel} "
                              "(for a whole new text, write_file is the tool)", path=rel, sha256=sha256)
    said = "".join(f"; {note}" for note in notes)
    return Outcome(output=f"applied {_plural(len(args.edits or []), 'edit')} to {rel}{said}", path=rel,
                   sha256=sha256)


def create_directory(ws: Workspace, args: CreateDirectory) -> Outcome:
    protected.check_write(ws, args.path)
    created, rel = ws.makedirs(args.path, guard=protected.guard(ws, args.path))
    return Outcome(output=f"created directory {rel}" if created else f"directory {rel} already exists",
                   path=rel)


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def written_digest(data: bytes) -> str:
    """sha256 hex of a file that holds ``data`` (UTF-8, as a write wrote it) as read_file
    shows it whole, numbers aside: each CRLF line end as LF, a BOM and a lone CR kept. The
    executor hashes a file it read so (:func:`actors.stages.execution.turnwatch.unnumbered`) and a
    write_file's content likewise (UTF-8): the same text, the same hash, whichever it saw."""
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def image(ws: Workspace, path: str) -> str | None:
    """sha256 hex of the regular file at ``path``, ``"absent"``, or None (not a readable file)."""
    try:
        dir_fd, name, _ = ws.open_parent(path)
    except SandboxError as exc:
        return ABSENT if exc.code == "ACODE-SBX-003" else None
    try:
        fd = os.open(name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        return ABSENT if exc.errno == errno.ENOENT else None
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with open(fd, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
