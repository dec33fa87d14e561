"""Frame parsing: the shape of a message (magic, command, frame count), nothing more."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.transport import frames
from protocol.transport.frames import DISCONNECT, HEARTBEAT, MAGIC, READY, REPLY, REQUEST, Frames

COMMANDS = {REQUEST: 5, REPLY: 5, READY: 4, HEARTBEAT: 2, DISCONNECT: 2}
NAMES = {REQUEST: "REQUEST", REPLY: "REPLY", READY: "READY", HEARTBEAT: "HEARTBEAT", DISCONNECT: "DISCONNECT"}


def _reject(parts: list[bytes]) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        frames.parse(parts)
    assert info.value.code == "ACODE-PROTO-001"
    return info.value


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([MAGIC, REQUEST, b"sandbox", b"hdr", b"body"], Frames(REQUEST, b"sandbox", b"hdr", b"body")),
        ([MAGIC, REPLY, b"\x00route", b"hdr", b"body"], Frames(REPLY, b"\x00route", b"hdr", b"body")),
        ([MAGIC, READY, b"planner", b"info"], Frames(READY, b"planner", b"info")),
        ([MAGIC, HEARTBEAT], Frames(HEARTBEAT)),
        ([MAGIC, DISCONNECT], Frames(DISCONNECT)),
    ],
    ids=["request", "reply", "ready", "heartbeat", "disconnect"],
)
def test_parse_splits_each_well_formed_command(parts: list[bytes], expected: Frames) -> None:
    assert frames.parse(parts) == expected


def test_parse_keeps_empty_frames_in_their_place() -> None:
    assert frames.parse([MAGIC, REQUEST, b"", b"", b""]) == Frames(REQUEST, b"", b"", b"")


@pytest.mark.parametrize("magic", [b"ACODE2", b"acode1", b"", b"ACODE1\x00", b"MDPC01"])
def test_parse_rejects_a_wrong_magic(magic: bytes) -> None:
    err = _reject([magic, HEARTBEAT])
    assert err.message == (f"frame does not start with b'ACODE1' (got {magic[:16]!r}, 2 frames); "
                           "is the peer an acode process of the same version?")


def test_parse_rejects_an_empty_message() -> None:
    err = _reject([])
    assert err.message == ("frame does not start with b'ACODE1' (got b'', 0 frames); "
                           "is the peer an acode process of the same version?")


def test_parse_quotes_at_most_16_bytes_of_a_wrong_first_frame() -> None:
    err = _reject([b"x" * 1_000, HEARTBEAT])
    assert f"(got {b'x' * 16!r}, 2 frames)" in err.message


def test_parse_says_a_lone_magic_frame_lacks_its_command() -> None:
    err = _reject([MAGIC])
    assert err.message == "message has only the b'ACODE1' frame; a command frame must follow it"


@pytest.mark.parametrize("command", [b"\x00", b"\x06", b"\xff", b"", b"\x01\x01", b"REQUEST"])
def test_parse_rejects_an_unknown_command(command: bytes) -> None:
    err = _reject([MAGIC, command, b"a", b"b", b"c"])
    assert err.message == f"unknown command byte {command[:4]!r}"


@pytest.mark.parametrize(
    ("command", "count"),
    [(cmd, n) for cmd, size in COMMANDS.items() for n in range(2, 8) if n != size],
    ids=lambda v: NAMES.get(v, str(v)) if isinstance(v, bytes) else str(v),
)
def test_parse_rejects_a_wrong_frame_count(command: bytes, count: int) -> None:
    err = _reject([MAGIC, command, *[b"x"] * (count - 2)])
    assert err.message == f"{NAMES[command]} needs {COMMANDS[command]} frames, got {count}"


_frame = st.binary(max_size=12) | st.sampled_from([MAGIC, *COMMANDS])


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(_frame, max_size=8))
def test_any_frame_list_parses_or_raises_protocol_error(parts: list[bytes]) -> None:
    try:
        parsed = frames.parse(parts)
    except ProtocolError as exc:
        assert exc.code == "ACODE-PROTO-001"
        valid = len(parts) >= 2 and parts[0] == MAGIC and COMMANDS.get(parts[1]) == len(parts)
        assert not valid
    else:
        assert parts[0] == MAGIC
        assert len(parts) == COMMANDS[parts[1]]
        assert parsed.command == parts[1]
        assert [parsed.address, parsed.header, parsed.body][: len(parts) - 2] == parts[2:]
