"""A command's risk class and its shape, from what it runs (pure, no I/O).

**Destructive unless proven otherwise.** A command is ``execute`` only when its program
(and subcommand, and options) is known to read, or only to add: git ``status``, ``log``,
``diff``, ``show``, ``grep``, ``blame``, ``add``, ``commit`` (not ``--amend``), branch and
tag creation and listing, ``checkout -b``/``switch`` without ``-f``/``-C``/``--discard-
changes``, ``stash list/show``, ``clean -n``; ``ls``, ``cat``, ``grep``, ``mkdir``,
``touch``, ``sort`` without ``-o``, ``tar -t``, ``tar -x -k``, ``cp -n``, ... A program that
runs code (python, node, pytest, make, cargo, go, npm, ...) is ``execute`` too (isolation
confines it), ``network`` when it installs or fetches (pip install, git fetch/push/clone,
npx, curl). Everything else is ``destructive``: every other form of a command that can
remove, truncate, overwrite or rewrite files or refs (``git reset`` in every form, since
even a plain one moves a branch or drops staged content; ``git checkout X``, since X may be
a file; ``git stash``; ``git branch -d/-m/-f``; ``update-ref``; ``reflog expire``; ``gc``;
``rebase``; ``rm``; ``mv``; ``cp`` without ``-n``; ``sort -o``; ``uniq IN OUT``; ``tar -x``;
``sed -i``; ...), an unknown git subcommand (an alias may run anything), an option the
table does not know on a command whose effect depends on its options, and any program this
module has no entry for (one added with ``extra_commands``, a workspace script, a program
named by a path such as ``./ls``), and a command that only creates files (``mkdir``,
``touch``, ``cp -n``, ``tar -x -k``) when it names a path in ``.git`` or ``.agent``
(``mkdir .git/hooks``, ``cp -n x .git/hooks/pre-commit``).

Options are read by :mod:`protocol.calls.cmdline` as the program reads them (``git reset --ha``
is ``--hard``; ``env -u VAR rm`` runs ``rm``), before any rule here looks at them.

**Shape** (:func:`shape`): the program, its subcommand and the canonical names of its
options (values and operands left out), with any wrappers in front: what an ``--always``
approval covers (:func:`protocol.calls.autonomy.rule_of` adds the risk class). ``git clean -n``
(``git clean --dry-run``) and ``git clean -fdx`` (``git clean --force -d -x``) differ.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from protocol.calls.cmdline import Parsed, Spec, parse, unwrap
from protocol.calls.cmdtables import GIT, GIT_GLOBAL, GIT_NESTED, PROGRAMS
from protocol.calls.tools import Risk

__all__ = ["REDIRECT", "Call", "classify", "describe", "shape"]

_SEPARATORS = frozenset({";", "&", "&&", "|", "||", "(", ")", ";;"})
_METADATA = re.compile(r"(^|[/=])\.(git|agent)(/|$)")
REDIRECT = re.compile(r"\d*>[>|&]?\d*|&>>?|<>")
_RANK: dict[Risk, int] = {"read": 0, "write": 1, "execute": 2, "network": 3, "destructive": 4}

# programs that only read (or print)
_READS = frozenset({
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "diff", "cmp", "echo", "printf", "true", "false",
    "pwd", "which", "test", "[", "basename", "dirname", "realpath", "readlink", "stat", "tr", "cut", "seq", "sleep",
    "date", "du", "df", "nl", "od", "comm", "join", "paste", "fold", "expand", "unexpand", "rev", "tac",
    "md5sum", "sha1sum", "sha256sum", "sha512sum", "whoami", "id", "uname",
})
# programs that run code (confined by isolation, not by a table): python x.py, make, ...
_RUNS_CODE = frozenset({
    "python", "pypy", "pip", "pytest", "py.test", "ruff", "mypy", "black", "isort", "flake8", "pylint", "uv",
    "poetry", "tox", "nox", "node", "nodejs", "bun", "deno", "npm", "yarn", "pnpm", "tsc", "eslint", "prettier",
    "jest", "vitest", "go", "gofmt", "cargo", "rustc", "rustfmt", "make", "gmake", "cmake", "perl", "ruby",
})
_INSTALL = {"pip": ("install", "download"), "uv": ("add", "sync", "pip", "lock"),
            "poetry": ("install", "add", "update", "lock"), "npm": ("install", "i", "ci", "add", "update"),
            "yarn": ("install", "add", "upgrade"), "pnpm": ("install", "i", "add", "update"),
            "cargo": ("install", "fetch", "update", "add", "publish"), "go": ("get", "install", "mod")}
# programs whose first operand is a subcommand, for the shape of a call with no table
_SUBCOMMANDS = frozenset({"npm", "yarn", "pnpm", "cargo", "go", "pip", "uv", "poetry", "tox", "nox", "ruff"})

_GIT_READS = frozenset({
    "status", "log", "diff", "show", "blame", "annotate", "grep", "ls-files", "ls-tree", "rev-parse", "rev-list",
    "describe", "shortlog", "cat-file", "show-ref", "for-each-ref", "merge-base", "name-rev", "whatchanged",
    "count-objects", "fsck", "verify-commit", "verify-tag", "verify-pack", "check-ignore", "check-attr",
    "check-ref-format", "check-mailmap", "diff-files", "diff-index", "diff-tree", "var", "version", "help",
    "cherry", "range-diff", "show-branch", "get-tar-commit-id", "hash-object", "mktree", "write-tree",
    "commit-tree", "mktag", "stripspace", "column", "",
})
_GIT_NETWORK = frozenset({"clone", "ls-remote"})
_GIT_NESTED_SAFE = {"stash": {"list", "show", "create"}, "reflog": {"show", "exists", "list"},
                    "worktree": {"", "list", "lock", "unlock"}, "remote": {"", "get-url"},
                    "notes": {"list", "show", "get-ref"}, "submodule": {"status", "summary"},
                    "bisect": {"", "log", "view", "visualize", "terms", "help"},
                    "sparse-checkout": {"", "list", "check-rules"}, "maintenance": {""}}


@dataclass(frozen=True)
class Call:
    """A simple command as read: wrappers, program, subcommand path, parsed arguments (None:
    no table for the program), its risk class."""

    wrappers: tuple[tuple[str, Parsed], ...]
    program: str
    command: tuple[str, ...]
    parsed: Parsed | None
    risk: Risk
    raw: tuple[str, ...] = ()


def classify(argv: list[str]) -> Risk:
    """The risk class of a command (see the module). A compound command (``make && rm -rf
    build``, as a configured ``shell_commands`` entry may be) takes the highest of its parts.
    (An output redirection is the command line's, not its words': see
    :func:`protocol.calls.autonomy.command_risk`.)"""
    parts = _parts(argv)
    return max((describe(part).risk for part in parts), key=_RANK.__getitem__, default="execute")


def shape(argv: list[str]) -> str:
    """What an ``--always`` approval of this command covers (see the module)."""
    return " ; ".join(_shape_of(describe(part)) for part in _parts(argv)) or "?"


def _parts(argv: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for word in argv:
        if word in _SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(word)
    return [part for part in parts if part]


def _shape_of(call: Call) -> str:
    words: list[str] = []
    for name, parsed in call.wrappers:
        words += [name, *parsed.names()]
    if call.program:
        words += [call.program, *call.command]
        if call.parsed is not None:
            words += call.parsed.names()
        else:
            flags = sorted({w.partition("=")[0] for w in call.raw if w.startswith("-") and w != "-"})
            words += flags
    return " ".join(words)


def describe(argv: list[str]) -> Call:
    """A simple command (no separators) read: see :class:`Call`."""
    wrapped = unwrap(argv)
    risk: Risk = "execute"
    for name, options in wrapped.wrappers:
        if name == "time" and options.may_be("--output"):
            risk = "destructive"  # time -o FILE overwrites FILE
        if name == "env" and options.may_be("--split-string"):
            risk = "destructive"  # the command is in a string no rule reads
    if not wrapped.argv:
        return Call(wrapped.wrappers, "", (), None, risk)
    program = os.path.basename(wrapped.argv[0])
    base = re.sub(r"(\d+(\.\d+)*)$", "", program)  # python3.11 -> python
    args = list(wrapped.argv[1:])
    command, parsed, own = _read(base, args)
    if "/" in wrapped.argv[0]:
        own = "destructive"  # ./ls, bin/git: a file of the workspace, not the program the tables know
    elif _creates(base, parsed) and any(_METADATA.search(word) for word in args):
        own = "destructive"  # mkdir .git/hooks, cp -n x .git/hooks/pre-commit: repository or acode metadata
    name = wrapped.argv[0] if "/" in wrapped.argv[0] else base  # ./rm is not rm, in a rule either
    return Call(wrapped.wrappers, name, command, parsed, max(risk, own, key=_RANK.__getitem__), tuple(args))


def _creates(base: str, parsed: Parsed | None) -> bool:
    """Whether an ``execute`` form of the program creates files where its arguments say."""
    if base == "tar":
        return parsed is not None and parsed.has("--extract", "--get")
    return base in ("mkdir", "touch", "cp")


def _read(base: str, args: list[str]) -> tuple[tuple[str, ...], Parsed | None, Risk]:
    """A program's subcommand path, parsed arguments (None: no table) and risk class."""
    if base == "git":
        command, parsed, own = _git(args)
        return (*_git_globals(args), *command), parsed, own
    if base in ("awk", "gawk", "mawk", "nawk"):
        parsed = parse(PROGRAMS["awk"], args)
        return (), parsed, _awk(parsed)
    if base in ("sed", "gsed"):
        parsed = parse(PROGRAMS["sed"], args)
        return (), parsed, "destructive" if parsed.may_be("--in-place") else "execute"
    if base in ("tar", "gtar"):
        parsed = parse(PROGRAMS["tar"], _tar_old_style(args))
        return (), parsed, _tar(parsed)
    if base in PROGRAMS:
        parsed = parse(PROGRAMS[base], args)
        return (), parsed, _program(base, parsed)
    command = tuple(a for a in args if not a.startswith("-"))[:1] if base in _SUBCOMMANDS else ()
    return command, None, _untabled(base, args)


# --- programs ---------------------------------------------------------------------------------

_CMAKE_E_READS = frozenset({"echo", "echo_append", "capabilities", "environment", "compare_files", "md5sum",
                            "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "sleep", "true", "false",
                            "cat"})


def _untabled(name: str, args: list[str]) -> Risk:
    if name == "find":
        writes = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
        return "destructive" if writes & set(args) else "execute"
    if name in _READS:
        return "execute"
    if name in ("npx", "curl", "wget"):
        return _fetcher(name, args)
    if name == "cmake" and "-E" in args:  # cmake's portable file tools: rm, copy, rename, tar, ...
        tool = args[args.index("-E") + 1:][:1]
        return "execute" if tool and tool[0] in _CMAKE_E_READS else "destructive"
    if name in _RUNS_CODE:
        if name in _INSTALL and any(a in _INSTALL[name] for a in args[:2]):
            return "network"
        if name == "python" and args[:2] == ["-m", "pip"] and len(args) > 2 and args[2] in ("install", "download"):
            return "network"
        return "execute"
    return "destructive"  # no table: nothing proves it harmless


def _fetcher(name: str, args: list[str]) -> Risk:
    """curl and wget fetch (network); writing a file with what they fetch is destructive."""
    if name == "curl":
        writes = ("--output", "--remote-name", "--remote-name-all", "--dump-header", "--cookie-jar", "--trace",
                  "--trace-ascii", "--stderr", "--output-dir", "--etag-save", "--hsts", "--alt-svc", "--libcurl")
        for arg in args:
            if arg.startswith("--") and any(w.startswith(arg.partition("=")[0]) for w in writes):
                return "destructive"
            if re.fullmatch(r"-[A-Za-z0-9#]*[oODc][^-]*", arg):
                return "destructive"
        return "network"
    if name == "wget":
        quiet = {"--spider"} & set(args) or any(args[i:i + 2] in (["-O", "-"], ["--output-document", "-"])
                                                for i in range(len(args))) or "--output-document=-" in args
        return "network" if quiet else "destructive"
    return "network"


def _program(name: str, parsed: Parsed) -> Risk:
    match name:
        case "cp":
            keeps = parsed.has("--no-clobber") or parsed.value("--update") in ("none", "none-fail")
            overwrites = parsed.may_be("--force", "--remove-destination", "--backup") is not None
            return "execute" if keeps and not overwrites and not parsed.unknown else "destructive"
        case "sort":
            return "destructive" if parsed.may_be("--output", "--compress-program") else "execute"
        case "uniq":
            return "destructive" if len(parsed.operands) >= 2 else "execute"
        case "file":
            return "destructive" if parsed.may_be("--compile") else "execute"
        case "mkdir" | "touch" | "rg" | "make":
            return "execute"
        case _:  # mv, rm: they remove by design
            return "destructive"


def _awk(parsed: Parsed) -> Risk:
    if parsed.may_be("--include", "--load", "--pretty-print", "--profile", "--dump-variables", "--debug"):
        return "destructive"
    for option in parsed.options:
        if option.name == "-W" and (option.value or "").partition("=")[0] not in ("version", "usage", "help"):
            return "destructive"
    texts = [o.value or "" for o in parsed.options if o.known and o.name == "--source"]
    if not parsed.has("--file", "--exec", "--source") and parsed.operands:
        texts.append(parsed.operands[0])
    for text in texts:
        if re.search(r"@\s*(include|load)|print[f]?[^;}]*?(>|\|)|system\s*\(|\|\s*&?\s*getline", text):
            return "destructive"
    return "execute"


def _tar_old_style(args: list[str]) -> list[str]:
    """``tar xzf a.tgz dir``: the first word's letters are options, each value in turn from
    the words that follow (as tar reads it)."""
    if not args or args[0].startswith("-") or not args[0].isalpha():
        return args
    letters, rest = args[0], args[1:]
    out: list[str] = []
    for letter in letters:
        out.append("-" + letter)
        if PROGRAMS["tar"].short.get(letter) == "required" and rest:
            out.append(rest.pop(0))
    return out + rest


def _tar(parsed: Parsed) -> Risk:
    if parsed.unknown or parsed.may_be("--remove-files", "--delete", "--append", "--update", "--catenate",
                                       "--concatenate", "--listed-incremental", "--index-file", "--recursive-unlink",
                                       "--unlink-first", "--overwrite", "--overwrite-dir", "--volno-file",
                                       "--to-command"):
        return "destructive"
    if parsed.has("--extract", "--get"):
        keeps = parsed.has("--keep-old-files", "--skip-old-files", "--to-stdout")
        return "execute" if keeps else "destructive"
    if parsed.has("--create"):
        archive = parsed.value("--file")
        return "execute" if archive in (None, "-") else "destructive"  # -f FILE may overwrite FILE
    return "execute"  # -t, -d, or no mode (tar refuses)


# --- git --------------------------------------------------------------------------------------

def _git_globals(args: list[str]) -> tuple[str, ...]:
    """The names of git's own options, before the subcommand (``-C``, ``--no-pager``)."""
    names: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, _ = args[i].partition("=")
        names.append(name)
        i += 2 if GIT_GLOBAL.get(name) and not eq else 1
    return tuple(names)


def _git(args: list[str]) -> tuple[tuple[str, ...], Parsed, Risk]:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, _ = args[i].partition("=")
        if GIT_GLOBAL.get(name) and not eq:
            i += 1  # -C DIR, --git-dir DIR: the next word is the value
        i += 1
    if i >= len(args):
        return (), parse(Spec(), []), "execute"  # git --version, git alone: prints
    sub, rest = args[i], args[i + 1:]
    nested = ""
    if sub in GIT_NESTED:
        nested, rest = _nested(sub, rest)
    command = (sub, nested) if nested else (sub,)
    table = GIT.get(f"{sub} {nested}") or GIT.get(sub)
    parsed = parse(table or Spec(negatable=True), rest)
    return command, parsed, _git_risk(sub, nested, parsed, table is not None, rest)


def _nested(sub: str, rest: list[str]) -> tuple[str, list[str]]:
    """The command of ``git stash``/``reflog``/``notes``/... and the words after it. git
    stash reads its first word only (``git stash -u`` is push) and git reflog runs ``show``
    with any word it does not know (``git reflog HEAD``); the others take their own options
    first (``git remote -v show``, ``git notes --ref x remove``), and a word they do not
    know is kept as the command (so nothing proves it harmless)."""
    known = GIT_NESTED[sub]
    if sub == "stash":
        return (rest[0], rest[1:]) if rest and rest[0] in known else (known[0], rest)
    at = 0
    while at < len(rest) and rest[at].startswith("-"):
        at += 2 if sub == "notes" and rest[at] == "--ref" else 1
    if at >= len(rest):
        return known[0], rest
    if rest[at] in known:
        return rest[at], rest[:at] + rest[at + 1:]
    if sub == "reflog":
        return "show", rest
    return rest[at], rest[:at] + rest[at + 1:]


def _git_risk(sub: str, nested: str, p: Parsed, tabled: bool, rest: list[str]) -> Risk:
    if p.may_be("--output", "--output-directory"):
        if not (sub == "format-patch" and p.has("--stdout")):
            return "destructive"
    if sub in _GIT_READS:
        return "execute"
    if sub in _GIT_NESTED_SAFE:
        if nested in _GIT_NESTED_SAFE[sub]:
            return "execute"
        if sub == "reflog" and nested == "expire" and p.has("--dry-run") and not p.unknown:
            return "execute"
        if sub == "remote" and nested in ("show", "update", "add"):
            return "network"
        if sub == "submodule" and nested in ("update", "add"):  # update --force/--checkout discards work
            discards = p.may_be("--force", "-f", "--checkout", "--merge", "--rebase")
            return "destructive" if discards else "network"
        if sub == "worktree" and nested == "add" and not p.unknown and not p.may_be("--force", "-B"):
            return "execute"
        if sub == "notes" and nested == "add" and not p.unknown and not p.may_be("--force"):
            return "execute"
        return "destructive"
    if sub in _GIT_NETWORK:
        return "destructive" if p.may_be("--separate-git-dir") else "network"
    if p.unknown and sub not in ("config",):
        return "destructive"  # an option the table does not know: nothing proves it harmless
    match sub:
        case "add":
            return "execute"
        case "commit":
            return "destructive" if p.may_be("--amend") else "execute"
        case "branch":
            return "destructive" if p.may_be("--delete", "-D", "--move", "-M", "-C", "--force", "--set-upstream-to",
                                             "--set-upstream", "--unset-upstream", "--edit-description") else "execute"
        case "tag":
            return "destructive" if p.may_be("--delete", "--force") else "execute"
        case "checkout":
            creates = p.has("-b", "--orphan")
            safe = {"-b", "--orphan", "--quiet", "--track", "--no-track", "--guess", "--no-guess", "--progress",
                    "--no-progress", "-l"}
            paths = "--" in rest or len(p.operands) > 1
            return "execute" if creates and not paths and set(p.names()) <= safe else "destructive"
        case "switch":
            return "destructive" if p.may_be("--force", "--discard-changes", "--force-create", "--merge",
                                             "--conflict", "--orphan") else "execute"
        case "clean":
            dry = p.has("--dry-run") and not p.may_be("--interactive")
            return "execute" if dry else "destructive"
        case "init":  # --template copies hooks in; --separate-git-dir moves .git; --shared rewrites modes
            safe = {"--quiet", "--initial-branch", "--object-format", "--no-template"}
            return "execute" if set(p.names()) <= safe else "destructive"
        case "fetch":
            refspec = any(":" in o or o.startswith("+") for o in p.operands[1:])
            rewrites = p.may_be("--prune", "--prune-tags", "--force", "--refmap", "--update-head-ok", "--refetch")
            return "destructive" if rewrites or refspec else "network"
        case "push":
            refspec = any(o.startswith(("+", ":")) for o in p.operands[1:])
            rewrites = p.may_be("--force", "--force-with-lease", "--force-if-includes", "--delete", "--mirror",
                                "--prune")
            return "destructive" if rewrites or refspec else "network"
        case "archive":
            return "network" if p.may_be("--remote", "--exec") else "execute"
        case "apply":
            checks = p.has("--check", "--stat", "--numstat", "--summary")
            writes = p.may_be("--apply", "--index", "--cached", "--3way", "--reject", "--intent-to-add")
            return "execute" if checks and not writes else "destructive"
        case "format-patch":
            return "execute" if p.has("--stdout") else "destructive"
        case "symbolic-ref":
            return "execute" if len(p.operands) <= 1 and not p.may_be("--delete") else "destructive"
        case "config":
            reads = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "--get-color",
                     "--get-colorbool", "-l"}
            return "execute" if set(rest) & reads or rest[:1] in (["get"], ["list"]) else "destructive"
        case _:
            # reset (every form), restore, rm, mv, rebase, merge, pull, cherry-pick, revert, am, gc, prune,
            # repack, update-ref, update-index, read-tree, checkout-index, replace, and unknown commands
            return "destructive"
