"""What every command shares: the root ``--home`` option and the acode home it names, and ``--json``."""

from pathlib import Path
from typing import Annotated

import typer

from actors.paths import RunPaths

__all__ = ["Home", "Json", "Verbose", "home", "run_paths", "set_home"]

_state: dict[str, Path | None] = {"home": None}

Home = Annotated[Path | None, typer.Option("--home", help="acode home (default $ACODE_HOME or ~/.acode)",
                                              show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="machine-readable JSON output")]
Verbose = Annotated[bool, typer.Option(
    "--verbose", "-v", help="show the model's text under each turn and stage as the session runs")]


def set_home(home: Home = None) -> None:
    """The app's callback: ``--home`` comes before the command and holds for it."""
    _state["home"] = home


def home() -> Path | None:
    """The ``--home`` given (None: ``$ACODE_HOME`` or ``~/.acode``)."""
    return _state["home"]


def run_paths() -> RunPaths:
    return RunPaths.for_home(_state["home"])
