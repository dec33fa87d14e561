"""What an approval prompt shows of a call: the diff a write would make, a command's argv and cwd.

The diff of ``write_file`` is computed against the file as the sandbox reads it now
(``read_file`` through the sandbox, under the call's key plus ``:preview``, so a replayed
stage reads the same bytes); ``modify_file`` shows the change it asks for (its diff as
given, or each search/replace pair as a hunk). The arguments are read as the sandbox will
read them (:func:`protocol.calls.tools.tolerant_args`), so a pair sent under another name shows;
a ``modify_file`` with ``content`` (a whole new text) shows as write_file's does. Nothing
here runs the call.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from actors.stages.request.context import StageContext
from protocol.calls.autonomy import command_argv
from protocol.calls.tools import tolerant_args

__all__ = ["command_of", "diff_of"]

_NUMBERED = re.compile(r"^ *\d+\t")
_TRUNCATED = "[… truncated"
MAX_DIFF_CHARS = 20_000


def _current(ctx: StageContext, key: str, path: str) -> tuple[str, str]:
    """The file's text now ("" when it does not exist) and a note when only part was read."""
    result = ctx.tool(f"{key}:preview", "read_file", {"path": path})
    if not result.ok:
        if result.error is not None and result.error.code == "ACODE-SBX-003":
            return "", ""
        return "", f"(the current file could not be read: {result.error.message if result.error else '?'})\n"
    lines, note = [], ""
    for line in result.output.splitlines(keepends=True):
        if line.startswith(_TRUNCATED):
            note = "(the file is longer than the output limit: the diff is against its first part)\n"
            break
        if line.startswith("[") and line.rstrip().endswith(" is empty]"):
            break
        lines.append(_NUMBERED.sub("", line, count=1))
    return "".join(lines), note


def _cut(text: str) -> str:
    if len(text) <= MAX_DIFF_CHARS:
        return text
    return text[:MAX_DIFF_CHARS] + f"\n[… {len(text) - MAX_DIFF_CHARS} more characters of diff]\n"


def diff_of(ctx: StageContext, key: str, tool: str, arguments: dict[str, Any]) -> str:
    """A unified diff of the change a write makes ("" for a call that writes no file text)."""
    arguments = tolerant_args(tool, arguments)
    path = str(arguments.get("path", ""))
    if tool == "write_file" or (tool == "modify_file" and "content" in arguments and "edits" not in arguments
                                and "diff" not in arguments):
        old, note = _current(ctx, key, path)
        new = str(arguments.get("content", ""))
        lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     fromfile=f"a/{path}" if old or note else "/dev/null", tofile=f"b/{path}")
        return _cut(note + "".join(line if line.endswith("\n") else line + "\n" for line in lines))
    if tool == "modify_file":
        if arguments.get("diff"):
            return _cut(f"--- a/{path}\n+++ b/{path}\n" + str(arguments["diff"]).removeprefix(f"--- a/{path}\n"))
        out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
        for edit in arguments.get("edits") or []:
            if isinstance(edit, dict):
                out.append("@@ edit @@\n")
                out += [f"-{line}\n" for line in str(edit.get("search", "")).splitlines()]
                out += [f"+{line}\n" for line in str(edit.get("replace", "")).splitlines()]
        return _cut("".join(out))
    if tool == "create_directory":
        return f"(creates the directory {path})\n"
    return ""


def command_of(arguments: dict[str, Any]) -> list[str]:
    return command_argv(str(arguments.get("command", "")))
