"""The coordinator's checks of a submitted task (in-process, no actors)."""

from __future__ import annotations

import pytest

from actors.coordinator import requests
from protocol.errors import ModelError
from protocol.plans.script import load_script
from protocol.sessions.session import ScriptedProvider

GOOD = "version: 1\nresponses:\n  planner:\n    - content: '{}'\n"
BAD = "version: 1\nresponses:\n  executor:\n    - tool_call: []\n"


def test_a_script_that_loads_is_parsed_once_and_a_bad_one_is_refused_every_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "_CHECKED_SCRIPTS", type(requests._CHECKED_SCRIPTS)())
    parsed: list[str] = []

    def counting(text: str, *, name: str) -> object:
        parsed.append(name)
        return load_script(text, name=name)

    monkeypatch.setattr(requests, "load_script", counting)
    for _ in range(3):
        requests._check_script(ScriptedProvider(script_yaml=GOOD, script_name="good.yaml"))
    assert parsed == ["good.yaml"]
    for _ in range(2):
        with pytest.raises(ModelError) as refused:
            requests._check_script(ScriptedProvider(script_yaml=BAD, script_name="bad.yaml"))
        assert refused.value.code == "ACODE-LLM-004" and "bad.yaml" in refused.value.message
    assert parsed == ["good.yaml", "bad.yaml", "bad.yaml"]


def test_the_checked_scripts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "_CHECKED_SCRIPTS", type(requests._CHECKED_SCRIPTS)())
    for n in range(requests._CHECKED_LIMIT + 10):
        requests._check_script(ScriptedProvider(script_yaml=GOOD + f"# {n}\n"))
    assert len(requests._CHECKED_SCRIPTS) == requests._CHECKED_LIMIT
