"""The CLI's dependencies: it takes the task contract from protocol/, nothing from the stages."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import cli

CLI_DIR = Path(cli.__file__).parent
ROOT = CLI_DIR.parent
# every module of the CLI, its sub-packages' too (cli/commands/), but not the example project `acode init` copies
FILES = sorted(p for p in CLI_DIR.rglob("*.py") if "example" not in p.relative_to(CLI_DIR).parts)
MODULES = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in FILES)


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_cli_module_names_the_stages_in_an_import() -> None:
    offenders = {str(path.relative_to(ROOT)): sorted(n for n in _imported(path) if n.startswith("actors.stages"))
                 for path in FILES}
    assert {path: names for path, names in offenders.items() if names} == {}
    assert {"cli.app", "cli.commands.sessions"} <= set(MODULES)  # the glob found the CLI, its sub-packages too


def _loaded(modules: list[str], condition: str) -> list[str]:
    """The modules, by name ``m``, for which ``condition`` holds once ``modules`` were imported
    in a fresh interpreter."""
    code = (f"import sys\nfor name in {modules!r}:\n    __import__(name)\n"
            f"print(sorted(m for m in sys.modules if {condition}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return list(ast.literal_eval(done.stdout.strip()))


def test_importing_every_cli_module_loads_nothing_from_the_stages() -> None:
    """Transitively too: what the CLI imports (the coordinator's options, say) must not pull them in."""
    assert _loaded(MODULES, "m == 'actors.stages' or m.startswith('actors.stages.')") == []


# `acode mcp serve`'s tools, written with the SDK: imported by that command when it runs, by no module
SERVES_MCP = "cli.mcp_server"


def test_importing_every_cli_module_loads_no_mcp_sdk() -> None:
    """The MCP SDK is the mcp actor's alone (issue 30): the CLI asks that actor (``acode doctor``),
    and a command that serves MCP imports the SDK when it runs, not when the CLI loads."""
    others = [name for name in MODULES if name != SERVES_MCP]
    assert len(others) == len(MODULES) - 1, "acode mcp serve's module moved: name it here"
    assert _loaded(others, "m.split('.')[0] in ('mcp', 'mcp_types', 'pydantic')") == []
    assert _loaded([SERVES_MCP], "m == 'mcp'") == ["mcp"], "the check can see the SDK"
