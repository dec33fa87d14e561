"""CLI start-up stays light: a client command loads no actor code it does not run.

Each check runs in a fresh interpreter (``sys.modules`` of this test process already
holds everything), so it sees exactly what ``import cli.app`` pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Packages a client command (help, status, run --detach) never needs: the sandbox, the
# coordinator and the stage actors run in their own processes; structlog (and the rich
# renderer its dev module loads) is for the actors' logs; httpx only talks to models.
_HEAVY = ("actors.sandbox", "actors.coordinator", "actors.stages", "actors.llm", "structlog", "rich", "httpx",
          "mcp", "pydantic")  # the MCP SDK: `acode mcp serve` and the mcp actor only (pip install acode[mcp])


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_importing_the_cli_loads_no_sandbox_coordinator_or_stage_code() -> None:
    loaded = _modules_after("import cli.app")
    heavy = sorted(m for m in loaded if m.split(".")[0] in _HEAVY or m.startswith(_HEAVY))
    assert heavy == [], f"import cli.app loaded {heavy}; import them inside the command that needs them"


def test_help_renders_without_rich() -> None:
    loaded = _modules_after("import sys\nfrom cli.app import app\nsys.argv = ['acode', '--help']\n"
                            "try:\n    app(prog_name='acode')\nexcept SystemExit:\n    pass")
    assert not any(m == "rich" or m.startswith("rich.") for m in loaded)
    assert "typer.rich_utils" not in loaded


def test_resolving_a_run_settings_loads_no_sandbox_actor_or_coordinator(tmp_path: Path) -> None:
    """What ``acode run`` does before it talks to the coordinator: resolve the settings."""
    code = ("from pathlib import Path\nfrom acode.config.loader import resolve\n"
            "from acode.config.settings import session_settings\n"
            f"session_settings(resolve(home=Path({str(tmp_path / 'home')!r}), workspace=Path({str(tmp_path)!r}), "
            "env={}))")
    loaded = _modules_after(code)
    assert not any(m.startswith(("actors.sandbox.actor", "actors.coordinator", "structlog")) for m in loaded)


def test_importing_the_cli_builds_no_decoder_and_compiles_no_redaction_pattern() -> None:
    """The codec's decoders are built at their first decode, redaction's combined patterns at
    the first text with a marker (README "Performance": some 13 ms of every command)."""
    code = ("import cli.app\nfrom protocol import codec\nfrom protocol.basics import redact\n"
            "built = [n for n, d in vars(codec).items() if isinstance(d, codec.TypedDecoder) and d._decoder]\n"
            "assert built == [], built\nassert redact._scanners.cache_info().currsize == 0\n"
            "assert redact.redact('token ghp_' + 'a' * 36) == 'token [REDACTED:github-token]'\n"
            "assert codec.ENVELOPE.decode(codec.encode(codec.Envelope(id='x', sender='t'))).id == 'x'\n"
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
