"""Model profiles: chosen by the executor's model name, overridden by ``model.profiles`` in config.yml.

The profile travels in the session's settings; what it changes is the executor's tool
surface (:func:`protocol.sessions.profiles.tool_surface`) and, when the model section sets none,
the temperature.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from acode.config.loader import resolve
from acode.config.settings import session_settings
from protocol.calls.tools import tool_definitions
from protocol.errors import ConfigError
from protocol.sessions.profiles import (
    ModelProfile,
    ProfileOverride,
    model_size,
    offered_tools,
    profile_for,
    tool_surface,
)
from protocol.sessions.session import OllamaProvider, OpenAIProvider, SessionSettings


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _names(definitions: list[dict[str, object]]) -> list[str]:
    return [d["function"]["name"] for d in definitions]  # type: ignore[index]


@pytest.mark.parametrize(("model", "size"), [("qwen2.5-coder:1.5b", 1.5), ("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", 1.5),
                                            ("qwen2.5-coder:7b-instruct", 7.0), ("llama3.1:70b", 70.0),
                                            ("qwen2.5-coder:latest", None), ("phi4", None)])
def test_the_size_is_read_from_the_model_name(model: str, size: float | None) -> None:
    assert model_size(model) == size


def test_a_small_qwen_coder_gets_the_small_profile_and_anything_else_todays_behaviour() -> None:
    small = profile_for("Qwen2.5-Coder-1.5B-Instruct")
    assert (small.name, small.edit_style, small.compact_tools, small.prompt_style) == (
        "small", "whole_file", True, "compact")
    assert offered_tools(small) == {"write_file", "read_file", "run_terminal", "list_directory", "step_complete",
                                    "step_failed"}
    for model in ("qwen2.5-coder:7b", "qwen2.5-coder:latest", "llama3.2:1b", "gpt-oss", None):
        assert profile_for(model) == ModelProfile()  # unknown, or no size: as before


def test_a_config_entry_matching_the_name_overrides_the_profile_it_would_get() -> None:
    overrides = {"nomatch*": ProfileOverride(edit_style="whole_file"),
                 "QWEN2.5-coder": ProfileOverride(temperature=0.2, tools=["write_file", "read_file"])}
    profile = profile_for("qwen2.5-coder:1.5b", overrides)  # a substring, matched whatever the case
    assert (profile.name, profile.temperature, profile.tools, profile.edit_style) == (
        "config:QWEN2.5-coder", 0.2, ["write_file", "read_file"], "whole_file")  # the rest from "small"
    glob = profile_for("deepseek-coder:6.7b", {"deepseek-*": ProfileOverride(compact_tools=False)})
    assert (glob.name, glob.compact_tools, glob.edit_style) == ("config:deepseek-*", False, "search_replace")


def test_the_tool_surface_follows_the_profile_and_the_context() -> None:
    full = tool_definitions()
    big = SessionSettings(provider=OllamaProvider(model="qwen2.5-coder:32b", num_ctx=32_768))
    assert tool_surface(big) == full  # today's definitions
    assert tool_surface(SessionSettings()) == full  # no model server (the scripted model)
    small_context = SessionSettings(provider=OllamaProvider(model="m", num_ctx=8_192))
    assert tool_surface(small_context) == tool_definitions(compact=True)
    small = SessionSettings(provider=OllamaProvider(model="qwen2.5-coder:1.5b"),
                            profile=profile_for("qwen2.5-coder:1.5b"))
    assert _names(tool_surface(small)) == ["write_file", "read_file", "run_terminal", "list_directory",
                                           "step_complete", "step_failed"]
    saved = len(msgspec.json.encode(full)) - len(msgspec.json.encode(tool_surface(small_context)))
    assert saved // 4 >= 450  # tokens at 4 characters a token: about 500


def test_model_profiles_in_config_reach_the_session_with_the_temperature(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "w"
    _write(home / "config.yml", "model: {provider: openai, model: Qwen2.5-Coder-1.5B-Instruct}\n")
    settings = session_settings(resolve(home=home, workspace=workspace, env={}))
    assert settings.profile.name == "small"
    assert isinstance(settings.provider, OpenAIProvider) and settings.provider.temperature == 0.0

    # a workspace may set profiles (what is offered and how, never what a tool may do)
    _write(workspace / ".agent" / "config.yml",
           "model:\n  profiles:\n    'qwen2.5-coder*':\n      edit_style: search_replace\n      temperature: 0.3\n")
    notices: list[str] = []
    settings = session_settings(resolve(home=home, workspace=workspace, env={}, notices=notices))
    assert notices == []
    assert (settings.profile.name, settings.profile.edit_style) == ("config:qwen2.5-coder*", "search_replace")
    assert "modify_file" in _names(tool_surface(settings))
    assert isinstance(settings.provider, OpenAIProvider) and settings.provider.temperature == 0.3

    # the model section's own temperature wins over the profile's
    env = {"ACODE_MODEL__TEMPERATURE": "0.1"}
    settings = session_settings(resolve(home=home, workspace=workspace, env=env))
    assert isinstance(settings.provider, OpenAIProvider) and settings.provider.temperature == 0.1
    assert settings.profile.temperature == 0.3


def test_the_step_and_review_styles_are_set_by_the_user_and_a_workspace_cannot_skip_the_review(
        tmp_path: Path) -> None:
    small = profile_for("qwen2.5-coder:1.5b")
    assert (small.step_style, small.review) == ("file", "checks")
    home, workspace = tmp_path / "home", tmp_path / "w"
    _write(home / "config.yml", "model:\n  provider: openai\n  model: qwen2.5-coder-7b-instruct\n  profiles:\n"
                                "    'qwen2.5-coder-7b*': {step_style: file, review: checks}\n")
    settings = session_settings(resolve(home=home, workspace=workspace, env={}))
    assert (settings.profile.step_style, settings.profile.review) == ("file", "checks")

    # a workspace may change how the model is asked, not skip the model's review
    _write(home / "config.yml", "model: {provider: openai, model: qwen2.5-coder-7b-instruct}\n")
    _write(workspace / ".agent" / "config.yml",
           "model:\n  profiles:\n    'qwen*': {step_style: file, review: checks}\n")
    notices: list[str] = []
    settings = session_settings(resolve(home=home, workspace=workspace, env={}, notices=notices))
    assert (settings.profile.step_style, settings.profile.review) == ("file", "model")
    assert any("model.profiles.qwen*.review: 'checks'" in notice for notice in notices), notices


def test_a_profile_naming_an_unknown_tool_or_key_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write(home / "config.yml", "model: {provider: ollama, model: m, profiles: {m: {tools: [write_file, rm]}}}\n")
    with pytest.raises(ConfigError) as info:
        session_settings(resolve(home=home, env={}))
    assert str(info.value) == ("model.profiles.m.tools names 'rm', which is not a tool; the tools are write_file, "
                               "read_file, modify_file, run_terminal, list_directory, search_code, create_directory, "
                               "step_complete, step_failed (ACODE-CFG-001)")
    _write(home / "config.yml", "model: {provider: ollama, model: m, profiles: {m: {style: whole}}}\n")
    with pytest.raises(ConfigError) as info:
        resolve(home=home, env={})
    assert "unknown field `style`" in str(info.value)


def test_the_default_profile_adds_nothing_to_stored_settings() -> None:
    plain = SessionSettings(provider=OllamaProvider(model="m"))
    assert b"profile" not in msgspec.json.encode(plain)  # sessions stored before profiles read the same
