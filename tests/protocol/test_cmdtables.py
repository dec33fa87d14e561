"""The option tables against the installed programs: each table holds the program's own
options, and a prefix means here what it means to the program (run in a temp dir; a check
is skipped only when the program is not installed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from protocol.calls.cmdline import WRAPPERS, parse, resolve, unwrap
from protocol.calls.cmdtables import GIT, PROGRAMS

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False)
    if check:
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _run(["git", "init", "-q", "-b", "main", "."], tmp_path)
    (tmp_path / "a.txt").write_text("one\n")
    _run(["git", "add", "a.txt"], tmp_path)
    _run(["git", "commit", "-q", "-m", "first"], tmp_path)
    return tmp_path


def _helper(words: list[str], cwd: Path) -> list[str]:
    out = _run(["git", *words, "--git-completion-helper-all"], cwd, check=False).stdout
    return [w for w in out.split(" -- ")[0].split() if w.startswith("--")]


@needs_git
@pytest.mark.parametrize("command", sorted(k for k in GIT if k not in ("diff", "log", "show", "whatchanged",
                                                                          "stash pop")))
def test_each_git_table_holds_every_option_git_lists(command: str, repo: Path) -> None:
    listed = _helper(command.split(), repo)
    assert listed, f"git {command} listed no options"
    table = GIT[command]
    for word in listed:
        name = word[2:].removesuffix("=")
        assert resolve(table, name) == ("--" + name,), f"git {command} {word} is missing from the table"
        if word.endswith("="):
            assert table.long.get(name) == "required", f"git {command} {word} takes a value"
        else:  # a flag or an optional value: taking the next word would hide it from every rule
            assert table.long.get(name, "none") != "required", f"git {command} {word} takes no separate value"


@needs_git
def test_the_diff_tables_hold_every_diff_option_git_lists(repo: Path) -> None:
    for command in ("diff", "log", "show"):
        for word in _helper(["diff"], repo):
            name = word[2:].removesuffix("=")
            assert resolve(GIT[command], name) == ("--" + name,), (command, word)
            assert (GIT[command].long[name] == "required") == word.endswith("="), (command, word)


@pytest.mark.parametrize("program", ["cp", "mv", "rm", "sort", "uniq", "touch", "mkdir", "sed", "tar"])
def test_each_gnu_table_holds_every_long_option_of_the_programs_help(program: str, tmp_path: Path) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    text = _run([program, "--help"], tmp_path).stdout
    names = set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]+)", text))
    missing = sorted(n for n in names if resolve(PROGRAMS[program], n) != ("--" + n,))
    assert not missing, f"{program} --help lists options the table lacks: {missing}"
    forms: dict[str, set[str]] = {}
    for name, form in re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]+)(\[=|=|)", text):
        forms.setdefault(name, set()).add(form)
    for name, seen in forms.items():
        ours = PROGRAMS[program].long[name]
        if "=" in seen and "[=" not in seen:
            assert ours != "none", f"{program} --{name} takes a value ({seen})"
        if seen <= {"", "[="}:  # a flag or an optional value: the next word is not its value
            assert ours != "required", f"{program} --{name} takes no separate value ({seen})"


# --- a prefix means what the program takes it to mean ------------------------------------------

@needs_git
def test_git_reset_ha_is_reset_hard(repo: Path) -> None:
    assert parse(GIT["reset"], ["--ha"]).options[0].name == "--hard"
    (repo / "a.txt").write_text("edited\n")
    _run(["git", "reset", "--ha"], repo)
    assert (repo / "a.txt").read_text() == "one\n"  # the edit is gone: it was --hard


@needs_git
def test_git_reset_re_is_ambiguous_to_git_and_here(repo: Path) -> None:
    result = _run(["git", "reset", "--re"], repo, check=False)
    assert result.returncode != 0 and "ambiguous" in result.stderr
    assert parse(GIT["reset"], ["--re"]).options[0].ambiguous


@needs_git
def test_git_clean_dry_is_a_dry_run_and_fo_forces(repo: Path) -> None:
    (repo / "junk.txt").write_text("x")
    assert parse(GIT["clean"], ["--dry"]).options[0].name == "--dry-run"
    _run(["git", "clean", "--dry"], repo)
    assert (repo / "junk.txt").exists()
    assert parse(GIT["clean"], ["--fo"]).options[0].name == "--force"
    _run(["git", "clean", "--fo"], repo)
    assert not (repo / "junk.txt").exists()


@needs_git
def test_git_branch_del_for_deletes_a_branch(repo: Path) -> None:
    _run(["git", "branch", "side"], repo)
    # git: "ambiguous option: for (could be --force or --format)"; so here
    assert parse(GIT["branch"], ["--for"]).options[0].candidates == ("--force", "--format")
    assert "ambiguous" in _run(["git", "branch", "--del", "--for", "side"], repo, check=False).stderr
    names = [o.name for o in parse(GIT["branch"], ["--del", "--forc", "side"]).options]
    assert names == ["--delete", "--force"]
    _run(["git", "branch", "--del", "--forc", "side"], repo)
    assert "side" not in _run(["git", "branch"], repo).stdout


@needs_git
def test_git_commit_am_amends(repo: Path) -> None:
    assert parse(GIT["commit"], ["--am"]).options[0].name == "--amend"
    _run(["git", "commit", "-q", "--am", "-m", "rewritten"], repo)
    assert _run(["git", "log", "--format=%s"], repo).stdout.split() == ["rewritten"]


@needs_git
def test_git_switch_disc_discards_changes(repo: Path) -> None:
    _run(["git", "branch", "side"], repo)
    (repo / "a.txt").write_text("edited\n")
    assert parse(GIT["switch"], ["--disc"]).options[0].name == "--discard-changes"
    _run(["git", "switch", "-q", "--disc", "side"], repo)
    assert (repo / "a.txt").read_text() == "one\n"


@needs_git
def test_git_archive_reads_out_as_output(repo: Path) -> None:
    assert parse(GIT["archive"], ["--out=x.tar"]).options[0].name == "--output"
    result = _run(["git", "archive", "--out=x.tar", "HEAD"], repo, check=False)
    # git 2.39 resolves it to --output, then refuses the abbreviation in its second pass;
    # the policy refuses it either way
    assert (repo / "x.tar").exists() or "--output" in result.stderr
    _run(["git", "archive", "-o", "y.tar", "HEAD"], repo)
    assert (repo / "y.tar").exists()


def _tool(program: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")


def test_sed_in_is_in_place(tmp_path: Path) -> None:
    _tool("sed")
    (tmp_path / "f").write_text("a\n")
    assert parse(PROGRAMS["sed"], ["--in", "s/a/b/", "f"]).options[0].name == "--in-place"
    _run(["sed", "--in", "s/a/b/", "f"], tmp_path)
    assert (tmp_path / "f").read_text() == "b\n"


def test_sed_nie_is_in_place_with_a_suffix(tmp_path: Path) -> None:
    _tool("sed")
    (tmp_path / "f").write_text("a\n")
    _run(["sed", "-nie", "s/a/b/", "f"], tmp_path)
    assert (tmp_path / "f").read_text() == "" and (tmp_path / "fe").read_text() == "a\n"
    assert [o.name for o in parse(PROGRAMS["sed"], ["-nie", "s/a/b/", "f"]).options] == ["--quiet", "--in-place"]


def test_sort_out_writes_the_file(tmp_path: Path) -> None:
    _tool("sort")
    (tmp_path / "in").write_text("b\na\n")
    (tmp_path / "keep").write_text("precious\n")
    assert parse(PROGRAMS["sort"], ["--out=keep"]).options[0].name == "--output"
    _run(["sort", "--out=keep", "in"], tmp_path)
    assert (tmp_path / "keep").read_text() == "a\nb\n"


def test_cp_no_c_does_not_clobber(tmp_path: Path) -> None:
    _tool("cp")
    (tmp_path / "a").write_text("new\n")
    (tmp_path / "b").write_text("precious\n")
    assert parse(PROGRAMS["cp"], ["--no-c"]).options[0].name == "--no-clobber"
    _run(["cp", "--no-c", "a", "b"], tmp_path, check=False)
    assert (tmp_path / "b").read_text() == "precious\n"


def test_tar_remove_removes_the_files_it_archives(tmp_path: Path) -> None:
    _tool("tar")
    (tmp_path / "x").write_text("precious\n")
    assert parse(PROGRAMS["tar"], ["--remove"]).options[0].name == "--remove-files"
    _run(["tar", "--remove", "-cf", "a.tar", "x"], tmp_path)
    assert not (tmp_path / "x").exists()


def test_uniq_with_two_operands_writes_the_second(tmp_path: Path) -> None:
    _tool("uniq")
    (tmp_path / "in").write_text("a\na\n")
    (tmp_path / "out").write_text("precious\n")
    assert parse(PROGRAMS["uniq"], ["in", "out"]).operands == ("in", "out")
    _run(["uniq", "in", "out"], tmp_path)
    assert (tmp_path / "out").read_text() == "a\n"


def test_env_u_var_runs_the_program_after_the_variable(tmp_path: Path) -> None:
    _tool("env")
    argv = ["env", "-u", "VAR", "--unset=OTHER", "-i", "touch", "made"]
    assert unwrap(argv).argv == ("touch", "made")
    _run(argv, tmp_path)
    assert (tmp_path / "made").exists()


def test_find_does_not_abbreviate_its_actions(tmp_path: Path) -> None:
    _tool("find")
    (tmp_path / "x").write_text("x")
    result = _run(["find", ".", "-del"], tmp_path, check=False)
    assert result.returncode != 0 and (tmp_path / "x").exists()


@pytest.mark.parametrize("wrapper", ["env", "nice", "timeout", "nohup", "stdbuf", "ionice", "time"])
def test_each_wrapper_table_holds_every_long_option_of_the_programs_help(wrapper: str, tmp_path: Path) -> None:
    path = shutil.which(wrapper)
    if path is None:
        pytest.skip(f"{wrapper} is not installed")
    text = _run([path, "--help"], tmp_path, check=False).stdout
    names = set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]+)", text))
    assert names, f"{wrapper} --help lists no options"
    missing = sorted(n for n in names if resolve(WRAPPERS[wrapper], n) != ("--" + n,))
    assert not missing, f"{wrapper} --help lists options the table lacks: {missing}"


def test_timeout_runs_the_program_after_its_duration(tmp_path: Path) -> None:
    _tool("timeout")
    argv = ["timeout", "-k", "5", "--signal=TERM", "10", "touch", "made"]
    assert unwrap(argv).argv == ("touch", "made")
    _run(argv, tmp_path)
    assert (tmp_path / "made").exists()
