"""The reference follows the code: every command and option of the CLI is in the README's
command table and in docs/commands.md, docs/events.md describes every event type a
session's log can hold, and docs/errors.md every error code acode emits, each with no other."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from cli.app import app
from protocol.errors import CODES
from protocol.sessions.events import Event

ROOT = Path(__file__).resolve().parent.parent


def _commands(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, list[list[str]]]]:
    """("plan show", [the spellings of each option]) for every command of the app."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*prefix, name))
        return
    options = [[*p.opts, *p.secondary_opts] for p in command.params if p.param_type_name == "option"]
    yield " ".join(prefix), [spellings for spellings in options if spellings != ["--help"]]


COMMANDS = sorted(_commands(typer.main.get_command(app)))


def _rows(path: Path) -> dict[str, str]:
    """The command table's rows of a page, by command: "| `acode plan show SESSION ...` | ...\""""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `acode ([a-z]+(?: [a-z]+)?)\b", line)
        if match:
            rows[match.group(1)] = line
    return rows


@pytest.mark.parametrize("page", ["README.md", "docs/commands.md"])
def test_every_command_has_a_row_naming_each_of_its_options(page: str) -> None:
    rows = _rows(ROOT / page)
    missing = [f"acode {name}" for name, _ in COMMANDS if name not in rows]
    unnamed = [f"acode {name} {'/'.join(spellings)}" for name, options in COMMANDS if name in rows
               for spellings in options
               if not any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", rows[name]) for s in spellings)]
    assert (missing, unnamed) == ([], [])
    assert "`--home DIR`" in (ROOT / page).read_text(encoding="utf-8")  # the one option of every command


def test_the_events_doc_has_a_row_for_every_event_type_and_no_other() -> None:
    tags = {member.__struct_config__.tag for member in typing.get_args(Event)}
    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.M))
    rows -= {"type", "id", "session_id", "seq", "at"}  # the fields every event has
    assert sorted(rows) == sorted(tags)


def test_the_error_codes_doc_has_a_row_for_every_code_and_no_other() -> None:
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(ACODE-[A-Z]+-\d{3})` \|", text, flags=re.M)
    assert sorted(rows) == sorted(CODES)
