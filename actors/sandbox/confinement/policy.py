"""The command policy: what run_terminal may run, checked before anything starts.

The model choosing commands is untrusted, so a command passes three gates, in order;
each refusal names the rule that refused it, the offending value and how to allow it.

1. **Shell syntax** (ACODE-SBX-010). No shell runs a command: it is split into arguments
   as a POSIX shell would split it, and refused if it relies on what only a shell does:
   ``;`` ``&&`` ``||`` ``|`` ``&`` (background), backticks, ``$(``, ``${``, ``$NAME``,
   ``<(`` ``>(``, redirections (``>`` ``>>`` ``<`` ``2>`` ``&>`` ``>&``), heredocs and
   here-strings (``<<`` ``<<<``), subshell parentheses, a leading ``!``, unquoted newlines
   (a quoted one is text, as in a shell), NUL and other control characters, assignment
   prefixes (``FOO=bar cmd``), and bidi or invisible Unicode (overrides, isolates,
   zero-width characters, BOM, soft hyphen, tag characters),
   which can make a command read differently from what runs. Quoted operators are plain
   text (``grep "a|b" f`` is fine); ``$`` and backticks are refused inside double quotes
   too (a shell would expand them there), allowed inside single quotes. Globs and braces
   are literal characters, since nothing expands them. The exception: a command line the
   user listed in ``sandbox.shell_commands`` runs as given through ``/bin/sh -c``.
2. **The executable allowlist** (ACODE-SBX-011). The first word's basename must be allowed
   (:data:`DEFAULT_ALLOW`, or the workspace's ``allowed_commands``, plus ``extra_commands``).
   An absolute path is refused whatever its basename (it bypasses the allowlist's review);
   a relative one (``./run.sh``) needs its basename allowed. Shells, ``xargs``, privilege
   tools and network clients are not in the defaults.
3. **Argument rules** (ACODE-SBX-012), per executable, for the known ways to run other code
   or write outside the rules: ``git -c``/``--config-env``/``--exec-path``/``-C``/
   ``--git-dir``/``--work-tree``/``--ext-diff``/``--textconv``/``--exec``/
   ``--upload-pack``/``--receive-pack``/``--output`` and the subcommands that run programs
   (``difftool``, ``mergetool``, ``filter-branch``, ``submodule foreach``, ``bisect run``,
   ``rebase --exec``, ``config`` writes, ``daemon``, ``instaweb``, ``credential``, ``hook``);
   ``find -exec/-execdir/-ok/-okdir/-delete/-fprint*/-fls``; ``rg --pre/--pre-glob/-z``;
   ``sed -i`` and scripts with the ``e``, ``w`` or ``W`` commands or flags (``sed -f`` too:
   its script cannot be seen); ``xargs`` always, even when allowed; ``env -S`` and
   ``env`` before a command, which is checked as a command of its own; ``awk`` programs
   with ``system(``, pipes, redirections or ``ENVIRON``, and ``-f``/``-i``/``-l``/``-E``;
   ``tar --checkpoint-action/--to-command/--use-compress-program/-I/--info-script/-F/
   --new-volume-script/--rsh-command/--rmt-command``; ``python -c``, ``node -e/-p/--eval/
   --print/-r/--require/--import``, ``perl``/``ruby -e`` unless ``allow_inline_code``;
   ``make --eval`` and ``SHELL=``/``.SHELLFLAGS=`` overrides; ``sort --compress-program``;
   ``awk`` ``@include``/``@load``, ``-W`` (but version/usage/help) and the options that
   write files (``--pretty-print``, ``--profile``, ``--dump-variables``); ``git archive -o``.
   Options are read by :mod:`protocol.cmdline` as the program reads them, so a rule holds
   for every abbreviation the program accepts (``sed --in``, ``git log --outpu=F``, ``rg
   --pre-g``), for an ambiguous prefix that may be the option, and for clusters (``-nie``);
   any other ambiguous abbreviation is refused too (rule ``ambiguous-option``), as the
   program would refuse it;
   a wrapper (``env``, ``nice``, ``timeout``, ``nohup``, ``stdbuf``, ``ionice``, ``time``,
   ``command``) must itself be allowed, and the command it runs is checked as a command of
   its own. Being conservative is the point: a false refusal costs one retry, a false
   allowance costs the machine.

The allowlist is not the security boundary against code in the workspace (``python
script.py`` runs whatever the script says); isolation is (:mod:`actors.sandbox.confinement.isolation`).
The policy stops the model from smuggling a second program past the reviewer's eyes.

:func:`classify` (in :mod:`protocol.commands`, pure, shared with the executor and the
verifier) gives the risk class approval gates use: destructive unless the program,
subcommand and options are known to read or only add (see there), ``network`` for installs
and fetches, else ``execute``.
"""

from __future__ import annotations

import os
import re
import shlex
import unicodedata
from typing import Any

import msgspec

from actors.sandbox.confinement.confine import quote
from protocol.autonomy import classify, command_risk
from protocol.cmdline import WRAPPERS, Option, Parsed, Wrapped, unwrap
from protocol.commands import describe
from protocol.errors import SandboxError
from protocol.sandbox import SandboxPolicy
from protocol.tools import Risk

__all__ = ["DEFAULT_ALLOW", "Command", "CommandPolicy", "check", "classify", "command_policy_of", "refused_by_policy"]

DEFAULT_ALLOW = frozenset({
    # Python
    "python", "python3", "pip", "pip3", "pytest", "ruff", "mypy", "black", "isort", "flake8", "pylint", "uv",
    "poetry", "tox", "nox",
    # Node
    "node", "npm", "npx", "yarn", "pnpm", "tsc", "eslint", "prettier", "jest", "vitest",
    # Go, Rust, C
    "go", "gofmt", "cargo", "rustc", "rustfmt", "make", "cmake",
    # git and reading tools
    "git", "ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "sed", "awk", "sort", "uniq", "diff", "cmp",
    "echo", "printf", "true", "false", "pwd", "mkdir", "touch", "cp", "mv", "rm", "tar", "env", "which", "test",
    "basename", "dirname", "realpath", "stat", "file", "tr", "cut", "seq", "sleep", "date",
})
_ALWAYS_REFUSED = {"xargs": "xargs runs the commands it reads, which no rule can see"}
_HINT_ALLOW = "add it with sandbox.extra_commands in .agent/config.yml if you trust it"
_HINT_INLINE = "write the code to a file and run that, or set sandbox.allow_inline_code: true"

# Bidi controls and invisible characters: the command may not read as it runs.
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u00ad\u180e"
                        "\U000e0000-\U000e007f]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = {";": "';' (command separator)", "&&": "'&&'", "||": "'||'", "|": "'|' (pipe)",
              "&": "'&' (background)", ";;": "';;'", "(": "'(' (subshell)", ")": "')' (subshell)",
              "|&": "'|&' (pipe)", ";&": "';&'"}


class CommandPolicy(msgspec.Struct, frozen=True, kw_only=True):
    allow: frozenset[str] = DEFAULT_ALLOW
    allow_inline_code: bool = False
    shell_commands: frozenset[str] = frozenset()


def command_policy_of(policy: SandboxPolicy) -> CommandPolicy:
    """The command policy a session's sandbox settings describe. Here, not in
    :mod:`actors.sandbox.tools.terminal`, so the planner's plan checks use it without loading the
    terminal (psutil, the isolation levels, the read boundary: memory in every stage actor)."""
    allow = (frozenset(policy.allowed_commands) if policy.allowed_commands is not None
             else DEFAULT_ALLOW) | frozenset(policy.extra_commands)
    return CommandPolicy(allow=allow, allow_inline_code=policy.allow_inline_code,
                         shell_commands=frozenset(c.strip() for c in policy.shell_commands))


class Command(msgspec.Struct, frozen=True):
    argv: list[str]
    shell: bool
    risk: Risk


def _refuse(code: str, message: str) -> SandboxError:
    return SandboxError(message, code=code)


def _syntax(form: str, command: str) -> SandboxError:
    return _refuse("ACODE-SBX-010", f"command {quote(command)} uses shell syntax: {form}; no shell runs commands, "
                                    "so run one program with its arguments (split the work into several calls), "
                                    "or list this exact command in sandbox.shell_commands")


def _scan_quotes(command: str) -> None:
    """Refuse expansions a shell would make: outside quotes and inside double quotes."""
    state = None  # None, "'" or '"'
    i = 0
    while i < len(command):
        ch = command[i]
        if state == "'":
            if ch == "'":
                state = None
        elif ch == "\\" and state is None:
            i += 1  # an escaped character is literal
        elif ch == "\\" and state == '"':
            if command[i + 1:i + 2] in ('"', "\\", "$", "`"):
                i += 1
        elif ch == "'" and state is None:
            state = "'"
        elif ch == '"':
            state = None if state == '"' else '"'
        elif ch in "\n\r" and state is None:
            raise _syntax("a newline (several commands)", command)
        elif ch == "`":
            raise _syntax("'`' (command substitution)", command)
        elif ch == "$":
            after = command[i + 1:i + 2]
            if after == "(":
                raise _syntax("'$(' (command substitution)", command)
            if after == "{":
                raise _syntax("'${' (parameter expansion)", command)
            if after and (after.isalnum() or after in "_?!#@*-$"):
                raise _syntax(f"'${after}' (variable expansion)", command)
        i += 1


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:
        raise _refuse("ACODE-SBX-007", f"command {quote(command)} could not be parsed: {exc}; quote it as a "
                                       "POSIX shell would (no shell runs it)") from exc


def _check_syntax(command: str) -> list[str]:
    for ch in command:
        if ch == "\0":
            raise _syntax("a NUL byte", command)
        if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r":
            raise _syntax(f"control character U+{ord(ch):04X}", command)
    invisible = _INVISIBLE.search(command)
    if invisible:
        raise _syntax(f"invisible or bidi character U+{ord(invisible.group()):04X} "
                      f"({unicodedata.name(invisible.group(), 'unnamed')})", command)
    _scan_quotes(command)
    # An operator token comes out of the lexer alone; a quoted one is part of a word. The
    # lexer drops quotes, so compare against the raw text: a token made only of operator
    # characters is an operator only if it appears unquoted (shlex keeps quoted ones as words).
    raw = shlex.shlex(command, posix=False, punctuation_chars=";&|<>()")
    raw.whitespace_split = True
    raw.commenters = ""
    try:
        raw_tokens = list(raw)
    except ValueError:
        raw_tokens = []
    for token in raw_tokens:
        if token and set(token) <= set(";&|<>()"):
            if token in _OPERATORS:
                raise _syntax(_OPERATORS[token], command)
            if "<<" in token:
                raise _syntax(f"{token!r} (heredoc or here-string)", command)
            raise _syntax(f"{token!r} (redirection)", command)
        if re.fullmatch(r"\d*[<>]&?\d*|&>>?", token):
            raise _syntax(f"{token!r} (redirection)", command)
    argv = _tokens(command)
    if not argv:
        raise _refuse("ACODE-SBX-007", "command is empty; name a program to run")
    if _ASSIGNMENT.match(argv[0]) and raw_tokens and _ASSIGNMENT.match(raw_tokens[0]):
        raise _syntax(f"assignment prefix {quote(argv[0], 60)} (set variables with sandbox.pass_env, not in "
                      "the command)", command)
    if argv[0] == "!":
        raise _syntax("'!' (negation)", command)
    return argv


# --- argument rules ----------------------------------------------------------------------------

def _rule(rule: str, value: str, why: str, fix: str) -> SandboxError:
    return _refuse("ACODE-SBX-012", f"argument {quote(value, 80)} refused by rule {rule}: {why}; {fix}")


def _option(arg: str, names: tuple[str, ...]) -> str | None:
    """The long/short option ``arg`` spells, if it is one of ``names`` (``--x=v`` and ``-xV`` too)."""
    for name in names:
        if arg == name or (name.startswith("--") and arg.startswith(name + "=")):
            return name
        if len(name) == 2 and name.startswith("-") and arg.startswith(name) and not arg.startswith("--"):
            return name  # -cVALUE
    return None


_GIT_GLOBAL = ("-c", "--config-env", "--exec-path", "-C", "--git-dir", "--work-tree", "--namespace",
               "--super-prefix", "--list-cmds")
_GIT_ANYWHERE = ("--ext-diff", "--textconv", "--exec", "--upload-pack", "--receive-pack", "--output",
                 "--extcmd", "--tool", "--run", "--open-files-in-pager", "-O")
_GIT_SUBCOMMANDS = {"difftool": "runs a diff program", "mergetool": "runs a merge program",
                    "filter-branch": "runs shell code per commit", "daemon": "serves the repository",
                    "instaweb": "starts a web server", "credential": "reads stored credentials",
                    "credential-store": "reads stored credentials", "credential-cache": "reads stored credentials",
                    "hook": "runs hooks", "fsmonitor--daemon": "runs a daemon", "upload-pack": "serves packs",
                    "receive-pack": "runs hooks", "shell": "runs a restricted shell", "sh-setup": "shell code",
                    "web--browse": "runs a browser", "send-email": "sends mail", "p4": "runs Perforce",
                    "svn": "runs Subversion", "cvsserver": "serves CVS", "archimport": "runs arch",
                    "quiltimport": "runs quilt", "remote-ext": "runs a command"}


def _named(option: Option) -> str:
    """How a refusal names the option: as written, and what it resolves to when abbreviated."""
    if option.known and option.raw.partition("=")[0] != option.name and option.raw.startswith("--"):
        return f"{option.name} (written {option.raw.partition('=')[0]})"
    if option.ambiguous:
        return f"{option.name} (ambiguous: {' '.join(option.candidates)})"
    return option.name


def _git(argv: list[str]) -> None:
    # git's own options (before the subcommand) are read by exact name, as git reads them
    args = argv[1:]
    for arg in args:
        if not arg.startswith("-"):
            break
        name = _option(arg, _GIT_GLOBAL)
        if name:
            raise _rule("git-global-option", arg, f"git {name} changes configuration, programs or directories "
                        "outside the workspace's repository (core.pager, aliases and hooks run code)",
                        "set configuration in the repository itself and run git from the workspace")
    call = describe(argv)
    parsed = call.parsed
    command = [w for w in call.command if not w.startswith("-")]
    if parsed is not None:
        exec_ = parsed.may_be("--exec") if command[:1] == ["rebase"] else None
        if exec_ is not None and not exec_.raw.startswith("--"):
            raise _rule("git-runs-program", "rebase --exec", "it runs shell code after each commit",
                        "rebase without it")
        hit = parsed.may_be(*_GIT_ANYWHERE)
        if hit is not None:
            raise _rule("git-runs-program", hit.raw, f"git {_named(hit)} runs another program or writes to any path",
                        "use git without it")
        if command[:1] == ["archive"] and parsed.may_be("--output", "--remote"):
            raise _rule("git-runs-program", "archive --output", "git archive -o writes to any path",
                        "use git archive without it")
    if not command:
        return
    sub = command[0]
    rest = args[args.index(sub) + 1:] if sub in args else []
    if sub in _GIT_SUBCOMMANDS:
        raise _rule("git-subcommand", sub, f"git {sub} {_GIT_SUBCOMMANDS[sub]}", "do the work another way")
    if sub == "submodule" and "foreach" in rest:
        raise _rule("git-subcommand", "submodule foreach", "it runs a shell command in each submodule",
                    "run the command in each submodule directly")
    if sub == "bisect" and "run" in rest:
        raise _rule("git-subcommand", "bisect run", "it runs a command at each step", "step through bisect by hand")
    if sub == "config" and not set(rest) & {"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}:
        raise _rule("git-config-write", "config", "writing git configuration can make git run programs (core.pager, "
                    "core.hooksPath, aliases)", "only read configuration (git config --get/--list)")


_FIND_FORBIDDEN = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprintf", "-fprint", "-fprint0", "-fls")


def _find(argv: list[str]) -> None:
    # find's expression words are matched by exact name: find does not abbreviate them
    for arg in argv[1:]:
        if arg in _FIND_FORBIDDEN:
            raise _rule("find-actions", arg, "find would run programs, delete or write files",
                        "list the files with find and act on them with separate tool calls")


def _parsed(argv: list[str]) -> Parsed:
    parsed = describe(argv).parsed
    assert parsed is not None  # only called for programs with a table
    return parsed


def _rg(argv: list[str]) -> None:
    hit = _parsed(argv).may_be("--pre", "--pre-glob", "--search-zip")
    if hit is not None:
        raise _rule("rg-preprocessor", hit.raw, f"rg {_named(hit)} runs a program on each file",
                    "search the files as they are")


_SED_TEXT = re.compile(r"([sy])(.)((?:\\.|(?!\2).)*)\2((?:\\.|(?!\2).)*)\2([a-zA-Z0-9]*)")
_SED_ADDRESS = re.compile(r"/(?:\\.|[^/])*/|\\(.)(?:\\.|(?!\1).)*\1")


def _sed_script_bad(script: str) -> str | None:
    """The dangerous part of a sed script, if any. Conservative: with the text of s///,
    y/// and address regexes set aside, any e, w or W left is taken for a command (a
    label or file name with those letters is refused too; a retry without them works)."""
    for match in _SED_TEXT.finditer(script):
        if match.group(1) == "s" and set(match.group(5)) & {"e", "w", "W"}:
            return "the e or w flag of s/// (runs a program or writes a file)"
    rest = _SED_ADDRESS.sub(" ", _SED_TEXT.sub(" ", script))
    if re.search(r"[ewW]", rest):
        return "the e, w or W command (runs a program or writes a file)"
    return None


def _sed(argv: list[str]) -> None:
    parsed = _parsed(argv)
    hit = parsed.may_be("--in-place")
    if hit is not None:
        raise _rule("sed-in-place", hit.raw, f"sed {_named(hit)} rewrites files outside the file tools' checks",
                    "use modify_file or write_file to change files")
    hit = parsed.may_be("--file")
    if hit is not None:
        raise _rule("sed-script-file", hit.raw, "a script file's commands cannot be checked",
                    "pass the script with -e")
    scripts = [o.value or "" for o in parsed.options if o.known and o.name == "--expression"]
    if not scripts and not parsed.may_be("--expression") and parsed.operands:
        scripts.append(parsed.operands[0])
    for script in scripts:
        bad = _sed_script_bad(script)
        if bad:
            raise _rule("sed-exec-or-write", script, f"the sed script uses {bad}",
                        "print with sed and change files with modify_file")


_AWK_OPTIONS = ("--file", "--include", "--load", "--exec", "--pretty-print", "--profile", "--dump-variables",
                "--debug")
_AWK_W = ("version", "usage", "help")


def _awk(argv: list[str]) -> None:
    parsed = _parsed(argv)
    hit = parsed.may_be(*_AWK_OPTIONS)
    if hit is not None:
        raise _rule("awk-program-file", hit.raw, f"awk {_named(hit)} would load a program or extension that cannot "
                    "be checked, or write a file", "pass the program inline")
    for option in parsed.options:
        if option.name == "-W" and (option.value or "").partition("=")[0] not in _AWK_W:
            raise _rule("awk-program-file", f"-W {option.value or ''}", "awk -W options load programs or write "
                        f"files (only -W {', -W '.join(_AWK_W)} pass)", "pass the program inline")
    programs = [o.value or "" for o in parsed.options if o.known and o.name == "--source"]
    if not programs and parsed.operands:
        programs.append(parsed.operands[0])
    for program in programs:
        for pattern, why in ((r"system\s*\(", "system() runs a shell command"),
                             (r"\|\s*&?\s*getline|\|&", "a pipe runs a shell command"),
                             (r"\bENVIRON\b", "ENVIRON reads the environment"),
                             (r"@\s*(include|load)\b", "@include and @load load code that cannot be checked "
                                                       "(@include \"inplace\" rewrites files)"),
                             (r"print[f]?[^;}]*?(>>?|\|)", "print/printf redirection writes a file or runs a command")):
            if re.search(pattern, program):
                raise _rule("awk-system", program, why, "keep the awk program to reading and printing")


_TAR_FORBIDDEN = ("--checkpoint-action", "--to-command", "--use-compress-program", "--info-script",
                  "--new-volume-script", "--rsh-command", "--rmt-command")


def _tar(argv: list[str]) -> None:
    hit = _parsed(argv).may_be(*_TAR_FORBIDDEN)
    if hit is not None:
        raise _rule("tar-runs-program", hit.raw, f"tar {_named(hit)} runs a program", "use tar without it (-z, -j, "
                    "-J choose a compressor)")


def _sort(argv: list[str]) -> None:
    hit = _parsed(argv).may_be("--compress-program")
    if hit is not None:
        raise _rule("sort-runs-program", hit.raw, f"sort {_named(hit)} runs a program", "sort without it")


def _prefix_of(arg: str, names: tuple[str, ...]) -> str | None:
    """The long option in ``names`` that ``arg`` (``--ev``, ``--eval=x``) spells or abbreviates."""
    if not arg.startswith("--") or arg == "--":
        return None
    name = arg.partition("=")[0]
    return next((n for n in names if n.startswith(name)), None)


def _inline(argv: list[str], policy: CommandPolicy, long_options: tuple[str, ...], code: str,
            takes_value: str = "", ends: str = "") -> None:
    """Refuse code given on the command line: a long option in ``long_options`` (or any
    abbreviation of one), or a short flag in ``code`` anywhere in a cluster (``-Ic``), up to
    a flag that takes a value."""
    if policy.allow_inline_code:
        return
    value_next = False
    for arg in argv[1:]:
        if value_next:  # the value of a flag such as -W or -m
            value_next = False
            continue
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break  # the script and its own arguments follow
        if arg.startswith("--"):
            if _prefix_of(arg, long_options):
                raise _inline_refusal(argv, arg)
            continue
        for i, flag in enumerate(arg[1:], start=1):
            if flag in code:
                raise _inline_refusal(argv, arg)
            if flag in ends:
                return  # python -m module: what follows is the module's
            if flag in takes_value:
                value_next = i == len(arg) - 1  # -W ignore: the next argument is the value
                break


def _inline_refusal(argv: list[str], arg: str) -> SandboxError:
    return _rule("inline-code", arg, f"{os.path.basename(argv[0])} {arg} runs code given on the command line",
                 _HINT_INLINE)


def _make(argv: list[str]) -> None:
    parsed = describe(argv).parsed
    hit = parsed.may_be("--eval") if parsed is not None else None
    if hit is not None:
        raise _rule("make-shell-override", hit.raw, "it changes what make runs", "put it in the Makefile")
    for arg in argv[1:]:
        if re.match(r"(\.?SHELL|\.SHELLFLAGS|MAKESHELL)\s*[:+?!]*=", arg):
            raise _rule("make-shell-override", arg, "it changes what make runs", "put it in the Makefile")


def _wrapper(name: str, wrapped: Wrapped) -> None:
    """The rules of a wrapper in front of a command (``env``, ``nice``, ``timeout``, ...):
    what it would change about the command beyond running it."""
    if name != "env":
        return
    options = wrapped.wrappers[0][1]
    hit = options.may_be("--split-string")
    if hit is not None:
        raise _rule("env-split-string", hit.raw, "env -S builds a command from a string", "run the command directly")
    hit = options.may_be("--chdir")
    if hit is not None:
        raise _rule("env-chdir", hit.raw, "env -C changes directory", "run the command in the workspace")
    if wrapped.assignments:
        raise _rule("env-assignment", wrapped.assignments[0], "env would set a variable for the command",
                    "pass variables with sandbox.pass_env")


def _allowed(program: str, policy: CommandPolicy) -> str:
    name = os.path.basename(program)
    if os.path.isabs(program):
        raise _refuse("ACODE-SBX-011", f"command {quote(program)} is an absolute path; name the program as it is on "
                                       "PATH (its basename must be on the allowlist)")
    if name in _ALWAYS_REFUSED:
        raise _refuse("ACODE-SBX-011", f"command {quote(name)} is refused by rule {name}-runs-commands: "
                                       f"{_ALWAYS_REFUSED[name]}; run each command as its own call")
    if name not in policy.allow:
        raise _refuse("ACODE-SBX-011", f"command {quote(name)} is not allowed by the allowlist rule; allowed: "
                                       f"{', '.join(sorted(policy.allow)[:60])}; {_HINT_ALLOW}")
    return name


def _check_argv(argv: list[str], policy: CommandPolicy) -> None:
    depth = 0
    while os.path.basename(argv[0]) in WRAPPERS:
        name = _allowed(argv[0], policy)  # whether a wrapper may run at all is the allowlist's decision
        wrapped = unwrap(argv, depth=1)
        _wrapper(name, wrapped)
        inner = list(wrapped.argv)
        if not inner:
            return  # env alone, command -v: runs nothing
        depth += 1
        if depth > 4:
            raise _rule("env-nesting", argv[0], "commands nest too deeply", "run the command directly")
        argv = inner
    name = _allowed(argv[0], policy)
    base = re.sub(r"(\d+(\.\d+)*)$", "", name)  # python3.11 -> python
    match base:
        case "git":
            _git(argv)
        case "find":
            _find(argv)
        case "rg":
            _rg(argv)
        case "sed" | "gsed":
            _sed(argv)
        case "awk" | "gawk" | "mawk" | "nawk":
            _awk(argv)
        case "tar" | "gtar":
            _tar(argv)
        case "sort":
            _sort(argv)
        case "python" | "pypy":
            _inline(argv, policy, (), code="c", takes_value="WX", ends="m")
        case "node" | "nodejs" | "bun" | "deno":
            _inline(argv, policy, ("--eval", "--print", "--require", "--import", "--loader"), code="epr")
        case "perl":
            _inline(argv, policy, (), code="eE", takes_value="IMmxiCd")
        case "ruby":
            _inline(argv, policy, (), code="e", takes_value="IrCE")
        case "make" | "gmake":
            _make(argv)
        case _:
            pass
    _ambiguous(argv)


def _ambiguous(argv: list[str]) -> None:
    """An abbreviation of several options: the program refuses it (``git reset --re``), so
    the policy says so now, naming them (a rule above has already refused it if any of them
    is one it refuses)."""
    parsed = describe(argv).parsed
    for option in parsed.options if parsed is not None else ():
        if option.ambiguous:
            raise _rule("ambiguous-option", option.raw, f"{os.path.basename(argv[0])} reads {option.name} as any of "
                        f"{', '.join(option.candidates)} and refuses it", "spell the option out in full")


def check(command: str, policy: CommandPolicy | None = None) -> Command:
    """The command to run, or a refusal (SandboxError, ACODE-SBX-007/010/011/012)."""
    policy = policy or CommandPolicy()
    stripped = command.strip()
    if stripped and stripped in policy.shell_commands:
        argv = _tokens(stripped) if not set(stripped) & set(";&|<>()`$\n") else stripped.split()
        redirected = command_risk(stripped) == "destructive"  # > FILE truncates FILE
        return Command(argv=["/bin/sh", "-c", stripped], shell=True,
                       risk="destructive" if redirected else classify(argv))
    argv = _check_syntax(command)
    _check_argv(argv, policy)
    return Command(argv=argv, shell=False, risk=classify(argv))


def refused_by_policy(tool: str, arguments: dict[str, Any], sandbox: SandboxPolicy) -> bool:
    """Whether ``run_terminal`` with ``arguments`` is a command the session's policy refuses
    (any of :func:`check`'s codes): such a call runs nowhere, so nobody is asked to approve
    it; the sandbox refuses it with the policy's own code and the model reads why. The
    executor's autonomy step and the sandbox's gate both ask, with the same policy."""
    command = arguments.get("command") if tool == "run_terminal" else None
    if not isinstance(command, str):
        return False
    try:
        check(command, command_policy_of(sandbox))
    except SandboxError:
        return True
    return False
