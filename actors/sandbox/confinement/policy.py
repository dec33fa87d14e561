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
   tools and network clients are not in the defaults; ``xargs`` is refused even when
   allowed (it runs the commands it reads).
3. **Argument rules** (ACODE-SBX-012), per executable, for the known ways to run other code
   or write outside the rules (``git -c``, ``find -exec``, ``sed -i``, ``python -c``, …:
   :mod:`actors.sandbox.confinement.argrules` lists them all); a wrapper (``env``,
   ``nice``, ``timeout``, …) must itself be allowed, and the command it runs is checked as a
   command of its own. Being conservative is the point: a false refusal costs one retry, a
   false allowance costs the machine.

The allowlist is not the security boundary against code in the workspace (``python
script.py`` runs whatever the script says); isolation is (:mod:`actors.sandbox.confinement.isolation`).
The policy stops the model from smuggling a second program past the reviewer's eyes.

:func:`classify` (in :mod:`protocol.calls.commands`, pure, shared with the executor and the
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

from actors.sandbox.confinement import argrules
from actors.sandbox.confinement.confine import quote
from protocol.calls.autonomy import classify, command_risk
from protocol.calls.cmdline import WRAPPERS, unwrap
from protocol.calls.tools import Risk
from protocol.errors import SandboxError
from protocol.policy.sandbox import SandboxPolicy

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


def _allowed(program: str, policy: CommandPolicy) -> str:
    """Gate 2: the basename of ``program`` if the allowlist allows it."""
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
    """Gates 2 and 3, for each wrapper in front of the command and for the command."""
    depth = 0
    while os.path.basename(argv[0]) in WRAPPERS:
        name = _allowed(argv[0], policy)  # whether a wrapper may run at all is the allowlist's decision
        wrapped = unwrap(argv, depth=1)
        argrules.check_wrapper(name, wrapped)
        inner = list(wrapped.argv)
        if not inner:
            return  # env alone, command -v: runs nothing
        depth += 1
        if depth > 4:
            raise argrules.refusal("env-nesting", argv[0], "commands nest too deeply", "run the command directly")
        argv = inner
    _allowed(argv[0], policy)
    argrules.check_arguments(argv, allow_inline_code=policy.allow_inline_code)


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
