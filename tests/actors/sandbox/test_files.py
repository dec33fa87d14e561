"""The file tools on real files: reads, atomic writes, exact-once edits, directories."""

from __future__ import annotations

import hashlib
import os
import re
import stat

import hypothesis
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from actors.sandbox.confinement.confine import Workspace
from actors.sandbox.tools import files
from protocol.calls.tools import CreateDirectory, Edit, ModifyFile, ReadFile, WriteFile
from protocol.errors import SandboxError
from tests.actors.sandbox.conftest import Tree


def _code(call: object) -> str:
    with pytest.raises(SandboxError) as info:
        call()  # type: ignore[operator]
    return info.value.code


# -- read_file ------------------------------------------------------------------------------


def test_read_file_numbers_the_lines_between_offset_and_limit(ws: Workspace, tree: Tree) -> None:
    (tree.root / "n.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    out = files.read_file(ws, ReadFile(path="n.txt", offset=2, limit=3), 64_000).output
    assert out == "     3\tline 2\n     4\tline 3\n     5\tline 4\n"
    assert files.read_file(ws, ReadFile(path="n.txt", offset=8), 64_000).output == "     9\tline 8\n    10\tline 9\n"
    for offset in (10, 50):
        out = files.read_file(ws, ReadFile(path="n.txt", offset=offset), 64_000).output
        assert out == f"[offset {offset} is past the end: the file has 10 lines]"


def test_read_file_counts_a_last_line_without_newline_and_hides_crs(ws: Workspace, tree: Tree) -> None:
    (tree.root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree")
    assert files.read_file(ws, ReadFile(path="w.txt"), 64_000).output == "     1\tone\n     2\ttwo\n     3\tthree"
    out = files.read_file(ws, ReadFile(path="w.txt", offset=5), 64_000).output
    assert out == "[offset 5 is past the end: the file has 3 lines]"


def test_read_file_of_an_empty_file_says_it_is_empty(ws: Workspace, tree: Tree) -> None:
    (tree.root / "e.txt").touch()
    assert files.read_file(ws, ReadFile(path="e.txt"), 64_000).output == "[e.txt is empty]"


def test_read_file_over_the_limit_is_cut_with_a_marker_counting_the_rest(ws: Workspace, tree: Tree) -> None:
    (tree.root / "big.txt").write_text("x" * 3000 + "\n" + "y" * 3000 + "\n")
    out = files.read_file(ws, ReadFile(path="big.txt"), 1024).output
    assert out == ("     1\t" + "x" * 1017 + "\n[… truncated: 4985 more bytes; line 1 alone is longer than the output "
                   "limit; continue with offset=1]")
    limited = files.read_file(ws, ReadFile(path="big.txt", limit=1), 1024).output
    assert limited.endswith("\n[… truncated: 1984 more bytes; line 1 alone is longer than the output limit; continue "
                            "with offset=1]")


def test_read_file_shows_an_output_of_exactly_the_limit_whole_and_cuts_one_byte_more(ws: Workspace,
                                                                                   tree: Tree) -> None:
    (tree.root / "fits.txt").write_text("x" * 1016 + "\n")  # "     1\t" + 1016 + "\n": 1024 bytes shown
    (tree.root / "over.txt").write_text("x" * 1017 + "\n")
    assert files.read_file(ws, ReadFile(path="fits.txt"), 1024).output == "     1\t" + "x" * 1016 + "\n"
    assert files.read_file(ws, ReadFile(path="over.txt"), 1024).output == (
        "     1\t" + "x" * 1017 + "\n[… truncated: 1 more bytes; line 1 alone is longer than the output limit; "
        "continue with offset=1]")


def test_read_file_cut_between_lines_says_which_offset_continues(ws: Workspace, tree: Tree) -> None:
    (tree.root / "n.txt").write_text("".join(f"line {i}\n" for i in range(100)))
    out = files.read_file(ws, ReadFile(path="n.txt"), 60).output
    assert out == ("     1\tline 0\n     2\tline 1\n     3\tline 2\n     4\tline 3\n"
                   "[… truncated: 762 more bytes; continue with offset=4]")
    cut = files.read_file(ws, ReadFile(path="n.txt"), 64).output
    assert cut.endswith("     5\tl\n[… truncated: 761 more bytes, from line 5 on; continue with offset=4]")
    following = files.read_file(ws, ReadFile(path="n.txt", offset=4, limit=1), 64).output
    assert following == "     5\tline 4\n"


def test_read_file_never_splits_a_utf8_character_at_the_cut(ws: Workspace, tree: Tree) -> None:
    (tree.root / "u.txt").write_text("a" + "é" * 1000)  # 1 + 2000 bytes: the cut falls mid-character
    out = files.read_file(ws, ReadFile(path="u.txt"), 1024).output
    assert out == ("     1\ta" + "é" * 508 + "\n[… truncated: 984 more bytes; line 1 alone is longer than the output "
                   "limit; continue with offset=1]")


def test_read_file_refuses_binary_and_replaces_other_invalid_utf8(ws: Workspace, tree: Tree) -> None:
    (tree.root / "bin.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (tree.root / "late.dat").write_bytes(b"text\n" * 3000 + b"\x00")  # the NUL is past the first 8 KiB
    (tree.root / "latin1.txt").write_bytes(b"caf\xe9\n")
    for path in ("bin.dat", "late.dat"):
        with pytest.raises(SandboxError) as info:
            files.read_file(ws, ReadFile(path=path), 64_000)
        assert str(info.value) == (f"path '{path}' looks binary (it contains NUL bytes); the file tools handle "
                                   "text only (ACODE-SBX-004)")
    assert files.read_file(ws, ReadFile(path="latin1.txt"), 64_000).output == "     1\tcaf\ufffd\n"


def test_read_file_refuses_directories_fifos_and_sockets_without_blocking(ws: Workspace, tree: Tree) -> None:
    import socket

    os.mkfifo(tree.root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tree.root / "sock"))
        for path, what in (("src", "a directory"), ("pipe", "a named pipe (FIFO)"), ("sock", "a socket")):
            with pytest.raises(SandboxError) as info:
                files.read_file(ws, ReadFile(path=path), 64_000)
            assert info.value.code == "ACODE-SBX-004"
            assert info.value.message.startswith(f"path '{path}' is {what};")
    finally:
        sock.close()


def test_read_file_of_a_missing_file_says_so(ws: Workspace, tree: Tree) -> None:
    with pytest.raises(SandboxError) as info:
        files.read_file(ws, ReadFile(path="src/nope.py"), 64_000)
    assert str(info.value) == (f"path 'src/nope.py' does not exist in the workspace {tree.root}; check the name "
                               "with list_directory (ACODE-SBX-003)")


_FILLER = 14_000  # lines of "fill\n": 70,000 bytes, more than read_file reads of a small file in one go
_TEXT = st.lists(st.sampled_from(["a", "b", " ", "\r", "é", "€", "😀", "\n", "\r\n"]), min_size=1,
                 max_size=300).map("".join)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@hypothesis.given(_TEXT, st.integers(0, 40), st.one_of(st.none(), st.integers(1, 30)),
                  st.sampled_from([1_024, 1_100, 64_000]))
def test_read_file_shows_the_lines_of_a_large_file_as_it_shows_those_of_a_small_one(
        ws: Workspace, tree: Tree, text: str, offset: int, limit: int | None, max_bytes: int) -> None:
    # a small file is read whole and shown in one pass; a large one line by line: same lines, same cuts
    (tree.root / "small.txt").write_bytes(text.encode() * 8)
    (tree.root / "large.txt").write_bytes(b"fill\n" * _FILLER + text.encode() * 8)
    small = files.read_file(ws, ReadFile(path="small.txt", offset=offset, limit=limit), max_bytes).output
    large = files.read_file(ws, ReadFile(path="large.txt", offset=_FILLER + offset, limit=limit), max_bytes).output
    shifted = re.sub(r"(?m)^ *(\d+)\t|(offset[ =]|line |has )(\d+)",
                     lambda m: f"{int(m[1]) + _FILLER:>6}\t" if m[1] else f"{m[2]}{int(m[3]) + _FILLER}", small)
    assert large == shifted


# -- write_file -----------------------------------------------------------------------------


def test_write_file_replaces_atomically_keeps_the_mode_and_leaves_no_temp_file(ws: Workspace, tree: Tree) -> None:
    target = tree.root / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    old_inode = target.stat().st_ino
    outcome = files.write_file(ws, WriteFile(path="run.sh", content="#!/bin/sh\necho hi\n"))
    assert outcome.output == "wrote 18 bytes to run.sh"
    assert outcome.path == "run.sh"
    assert target.read_text() == "#!/bin/sh\necho hi\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.stat().st_ino != old_inode  # a new inode renamed into place, not rewritten in place
    assert sorted(p.name for p in tree.root.iterdir()) == ["run.sh", "src"]


def test_write_and_modify_refuse_a_hardlinked_file_saying_why(ws: Workspace, tree: Tree) -> None:
    (tree.root / "one.txt").write_text("shared\n")
    os.link(tree.root / "one.txt", tree.root / "two.txt")  # both names inside: still refused, the rule is local
    calls = [("two.txt", lambda: files.write_file(ws, WriteFile(path="two.txt", content="x"))),
             ("two.txt", lambda: files.modify_file(ws, ModifyFile(path="two.txt",
                                                                  edits=[Edit(search="shared", replace="x")]))),
             ("one.txt", lambda: files.modify_file(ws, ModifyFile(path="one.txt", diff="@@ -1 +1 @@\n-shared\n+x\n")))]
    for path, call in calls:
        with pytest.raises(SandboxError) as info:
            call()
        assert str(info.value) == (
            f"path '{path}' is a hard link: 2 names share this file and another may be outside the workspace, so "
            "the file tools will not change it; break the link first (copy the file over itself under a new "
            "inode) or write to a new path (ACODE-SBX-014)")
    assert (tree.root / "one.txt").read_text() == "shared\n"
    assert os.stat(tree.root / "one.txt").st_nlink == 2


def test_write_and_modify_refuse_fifos_sockets_and_devices_as_targets(ws: Workspace, tree: Tree) -> None:
    import socket

    os.mkfifo(tree.root / "pipe")
    targets = {"pipe": "a named pipe (FIFO)", "sock": "a socket"}
    try:
        os.mknod(tree.root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        targets["zero"] = "a device"
    except PermissionError:
        pass  # not root: no device node to test with
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tree.root / "sock"))
        for path, what in targets.items():
            edit = [Edit(search="a", replace="b")]
            for args in (WriteFile(path=path, content="x"), ModifyFile(path=path, edits=edit)):
                with pytest.raises(SandboxError) as info:
                    if isinstance(args, WriteFile):
                        files.write_file(ws, args)
                    else:
                        files.modify_file(ws, args)
                assert info.value.code == "ACODE-SBX-004"
                assert info.value.message.startswith(f"path '{path}' is {what}")
            assert not stat.S_ISREG(os.lstat(tree.root / path).st_mode)  # still what it was: not replaced


def test_a_write_retried_after_a_crash_takes_over_the_temp_file_the_crash_left(ws: Workspace, tree: Tree) -> None:
    content = "after the crash\n"
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    leftover = tree.root / f".c.txt.{digest}.acode.tmp"
    leftover.write_text("half writ")  # what a kill -9 between create and rename leaves
    files.write_file(ws, WriteFile(path="c.txt", content=content))
    assert (tree.root / "c.txt").read_text() == content
    assert not leftover.exists()


def test_a_planted_hard_link_at_the_temp_name_is_unlinked_not_written_through(ws: Workspace, tree: Tree) -> None:
    content = "x"
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    os.link(tree.outside / "canary.txt", tree.root / f".d.txt.{digest}.acode.tmp")
    files.write_file(ws, WriteFile(path="d.txt", content=content))
    assert tree.canaries_intact()


def test_write_file_reports_the_normalized_relative_path_and_refuses_directories(ws: Workspace, tree: Tree) -> None:
    assert files.write_file(ws, WriteFile(path=f"{tree.root}/src/../b.txt", content="b")).path == "b.txt"
    assert _code(lambda: files.write_file(ws, WriteFile(path="src", content="x"))) == "ACODE-SBX-004"
    assert _code(lambda: files.write_file(ws, WriteFile(path="src/a.py/x", content="x"))) == "ACODE-SBX-004"


# -- modify_file ----------------------------------------------------------------------------


def test_modify_file_applies_every_edit_in_order(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("a = 1\nb = 2\n")
    edits = [Edit(search="a = 1", replace="a = 10"), Edit(search="a = 10\nb", replace="a = 10\nc")]
    assert files.modify_file(ws, ModifyFile(path="m.py", edits=edits)).output == "applied 2 edits to m.py"
    assert (tree.root / "m.py").read_text() == "a = 10\nc = 2\n"


@pytest.mark.parametrize(("search", "found"), [("missing", 0), ("x =", 2), ("aa", 2)])
def test_modify_file_refuses_a_search_not_matching_exactly_once_and_applies_nothing(
        ws: Workspace, tree: Tree, search: str, found: int) -> None:
    original = "x = 1\nx = 2\nx = 3\naaa\n"  # edit 1 runs first: two "x =" are left for edit 2
    (tree.root / "m.py").write_text(original)
    edits = [Edit(search="x = 1", replace="y = 1"), Edit(search=search, replace="z")]
    with pytest.raises(SandboxError) as info:
        files.modify_file(ws, ModifyFile(path="m.py", edits=edits))
    assert info.value.code == "ACODE-SBX-009"
    assert info.value.message.startswith(f"edit 2 of 2: the search text {search!r} matches {found} times in m.py; "
                                         "it must match exactly once, so no edit was applied; ")
    assert (tree.root / "m.py").read_text() == original


def _refusal(ws: Workspace, path: str, *edits: Edit) -> str:
    with pytest.raises(SandboxError) as info:
        files.modify_file(ws, ModifyFile(path=path, edits=list(edits)))
    assert info.value.code == "ACODE-SBX-009"
    return info.value.message


def test_a_search_matching_nowhere_quotes_the_closest_region_with_line_numbers(ws: Workspace, tree: Tree) -> None:
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))
    (tree.root / "m.py").write_text(body)
    message = _refusal(ws, "m.py", Edit(search="def f17(x):\n  return x+17", replace="z"))
    assert message == ("edit 1 of 1: the search text 'def f17(x):\\n  return x+17' matches 0 times in m.py; it "
                       "must match exactly once, so no edit was applied; read the file again and copy the exact "
                       "text, whitespace included; the closest region is lines 52-53:\n"
                       "    52\tdef f17(x):\n    53\t    return x + 17")
    assert (tree.root / "m.py").read_text() == body


def test_the_closest_region_is_capped_and_absent_when_nothing_is_alike(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("".join(f"line {i} {'w' * 500}\n" for i in range(30)))
    message = _refusal(ws, "m.py", Edit(search="".join(f"line {i} {'v' * 500}\n" for i in range(3, 20)),
                                        replace="z"))
    region = message.split("the closest region is lines 4-20:\n", 1)[1]
    assert region.splitlines()[0] == "     4\tline 3 " + "w" * 193 + "…"
    assert region.splitlines()[-1] == "[… 7 more lines]"
    assert len(region.splitlines()) == 11
    message = _refusal(ws, "m.py", Edit(search="qqq zzz", replace="z"))
    assert message.endswith("; there is no closest region: no line of the file shares a word with it")


def test_a_search_with_read_file_line_numbers_gets_told_to_drop_them(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("a = 1\nb = 2\n")
    message = _refusal(ws, "m.py", Edit(search="     1\ta = 1\n     2\tb = 2", replace="z"))
    assert "(leave out the line numbers read_file puts before each line)" in message
    assert message.endswith("the closest region is lines 1-2:\n     1\ta = 1\n     2\tb = 2")


def test_a_search_matching_many_times_names_the_first_lines_with_their_neighbours(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("pass\n" * 8 + "x = 1\n")
    message = _refusal(ws, "m.py", Edit(search="x = 1", replace="x = 2"), Edit(search="pass", replace="..."))
    assert message == ("edit 2 of 2: the search text 'pass' matches 8 times in m.py; it must match exactly once, so "
                       "no edit was applied; add a neighbouring line to the search so it is unique, or give the edit "
                       "`line`, the line number of the match you mean, or send the whole new text with write_file "
                       "(the file has 9 lines); it matches at lines 1, 2, 3, 4, 5 and 3 more (line numbers as edit 1 "
                       "left the file):\n"
                       "     1\tpass\n     2\tpass\n--\n     1\tpass\n     2\tpass\n     3\tpass\n--\n"
                       "     2\tpass\n     3\tpass\n     4\tpass\n--\n     3\tpass\n     4\tpass\n     5\tpass\n--\n"
                       "     4\tpass\n     5\tpass\n     6\tpass")


def test_the_closest_region_stays_fast_on_a_10_mb_file(ws: Workspace, tree: Tree) -> None:
    import time

    lines = [f"    value_{i % 977} = compute(item_{i}, offset={i % 13})" for i in range(220_000)]
    (tree.root / "big.py").write_text("\n".join(lines) + "\n")
    assert (tree.root / "big.py").stat().st_size > 10_000_000
    start = time.monotonic()
    message = _refusal(ws, "big.py", Edit(search="value_524 = compute(item_150005, offset=11)\n"
                                                 "value_525 = compute(item_150006, ofset=12)", replace="z"))
    assert time.monotonic() - start < 3.0  # ~0.3 s here; generous for a loaded CI machine
    assert message.endswith("the closest region is lines 150006-150007:\n"
                            "150006\t    value_524 = compute(item_150005, offset=11)\n"
                            "150007\t    value_525 = compute(item_150006, offset=12)")


def test_modify_file_keeps_crlf_line_endings(ws: Workspace, tree: Tree) -> None:
    (tree.root / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    files.modify_file(ws, ModifyFile(path="w.txt", edits=[Edit(search="one\ntwo", replace="1\n2\n3")]))
    assert (tree.root / "w.txt").read_bytes() == b"1\r\n2\r\n3\r\n"


def test_modify_file_keeps_lf_files_lf_and_mixed_files_exact(ws: Workspace, tree: Tree) -> None:
    (tree.root / "lf.txt").write_bytes(b"one\ntwo\n")
    files.modify_file(ws, ModifyFile(path="lf.txt", edits=[Edit(search="one\r\ntwo", replace="1\r\n2")]))
    assert (tree.root / "lf.txt").read_bytes() == b"1\n2\n"
    (tree.root / "mixed.txt").write_bytes(b"a\r\nb\nc\n")
    assert _refusal(ws, "mixed.txt", Edit(search="a\nb", replace="x")).startswith(
        "edit 1 of 1: the search text 'a\\nb' matches 0 times")
    files.modify_file(ws, ModifyFile(path="mixed.txt", edits=[Edit(search="a\r\nb\n", replace="x\n")]))
    assert (tree.root / "mixed.txt").read_bytes() == b"x\nc\n"


def test_modify_file_keeps_a_utf8_bom(ws: Workspace, tree: Tree) -> None:
    (tree.root / "bom.txt").write_bytes("\ufeffnamé = 1\n".encode())
    files.modify_file(ws, ModifyFile(path="bom.txt", edits=[Edit(search="namé = 1", replace="namé = 2")]))
    assert (tree.root / "bom.txt").read_bytes() == "\ufeffnamé = 2\n".encode()


def test_modify_file_takes_exactly_one_of_edits_and_diff(ws: Workspace, tree: Tree) -> None:
    (tree.root / "m.py").write_text("a\n")
    for args, given in ((ModifyFile(path="m.py"), "neither"),
                        (ModifyFile(path="m.py", edits=[Edit(search="a", replace="b")], diff="@@ -1 +1 @@\n-a\n+b\n"),
                         "both")):
        with pytest.raises(SandboxError) as info:
            files.modify_file(ws, args)
        assert str(info.value) == (f"modify_file of 'm.py' got {given} of edits and diff; give exactly one: edits "
                                   "(search/replace pairs) or diff (a unified diff of this file) (ACODE-SBX-007)")
    huge = "@@ -1 +1 @@\n-a\n+" + "é" * 600_000 + "\n"  # under the schema's 1,000,000 characters, over 1 MiB
    with pytest.raises(SandboxError) as info:
        files.modify_file(ws, ModifyFile(path="m.py", diff=huge))
    assert info.value.code == "ACODE-SBX-007"
    assert "bytes, over the 1048576-byte limit" in info.value.message
    assert (tree.root / "m.py").read_text() == "a\n"


def test_modify_file_of_a_missing_file_is_not_found(ws: Workspace) -> None:
    edit = [Edit(search="a", replace="b")]
    assert _code(lambda: files.modify_file(ws, ModifyFile(path="nope.py", edits=edit))) == "ACODE-SBX-003"


# -- create_directory and pre-images ----------------------------------------------------------


def test_create_directory_makes_parents_and_is_idempotent(ws: Workspace, tree: Tree) -> None:
    assert files.create_directory(ws, CreateDirectory(path="a/b/c")).output == "created directory a/b/c"
    assert files.create_directory(ws, CreateDirectory(path="a/b/c")).output == "directory a/b/c already exists"
    assert (tree.root / "a" / "b" / "c").is_dir()
    assert _code(lambda: files.create_directory(ws, CreateDirectory(path="src/a.py"))) == "ACODE-SBX-004"


def test_image_is_the_sha256_of_the_file_or_absent(ws: Workspace, tree: Tree) -> None:
    import hashlib

    assert files.image(ws, "src/a.py") == hashlib.sha256(b"print('inside')\n").hexdigest()
    assert files.image(ws, "src/new.py") == files.ABSENT
    assert files.image(ws, "nodir/new.py") == files.ABSENT
    assert files.image(ws, "src") is None
    assert files.image(ws, "../outside/canary.txt") is None


SETTINGS = 'DEBUG = True\nDB_PASSWORD = "hunter2-x9z"\nAPI_URL = "https://api.example"\n'


def test_a_write_never_puts_a_redaction_placeholder_where_the_file_holds_a_secret(ws: Workspace, tree: Tree) -> None:
    """What the model read was redacted; writing it back would replace the user's secret
    with the placeholder, and so would a replayed answer recorded redacted (ACODE-SBX-022)."""
    from protocol.basics.redact import redact

    path = tree.root / "settings.py"
    path.write_text(SETTINGS)
    seen = redact(files.read_file(ws, ReadFile(path="settings.py"), 10_000).output)
    assert "[REDACTED:" in seen and "hunter2" not in seen  # what the model was shown
    whole = redact(SETTINGS).replace("DEBUG = True", "DEBUG = False")
    token = redact("token=ghp_" + "a" * 36)
    for write in (lambda: files.write_file(ws, WriteFile(path="settings.py", content=whole)),
                  lambda: files.modify_file(ws, ModifyFile(path="settings.py", edits=[
                      Edit(search="DEBUG = True", replace=f"DEBUG = False\nOTHER = {token}")])),
                  lambda: files.write_file(ws, WriteFile(path="new.py", content=whole))):
        with pytest.raises(SandboxError) as refused:
            write()
        assert refused.value.code == "ACODE-SBX-022" and "[REDACTED:" in refused.value.message
    assert path.read_text() == SETTINGS and not (tree.root / "new.py").exists()
    # Another line changes; a file that really holds a placeholder's text keeps it.
    files.modify_file(ws, ModifyFile(path="settings.py", edits=[Edit(search="DEBUG = True", replace="DEBUG = False")]))
    assert path.read_text() == SETTINGS.replace("DEBUG = True", "DEBUG = False")
    (tree.root / "doc.md").write_text("shown as [REDACTED:github-token]\n")
    files.write_file(ws, WriteFile(path="doc.md", content="still shown as [REDACTED:github-token]\n"))
