"""The command-line parser: options resolved as getopt_long and git's parse-options resolve
them, clusters, values, ``--``, and the wrappers in front of a program."""

from __future__ import annotations

import pytest

from protocol.calls.cmdline import parse, spec, unwrap
from protocol.calls.cmdtables import GIT, PROGRAMS

SED = PROGRAMS["sed"]


@pytest.mark.parametrize(("table", "words", "name"), [
    (GIT["reset"], ["--ha"], "--hard"), (GIT["reset"], ["--hard"], "--hard"), (GIT["reset"], ["--so"], "--soft"),
    (GIT["clean"], ["--dry"], "--dry-run"), (GIT["clean"], ["--fo"], "--force"), (GIT["commit"], ["--am"], "--amend"),
    (GIT["branch"], ["--del"], "--delete"), (GIT["switch"], ["--disc"], "--discard-changes"),
    (SED, ["--in", "s/a/b/"], "--in-place"), (SED, ["--in-pl=.bak"], "--in-place"),
    (PROGRAMS["awk"], ["--inc=inplace"], "--include"), (PROGRAMS["tar"], ["--remove"], "--remove-files"),
    (PROGRAMS["sort"], ["--out=f"], "--output"), (PROGRAMS["cp"], ["--no-c"], "--no-clobber"),
    (GIT["grep"], ["--open"], "--open-files-in-pager"), (GIT["diff"], ["--ext"], "--ext-diff"),
    (PROGRAMS["rg"], ["--pre-g=*"], "--pre-glob"), (GIT["archive"], ["--out=x"], "--output"),
])
def test_a_unique_prefix_of_a_long_option_is_that_option(table, words, name) -> None:  # type: ignore[no-untyped-def]
    option = parse(table, words).options[0]
    assert option.known and option.name == name and option.raw == words[0]


def test_an_exact_name_wins_over_a_longer_option_it_prefixes() -> None:
    table = spec("text textconv")
    assert parse(table, ["--text"]).options[0].candidates == ("--text",)
    assert parse(table, ["--tex"]).options[0].candidates == ("--text", "--textconv")


def test_a_prefix_of_several_options_is_ambiguous_and_names_them_all() -> None:
    option = parse(GIT["reset"], ["--re"]).options[0]
    assert option.ambiguous and option.candidates == ("--recurse-submodules", "--refresh")
    assert parse(GIT["reset"], ["--re"]).may_be("--refresh") == option


def test_git_negations_and_their_abbreviations_resolve() -> None:
    # git says: ambiguous option: no-ver (could be --no-verbose or --no-verify)
    assert parse(GIT["commit"], ["--no-ver"]).options[0].candidates == ("--no-verbose", "--no-verify")
    assert parse(GIT["commit"], ["--no-veri"]).options[0].name == "--no-verify"
    assert parse(GIT["reset"], ["--no-ha"]).options[0].name == "--no-hard"
    assert parse(GIT["reset"], ["--no"]).options[0].ambiguous  # "no-" of every option


def test_an_option_the_table_does_not_know_may_still_be_a_dangerous_one() -> None:
    parsed = parse(spec("quiet"), ["--outp=x", "-O"])
    assert parsed.unknown and parsed.may_be("--output") is parsed.options[0]
    assert parsed.may_be("-O") is parsed.options[1]
    assert parsed.may_be("--quiet") is None


@pytest.mark.parametrize(("words", "names", "values", "operands"), [
    (["-fdx"], ["--force", "-d", "-x"], [None, None, None], []),
    (["-fdxe", "pat"], ["--force", "-d", "-x", "--exclude"], [None, None, None, "pat"], []),
    (["-fdxepat", "f"], ["--force", "-d", "-x", "--exclude"], [None, None, None, "pat"], ["f"]),
    (["--exclude=pat", "f"], ["--exclude"], ["pat"], ["f"]),
    (["--exclude", "pat", "f"], ["--exclude"], ["pat"], ["f"]),
    (["--excl", "pat", "f"], ["--exclude"], ["pat"], ["f"]),
    (["f", "-n"], ["--dry-run"], [None], ["f"]),  # options after operands: git and GNU permute
    (["--", "-f", "x"], [], [], ["-f", "x"]),  # -- ends the options
    (["-", "-n"], ["--dry-run"], [None], ["-"]),
])
def test_clusters_values_and_the_end_of_options(words, names, values, operands) -> None:  # type: ignore[no-untyped-def]
    parsed = parse(GIT["clean"], words)
    assert [o.name for o in parsed.options] == names
    assert [o.value for o in parsed.options] == values
    assert list(parsed.operands) == operands


def test_an_optional_value_is_only_ever_attached() -> None:
    assert [(o.name, o.value) for o in parse(SED, ["-i", "s/a/b/", "f"]).options] == [("--in-place", None)]
    assert parse(SED, ["-i", "s/a/b/", "f"]).operands == ("s/a/b/", "f")
    # -nie: -n, then -i with the suffix "e" (not -e SCRIPT)
    assert [(o.name, o.value) for o in parse(SED, ["-nie", "s/a/b/"]).options] == [("--quiet", None),
                                                                                  ("--in-place", "e")]
    assert parse(SED, ["--in-place", "x"]).operands == ("x",)


def test_a_program_that_does_not_permute_stops_at_its_first_operand() -> None:
    parsed = parse(PROGRAMS["awk"], ["-F:", "{print}", "-f", "x"])
    assert [o.name for o in parsed.options] == ["--field-separator"]
    assert parsed.operands == ("{print}", "-f", "x")


@pytest.mark.parametrize(("argv", "program", "wrappers"), [
    (["env", "-u", "VAR", "rm", "-rf", "src"], ["rm", "-rf", "src"], ["env"]),
    (["env", "--unset=VAR", "rm", "x"], ["rm", "x"], ["env"]),
    (["env", "--uns", "VAR", "rm", "x"], ["rm", "x"], ["env"]),
    (["env", "-i", "A=1", "B=2", "rm", "x"], ["rm", "x"], ["env"]),
    (["env", "-iu", "VAR", "rm", "x"], ["rm", "x"], ["env"]),
    (["env", "--", "rm", "x"], ["rm", "x"], ["env"]),
    (["nice", "-n", "5", "rm", "x"], ["rm", "x"], ["nice"]),
    (["nice", "-5", "rm", "x"], ["rm", "x"], ["nice"]),
    (["nice", "--adjustment=5", "rm", "x"], ["rm", "x"], ["nice"]),
    (["timeout", "-s", "KILL", "5", "rm", "x"], ["rm", "x"], ["timeout"]),
    (["timeout", "--kill-after=1", "5s", "git", "stash"], ["git", "stash"], ["timeout"]),
    (["nohup", "rm", "x"], ["rm", "x"], ["nohup"]),
    (["stdbuf", "-o", "L", "rm", "x"], ["rm", "x"], ["stdbuf"]),
    (["stdbuf", "-oL", "rm", "x"], ["rm", "x"], ["stdbuf"]),
    (["ionice", "-c", "3", "rm", "x"], ["rm", "x"], ["ionice"]),
    (["time", "-p", "rm", "x"], ["rm", "x"], ["time"]),
    (["command", "rm", "x"], ["rm", "x"], ["command"]),
    (["command", "-v", "rm"], [], ["command"]),
    (["env", "nice", "timeout", "1", "nohup", "rm", "x"], ["rm", "x"], ["env", "nice", "timeout", "nohup"]),
    (["env"], [], ["env"]),
    (["env", "-u", "X"], [], ["env"]),
])
def test_wrappers_are_peeled_to_the_program_they_run(argv, program, wrappers) -> None:  # type: ignore[no-untyped-def]
    wrapped = unwrap(argv)
    assert list(wrapped.argv) == program
    assert [name for name, _ in wrapped.wrappers] == wrappers
