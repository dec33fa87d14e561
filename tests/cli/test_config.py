"""Configuration layers: strict files, environment, flags, and their precedence."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from acode.config.loader import resolve
from acode.config.settings import session_settings, up_options
from actors.coordinator.actor import CoordinatorOptions
from actors.logrotate import LogLimits
from actors.paths import RunPaths
from cli.daemon import coordinator_spec
from protocol.errors import ConfigError, ModelError
from protocol.sessions.session import OllamaProvider, OpenAIProvider, ScriptedProvider

SCRIPT = "version: 1\nresponses: {}\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_match_the_seeds_when_nothing_is_configured(tmp_path: Path) -> None:
    settings = session_settings(resolve(home=tmp_path, workspace=tmp_path, env={}))
    assert settings.stage_timeouts == dict.fromkeys(("planner", "executor", "verifier", "reviewer"), 300.0)
    assert settings.cycle_limits == {"verify": 3, "review": 3}
    assert (settings.stage_retry_limit, settings.max_turns_per_step, settings.provider) == (2, 10, None)


def test_flags_beat_environment_beat_workspace_beat_user_config(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "w"
    _write(home / "config.yml", "orchestration: {cycle_limit: 1, planner_timeout: 11, executor_timeout: 12, "
                                "verifier_timeout: 13}\n")
    _write(workspace / ".agent" / "config.yml", "orchestration: {cycle_limit: 2, planner_timeout: 21, "
                                                "executor_timeout: 22}\n")
    env = {"ACODE_ORCHESTRATION__CYCLE_LIMIT": "4", "ACODE_ORCHESTRATION__PLANNER_TIMEOUT": "31"}
    config = resolve(home=home, workspace=workspace, env=env, flags={"orchestration.cycle_limit": 5})
    settings = session_settings(config)
    assert settings.cycle_limits == {"verify": 5, "review": 5}  # flag
    assert settings.stage_timeouts["planner"] == 31  # environment
    assert settings.stage_timeouts["executor"] == 22  # workspace
    assert settings.stage_timeouts["verifier"] == 13  # user
    assert settings.stage_timeouts["reviewer"] == 300  # default


def test_a_per_kind_cycle_limit_overrides_the_shared_one(tmp_path: Path) -> None:
    _write(tmp_path / ".agent" / "config.yml", "orchestration: {cycle_limit: 2, review_cycle_limit: 5}\n")
    settings = session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env={}))
    assert settings.cycle_limits == {"verify": 2, "review": 5}


def test_a_typo_in_a_config_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path / ".agent" / "config.yml", "executor:\n  max_turns: 3\n")
    with pytest.raises(ConfigError) as info:
        resolve(home=tmp_path / "h", workspace=tmp_path, env={})
    assert info.value.code == "ACODE-CFG-001"
    assert str(path) in info.value.message and "max_turns" in info.value.message


def test_a_limit_out_of_bounds_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / ".agent" / "config.yml", "orchestration: {cycle_limit: 11}\n")
    with pytest.raises(ConfigError, match="Expected `int` <= 10"):
        resolve(home=tmp_path / "h", workspace=tmp_path, env={})


def test_unknown_acode_environment_variables_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ACODE_EXECUTOR__MAX_TURNS names no setting of executor"):
        resolve(home=tmp_path, env={"ACODE_EXECUTOR__MAX_TURNS": "3"})
    with pytest.raises(ConfigError, match="ACODE_TIMEOUT is not an acode setting"):
        resolve(home=tmp_path, env={"ACODE_TIMEOUT": "3"})
    resolve(home=tmp_path, env={"ACODE_HOME": "/x", "ACODE_FAULT_CRASH_ON_START": "planner",  # not settings
                                "ACODE_SANDBOX_ISOLATION": "landlock", "ACODE_SANDBOX_TREE": "subreaper"})
    with pytest.raises(ConfigError, match="ACODE_SANDBOX_ISOLATON is not an acode setting"):
        resolve(home=tmp_path, env={"ACODE_SANDBOX_ISOLATON": "landlock"})


def test_a_script_path_in_a_config_file_is_relative_to_that_file(tmp_path: Path) -> None:
    _write(tmp_path / ".agent" / "model.yaml", SCRIPT)
    _write(tmp_path / ".agent" / "config.yml", "model: {provider: scripted, script: model.yaml}\n")
    settings = session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env={}))
    assert isinstance(settings.provider, ScriptedProvider)
    assert settings.provider.script_name == str(tmp_path / ".agent" / "model.yaml")
    assert settings.provider.script_yaml == SCRIPT


def test_the_scripted_provider_without_a_script_says_what_to_pass(tmp_path: Path) -> None:
    config = resolve(home=tmp_path, workspace=tmp_path, env={}, flags={"model.provider": "scripted"})
    with pytest.raises(ConfigError, match="the scripted provider needs a script: pass --script FILE"):
        session_settings(config)


def test_up_options_carry_supervision_storage_and_workers(tmp_path: Path) -> None:
    _write(tmp_path / "config.yml", "supervision: {heartbeat_interval: 0.5, restart_intensity: 2}\n"
                                    "storage: {synchronous: normal}\n")
    options, interval, liveness = up_options(resolve(home=tmp_path, env={}, flags={"workers.executor": 3}))
    assert (interval, liveness) == (0.5, 3)
    assert options.supervision.restart_intensity == 2 and options.supervision.restart_period == 30.0
    assert options.synchronous == "normal" and options.workers == {"executor": 3}


def test_the_log_limits_reach_the_coordinator_with_their_defaults_where_unset(tmp_path: Path) -> None:
    assert up_options(resolve(home=tmp_path, env={}))[0].logs == LogLimits(max_mb=20.0, keep=3)
    _write(tmp_path / "config.yml", "logs: {max_mb: 0.5}\n")
    assert up_options(resolve(home=tmp_path, env={}))[0].logs == LogLimits(max_mb=0.5, keep=3)
    options = up_options(resolve(home=tmp_path, env={"ACODE_LOGS__KEEP": "0"}))[0]  # 0: none kept, not unset
    assert options.logs == LogLimits(max_mb=0.5, keep=0)
    spec = coordinator_spec(RunPaths(tmp_path), options, heartbeat_interval=1.0, liveness=3)
    assert msgspec.convert(spec.options, CoordinatorOptions).logs == options.logs  # what the coordinator decodes


@pytest.mark.parametrize(("text", "expected"), [
    ("logs: {max_mb: 0}", "Expected `float` > 0.0 - at `$.logs.max_mb`"),
    ("logs: {max_mb: -5}", "Expected `float` > 0.0 - at `$.logs.max_mb`"),
    ("logs: {max_mb: lots}", "Expected `float | null`, got `str` - at `$.logs.max_mb`"),
    ("logs: {keep: -1}", "Expected `int` >= 0 - at `$.logs.keep`"),
    ("logs: {keep: 101}", "Expected `int` <= 100 - at `$.logs.keep`"),
    ("logs: {keep: 2.5}", "Expected `int | null`, got `float` - at `$.logs.keep`"),
    ("logs: {max_size: 10}", "Object contains unknown field `max_size` - at `$.logs`"),
])
def test_a_bad_log_limit_in_the_user_file_is_refused_with_cfg_001_naming_key_and_value(
        tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path / "config.yml", text + "\n")
    with pytest.raises(ConfigError) as info:
        resolve(home=tmp_path, env={})
    assert info.value.code == "ACODE-CFG-001"
    assert info.value.message.startswith(f"config file {path} is invalid: {expected};")


def test_a_bad_log_limit_in_the_environment_is_refused_with_cfg_001(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(home=tmp_path, env={"ACODE_LOGS__MAX_MB": "0"})
    assert info.value.code == "ACODE-CFG-001"
    assert info.value.message == ("ACODE_* environment setting is invalid: Expected `float` > 0.0 - at "
                                  "`$.logs.max_mb`")


def test_the_user_sandbox_section_reaches_the_session(tmp_path: Path) -> None:
    _write(tmp_path / "home" / "config.yml",
           "sandbox:\n  extra_commands: [make]\n  shell_commands: ['npm test && npm run lint']\n"
           "  require_isolation: bubblewrap\n  memory_limit_mb: 0\n")
    policy = session_settings(resolve(home=tmp_path / "home", workspace=tmp_path, env={})).sandbox
    assert (policy.extra_commands, policy.shell_commands, policy.require_isolation, policy.memory_limit_mb) == (
        ["make"], ["npm test && npm run lint"], "bubblewrap", 0)
    assert (policy.allowed_commands, policy.allow_inline_code, policy.network) == (None, False, False)


def test_list_settings_from_the_environment_are_comma_lists_or_json(tmp_path: Path) -> None:
    env = {"ACODE_SANDBOX__EXTRA_COMMANDS": "make, cmake", "ACODE_SANDBOX__SHELL_COMMANDS": '["a, b && c"]'}
    policy = session_settings(resolve(home=tmp_path, env=env)).sandbox
    assert (policy.extra_commands, policy.shell_commands) == (["make", "cmake"], ["a, b && c"])
    with pytest.raises(ConfigError, match="ACODE_SANDBOX__SHELL_COMMANDS is not a JSON array"):
        resolve(home=tmp_path, env={"ACODE_SANDBOX__SHELL_COMMANDS": "[oops"})


def test_passing_a_secret_looking_variable_to_commands_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sandbox.pass_env names GH_TOKEN, which look like secrets"):
        session_settings(resolve(home=tmp_path, env={"ACODE_SANDBOX__PASS_ENV": "GH_TOKEN,FOO"}))
    with pytest.raises(ConfigError, match="require_isolation"):
        resolve(home=tmp_path, env={"ACODE_SANDBOX__REQUIRE_ISOLATION": "strong"})


def test_the_model_section_becomes_an_ollama_or_openai_provider_spec(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "w"
    _write(workspace / ".agent" / "config.yml",
           "model: {provider: ollama, model: qwen2.5-coder:7b, num_ctx: 16384, stage_models: {planner: big:14b}}\n"
           "verification: {commands: ['python -m pytest -q']}\n"
           "planner: {context_tokens: 9000, clarification_timeout: 60}\nexecutor: {tool_result_tokens: 2000}\n")
    settings = session_settings(resolve(home=home, workspace=workspace, env={}))
    provider = settings.provider
    assert isinstance(provider, OllamaProvider)
    assert (provider.base_url, provider.num_ctx) == ("http://127.0.0.1:11434", 16384)
    assert (provider.model_for("planner"), provider.model_for("executor")) == ("big:14b", "qwen2.5-coder:7b")
    assert settings.verify_commands == ["python -m pytest -q"]
    assert (settings.planner_context_tokens, settings.clarification_timeout_s, settings.tool_result_tokens) == (
        9000, 60, 2000)

    env = {"ACODE_MODEL__PROVIDER": "openai", "ACODE_MODEL__BASE_URL": "http://192.168.1.20:8000/v1",
           "ACODE_MODEL__STAGE_MODELS": "reviewer=judge", "ACODE_MODEL__API_KEY_ENV": "VLLM_KEY"}
    openai = session_settings(resolve(home=home, workspace=workspace, env=env)).provider
    assert isinstance(openai, OpenAIProvider)
    assert (openai.base_url, openai.api_key_env, openai.model_for("reviewer")) == (
        "http://192.168.1.20:8000/v1", "VLLM_KEY", "judge")


def test_a_model_config_that_cannot_work_is_refused_before_a_session_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a model name"):
        session_settings(resolve(home=tmp_path, env={"ACODE_MODEL__PROVIDER": "ollama"}))
    with pytest.raises(ModelError, match="allow_remote") as info:
        session_settings(resolve(home=tmp_path, env={"ACODE_MODEL__PROVIDER": "ollama", "ACODE_MODEL__MODEL": "m",
                                                     "ACODE_MODEL__BASE_URL": "http://203.0.113.5:11434"}))
    assert info.value.code == "ACODE-LLM-009"
    allowed = session_settings(resolve(home=tmp_path, env={
        "ACODE_MODEL__PROVIDER": "ollama", "ACODE_MODEL__MODEL": "m", "ACODE_MODEL__ALLOW_REMOTE": "true",
        "ACODE_MODEL__BASE_URL": "http://203.0.113.5:11434"})).provider
    assert isinstance(allowed, OllamaProvider) and allowed.allow_remote
    with pytest.raises(ConfigError, match="api_key_env is for the openai provider"):
        session_settings(resolve(home=tmp_path, env={"ACODE_MODEL__PROVIDER": "ollama", "ACODE_MODEL__MODEL": "m",
                                                     "ACODE_MODEL__API_KEY_ENV": "K"}))
    with pytest.raises(ConfigError, match="model.provider is not"):
        session_settings(resolve(home=tmp_path, env={"ACODE_MODEL__MODEL": "m"}))


def test_read_and_write_paths_travel_to_the_sandbox_and_min_isolation_is_require_isolation(tmp_path: Path) -> None:
    shared, out = tmp_path / "shared", tmp_path / "out"
    shared.mkdir()
    out.mkdir()
    _write(tmp_path / "h" / "config.yml", f"sandbox: {{read_paths: [{shared}], write_paths: [{out}], "
                                          "read_opt: false, min_isolation: bubblewrap}\n")
    policy = session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env={}), home=tmp_path / "h").sandbox
    assert (policy.read_paths, policy.write_paths, policy.read_opt) == ([str(shared)], [str(out)], False)
    assert policy.require_isolation == "bubblewrap"
    env = {"ACODE_SANDBOX__REQUIRE_ISOLATION": "landlock", "ACODE_SANDBOX__READ_PATHS": f"{shared},{out}"}
    policy = session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env=env)).sandbox
    assert policy.require_isolation == "bubblewrap"  # both names set: the stronger level applies
    assert policy.read_paths == [str(shared), str(out)]


@pytest.mark.parametrize(("value", "why"), [
    ("relative/dir", "is not an absolute path"),
    ("/no/such/dir-4e1", "does not exist"),
    ("/", "is /; commands would see everything in it"),
    ("~", "is the home directory"),
    ("ACODE_HOME", "holds or lies in acode's own home"),
    ("ACODE_HOME/run", "holds or lies in acode's own home"),
])
def test_a_bad_read_or_write_path_is_refused_with_cfg_001_naming_key_and_value(
        tmp_path: Path, value: str, why: str) -> None:
    home = tmp_path / "acode-home"
    (home / "run").mkdir(parents=True)
    value = value.replace("~", str(Path.home())).replace("ACODE_HOME", str(home))
    for key in ("read_paths", "write_paths"):
        env = {f"ACODE_SANDBOX__{key.upper()}": f'["{value}"]'}
        with pytest.raises(ConfigError) as info:
            session_settings(resolve(home=home, workspace=tmp_path, env=env), home=home)
        assert info.value.code == "ACODE-CFG-001"
        assert f"sandbox.{key} entry {value!r} {why}" in info.value.message


def test_a_path_holding_a_credential_store_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_home = tmp_path / "home"
    (fake_home / "stuff" / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(fake_home / "stuff"))  # ~/.ssh lies in the configured path's tree
    env = {"ACODE_SANDBOX__READ_PATHS": str(fake_home)}
    with pytest.raises(ConfigError) as info:
        session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env=env))
    assert "is an ancestor of the home directory" in info.value.message
    monkeypatch.setenv("HOME", str(fake_home))
    env = {"ACODE_SANDBOX__READ_PATHS": str(fake_home / "stuff")}
    (fake_home / ".ssh").mkdir()
    ok = session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env=env)).sandbox
    assert ok.read_paths == [str(fake_home / "stuff")]
    (fake_home / "stuff" / ".aws").mkdir()
    monkeypatch.setenv("HOME", str(fake_home / "stuff" / "x"))
    (fake_home / "stuff" / "x" / ".aws").mkdir(parents=True)
    env = {"ACODE_SANDBOX__READ_PATHS": str(fake_home / "stuff" / "x" / ".aws")}
    with pytest.raises(ConfigError) as info:
        session_settings(resolve(home=tmp_path / "h", workspace=tmp_path, env=env))
    assert "holds the credential store" in info.value.message
