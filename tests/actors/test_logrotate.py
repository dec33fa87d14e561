"""actors.logrotate: size-based rotation on real files, and copytruncate under a real writer
process that holds its log open O_APPEND, as every actor does (actors/spawn.py)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from actors.logrotate import LogLimits, generations, logs_by_instance, rotate, rotate_all

KIB = 1 / 1024  # in max_mb units
TINY = LogLimits(max_mb=KIB, keep=3)  # 1 KiB


def _log(path: Path, label: str, size: int = 2048) -> Path:
    """A log of whole lines ``label``, at most ``size`` bytes."""
    line = f"{label}\n".encode()
    path.write_bytes(line * max(1, size // len(line)))
    return path


def _label(path: Path) -> str:
    return path.read_text().split("\n", 1)[0]


@pytest.mark.parametrize("live", [False, True])
def test_a_log_past_the_limit_shifts_its_older_files_up_and_the_oldest_beyond_keep_goes(
        tmp_path: Path, live: bool) -> None:
    log = _log(tmp_path / "executor.log", "live")
    content = log.read_bytes()
    for number in (1, 2, 3):
        _log(tmp_path / f"executor.log.{number}", f"was-{number}", 10)

    assert rotate(log, TINY, live=live)

    assert [(p.name, _label(p)) for p in generations(log)] == [
        ("executor.log.3", "was-2"), ("executor.log.2", "was-1"), ("executor.log.1", "live")]
    assert (tmp_path / "executor.log.1").read_bytes() == content  # the whole content, once
    if live:  # copytruncate: the same file, emptied, for the writer that holds it
        assert log.read_bytes() == b""
    else:  # renamed: the next child opens a new one
        assert not log.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "executor.log", "executor.log.1", "executor.log.2", "executor.log.3"][0 if live else 1:]


def test_a_log_within_the_limit_and_a_missing_one_are_left_alone(tmp_path: Path) -> None:
    small = _log(tmp_path / "planner.log", "small", 1024)
    assert small.stat().st_size <= TINY.max_bytes
    assert not rotate(small, TINY, live=True)
    assert not rotate(small, TINY, live=False)
    assert not rotate(tmp_path / "absent.log", TINY, live=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["planner.log"]
    assert LogLimits().max_bytes == 20 * 2**20 and LogLimits().keep == 3  # the defaults: 20 MiB, 3 kept


def test_a_smaller_keep_drops_the_surplus_and_keep_0_keeps_nothing(tmp_path: Path) -> None:
    log = _log(tmp_path / "sandbox.log", "live")
    for number in (1, 2, 3, 4, 5):
        _log(tmp_path / f"sandbox.log.{number}", f"was-{number}", 10)
    assert rotate(log, LogLimits(max_mb=KIB, keep=2), live=True)
    assert [(p.name, _label(p)) for p in generations(log)] == [("sandbox.log.2", "was-1"), ("sandbox.log.1", "live")]

    _log(log, "again")
    assert rotate(log, LogLimits(max_mb=KIB, keep=0), live=True)
    assert (generations(log), log.read_bytes()) == ([], b"")
    _log(log, "closed")
    assert rotate(log, LogLimits(max_mb=KIB, keep=0), live=False)
    assert list(tmp_path.iterdir()) == []


def test_the_readers_see_an_instances_files_oldest_first_and_never_a_rotated_file_as_an_instance(
        tmp_path: Path) -> None:
    for name in ("executor.log", "executor.log.10", "executor.log.2", "executor.log.1", "mcp-notes.log",
                 "verifier.log.1", ".executor.log.rotating", "notes.txt", "executor.log.0", "executor.log.x"):
        (tmp_path / name).write_text("x\n")
    found = {instance: [p.name for p in files] for instance, files in logs_by_instance(tmp_path).items()}
    assert found == {"executor": ["executor.log.10", "executor.log.2", "executor.log.1", "executor.log"],
                     "mcp-notes": ["mcp-notes.log"], "verifier": ["verifier.log.1"]}
    assert logs_by_instance(tmp_path / "absent") == {}


def test_the_periodic_pass_rotates_each_live_log_past_the_limit_and_reports_one_it_cannot(tmp_path: Path) -> None:
    _log(tmp_path / "coordinator.log", "coordinator")
    _log(tmp_path / "mcp-notes.log", "mcp")
    _log(tmp_path / "planner.log", "small", 100)
    _log(tmp_path / "reviewer.log.1", "only-rotated")  # its live file gone: nothing to rotate
    (tmp_path / "broken.log").mkdir()  # cannot be opened as a file: reported, the others still rotated
    (tmp_path / "broken.log" / "filler").write_bytes(b"x" * 10)

    done = rotate_all(tmp_path, LogLimits(max_mb=1e-6, keep=3))  # 1 byte: every non-empty log is past it

    assert [(p.name, type(error).__name__ if error else None) for p, error in done] == [
        ("broken.log", "IsADirectoryError"), ("coordinator.log", None), ("mcp-notes.log", None),
        ("planner.log", None)]
    assert (tmp_path / "coordinator.log").read_bytes() == b""
    assert _label(tmp_path / "coordinator.log.1") == "coordinator"
    assert _label(tmp_path / "mcp-notes.log.1") == "mcp"
    assert [p.name for p in generations(tmp_path / "reviewer.log")] == ["reviewer.log.1"]
    assert [p.name for p, _ in rotate_all(tmp_path, TINY)] == ["broken.log"]  # nothing else is past 1 KiB now


# -- copytruncate under a real writer ---------------------------------------------------------

# Writes lines "line N" for each "START END" it reads, one write(2) each, to its stdout (the
# log, opened O_APPEND by the test as actors/spawn.py does), then says "done" on stderr.
WRITER = """
import os, sys
for command in sys.stdin:
    start, end = map(int, command.split())
    for n in range(start, end):
        os.write(1, b"line %d\\n" % n)
    os.write(2, b"done\\n")
"""


def _done(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], timeout)
    assert ready and proc.stderr.readline() == b"done\n", "the writer did not finish its lines"


def _write(proc: subprocess.Popen[bytes], start: int, end: int) -> None:
    """Have the writer write lines ``start`` to ``end - 1`` and wait until it has."""
    assert proc.stdin is not None
    proc.stdin.write(f"{start} {end}\n".encode())
    proc.stdin.flush()
    _done(proc)


def test_copytruncate_keeps_a_running_writers_lines_in_order_once_and_its_next_line_in_the_live_file(
        tmp_path: Path) -> None:
    log = tmp_path / "executor.log"
    limits = LogLimits(max_mb=8 * KIB, keep=100)  # every generation kept: all its lines can be read
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", WRITER], stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stderr is not None
        written = rotations = 0
        while rotations < 3:  # batches of lines until three rotations happened while it wrote
            assert written < 100_000, f"{rotations} rotations in {written} lines: the live file is not rotated"
            proc.stdin.write(f"{written} {written + 10_000}\n".encode())
            proc.stdin.flush()
            written += 10_000
            while not select.select([proc.stderr], [], [], 0)[0]:
                rotations += rotate(log, limits, live=True)
            _done(proc)

        files = [*generations(log), log]
        seen: list[int] = []
        for path in files:
            data = path.read_bytes()
            assert b"\0" not in data, f"{path.name} has a hole: the writer wrote at its old offset"
            if path != log:
                assert data.endswith(b"\n"), f"{path.name} ends with a torn line: {data[-20:]!r}"
            lines = data.split(b"\n")
            for index, raw in enumerate(lines):
                match = re.fullmatch(rb"line (\d+)", raw)
                if match:
                    seen.append(int(match[1]))
                else:  # only a file's end may be cut: empty after the last newline, or a line cut mid-write
                    assert index == len(lines) - 1, (path.name, raw)
        assert seen == sorted(set(seen)), "a line was duplicated or out of order across the files"
        # Lines written between a copy's last read and the truncation are lost (the module's
        # caveat): how many depends on the scheduler, so only what was copied is checked.
        assert all(re.search(rb"^line \d+$", path.read_bytes(), re.M) for path in files[:-1])

        _write(proc, written, written + 1)  # then idle, its fd still open
        assert rotate(log, LogLimits(max_mb=1e-6, keep=100), live=True)
        _write(proc, written + 1, written + 2)
        after = f"line {written + 1}\n".encode()
        assert log.read_bytes() == after  # at the start of the emptied live file, no hole before it
        assert generations(log)[-1].read_bytes().endswith(f"line {written}\n".encode())  # the line before
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_rotated_copy_is_private_to_the_user(tmp_path: Path) -> None:
    log = _log(tmp_path / "persistence.log", "live")
    os.chmod(log, 0o600)
    old = os.umask(0o022)  # a looser umask than acode's own must not widen the copy
    try:
        assert rotate(log, TINY, live=True)
    finally:
        os.umask(old)
    assert (tmp_path / "persistence.log.1").stat().st_mode & 0o777 == 0o600
