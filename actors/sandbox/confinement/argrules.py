"""The argument rules: gate 3 of the command policy (ACODE-SBX-012), per program.

:mod:`actors.sandbox.confinement.policy` has split a command into argv (gate 1) and found
its program on the allowlist (gate 2); these rules refuse the known ways to run other code
or write outside the rules, per executable:

- ``git -c``/``--config-env``/``--exec-path``/``-C``/``--git-dir``/``--work-tree``/
  ``--ext-diff``/``--textconv``/``--exec``/``--upload-pack``/``--receive-pack``/
  ``--output`` and the subcommands that run programs (``difftool``, ``mergetool``,
  ``filter-branch``, ``submodule foreach``, ``bisect run``, ``rebase --exec``, ``config``
  writes, ``daemon``, ``instaweb``, ``credential``, ``hook``); ``git archive -o``;
- ``find -exec/-execdir/-ok/-okdir/-delete/-fprint*/-fls``; ``rg --pre/--pre-glob/-z``;
- ``sed -i`` and scripts with the ``e``, ``w`` or ``W`` commands or flags (``sed -f`` too:
  its script cannot be seen);
- ``awk`` programs with ``system(``, pipes, redirections or ``ENVIRON``, and
  ``-f``/``-i``/``-l``/``-E``, ``@include``/``@load``, ``-W`` (but version/usage/help) and
  the options that write files (``--pretty-print``, ``--profile``, ``--dump-variables``);
- ``tar --checkpoint-action/--to-command/--use-compress-program/-I/--info-script/-F/
  --new-volume-script/--rsh-command/--rmt-command``; ``sort --compress-program``;
- ``python -c``, ``node -e/-p/--eval/--print/-r/--require/--import``, ``perl``/``ruby -e``
  unless ``allow_inline_code``; ``make --eval`` and ``SHELL=``/``.SHELLFLAGS=`` overrides;
- a wrapper's own (:func:`check_wrapper`): ``env -S``, ``env -C`` and ``env`` setting a
  variable; the command a wrapper runs is checked as a command of its own (``xargs`` is
  refused always, even when allowed, by the policy).

Options are read by :mod:`protocol.calls.cmdline` as the program reads them, so a rule holds for
every abbreviation the program accepts (``sed --in``, ``git log --outpu=F``, ``rg
--pre-g``), for an ambiguous prefix that may be the option, and for clusters (``-nie``);
any other ambiguous abbreviation is refused too (rule ``ambiguous-option``), as the program
would refuse it. Being conservative is the point: a false refusal costs one retry, a false
allowance costs the machine.
"""

from __future__ import annotations

import os
import re

from actors.sandbox.confinement.confine import quote
from protocol.calls.cmdline import Option, Parsed, Wrapped
from protocol.calls.commands import describe
from protocol.errors import SandboxError

__all__ = ["check_arguments", "check_wrapper", "refusal"]

_HINT_INLINE = "write the code to a file and run that, or set sandbox.allow_inline_code: true"


def check_arguments(argv: list[str], *, allow_inline_code: bool) -> None:
    """Refuse ``argv`` (a program the allowlist allows, wrappers removed) if one of its
    program's rules does, or if it abbreviates an option ambiguously (SandboxError)."""
    base = re.sub(r"(\d+(\.\d+)*)$", "", os.path.basename(argv[0]))  # python3.11 -> python
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
            _inline(argv, allow_inline_code, (), code="c", takes_value="WX", ends="m")
        case "node" | "nodejs" | "bun" | "deno":
            _inline(argv, allow_inline_code, ("--eval", "--print", "--require", "--import", "--loader"), code="epr")
        case "perl":
            _inline(argv, allow_inline_code, (), code="eE", takes_value="IMmxiCd")
        case "ruby":
            _inline(argv, allow_inline_code, (), code="e", takes_value="IrCE")
        case "make" | "gmake":
            _make(argv)
        case _:
            pass
    _ambiguous(argv)


def refusal(rule: str, value: str, why: str, fix: str) -> SandboxError:
    """The refusal of ``value`` by ``rule`` (ACODE-SBX-012): why, and what to do instead."""
    return SandboxError(f"argument {quote(value, 80)} refused by rule {rule}: {why}; {fix}", code="ACODE-SBX-012")


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
            raise refusal("git-global-option", arg, f"git {name} changes configuration, programs or directories "
                          "outside the workspace's repository (core.pager, aliases and hooks run code)",
                          "set configuration in the repository itself and run git from the workspace")
    call = describe(argv)
    parsed = call.parsed
    command = [w for w in call.command if not w.startswith("-")]
    if parsed is not None:
        exec_ = parsed.may_be("--exec") if command[:1] == ["rebase"] else None
        if exec_ is not None and not exec_.raw.startswith("--"):
            raise refusal("git-runs-program", "rebase --exec", "it runs shell code after each commit",
                          "rebase without it")
        hit = parsed.may_be(*_GIT_ANYWHERE)
        if hit is not None:
            raise refusal("git-runs-program", hit.raw, f"git {_named(hit)} runs another program or writes to any path",
                          "use git without it")
        if command[:1] == ["archive"] and parsed.may_be("--output", "--remote"):
            raise refusal("git-runs-program", "archive --output", "git archive -o writes to any path",
                          "use git archive without it")
    if not command:
        return
    sub = command[0]
    rest = args[args.index(sub) + 1:] if sub in args else []
    if sub in _GIT_SUBCOMMANDS:
        raise refusal("git-subcommand", sub, f"git {sub} {_GIT_SUBCOMMANDS[sub]}", "do the work another way")
    if sub == "submodule" and "foreach" in rest:
        raise refusal("git-subcommand", "submodule foreach", "it runs a shell command in each submodule",
                      "run the command in each submodule directly")
    if sub == "bisect" and "run" in rest:
        raise refusal("git-subcommand", "bisect run", "it runs a command at each step", "step through bisect by hand")
    if sub == "config" and not set(rest) & {"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}:
        raise refusal("git-config-write", "config", "writing git configuration can make git run programs (core.pager, "
                      "core.hooksPath, aliases)", "only read configuration (git config --get/--list)")


_FIND_FORBIDDEN = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprintf", "-fprint", "-fprint0", "-fls")


def _find(argv: list[str]) -> None:
    # find's expression words are matched by exact name: find does not abbreviate them
    for arg in argv[1:]:
        if arg in _FIND_FORBIDDEN:
            raise refusal("find-actions", arg, "find would run programs, delete or write files",
                          "list the files with find and act on them with separate tool calls")


def _parsed(argv: list[str]) -> Parsed:
    parsed = describe(argv).parsed
    assert parsed is not None  # only called for programs with a table
    return parsed


def _rg(argv: list[str]) -> None:
    hit = _parsed(argv).may_be("--pre", "--pre-glob", "--search-zip")
    if hit is not None:
        raise refusal("rg-preprocessor", hit.raw, f"rg {_named(hit)} runs a program on each file",
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
        raise refusal("sed-in-place", hit.raw, f"sed {_named(hit)} rewrites files outside the file tools' checks",
                      "use modify_file or write_file to change files")
    hit = parsed.may_be("--file")
    if hit is not None:
        raise refusal("sed-script-file", hit.raw, "a script file's commands cannot be checked",
                      "pass the script with -e")
    scripts = [o.value or "" for o in parsed.options if o.known and o.name == "--expression"]
    if not scripts and not parsed.may_be("--expression") and parsed.operands:
        scripts.append(parsed.operands[0])
    for script in scripts:
        bad = _sed_script_bad(script)
        if bad:
            raise refusal("sed-exec-or-write", script, f"the sed script uses {bad}",
                          "print with sed and change files with modify_file")


_AWK_OPTIONS = ("--file", "--include", "--load", "--exec", "--pretty-print", "--profile", "--dump-variables",
                "--debug")
_AWK_W = ("version", "usage", "help")


def _awk(argv: list[str]) -> None:
    parsed = _parsed(argv)
    hit = parsed.may_be(*_AWK_OPTIONS)
    if hit is not None:
        raise refusal("awk-program-file", hit.raw, f"awk {_named(hit)} would load a program or extension that cannot "
                      "be checked, or write a file", "pass the program inline")
    for option in parsed.options:
        if option.name == "-W" and (option.value or "").partition("=")[0] not in _AWK_W:
            raise refusal("awk-program-file", f"-W {option.value or ''}", "awk -W options load programs or write "
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
                raise refusal("awk-system", program, why, "keep the awk program to reading and printing")


_TAR_FORBIDDEN = ("--checkpoint-action", "--to-command", "--use-compress-program", "--info-script",
                  "--new-volume-script", "--rsh-command", "--rmt-command")


def _tar(argv: list[str]) -> None:
    hit = _parsed(argv).may_be(*_TAR_FORBIDDEN)
    if hit is not None:
        raise refusal("tar-runs-program", hit.raw, f"tar {_named(hit)} runs a program", "use tar without it (-z, -j, "
                      "-J choose a compressor)")


def _sort(argv: list[str]) -> None:
    hit = _parsed(argv).may_be("--compress-program")
    if hit is not None:
        raise refusal("sort-runs-program", hit.raw, f"sort {_named(hit)} runs a program", "sort without it")


def _prefix_of(arg: str, names: tuple[str, ...]) -> str | None:
    """The long option in ``names`` that ``arg`` (``--ev``, ``--eval=x``) spells or abbreviates."""
    if not arg.startswith("--") or arg == "--":
        return None
    name = arg.partition("=")[0]
    return next((n for n in names if n.startswith(name)), None)


def _inline(argv: list[str], allow_inline_code: bool, long_options: tuple[str, ...], code: str,
            takes_value: str = "", ends: str = "") -> None:
    """Refuse code given on the command line: a long option in ``long_options`` (or any
    abbreviation of one), or a short flag in ``code`` anywhere in a cluster (``-Ic``), up to
    a flag that takes a value."""
    if allow_inline_code:
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
    return refusal("inline-code", arg, f"{os.path.basename(argv[0])} {arg} runs code given on the command line",
                   _HINT_INLINE)


def _make(argv: list[str]) -> None:
    parsed = describe(argv).parsed
    hit = parsed.may_be("--eval") if parsed is not None else None
    if hit is not None:
        raise refusal("make-shell-override", hit.raw, "it changes what make runs", "put it in the Makefile")
    for arg in argv[1:]:
        if re.match(r"(\.?SHELL|\.SHELLFLAGS|MAKESHELL)\s*[:+?!]*=", arg):
            raise refusal("make-shell-override", arg, "it changes what make runs", "put it in the Makefile")


def check_wrapper(name: str, wrapped: Wrapped) -> None:
    """The rules of a wrapper in front of a command (``env``, ``nice``, ``timeout``, ...):
    what it would change about the command beyond running it."""
    if name != "env":
        return
    options = wrapped.wrappers[0][1]
    hit = options.may_be("--split-string")
    if hit is not None:
        raise refusal("env-split-string", hit.raw, "env -S builds a command from a string", "run the command directly")
    hit = options.may_be("--chdir")
    if hit is not None:
        raise refusal("env-chdir", hit.raw, "env -C changes directory", "run the command in the workspace")
    if wrapped.assignments:
        raise refusal("env-assignment", wrapped.assignments[0], "env would set a variable for the command",
                      "pass variables with sandbox.pass_env")


def _ambiguous(argv: list[str]) -> None:
    """An abbreviation of several options: the program refuses it (``git reset --re``), so
    the policy says so now, naming them (a rule above has already refused it if any of them
    is one it refuses)."""
    parsed = describe(argv).parsed
    for option in parsed.options if parsed is not None else ():
        if option.ambiguous:
            raise refusal("ambiguous-option", option.raw, f"{os.path.basename(argv[0])} reads {option.name} as any of "
                          f"{', '.join(option.candidates)} and refuses it", "spell the option out in full")
