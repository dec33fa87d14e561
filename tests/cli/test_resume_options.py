"""`acode resume`'s model options: the session's model with --model/--base-url applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from acode.inputs import provider_override as _provider_override
from protocol.errors import AcodeError, CliError
from protocol.sessions.session import OllamaProvider, ScriptedProvider, SessionSettings, SessionSnapshot


def _session(provider: object) -> SessionSnapshot:
    return SessionSnapshot(id="s1", task="t", workspace="/w",
                           settings=SessionSettings(provider=provider))  # type: ignore[arg-type]


def test_model_and_base_url_replace_those_of_the_sessions_provider_keeping_the_rest() -> None:
    current = OllamaProvider(model="qwen2.5-coder:7b", num_ctx=16_384)
    changed = _provider_override(_session(current), provider=None, model="qwen2.5-coder:14b",
                                 base_url="http://127.0.0.1:11500", script=None)
    assert changed == OllamaProvider(model="qwen2.5-coder:14b", base_url="http://127.0.0.1:11500", num_ctx=16_384)


def test_a_remote_base_url_is_refused_as_at_submission() -> None:
    with pytest.raises(AcodeError) as info:
        _provider_override(_session(OllamaProvider(model="m")), provider=None, model=None,
                           base_url="http://93.184.216.34:11434", script=None)
    assert info.value.code == "ACODE-LLM-009"


def test_the_scripted_model_takes_a_new_script_and_refuses_a_model_name(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("version: 1\nresponses: {}\n")
    current = ScriptedProvider(script_yaml="version: 1\nresponses: {}\n", script_name="old.yaml")
    changed = _provider_override(_session(current), provider=None, model=None, base_url=None, script=script)
    assert isinstance(changed, ScriptedProvider) and changed.script_name == str(script.resolve())
    with pytest.raises(CliError, match="--model and --base-url are for the ollama and openai providers"):
        _provider_override(_session(current), provider=None, model="m", base_url=None, script=None)


def test_a_bad_script_is_refused_before_the_session_goes_on(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nresponses:\n  executor:\n    - tool_call: []\n")
    with pytest.raises(AcodeError) as info:
        _provider_override(_session(ScriptedProvider(script_yaml="version: 1\n")), provider="scripted", model=None,
                           base_url=None, script=bad)
    assert info.value.code == "ACODE-LLM-004"


def test_the_ladders_config_keys_reach_the_session_settings(tmp_path: Path) -> None:
    from acode.config.loader import resolve
    from acode.config.settings import session_settings

    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text(
        "orchestration:\n  step_retry_limit: 5\nexecutor:\n  step_timeout_seconds: 300\n")
    settings = session_settings(resolve(home=tmp_path / "home", workspace=tmp_path, env={}))
    assert (settings.step_retry_limit, settings.step_timeout_s) == (5, 300.0)
    defaults = session_settings(resolve(home=tmp_path / "home", env={}))
    assert (defaults.step_retry_limit, defaults.step_timeout_s) == (3, 120.0)
