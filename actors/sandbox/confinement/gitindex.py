"""The gitlinks of a git index: where the user's ``git status`` will look into another repository.

A gitlink (mode 160000) makes git treat a directory as a submodule: ``git status`` runs
git inside it, with *that* repository's config (``core.fsmonitor`` and the rest). A
command that stages a nested repository it made (``git init x``, a planted
``x/.git/config``, ``git add x``) would so plant code for the user's next ``git status``
as surely as one writing ``.git/config``; :func:`gitlinks` lists them so the sandbox can
protect existing ones and refuse new ones (:mod:`actors.sandbox.confinement.sealed`,
:mod:`actors.sandbox.confinement.tripwire`).

The index format (git's ``Documentation/gitformat-index.txt``), versions 2 to 4: a
``DIRC`` header, then per entry 40 bytes of stat data with the mode at offset 24, the
object id (20 bytes, 32 in a SHA-256 repository), 16 bits of flags (and 16 more when
the extended bit is set, version 3+), then the path: NUL-terminated and padded to a
multiple of 8 bytes (versions 2 and 3), or prefix-compressed against the previous path
with a varint and not padded (version 4). Anything else reads as "not an index" (None).
"""

from __future__ import annotations

import os
import stat

__all__ = ["MAX_INDEX_BYTES", "gitlinks", "read_fd", "read_index"]

MAX_INDEX_BYTES = 64 << 20
_GITLINK = 0o160000
_EXTENDED = 0x4000


def read_index(path: str) -> bytes | None:
    """The index file's bytes (never through a final symlink), or None: missing, not a
    regular file, or larger than :data:`MAX_INDEX_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def read_fd(fd: int) -> bytes | None:
    """:func:`read_index` of an open file, from its start (its offset is left alone)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
        return None
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def gitlinks(data: bytes, *, hash_bytes: int = 20) -> list[str] | None:
    """The paths of the gitlink entries of the index ``data``, or None when it does not read as one."""
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    found: list[str] = []
    pos, previous = 12, b""
    try:
        for _ in range(count):
            start = pos
            mode = int.from_bytes(data[pos + 24:pos + 28], "big")
            pos += 40 + hash_bytes
            flags = int.from_bytes(data[pos:pos + 2], "big")
            pos += 2
            if version >= 3 and flags & _EXTENDED:
                pos += 2
            if version == 4:
                strip, pos = _varint(data, pos)
                end = data.index(b"\0", pos)
                name = previous[:len(previous) - strip] + data[pos:end]
                pos = end + 1
            else:
                end = data.index(b"\0", pos)
                name = data[pos:end]
                pos = start + ((end - start + 8) & ~7)
            previous = name
            if mode & 0o170000 == _GITLINK:
                found.append(os.fsdecode(name))
    except (ValueError, IndexError):
        return None
    return found


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (each continuation adds one before shifting)."""
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos
