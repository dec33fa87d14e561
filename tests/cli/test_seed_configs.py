"""The sample `.agent/config.yml` blocks of the seeds load, verbatim.

``seed_configs/`` holds them copied byte for byte from ``../shared/seeds/`` (000's user
manual "Configuration", 003's planner block, 004's executor block; 004's ``approvals:``
block belongs to the approvals issue). Every key is accepted with its meaning; the keys
acode names otherwise are aliases, each with a one-line deprecation notice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from acode.config.loader import resolve
from acode.config.settings import session_settings
from protocol.errors import ConfigError

SAMPLES = Path(__file__).parent / "seed_configs"


def _load(tmp_path: Path, name: str) -> tuple[object, list[str]]:
    """The sample as the user's own config file: a workspace's may only tighten safety
    settings (tests/cli/test_trust.py), and the samples loosen some."""
    (tmp_path / "home").mkdir(exist_ok=True)
    shutil.copy(SAMPLES / name, tmp_path / "home" / "config.yml")
    notices: list[str] = []
    config = resolve(home=tmp_path / "home", workspace=tmp_path, env={}, notices=notices)
    return config, notices


def test_seed_000s_orchestration_sample_loads_with_its_token_budget(tmp_path: Path) -> None:
    config, notices = _load(tmp_path, "000_orchestration.yml")
    settings = session_settings(config)  # type: ignore[arg-type]
    assert notices == []
    assert settings.stage_timeouts == {"planner": 120, "executor": 300, "verifier": 180, "reviewer": 120}
    assert (settings.stage_retry_limit, settings.cycle_limits) == (2, {"verify": 3, "review": 3})
    assert settings.token_budget == {"planner": 40, "executor": 30, "verifier": 15, "reviewer": 15}
    assert config.orchestration.step_retry_limit == 3  # type: ignore[attr-defined]


def test_seed_003s_planner_sample_loads_with_aliases_and_patterns(tmp_path: Path) -> None:
    config, notices = _load(tmp_path, "003_planner.yml")
    settings = session_settings(config)  # type: ignore[arg-type]
    path = tmp_path / "home" / "config.yml"
    assert notices == [f"config file {path}: planner.timeout is deprecated; use orchestration.planner_timeout",
                       f"config file {path}: planner.max_context_tokens is deprecated; use planner.context_tokens"]
    assert settings.stage_timeouts["planner"] == 60 and settings.planner_context_tokens == 8_000
    assert settings.context_includes == ["src/**/*.ts", "*.config.js"]
    assert settings.context_excludes == ["node_modules/**", "**/*.test.ts"]
    assert settings.max_task_complexity == 21


def test_seed_004s_executor_sample_loads_with_aliases(tmp_path: Path) -> None:
    config, notices = _load(tmp_path, "004_executor.yml")
    settings = session_settings(config)  # type: ignore[arg-type]
    assert [n.split(": ", 1)[1] for n in notices] == [
        "executor.retry_count is deprecated; use executor.tool_retry_limit",
        "executor.retry_backoff_base_ms is deprecated; use executor.tool_retry_backoff (in seconds)",
        "executor.token_budget_percent is deprecated; use orchestration.token_budget.executor",
        "executor.allowed_commands is deprecated; use sandbox.allowed_commands"]
    assert (settings.max_turns_per_step, settings.tool_retry_limit, settings.tool_retry_backoff_s) == (10, 3, 1.0)
    assert settings.token_budget["executor"] == 30
    assert settings.sandbox.allowed_commands == ["npm", "dotnet", "git"]
    assert config.executor.step_timeout_seconds == 120  # type: ignore[attr-defined]


def test_without_a_notices_list_each_notice_is_one_line_on_stderr(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text("planner:\n  timeout: 60\n")
    resolve(home=tmp_path / "home", workspace=tmp_path, env={})
    assert capsys.readouterr().err == (f"acode: config file {tmp_path}/.agent/config.yml: planner.timeout is "
                                       "deprecated; use orchestration.planner_timeout\n")


@pytest.mark.parametrize(("text", "code", "words"), [
    ("orchestration:\n  token_budgett: {planner: 40}\n", "ACODE-CFG-001", "token_budgett"),
    ("orchestration:\n  token_budget: {planner: 40, coder: 10}\n", "ACODE-CFG-001", "coder"),
    ("orchestration:\n  token_budget: {planner: 60, executor: 50}\n", "ACODE-CFG-002", "adds up to 140%"),
    ("planner:\n  timeout: 60\norchestration:\n  planner_timeout: 90\n", "ACODE-CFG-002",
     "sets both planner.timeout (60) and orchestration.planner_timeout (90)"),
    ("executor:\n  workspace_only: false\n", "ACODE-CFG-003", "always stay inside the workspace"),
    ("planner:\n  max_complexity: 20\n", "ACODE-CFG-001", "max_complexity"),
])
def test_unknown_keys_and_contradictions_are_still_refused(tmp_path: Path, text: str, code: str,
                                                           words: str) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text(text)
    with pytest.raises(ConfigError) as info:
        session_settings(resolve(home=tmp_path / "home", workspace=tmp_path, env={}, notices=[]))
    assert info.value.code == code and words in info.value.message


def test_seed_000s_advanced_per_stage_sample_loads_with_each_stages_timeout_and_retry_limit(tmp_path: Path) -> None:
    config, notices = _load(tmp_path, "000_advanced.yml")
    settings = session_settings(config)  # type: ignore[arg-type]
    assert len(notices) == 8 and notices[0].endswith(
        "orchestration.stages.planner.timeout is deprecated; use orchestration.planner_timeout")
    assert notices[1].endswith("orchestration.stages.planner.retry_limit is deprecated; use "
                               "orchestration.stage_retry_limits.planner")
    assert settings.stage_timeouts == {"planner": 120, "executor": 300, "verifier": 180, "reviewer": 120}
    assert settings.stage_retry_limits == {"planner": 2, "executor": 3, "verifier": 2, "reviewer": 1}
    assert settings.cycle_limits == {"verify": 3, "review": 3}  # auto_retry_on_failure: true is acode's way


@pytest.mark.parametrize(("options", "words"), [
    ("executor: {context_strategy: full}", "acode's executor always works with 'focused' context"),
    ("executor: {parallel_steps: true}", "acode runs one step at a time"),
    ("reviewer: {require_human_approval: true}", "require_human_approval is true"),
    ("planner: {auto_retry_on_failure: true}", "auto_retry_on_failure is for the verifier"),
])
def test_a_per_stage_option_acode_cannot_honour_is_refused(tmp_path: Path, options: str, words: str) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text(f"orchestration:\n  stages: {{{options}}}\n")
    with pytest.raises(ConfigError) as info:
        session_settings(resolve(home=tmp_path / "home", workspace=tmp_path, env={}, notices=[]))
    assert info.value.code == "ACODE-CFG-003" and words in info.value.message


def test_the_verifiers_auto_retry_off_makes_a_failed_verification_pause(tmp_path: Path) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text("orchestration:\n  stages: {verifier: {auto_retry_on_failure: "
                                                    "false}}\n")
    settings = session_settings(resolve(home=tmp_path / "home", workspace=tmp_path, env={}, notices=[]))
    assert settings.cycle_limits == {"verify": 0, "review": 3}


def test_seed_004s_approvals_sample_loads_and_refines_every_class_to_prompt(tmp_path: Path) -> None:
    config, notices = _load(tmp_path, "004_approvals.yml")
    settings = session_settings(config)  # type: ignore[arg-type]
    assert notices == []
    approvals = settings.approvals
    assert (approvals.file_write, approvals.file_delete, approvals.terminal_commands) == ("prompt",) * 3
    assert approvals.non_interactive_policy == "auto" and settings.autonomy == 2
    from protocol.calls.autonomy import gate

    assert [gate(settings.autonomy, approvals, risk)[0] for risk in ("read", "write", "execute", "destructive")] == [
        "auto", "prompt", "prompt", "prompt"]


def test_autonomy_comes_from_the_config_the_environment_and_the_flag_in_that_order(tmp_path: Path) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text("autonomy: 1\napprovals:\n  file_write: deny\n")
    home = tmp_path / "home"
    assert session_settings(resolve(home=home, workspace=tmp_path, env={}, notices=[])).autonomy == 1
    assert session_settings(resolve(home=home, workspace=tmp_path, env={"ACODE_AUTONOMY": "3"},
                                    notices=[])).autonomy == 3
    flagged = session_settings(resolve(home=home, workspace=tmp_path, env={"ACODE_AUTONOMY": "3"},
                                       flags={"autonomy": 0}, notices=[]))
    assert flagged.autonomy == 0 and flagged.approvals.file_write == "deny"


@pytest.mark.parametrize(("text", "words"), [
    ("autonomy: 4\n", "autonomy"),
    ("approvals:\n  file_write: maybe\n", "file_write"),
    ("approvals:\n  file_move: prompt\n", "file_move"),
])
def test_an_autonomy_or_approvals_value_acode_does_not_know_is_refused(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "config.yml").write_text(text)
    with pytest.raises(ConfigError) as info:
        resolve(home=tmp_path / "home", workspace=tmp_path, env={}, notices=[])
    assert info.value.code == "ACODE-CFG-001" and words in info.value.message
