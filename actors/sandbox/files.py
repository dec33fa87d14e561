"""The file tools: read_file, write_file, modify_file, create_directory, and pre-images.

Every path goes through :class:`~actors.sandbox.confine.Workspace`. Reads open the file
beneath the root with ``O_NONBLOCK | O_NOCTTY`` and check ``fstat`` before reading, so a
FIFO, socket or device is refused without blocking. Writes are atomic: the new bytes go to
a temporary file created (``O_EXCL | O_NOFOLLOW``) in the resolved parent directory, are
fsynced, then renamed over the target and the directory is fsynced; a crash leaves the
old file or the new one, never half of one. ``rename`` replaces the directory entry, so
a write never goes through a symlink or into a hardlinked inode's other names.

``image(ws, path)`` is the pre-image the journal records before a write: the sha256 of
the file's bytes, ``"absent"``, or None when the path is not a readable regular file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

from actors.sandbox.confine import Workspace, quote
from actors.sandbox.output import Outcome, utf8_stop
from protocol.errors import SandboxError
from protocol.tools import CreateDirectory, Edit, ModifyFile, ReadFile, WriteFile

__all__ = ["ABSENT", "content_digest", "create_directory", "image", "modify_file", "read_file",
           "write_file"]

ABSENT = "absent"
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SNIFF = 8192  # like git: a NUL in the first 8 KiB means binary
_CHUNK = 65536


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


def _regular(fd: int, path: str) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        what, hint = _kind(info.st_mode)
        raise SandboxError(f"path {quote(path)} is {what}; {hint}", code="ACODE-SBX-004")
    return info


def _binary(path: str) -> SandboxError:
    return SandboxError(f"path {quote(path)} looks binary (it contains NUL bytes); the file tools "
                        "handle text only", code="ACODE-SBX-004")


def read_file(ws: Workspace, args: ReadFile, max_bytes: int) -> Outcome:
    """The raw text of lines ``[offset, offset + limit)`` (0-based), capped at ``max_bytes``."""
    fd = ws.open(args.path, _READ_FLAGS)
    try:
        size = _regular(fd, args.path).st_size  # before open(): a FIFO or directory is refused, not read
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb", buffering=_CHUNK) as f:
        if b"\0" in f.read(_SNIFF):
            raise _binary(args.path)
        f.seek(0)
        lines = 0
        while lines < (args.offset or 0):
            chunk = f.readline(_CHUNK)
            if not chunk:
                return Outcome(output=f"[offset {args.offset} is past the end: the file has {lines} lines]",
                               path=ws.relative(args.path))
            lines += chunk.endswith(b"\n")
        kept = bytearray()
        omitted = 0
        taken = 0
        while args.limit is None or taken < args.limit:
            chunk = f.readline(_CHUNK)
            if not chunk:
                break
            room = max_bytes - len(kept)
            if room <= 0 and args.limit is None:
                omitted += len(chunk) + max(0, size - f.tell())
                break
            kept += chunk[:max(room, 0)]
            omitted += max(0, len(chunk) - max(room, 0))
            taken += chunk.endswith(b"\n")
    if b"\0" in kept:
        raise _binary(args.path)
    if omitted:
        cut = utf8_stop(kept, len(kept))
        omitted += len(kept) - cut
        del kept[cut:]
    text = kept.decode("utf-8", "replace")
    if omitted:
        separator = "" if not text or text.endswith("\n") else "\n"
        text += f"{separator}[… truncated: {omitted} more bytes]"
    return Outcome(output=text, path=ws.relative(args.path))


def _encode(content: str, path: str) -> bytes:
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SandboxError(f"content for {quote(path)} is not valid Unicode text ({exc.reason} at "
                           f"character {exc.start}); send UTF-8 text", code="ACODE-SBX-007") from exc


def _replace(ws: Workspace, dir_fd: int, name: str, data: bytes, path: str) -> None:
    """Atomically make ``name`` in ``dir_fd`` hold ``data`` (keeping an existing file's mode)."""
    mode = None
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            raise SandboxError(f"path {quote(path)} is a directory; name a file", code="ACODE-SBX-004")
        if stat.S_ISREG(info.st_mode):
            mode = stat.S_IMODE(info.st_mode)
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
            if mode is not None:
                os.fchmod(fd, mode)
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


def write_file(ws: Workspace, args: WriteFile) -> Outcome:
    data = _encode(args.content, args.path)
    dir_fd, name, rel = ws.open_parent(args.path, create=True)
    try:
        _replace(ws, dir_fd, name, data, args.path)
    finally:
        os.close(dir_fd)
    return Outcome(output=f"wrote {len(data)} bytes to {rel}", path=rel)


def _newline(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf == text.count("\n") else "\n"


def _occurrences(text: str, search: str) -> int:
    """How many times ``search`` occurs, overlaps included ('aa' is twice in 'aaa')."""
    count, at = 0, text.find(search)
    while at != -1 and count < 1000:
        count += 1
        at = text.find(search, at + 1)
    return count


def _apply(text: str, edits: list[Edit], rel: str) -> str:
    newline = _newline(text)
    for number, edit in enumerate(edits, 1):
        search, replace = edit.search, edit.replace
        if newline == "\r\n":  # edits written with \n still match a CRLF file, and keep it CRLF
            search = search.replace("\r\n", "\n").replace("\n", "\r\n")
            replace = replace.replace("\r\n", "\n").replace("\n", "\r\n")
        found = _occurrences(text, search)
        if found != 1:
            hint = ("read the file again and copy the exact text, whitespace included" if found == 0
                    else "include more surrounding lines so it is unique")
            raise SandboxError(f"edit {number} of {len(edits)}: the search text {quote(edit.search)} matches "
                               f"{found} times in {rel}; it must match exactly once, so no edit was applied; "
                               f"{hint}", code="ACODE-SBX-009")
        text = text.replace(search, replace, 1)
    return text


def modify_file(ws: Workspace, args: ModifyFile) -> Outcome:
    """Apply every edit (each search matching exactly once) or none; write atomically."""
    dir_fd, name, rel = ws.open_parent(args.path)
    try:
        try:
            fd = os.open(name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
        except OSError as exc:
            raise ws.error(exc, args.path) from exc
        try:
            _regular(fd, args.path)
        except BaseException:
            os.close(fd)
            raise
        with open(fd, "rb") as f:
            data = f.read()
        if b"\0" in data:
            raise _binary(args.path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SandboxError(f"path {quote(args.path)} is not valid UTF-8 (byte {exc.start}); modify_file "
                               "edits UTF-8 text only", code="ACODE-SBX-004") from exc
        new = _apply(text, args.edits, rel)
        _replace(ws, dir_fd, name, _encode(new, args.path), args.path)
    finally:
        os.close(dir_fd)
    count = len(args.edits)
    return Outcome(output=f"applied {count} edit{'s' if count != 1 else ''} to {rel}", path=rel)


def create_directory(ws: Workspace, args: CreateDirectory) -> Outcome:
    created, rel = ws.makedirs(args.path)
    return Outcome(output=f"created directory {rel}" if created else f"directory {rel} already exists",
                   path=rel)


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


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
