"""git pack files (version 2, no deltas) with their version-2 index, written and read by Python.

A loose object costs a file creation, which on a busy disk is most of a take's time
(~0.2 ms each measured on the benchmark's VM: 10,000 files, 2 s). So a take that writes
many objects (the first one, or one after a large change) writes them into one pack
instead: :class:`PackWriter` streams ``<type/size header><zlib data>`` entries into a temp
file, then adds the header's count and the sha1 trailer, writes the ``.idx`` (fan-out,
sorted ids, CRC32s, offsets, the pack's and its own checksum) and renames both into
``objects/pack/`` (the ``.idx`` last: git and :class:`Pack` look for packs by their
index). A killed writer leaves temp files only.

Deltas. A take rewrites the trees on the paths it changed, each nearly the same as its
previous version (one 20-byte id differs in a 100-entry tree), and an edited file is
often its previous version plus a few lines. :meth:`PackWriter.add_delta` stores such an
object as an ``OFS_DELTA`` against the earlier version in the same pack (git requires a
pack's delta bases inside it): a copy of the common prefix, the differing middle, a copy
of the common suffix. No general base search: the caller knows which object is the
previous version of which (:meth:`actors.sandbox.workspace.objects.Objects.repack`).

:class:`Pack` reads an index into a dict (id -> offset) and an object at its offset,
resolving ``OFS_DELTA`` and ``REF_DELTA`` chains.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from typing import BinaryIO

__all__ = ["KINDS", "Pack", "PackWriter", "delta"]

KINDS = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_NAMES = {number: kind for kind, number in KINDS.items()}
_IDX_MAGIC = b"\377tOc\0\0\0\2"
_LEVEL = 1
_OFS_DELTA, _REF_DELTA = 6, 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _copy(offset: int, size: int) -> bytes:
    out = bytearray([0x80])
    for n in range(4):
        if offset >> (8 * n) & 0xFF:
            out[0] |= 1 << n
            out.append(offset >> (8 * n) & 0xFF)
    for n in range(3):
        if size >> (8 * n) & 0xFF:
            out[0] |= 0x10 << n
            out.append(size >> (8 * n) & 0xFF)
    return bytes(out)


def delta(base: bytes, data: bytes) -> bytes:
    """git's delta turning ``base`` into ``data``: the common prefix and suffix copied, the rest inserted."""
    limit = min(len(base), len(data))
    prefix = 0
    while prefix < limit and base[prefix] == data[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and base[-1 - suffix] == data[-1 - suffix]:
        suffix += 1
    out = [_varint(len(base)), _varint(len(data))]
    for at in range(0, prefix, 0xFFFF):
        out.append(_copy(at, min(0xFFFF, prefix - at)))
    middle = data[prefix:len(data) - suffix]
    for at in range(0, len(middle), 0x7F):
        chunk = middle[at:at + 0x7F]
        out.append(bytes([len(chunk)]) + chunk)
    for at in range(len(base) - suffix, len(base), 0xFFFF):
        out.append(_copy(at, min(0xFFFF, len(base) - at)))
    return b"".join(out)


def _patch(base: bytes, change: bytes) -> bytes:
    at = 0
    sizes = []
    for _ in range(2):
        value, shift = 0, 0
        while True:
            byte = change[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        sizes.append(value)
    if sizes[0] != len(base):
        raise ValueError(f"a delta for a {sizes[0]}-byte base was given one of {len(base)} bytes")
    out = bytearray()
    while at < len(change):
        op = change[at]
        at += 1
        if op & 0x80:
            offset = size = 0
            for n in range(4):
                if op & (1 << n):
                    offset |= change[at] << (8 * n)
                    at += 1
            for n in range(3):
                if op & (0x10 << n):
                    size |= change[at] << (8 * n)
                    at += 1
            out += base[offset:offset + (size or 0x10000)]
        elif op:
            out += change[at:at + op]
            at += op
        else:
            raise ValueError("a delta holds the reserved instruction 0")
    if len(out) != sizes[1]:
        raise ValueError(f"a delta made {len(out)} bytes, it says {sizes[1]}")
    return bytes(out)


class PackWriter:
    """One pack being written in ``pack_dir``; :meth:`finish` makes it visible."""

    def __init__(self, pack_dir: str):
        self.dir = pack_dir
        self.temp = os.path.join(pack_dir, f"tmp-{os.getpid()}-{id(self):x}.pack")
        self.file: BinaryIO = open(self.temp, "wb")  # noqa: SIM115 (closed by finish or abort)
        self.file.write(b"PACK" + struct.pack(">II", 2, 0))
        self.entries: dict[str, tuple[int, int]] = {}  # id -> (offset, crc32)
        self.at = 12

    def add(self, kind: bytes, data: bytes, oid: str) -> None:
        if oid not in self.entries:
            self._entry(oid, KINDS[kind], len(data), b"", data)

    def add_delta(self, kind: bytes, data: bytes, oid: str, base: bytes, base_oid: str) -> None:
        """Store ``data`` as a delta against ``base`` (an object already in this pack), when that is smaller."""
        if oid in self.entries:
            return
        change = delta(base, data)
        if base_oid not in self.entries or len(change) >= len(data) // 2:
            self.add(kind, data, oid)
            return
        back = self.at - self.entries[base_oid][0]
        code = bytearray([back & 0x7F])
        back >>= 7
        while back:
            back -= 1
            code.insert(0, 0x80 | (back & 0x7F))
            back >>= 7
        self._entry(oid, _OFS_DELTA, len(change), bytes(code), change)

    def _entry(self, oid: str, number: int, size: int, extra: bytes, data: bytes) -> None:
        head = bytearray([(number << 4) | (size & 0x0F)])
        size >>= 4
        while size:
            head[-1] |= 0x80
            head.append(size & 0x7F)
            size >>= 7
        entry = bytes(head) + extra + zlib.compress(data, _LEVEL)
        self.file.write(entry)
        self.entries[oid] = (self.at, zlib.crc32(entry))
        self.at += len(entry)

    def finish(self) -> str | None:
        """Count, checksum, index and rename; the pack's name (None when it is empty)."""
        self.file.seek(8)
        self.file.write(struct.pack(">I", len(self.entries)))
        self.file.close()
        if not self.entries:
            os.unlink(self.temp)
            return None
        digest = hashlib.sha1()
        with open(self.temp, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        trailer = digest.digest()
        with open(self.temp, "ab") as file:
            file.write(trailer)
        name = f"pack-{trailer.hex()}"
        final = os.path.join(self.dir, name)
        ids = sorted(self.entries)
        fanout = [0] * 256
        for oid in ids:
            fanout[int(oid[:2], 16)] += 1
        total, counts = 0, []
        for count in fanout:
            total += count
            counts.append(total)
        big = [self.entries[oid][0] for oid in ids if self.entries[oid][0] >= 1 << 31]
        offsets = []
        for oid in ids:
            offset = self.entries[oid][0]
            offsets.append(offset if offset < 1 << 31 else (1 << 31) | big.index(offset))
        index = b"".join([_IDX_MAGIC, struct.pack(">256I", *counts), *(bytes.fromhex(oid) for oid in ids),
                          struct.pack(f">{len(ids)}I", *(self.entries[oid][1] for oid in ids)),
                          struct.pack(f">{len(ids)}I", *offsets), struct.pack(f">{len(big)}Q", *big), trailer])
        index += hashlib.sha1(index).digest()
        with open(final + ".idx.tmp", "wb") as file:
            file.write(index)
        os.rename(self.temp, final + ".pack")
        os.rename(final + ".idx.tmp", final + ".idx")
        return name

    def abort(self) -> None:
        self.file.close()
        try:
            os.unlink(self.temp)
        except FileNotFoundError:
            pass


class Pack:
    """A pack's index (id -> offset) and its objects, read on demand."""

    def __init__(self, path: str):
        self.path = path  # without the extension
        with open(path + ".idx", "rb") as file:
            data = file.read()
        if data[:8] != _IDX_MAGIC:
            raise ValueError(f"{path}.idx is not a version-2 pack index")
        count = struct.unpack_from(">I", data, 8 + 255 * 4)[0]
        ids_at = 8 + 256 * 4
        offsets_at = ids_at + count * 24  # ids (20 bytes each), then CRC32s (4 each)
        big_at = offsets_at + count * 4
        offsets = struct.unpack_from(f">{count}I", data, offsets_at)
        self.offsets: dict[str, int] = {}
        for n, offset in enumerate(offsets):
            if offset & (1 << 31):
                offset = struct.unpack_from(">Q", data, big_at + 8 * (offset & 0x7FFFFFFF))[0]
            self.offsets[data[ids_at + 20 * n:ids_at + 20 * n + 20].hex()] = offset

    def read(self, oid: str) -> tuple[bytes, bytes]:
        """(type, data) of an object of this pack, its delta chain resolved."""
        with open(self.path + ".pack", "rb") as file:
            return self._read_at(file, self.offsets[oid])

    def _read_at(self, file: BinaryIO, offset: int) -> tuple[bytes, bytes]:
        file.seek(offset)
        head = file.read(64)
        number, size, used = head[0] >> 4 & 7, head[0] & 0x0F, 1
        shift = 4
        while head[used - 1] & 0x80:
            size |= (head[used] & 0x7F) << shift
            shift += 7
            used += 1
        if number == _OFS_DELTA:
            back = head[used] & 0x7F
            while head[used] & 0x80:
                used += 1
                back = ((back + 1) << 7) | (head[used] & 0x7F)
            used += 1
            base_at = offset - back
        elif number == _REF_DELTA:
            base_id = head[used:used + 20].hex()
            used += 20
            base_at = self.offsets[base_id]
        elif number not in _NAMES:
            raise ValueError(f"pack entry at {offset} of {self.path}.pack has type {number}")
        inflate = zlib.decompressobj()
        out = [inflate.decompress(head[used:])]
        while not inflate.eof:
            chunk = file.read(1 << 16)
            if not chunk:
                break
            out.append(inflate.decompress(chunk))
        data = b"".join(out)
        if len(data) != size:
            raise ValueError(f"pack entry at {offset} of {self.path}.pack has {len(data)} bytes, "
                             f"its header says {size}")
        if number in _NAMES:
            return _NAMES[number], data
        base = self._read_at(file, base_at)
        return base[0], _patch(base[1], data)
