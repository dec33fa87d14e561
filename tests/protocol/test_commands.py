"""Risk classes of commands: destructive unless the program, subcommand and options are
known to read or only add; and the shape an ``--always`` rule covers."""

from __future__ import annotations

import pytest

from protocol.calls.autonomy import command_argv, command_risk
from protocol.calls.commands import shape

DESTRUCTIVE = [
    # cmake's portable file tools
    "cmake -E rm -rf src", "cmake -E remove_directory src", "cmake -E copy a b", "cmake -E rename a b",
    "cmake -E tar xf a.tar", "cmake -E touch a", "cmake -E", "cmake -E env rm -rf src",
    # git stash in every form that moves work away
    "git stash", "git stash -u", "git stash push", "git stash push -u -m x", "git stash save wip", "git stash --all",
    "git stash -q", "git stash drop", "git stash pop", "git stash clear", "git stash apply", "git stash branch b",
    "git stash --include-untracked", "git stash --inc", "git stash store abc",
    # reset, every form and abbreviation
    "git reset --hard", "git reset --ha", "git reset --h HEAD", "git reset --keep HEAD~1", "git reset --merge",
    "git reset --kee", "git reset", "git reset HEAD~1", "git reset --soft HEAD~2", "git reset --mixed",
    "git reset -q -- a.txt", "git --no-pager reset --hard",
    # checkout / switch / restore that can discard
    "git checkout a.txt", "git checkout .", "git checkout -- a.txt", "git checkout -f", "git checkout -f main",
    "git checkout --force main", "git checkout --for main", "git checkout main", "git checkout HEAD~1 -- .",
    "git checkout -B main", "git checkout -b x -- a.txt", "git checkout -b x HEAD a.txt", "git checkout -m x",
    "git checkout --ours a.txt", "git checkout -p", "git checkout -bx -f",
    "git switch -f main", "git switch --force main", "git switch --discard-changes main", "git switch --disc main",
    "git switch -C main", "git switch --force-create main HEAD~1", "git switch --orphan x", "git switch -m main",
    "git restore a.txt", "git restore --staged a.txt", "git restore -s HEAD~1 .", "git restore --source=HEAD .",
    # branches, tags, refs
    "git branch -d side", "git branch -D side", "git branch --delete side", "git branch --delete --force side",
    "git branch --del side", "git branch -m side other", "git branch -M side", "git branch --move a b",
    "git branch -f side HEAD~1", "git branch --force side", "git branch -C a b", "git branch -dr origin/x",
    "git branch -u origin/x", "git branch --unset-upstream", "git branch -fd x",
    "git tag -d v1", "git tag --delete v1", "git tag -f v1", "git tag --del v1",
    "git update-ref -d refs/heads/side", "git update-ref refs/heads/main HEAD~1", "git update-ref --stdin",
    "git symbolic-ref HEAD refs/heads/x", "git symbolic-ref -d HEAD",
    "git reflog expire --expire=now --all", "git reflog delete HEAD@{1}", "git reflog expire",
    "git gc", "git gc --prune=now", "git gc --aggressive", "git prune", "git prune --expire=now", "git repack -ad",
    "git prune-packed", "git maintenance run",
    # clean unless a dry run
    "git clean -f", "git clean -fdx", "git clean -fd", "git clean --force", "git clean -ffdx", "git clean -X -f",
    "git clean -i", "git clean -n -i", "git clean -fn -e x --unknown",
    # history rewriting and working-tree rewriting
    "git rebase main", "git rebase -i HEAD~3", "git cherry-pick abc", "git am x.patch", "git revert HEAD",
    "git merge side", "git pull", "git pull --rebase", "git apply x.patch", "git apply --index x.patch",
    "git commit --amend", "git commit --amend -m x", "git commit --am -m x", "git commit -a --amend --no-edit",
    "git rm a.txt", "git rm --cached a.txt", "git mv a b", "git read-tree -u HEAD", "git checkout-index -f -a",
    "git update-index --assume-unchanged a", "git replace a b", "git filter-repo", "git sparse-checkout set x",
    "git worktree remove ../w", "git worktree prune", "git worktree add -f ../w", "git worktree add -B x ../w",
    "git remote remove origin", "git remote rm origin", "git remote set-url origin x", "git remote prune origin",
    "git notes remove", "git notes --ref x remove HEAD", "git notes --ref=x remove", "git notes frobnicate",
    "git remote -v rm origin", "git remote --verbose frobnicate", "git submodule update --force",
    "git submodule update --checkout", "git submodule --quiet deinit x", "git worktree frobnicate",
    "git bisect start", "git bisect reset", "git submodule deinit -f x",
    "git init --separate-git-dir=/tmp/x", "git format-patch HEAD~1", "git format-patch -o out HEAD~1",
    "git log --output=x", "git log --outpu=x", "git diff --output x", "git show --out=x HEAD",
    "git archive -o x.tar HEAD", "git archive --output=x.tar HEAD", "git archive --out=x HEAD",
    "git config user.name x", "git config --unset user.name", "git interpret-trailers --in-place x",
    "git push -f", "git push --force", "git push --force-with-lease", "git push origin +main",
    "git push origin :main", "git push --delete origin x", "git push --mirror", "git push --prune origin",
    "git fetch --prune", "git fetch -p", "git fetch origin main:main", "git fetch origin +refs/*:refs/*",
    "git fetch -f", "git st", "git some-alias", "git commit --unknown-opt",
    # other programs
    "rm x", "rm -rf src", "rm -f", "rm -- -x", "rmdir d", "mv .git elsewhere", "mv a b", "mv -n a b", "mv -t d a",
    "cp /dev/null f", "cp a b", "cp -r a b", "cp -f a b", "cp -n -f a b", "cp --remove-destination a b",
    "cp -u a b", "cp -t d a", "cp --no-clobber --force a b", "cp -nb a b",
    "sort -o f f", "sort -of f", "sort --output=f g", "sort --out=f g", "sort --outp f g", "sort -rno f g",
    "sort --compress-program=gzip f",
    "uniq in out", "uniq -c in out", "uniq -- in out", "uniq -f 1 in out",
    "tar -xf a.tar", "tar xf a.tar", "tar -x -f a.tar", "tar --extract --file=a.tar", "tar --ext -f a.tar",
    "tar xzf a.tgz", "tar -xzvf a.tgz -C d", "tar --get -f a.tar", "tar -xkf a.tar --overwrite",
    "tar --remove-files -cf a.tar x", "tar --remove -cf - x", "tar -cf a.tar x", "tar -czf out.tgz src",
    "tar cf a.tar x", "tar -rf a.tar x", "tar -uf a.tar x", "tar --delete -f a.tar x", "tar -Af a.tar b.tar",
    "tar -x -U -f a.tar", "tar -g snap -cf - x", "tar --index-file=idx -cf - x", "tar -xf a.tar --unknown-option",
    "sed -i s/a/b/ f", "sed --in s/a/b/ f", "sed --in-place=.bak s/a/b/ f", "sed -ni p f", "sed -nie p f",
    "sed -Ei s/a/b/ f", "sed -s -i s/a/b/ f",
    "awk -i inplace {print} f", "awk --inc=inplace {print} f", "awk --include=inplace {print} f",
    "awk '@include \"inplace\"; {print}' f", "awk '@load \"x\"' f", "awk '{print > \"f\"}' g",
    "awk -W dump-variables=x 1", "awk -o out 1 f", "awk --dump 1",
    "find . -delete", "find . -name x -delete", "find . -exec rm {} ;", "find . -fprint out",
    "file -C -m magic",
    "env -u VAR rm -rf src", "env --unset=VAR rm x", "env -i rm x", "env A=1 rm x", "env -- rm x",
    "nice rm x", "nice -n 5 rm x", "nice -5 rm x", "timeout 5 rm x", "timeout -s KILL 5 git stash",
    "nohup rm x", "stdbuf -oL rm x", "ionice -c3 rm x", "time rm x", "command rm x", "env nice timeout 1 rm x",
    "time -o f ls", "time --output=f ls", "env -S 'rm x'",
    "curl -o f https://x", "curl -O https://x", "curl -sSLo f https://x", "curl --output f https://x",
    "wget https://x",
    # programs with no table, and workspace scripts
    "jq . f", "tee f", "dd if=/dev/zero of=f", "truncate -s0 f", "ln -sf a b", "chmod 000 f", "./run.sh",
    "sh -c 'x'", "bash x.sh", "xargs rm", "patch -p1", "install a b", "split f", "shred f",
    "tree -o out",
    # a program named by a path is the workspace's file; anything writing near .git or .agent
    "./ls", "bin/git status", "./git status", "mkdir .git/hooks", "mkdir -p .git/hooks", "touch .git/hooks/x",
    "cp -n hook .git/hooks/pre-commit", "cp -n x ./.git/config", "tar -xkf a.tar -C .git", "touch .agent/config.yml",
    "cp -n --target-directory=.git/hooks x", "mkdir sub/.git", "tar -xkf a.tar -C sub/.git/hooks",
    # compound (configured shell_commands)
    "make && rm -rf build", "ls ; git stash", "echo x > f", "cat a >> b", "ls 2> err", "ls &> out",
    "git init --template=t", "git init --shared", "git init --separate-git-dir x",
]

EXECUTE = [
    "cmake -E echo hi", "cmake -E sha256sum a", "cmake --build build", "cmake -S . -B build",
    "git status", "git status --short", "git status -sb", "git status --porcelain=v2", "git log", "git log --oneline",
    "git log -p -n 5", "git log --format=%H -- a.txt", "git diff", "git diff --stat HEAD~1", "git diff --cached",
    "git show HEAD", "git show --stat", "git blame a.txt", "git grep -n foo", "git grep -e foo -- '*.py'",
    "git ls-files", "git ls-files -o --exclude-standard", "git rev-parse HEAD", "git rev-parse --show-toplevel",
    "git describe --tags", "git shortlog -sn", "git cat-file -p HEAD", "git for-each-ref", "git merge-base a b",
    "git add a.txt", "git add -A", "git add .", "git add -u", "git add --all",
    "git commit -m x", "git commit -am x", "git commit -a -m x", "git commit --message=x", "git commit -qm x",
    "git commit --allow-empty -m x", "git commit --fixup=HEAD", "git commit -F msg.txt",
    "git branch", "git branch new", "git branch new main", "git branch -a", "git branch -v", "git branch --list",
    "git branch --show-current", "git branch --contains HEAD", "git branch -c a b",
    "git checkout -b new", "git checkout -b new main", "git checkout -q -b new", "git checkout --orphan x",
    "git checkout -bnew",
    "git switch main", "git switch -c new", "git switch --create new main", "git switch -d HEAD~1",
    "git switch --detach main", "git switch -",
    "git tag v1", "git tag -a v1 -m x", "git tag -l", "git tag --list 'v*'", "git tag",
    "git stash list", "git stash show", "git stash show -p stash@{0}", "git stash create",
    "git reflog", "git reflog show", "git reflog exists HEAD", "git reflog HEAD", "git reflog expire --dry-run --all",
    "git worktree list", "git worktree add ../w", "git remote", "git remote -v", "git remote get-url origin",
    "git notes list", "git notes show", "git notes --ref x show HEAD", "git notes",
    "git remote -v get-url origin", "git reflog --date=iso HEAD",
    "git bisect log", "git submodule status", "git sparse-checkout list",
    "git clean -n", "git clean -nd", "git clean --dry-run -fdx", "git clean --dry -x", "git clean -ndx",
    "git config --get user.name", "git config --list", "git config -l", "git config get user.name",
    "git init", "git init -q", "git init -b main", "cat < f",
    "grep '>' f", 'echo ">"', "awk '$1 > 5' f", "git apply --check x.patch", "git apply --stat x.patch",
    "git format-patch --stdout HEAD~1", "git archive HEAD", "git archive --format=tar HEAD",
    "git symbolic-ref HEAD", "git symbolic-ref --short HEAD",
    "git status --frobnicate",  # a reading command with an option git refuses: it still only reads
    "git", "git --version", "git help",
    "git --no-pager log", "git -P diff", "git version", "git fsck", "git count-objects -v", "git hash-object a",
    "ls", "ls -la", "cat a.txt", "head -n 5 a", "tail -f log", "wc -l a", "grep -rn foo .", "diff a b",
    "cmp a b", "echo hi", "printf '%s' x", "true", "false", "pwd", "which python", "test -f a", "basename a/b",
    "dirname a/b", "realpath a", "stat a", "tr a b", "cut -d, -f1 a", "seq 3", "sleep 1", "date", "du -sh .",
    "mkdir x", "mkdir -p a/b", "touch a", "touch -d yesterday a", "cat .git/config", "ls .git", "ls -la .git/hooks",
    "grep -r x .git", "touch .gitignore", "mkdir .github", "git add .gitignore", "git log -- .agent",
    "find . -path ./.git -prune -o -type f -print", "tar --exclude=.git -czf - .", "rg -n x .agent", "cat .agent/x",
    "cp -n a b", "cp --no-clobber a b", "cp -rn a b", "cp --no-c a b",
    "sort a", "sort -rn a", "sort -k2 -t, a", "sort -u a b", "sort -- -o",
    "uniq a", "uniq -c a", "uniq -", "tar -tf a.tar", "tar tf a.tar", "tar --list -f a.tar", "tar -tzvf a.tgz",
    "tar -xkf a.tar", "tar --keep-old-files -xf a.tar", "tar --skip-old-files -xf a.tar", "tar -xOf a.tar",
    "tar -xf a.tar --to-stdout", "tar -czf - src", "tar -c src", "tar -df a.tar",
    "sed -n 1,5p f", "sed s/a/b/ f", "sed -e s/a/b/ -e s/c/d/ f", "sed -E s/a+/b/ f",
    "awk '{print $1}' f", "awk -F: '{print $1}' f", "awk -v x=1 '{print x}' f", "awk 'BEGIN{print 1}'",
    "find . -name '*.py'", "find . -type f -newer a", "rg -n foo", "rg --pretty foo", "file a",
    "env", "env -u X", "env python -m pytest", "env -u VAR python -m pytest", "nice -n 5 git status",
    "timeout 60 pytest -q", "command -v rm", "time -p make", "stdbuf -oL pytest",
    "python -m pytest -q", "python3 x.py", "python3.11 -m mypy .", "pytest -q", "ruff check .", "mypy",
    "node x.js", "npm test", "npm run build", "make test", "make", "cargo test", "cargo build", "go test ./...",
    "go vet ./...", "tsc --noEmit", "black --check .",
]

NETWORK = [
    "git fetch", "git fetch origin", "git fetch --all", "git clone https://x", "git ls-remote origin",
    "git push", "git push origin main", "git push -u origin main", "git remote show origin", "git remote update",
    "git submodule update --init", "git archive --remote=x HEAD", "pip install requests", "pip3 install -r r.txt",
    "python -m pip install x", "npm install", "npm ci", "yarn add x", "cargo install x", "go get x", "npx x",
    "uv sync", "poetry install", "curl https://x", "curl -s https://x", "wget -O - https://x", "wget --spider https://x",
]


@pytest.mark.parametrize("command", DESTRUCTIVE)
def test_what_can_remove_truncate_overwrite_or_rewrite_is_destructive(command: str) -> None:
    assert command_risk(command) == "destructive"


@pytest.mark.parametrize("command", EXECUTE)
def test_what_only_reads_adds_or_runs_confined_code_is_execute(command: str) -> None:
    assert command_risk(command) == "execute"


@pytest.mark.parametrize("command", NETWORK)
def test_what_fetches_or_installs_is_network(command: str) -> None:
    assert command_risk(command) == "network"


@pytest.mark.parametrize(("command", "expected"), [
    ("git clean -n", "git clean --dry-run"),
    ("git clean --dry-run", "git clean --dry-run"),
    ("git clean -fdx", "git clean --force -d -x"),
    ("git clean -xdf", "git clean --force -d -x"),
    ("git status --short", "git status --short"),
    ("git status -s", "git status --short"),
    ("git checkout -f", "git checkout --force"),
    ("git reset --ha", "git reset --hard"),
    ("git reset --hard HEAD~3", "git reset --hard"),
    ("git branch -D x", "git branch -D"),
    ("git stash -u", "git stash push --include-untracked"),
    ("rm -rf a", "rm --force --recursive"),
    ("env -u VAR rm -rf src", "env --unset rm --force --recursive"),
    ("git -C /tmp status", "git -C status"),
    ("tar xzf a.tgz", "tar --extract --file --gzip"),
    ("npm run build", "npm run"),
    ("jq -r . f", "jq -r"),
    ("./rm x", "./rm"),
    ("python3.11 -m pytest", "python -m"),
])
def test_a_calls_shape_is_its_program_subcommand_and_option_names(command: str, expected: str) -> None:
    assert shape(command_argv(command)) == expected


@pytest.mark.parametrize(("first", "second"), [
    ("git clean -n", "git clean -f"), ("git clean -n", "git clean -fdx"), ("git status --short", "git checkout -f"),
    ("git status", "git stash"), ("git reset --soft", "git reset --hard"), ("git branch x", "git branch -D x"),
    ("git checkout -b x", "git checkout -f"), ("git tag v1", "git tag -d v1"), ("cp -n a b", "cp a b"),
    ("tar -tf a.tar", "tar -xf a.tar"), ("tar -xkf a.tar", "tar -xf a.tar"), ("sort a", "sort -o a a"),
    ("git commit -m x", "git commit --amend -m x"), ("sed -n p f", "sed -i p f"), ("git push", "git push -f"),
    ("rm x", "./rm x"), ("rm x", "bin/rm x"),
])
def test_a_dry_run_or_a_reading_form_never_has_the_shape_of_the_real_thing(first: str, second: str) -> None:
    assert shape(command_argv(first)) != shape(command_argv(second))
