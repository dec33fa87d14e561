"""The command policy: shell syntax, the allowlist, argument rules and risk classes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.sandbox.confinement.policy import DEFAULT_ALLOW, CommandPolicy, check, classify
from protocol.errors import SandboxError

POLICY = CommandPolicy(allow=DEFAULT_ALLOW | {"perl", "ruby", "sh"})


def _refused(command: str, policy: CommandPolicy = POLICY) -> SandboxError:
    with pytest.raises(SandboxError) as info:
        check(command, policy)
    return info.value


@pytest.mark.parametrize(("command", "form"), [
    ("ls; rm -rf x", "';' (command separator)"),
    ("make && make install", "'&&'"),
    ("make || true", "'||'"),
    ("cat f | sh", "'|' (pipe)"),
    ("sleep 100 &", "'&' (background)"),
    ("echo `id`", "'`' (command substitution)"),
    ('echo "`id`"', "'`' (command substitution)"),
    ("echo $(id)", "'$(' (command substitution)"),
    ('echo "$(id)"', "'$(' (command substitution)"),
    ("echo ${HOME}", "'${' (parameter expansion)"),
    ("echo $HOME", "'$H' (variable expansion)"),
    ("diff <(ls) f", "'<(' (redirection)"),
    ("tee >(sh) f", "'>(' (redirection)"),
    ("ls > out", "'>' (redirection)"),
    ("ls >> out", "'>>' (redirection)"),
    ("cat < /etc/passwd", "'<' (redirection)"),
    ("ls 2>/dev/null", "'>' (redirection)"),
    ("ls &> out", "'&>' (redirection)"),
    ("ls >&2", "'>&' (redirection)"),
    ("cat <<EOF", "'<<' (heredoc or here-string)"),
    ("cat <<< text", "'<<<' (heredoc or here-string)"),
    ("ls\nrm -rf x", "a newline (several commands)"),
    ("ls\rrm", "a newline (several commands)"),
    ("ls\0rm", "a NUL byte"),
    ("ls \x1b[2J", "control character U+001B"),
    ("PATH=/tmp ls", "assignment prefix 'PATH=/tmp'"),
    ("LD_PRELOAD=x.so ls", "assignment prefix 'LD_PRELOAD=x.so'"),
    ("(ls)", "'(' (subshell)"),
    ("! ls", "'!' (negation)"),
], ids=lambda v: repr(v)[:30])
def test_shell_syntax_is_refused_naming_the_form(command: str, form: str) -> None:
    error = _refused(command)
    assert error.code == "ACODE-SBX-010"
    assert f"uses shell syntax: {form}" in str(error)
    assert "sandbox.shell_commands" in str(error)  # how to allow it on purpose


@pytest.mark.parametrize(("char", "name"), [
    ("\u202e", "RIGHT-TO-LEFT OVERRIDE"), ("\u2066", "LEFT-TO-RIGHT ISOLATE"), ("\u200b", "ZERO WIDTH SPACE"),
    ("\u200d", "ZERO WIDTH JOINER"), ("\ufeff", "ZERO WIDTH NO-BREAK SPACE"), ("\u00ad", "SOFT HYPHEN"),
    ("\U000e0041", "TAG LATIN CAPITAL LETTER A"), ("\u2060", "WORD JOINER"),
])
def test_bidi_and_invisible_characters_are_refused_by_code_point(char: str, name: str) -> None:
    for command in (f"ls {char}x", f"git log '{char}'"):  # quoted or not
        error = _refused(command)
        assert error.code == "ACODE-SBX-010"
        assert f"U+{ord(char):04X} ({name})" in str(error)


@pytest.mark.parametrize("command", [
    'grep "a|b" src', "git commit -m 'fix; tidy && ship'", "echo 'x > y'", 'find . -name "*.py"',
    "sed -n 1,5p f", "sed 's/a/b/g' f", "sed -n '/error/p' f", "rg -n foo", "python -m pytest -q",
    "python -W ignore -m pytest -k 'a or b'", "tar -xzf a.tgz", "awk '{print $1}' f", "git log --oneline",
    "git diff HEAD~1", "git config --get user.name", "echo '$HOME stays literal'", "ls {a,b}*", "node script.js",
    "python script.py -c x", "ls -la 'a;b'", "env -u FOO python -m pytest", "make test", "cargo test",
    "git commit -m 'line one\nline two'",
])
def test_ordinary_commands_pass_as_argv(command: str) -> None:
    result = check(command, POLICY)
    assert result.shell is False and result.argv and result.argv[0] == command.split()[0]


def test_quoted_operators_stay_arguments() -> None:
    assert check('grep "a|b" f').argv == ["grep", "a|b", "f"]
    assert check("git commit -m 'a; b'").argv == ["git", "commit", "-m", "a; b"]


@pytest.mark.parametrize(("command", "why"), [
    ("bash -c id", "'bash' is not allowed by the allowlist rule"),
    ("curl http://127.0.0.1/", "'curl' is not allowed by the allowlist rule"),
    ("sudo ls", "'sudo' is not allowed"),
    ("./evil.sh", "'evil.sh' is not allowed"),
    ("/bin/ls", "'/bin/ls' is an absolute path"),
    ("/usr/bin/python3 x.py", "is an absolute path"),
])
def test_executables_off_the_allowlist_are_refused(command: str, why: str) -> None:
    error = _refused(command, CommandPolicy())
    assert error.code == "ACODE-SBX-011" and why in str(error)


def test_the_allowlist_is_configurable_and_xargs_stays_refused() -> None:
    assert check("bash x.sh", CommandPolicy(allow=DEFAULT_ALLOW | {"bash"})).argv == ["bash", "x.sh"]
    error = _refused("ls", CommandPolicy(allow=frozenset({"git"})))
    assert error.code == "ACODE-SBX-011" and "allowed: git;" in str(error) and "sandbox.extra_commands" in str(error)
    error = _refused("xargs rm", CommandPolicy(allow=DEFAULT_ALLOW | {"xargs"}))
    assert error.code == "ACODE-SBX-011" and "rule xargs-runs-commands" in str(error)


@pytest.mark.parametrize(("command", "rule", "value"), [
    ("git -c core.pager=sh log", "git-global-option", "'-c'"),
    ("git -ccore.sshCommand=x fetch", "git-global-option", "'-ccore.sshCommand=x'"),
    ("git --config-env=core.pager=X log", "git-global-option", "'--config-env=core.pager=X'"),
    ("git --exec-path=/tmp status", "git-global-option", "'--exec-path=/tmp'"),
    ("git -C /etc status", "git-global-option", "'-C'"),
    ("git --git-dir=/other/.git log", "git-global-option", "'--git-dir=/other/.git'"),
    ("git --work-tree=/ status", "git-global-option", "'--work-tree=/'"),
    ("git diff --ext-diff", "git-runs-program", "'--ext-diff'"),
    ("git log -p --textconv", "git-runs-program", "'--textconv'"),
    ("git archive --exec=/bin/sh HEAD", "git-runs-program", "'--exec=/bin/sh'"),
    ("git fetch --upload-pack=touch origin", "git-runs-program", "'--upload-pack=touch'"),
    ("git push --receive-pack=x origin", "git-runs-program", "'--receive-pack=x'"),
    ("git diff --output=/etc/passwd", "git-runs-program", "'--output=/etc/passwd'"),
    ("git difftool HEAD", "git-subcommand", "'difftool'"),
    ("git mergetool", "git-subcommand", "'mergetool'"),
    ("git filter-branch --tree-filter x", "git-subcommand", "'filter-branch'"),
    ("git submodule foreach ls", "git-subcommand", "'submodule foreach'"),
    ("git bisect run make", "git-subcommand", "'bisect run'"),
    ("git rebase --exec make HEAD~3", "git-runs-program", "'--exec'"),
    ("git rebase -x make HEAD~3", "git-runs-program", "'rebase --exec'"),
    ("git config core.hooksPath .", "git-config-write", "'config'"),
    ("find . -exec rm {} +", "find-actions", "'-exec'"),
    ("find . -execdir sh {} +", "find-actions", "'-execdir'"),
    ("find . -ok rm {} +", "find-actions", "'-ok'"),
    ("find . -okdir rm {} +", "find-actions", "'-okdir'"),
    ("find . -delete", "find-actions", "'-delete'"),
    ("find . -fprintf /tmp/x %p", "find-actions", "'-fprintf'"),
    ("find . -fprint /tmp/x", "find-actions", "'-fprint'"),
    ("find . -fls /tmp/x", "find-actions", "'-fls'"),
    ("rg --pre ./x foo", "rg-preprocessor", "'--pre'"),
    ("rg --pre=./x foo", "rg-preprocessor", "'--pre=./x'"),
    ("rg --pre-glob '*' foo", "rg-preprocessor", "'--pre-glob'"),
    ("rg -z foo", "rg-preprocessor", "'-z'"),
    ("sed -i s/a/b/ f", "sed-in-place", "'-i'"),
    ("sed -i.bak s/a/b/ f", "sed-in-place", "'-i.bak'"),
    ("sed -ni p f", "sed-in-place", "'-ni'"),
    ("sed --in-place=.b s/a/b/ f", "sed-in-place", "'--in-place=.b'"),
    ("sed s/a/id/e f", "sed-exec-or-write", "'s/a/id/e'"),
    ("sed 's|a|b|w /tmp/out' f", "sed-exec-or-write", "'s|a|b|w /tmp/out'"),
    ("sed -e '1e id' f", "sed-exec-or-write", "'1e id'"),
    ("sed 'w /tmp/out' f", "sed-exec-or-write", "'w /tmp/out'"),
    ("sed -f script.sed f", "sed-script-file", "'-f'"),
    ("env -S 'sh -c id'", "env-split-string", "'-S'"),
    ("env FOO=1 ls", "env-assignment", "'FOO=1'"),
    ("env python -c 1", "inline-code", "'-c'"),
    ("awk 'BEGIN{system(\"id\")}'", "awk-system", "'BEGIN{system(\"id\")}'"),
    ("awk '{print > \"/tmp/x\"}' f", "awk-system", "'{print > \"/tmp/x\"}'"),
    ("awk 'BEGIN{\"id\" | getline x}'", "awk-system", "'BEGIN{\"id\" | getline x}'"),
    ("awk 'BEGIN{print ENVIRON[\"K\"]}'", "awk-system", "'BEGIN{print ENVIRON[\"K\"]}'"),
    ("awk -f prog.awk f", "awk-program-file", "'-f'"),
    ("tar --checkpoint=1 --checkpoint-action=exec=id -cf a.tar .", "tar-runs-program",
     "'--checkpoint-action=exec=id'"),
    ("tar --to-command=sh -xf a.tar", "tar-runs-program", "'--to-command=sh'"),
    ("tar --use-compress-program=sh -xf a.tar", "tar-runs-program", "'--use-compress-program=sh'"),
    ("tar -I sh -xf a.tar", "tar-runs-program", "'-I'"),
    ("tar --info-script=x -cf a.tar .", "tar-runs-program", "'--info-script=x'"),
    ("tar -F x -cf a.tar .", "tar-runs-program", "'-F'"),
    ("tar --new-volume-script=x -cf a.tar .", "tar-runs-program", "'--new-volume-script=x'"),
    ("tar --rsh-command=x -cf h:a.tar .", "tar-runs-program", "'--rsh-command=x'"),
    ("python -c 'import os'", "inline-code", "'-c'"),
    ("python3 -Ic 'import os'", "inline-code", "'-Ic'"),
    ("python -W ignore -c 1", "inline-code", "'-c'"),
    ("node -e 1", "inline-code", "'-e'"),
    ("node -pe 1", "inline-code", "'-pe'"),
    ("node --eval=1", "inline-code", "'--eval=1'"),
    ("node --require ./x.js app.js", "inline-code", "'--require'"),
    ("perl -le print", "inline-code", "'-le'"),
    ("ruby -e 1", "inline-code", "'-e'"),
    ("make SHELL=/bin/bash", "make-shell-override", "'SHELL=/bin/bash'"),
    ("make --eval=x:", "make-shell-override", "'--eval=x:'"),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_argument_escapes_are_refused_naming_the_rule(command: str, rule: str, value: str) -> None:
    error = _refused(command)
    assert error.code == "ACODE-SBX-012", str(error)
    assert f"argument {value} refused by rule {rule}:" in str(error)


def test_inline_code_can_be_allowed() -> None:
    policy = CommandPolicy(allow_inline_code=True)
    assert check("python -c 'print(1)'", policy).argv == ["python", "-c", "print(1)"]
    assert check("node -e 1", policy).argv == ["node", "-e", "1"]


def test_listed_shell_commands_run_through_sh_exactly() -> None:
    policy = CommandPolicy(shell_commands=frozenset({"npm test && npm run lint"}))
    command = check("  npm test && npm run lint ", policy)
    assert (command.argv, command.shell) == (["/bin/sh", "-c", "npm test && npm run lint"], True)
    assert _refused("npm test && npm run lint; id", policy).code == "ACODE-SBX-010"


def test_unparseable_and_empty_commands_are_invalid_arguments() -> None:
    assert _refused('echo "open').code == "ACODE-SBX-007"
    assert _refused("   ").code == "ACODE-SBX-007"


@pytest.mark.parametrize(("command", "risk"), [
    ("rm -rf build", "destructive"), ("git reset --hard HEAD", "destructive"), ("git clean -fdx", "destructive"),
    ("git push --force origin main", "destructive"), ("git branch -D x", "destructive"),
    ("git stash drop", "destructive"), ("pip install requests", "network"), ("npm ci", "network"),
    ("python -m pip install x", "network"), ("git fetch origin", "network"), ("git clone u", "network"),
    ("npx prettier .", "network"), ("cargo install x", "network"), ("go get x", "network"),
    ("pytest -q", "execute"), ("git status", "execute"), ("env rm x", "destructive"),
])
def test_commands_are_classified_for_approval_gates(command: str, risk: str) -> None:
    assert classify(command.split()) == risk
    assert check(command).risk == risk


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./", min_size=1, max_size=8)


@given(st.lists(_WORD, min_size=1, max_size=4), st.sampled_from([";", "|", "&", "&&", "||", ">", "<", "\n"]),
       st.lists(_WORD, min_size=0, max_size=4), st.booleans())
def test_an_unquoted_operator_anywhere_is_refused(before: list[str], op: str, after: list[str], spaced: bool) -> None:
    joiner = " " if spaced else ""
    command = "ls " + " ".join(before) + joiner + op + joiner + " ".join(after)
    with pytest.raises(SandboxError) as info:
        check(command, POLICY)
    assert info.value.code in ("ACODE-SBX-010", "ACODE-SBX-011")
    if op != "\n":
        assert info.value.code == "ACODE-SBX-010"


WRAPPING = CommandPolicy(allow=DEFAULT_ALLOW | {"nice", "timeout", "nohup", "stdbuf", "time", "command", "gawk"})


@pytest.mark.parametrize(("command", "rule", "value"), [
    # every rule matches the abbreviations the program itself accepts (and ambiguous prefixes)
    ("sed --in s/a/b/ f", "sed-in-place", "'--in'"),
    ("sed --in-pl=.b s/a/b/ f", "sed-in-place", "'--in-pl=.b'"),
    ("sed -nie p f", "sed-in-place", "'-nie'"),
    ("sed -si s/a/b/ f", "sed-in-place", "'-si'"),
    ("sed -n -i -- s/a/b/ f", "sed-in-place", "'-i'"),
    ("sed --fi=x.sed f", "sed-script-file", "'--fi=x.sed'"),
    ("sed --expr='w /tmp/x' f", "sed-exec-or-write", "'w /tmp/x'"),
    ("sed -n -e p -e 'w out' f", "sed-exec-or-write", "'w out'"),
    ("awk --inc=inplace '{print}' f", "awk-program-file", "'--inc=inplace'"),
    ("awk --include inplace '{print}' f", "awk-program-file", "'--include'"),
    ("awk -i inplace '{print}' f", "awk-program-file", "'-i'"),
    ("awk -iinplace '{print}' f", "awk-program-file", "'-iinplace'"),
    ("awk --lo=x '{print}' f", "awk-program-file", "'--lo=x'"),
    ("awk --fi=p.awk f", "awk-program-file", "'--fi=p.awk'"),
    ("awk -W exec=p.awk f", "awk-program-file", "'-W exec=p.awk'"),
    ("awk -Winclude=inplace 1 f", "awk-program-file", "'-W include=inplace'"),
    ("awk --pretty=out 1 f", "awk-program-file", "'--pretty=out'"),
    ("awk -d 1 f", "awk-program-file", "'-d'"),
    ("awk '@include \"inplace\"; {print}' f", "awk-system", "'@include \"inplace\"; {print}'"),
    ("awk '@load \"rwarray\"' f", "awk-system", "'@load \"rwarray\"'"),
    ("awk '@ include \"inplace\"' f", "awk-system", "'@ include \"inplace\"'"),
    ("awk -e 'BEGIN{system(\"id\")}'", "awk-system", "'BEGIN{system(\"id\")}'"),
    ("awk --source='@include \"inplace\"' f", "awk-system", "'@include \"inplace\"'"),
    ("git log --outpu=F", "git-runs-program", "'--outpu=F'"),
    ("git log --output F", "git-runs-program", "'--output'"),
    ("git diff --ext", "git-runs-program", "'--ext'"),
    ("git diff --ext-d HEAD", "git-runs-program", "'--ext-d'"),
    ("git show --textc HEAD", "git-runs-program", "'--textc'"),
    ("git grep --open foo", "git-runs-program", "'--open'"),
    ("git grep -Ovim foo", "git-runs-program", "'-Ovim'"),
    ("git grep -nOvim foo", "git-runs-program", "'-nOvim'"),
    ("git fetch --upload=x origin", "git-runs-program", "'--upload=x'"),
    ("git push --rec=x origin", "git-runs-program", "'--rec=x'"),
    ("git rebase --exe=make HEAD~1", "git-runs-program", "'--exe=make'"),
    ("git rebase -ix make HEAD~1", "git-runs-program", "'rebase --exec'"),
    ("git archive -o x.tar HEAD", "git-runs-program", "'-o'"),
    ("git archive -ox.tar HEAD", "git-runs-program", "'-ox.tar'"),
    ("git archive --out=x.tar HEAD", "git-runs-program", "'--out=x.tar'"),
    ("git archive --output=x.tar HEAD", "git-runs-program", "'--output=x.tar'"),
    ("git submodule --quiet foreach ls", "git-subcommand", "'submodule foreach'"),
    ("rg --pre-g='*' foo", "rg-preprocessor", "'--pre-g=*'"),
    ("rg --pr=x foo", "rg-preprocessor", "'--pr=x'"),
    ("rg --search foo", "rg-preprocessor", "'--search'"),
    ("rg -iz foo", "rg-preprocessor", "'-iz'"),
    ("tar --to-c=sh -xf a.tar", "tar-runs-program", "'--to-c=sh'"),
    ("tar --use=sh -xf a.tar", "tar-runs-program", "'--use=sh'"),
    ("tar --checkpoint-a=exec=id -cf a.tar .", "tar-runs-program", "'--checkpoint-a=exec=id'"),
    ("tar --info=x -cf a.tar .", "tar-runs-program", "'--info=x'"),
    ("tar --rsh=x -cf h:a.tar .", "tar-runs-program", "'--rsh=x'"),
    ("tar -xIsh -f a.tar", "tar-runs-program", "'-xIsh'"),
    ("tar xIf sh a.tar", "tar-runs-program", "'-I'"),
    ("sort --compress=sh f", "sort-runs-program", "'--compress=sh'"),
    ("sort --compress-program sh f", "sort-runs-program", "'--compress-program'"),
    ("make --ev=x:", "make-shell-override", "'--ev=x:'"),
    ("make -E 'x:'", "make-shell-override", "'-E'"),
    ("make -kE 'x:'", "make-shell-override", "'-kE'"),
    ("make SHELL:=/bin/sh", "make-shell-override", "'SHELL:=/bin/sh'"),
    ("node --ev=1", "inline-code", "'--ev=1'"),
    ("node --req ./x.js a.js", "inline-code", "'--req'"),
    ("env --split='ls x'", "env-split-string", "'--split=ls x'"),
    ("env -iS 'ls x'", "env-split-string", "'-iS'"),
    ("env --ch=/ ls", "env-chdir", "'--ch=/'"),
    ("env -u X FOO=1 ls", "env-assignment", "'FOO=1'"),
    ("env -u VAR python -c 1", "inline-code", "'-c'"),
    ("env -u VAR git -c core.pager=sh log", "git-global-option", "'-c'"),
    ("nice -n 5 sed -i s/a/b/ f", "sed-in-place", "'-i'"),
    ("timeout 5 git diff --ext", "git-runs-program", "'--ext'"),
    ("nohup env sed --in s/a/b/ f", "sed-in-place", "'--in'"),
    ("time -p awk --inc=inplace 1 f", "awk-program-file", "'--inc=inplace'"),
    ("command find . -delete", "find-actions", "'-delete'"),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_argument_rules_hold_for_abbreviations_clusters_and_wrappers(command: str, rule: str, value: str) -> None:
    error = _refused(command, WRAPPING)
    assert error.code == "ACODE-SBX-012", str(error)
    assert f"argument {value} refused by rule {rule}:" in str(error)


@pytest.mark.parametrize("command", [
    "git log --text", "git diff --stat",
    "git show --stat HEAD", "git grep -n -e foo", "git log -S output", "git commit -m 'fix --output handling'",
    "git log -- --output", "rg --pretty foo", "rg -i foo", "sed -n -e p f", "sed -E s/a/b/ f", "sort -o",
    "awk -F: '{print $1}' f", "awk -v x=1 'BEGIN{print x}'", "awk -W version", "tar -czf - src", "tar -tvf a.tar",
    "env -u VAR python -m pytest", "env -i ls", "nice -n 5 pytest -q", "timeout 60 python -m pytest",
    "command -v rm", "make -k test", "node app.js --eval-later",
])
def test_ordinary_forms_near_the_rules_still_pass(command: str) -> None:
    assert check(command, WRAPPING).argv


def test_a_wrapper_is_refused_unless_the_allowlist_allows_it() -> None:
    error = _refused("nice rm x", CommandPolicy())
    assert error.code == "ACODE-SBX-011" and "'nice' is not allowed" in str(error)
    error = _refused("env bash -c id", CommandPolicy())
    assert error.code == "ACODE-SBX-011" and "'bash' is not allowed" in str(error)


@pytest.mark.parametrize("command", ["env -u VAR rm -rf src", "nice -n 5 rm -rf src", "timeout 5 git stash",
                                     "env --unset=VAR git reset --ha", "nohup mv .git elsewhere"])
def test_a_wrapped_command_is_classified_by_the_program_it_runs(command: str) -> None:
    assert check(command, WRAPPING).risk == "destructive"


@pytest.mark.parametrize(("command", "value", "names"), [
    ("git reset --re", "'--re'", "--recurse-submodules, --refresh"),
    ("git branch --for x", "'--for'", "--force, --format"),
    ("git commit --no-ver -m x", "'--no-ver'", "--no-verbose, --no-verify"),
    ("sort --s f", "'--s'", "--sort, --stable"),
    ("env -u X git reset --re", "'--re'", "--recurse-submodules, --refresh"),
])
def test_an_ambiguous_abbreviation_is_refused_naming_what_it_may_be(command: str, value: str, names: str) -> None:
    error = _refused(command)
    assert error.code == "ACODE-SBX-012"
    assert f"argument {value} refused by rule ambiguous-option:" in str(error) and names in str(error)
    assert "spell the option out in full" in str(error)


@pytest.mark.parametrize(("line", "risk"), [
    ("make > build.log", "destructive"), ("make && rm -rf build", "destructive"), ("npm test | tee out", "destructive"),
    ("npm test && npm run lint", "execute"), ("grep '>' notes.txt && make", "execute"),
])
def test_a_listed_shell_command_is_classified_by_all_it_runs_and_writes(line: str, risk: str) -> None:
    assert check(line, CommandPolicy(shell_commands=frozenset({line}))).risk == risk


def test_a_command_the_policy_refuses_is_known_as_such_so_nobody_is_asked_to_approve_it() -> None:
    from actors.sandbox.confinement.policy import refused_by_policy
    from protocol.policy.sandbox import SandboxPolicy

    strict, shells = SandboxPolicy(), SandboxPolicy(extra_commands=["sh"])
    assert refused_by_policy("run_terminal", {"command": "sh -c 'rm -rf src'"}, strict)
    assert refused_by_policy("run_terminal", {"command": "echo $(rm -rf src)"}, strict)
    assert not refused_by_policy("run_terminal", {"command": "sh -c 'rm -rf src'"}, shells)
    assert not refused_by_policy("run_terminal", {"command": "rm -rf src"}, strict)  # allowed: it asks
    assert not refused_by_policy("write_file", {"path": "a", "command": "sh"}, strict)
