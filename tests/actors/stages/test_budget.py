"""Each stage's token budget and the trimming of a prompt to it (actors/stages/budget.py)."""

from __future__ import annotations

import pytest

from actors.stages.budget import Part, fit, stage_budget
from protocol.errors import OrchestrationError
from protocol.session import OllamaProvider, SessionSettings

SMALL = SessionSettings(provider=OllamaProvider(model="m", num_ctx=8_192))


def test_each_stage_gets_its_share_of_the_context_less_the_answers_reserve() -> None:
    # 8192 tokens less 1024 for the answer: 7168, of which 40/30/15/15 %
    assert [stage_budget(SMALL, s) for s in ("planner", "executor", "verifier", "reviewer")] == [
        2_867, 2_150, 1_075, 1_075]
    custom = SessionSettings(provider=OllamaProvider(model="m", num_ctx=8_192), token_budget={"reviewer": 50})
    assert stage_budget(custom, "reviewer") == 3_584
    assert stage_budget(SessionSettings(), "reviewer") == 4_300  # the scripted model: a 32k window


def test_fit_trims_the_least_relevant_largest_part_first_with_a_note() -> None:
    parts = [Part("the system prompt", "s" * 400, fixed=True), Part("the history", "h" * 1_000, rank=1, keep=200),
             Part("the diff", "d" * 100_000, rank=0, keep=500)]
    fit(SMALL, "reviewer", parts)
    assert sum(len(p.text) for p in parts) <= 1_075 * 4
    assert parts[1].text == "h" * 1_000 and parts[1].cut == 0  # the diff alone was enough
    diff = parts[2].text
    assert diff.startswith("d" * 100) and diff.endswith("d" * 100)
    assert "characters of the diff" in diff and "left out here to fit the reviewer's prompt budget of 1,075" in diff


def test_when_even_the_minimum_does_not_fit_the_stage_fails_with_orch_005() -> None:
    parts = [Part("the task", "t" * 5_000, fixed=True), Part("the diff", "d" * 10_000, keep=500)]
    with pytest.raises(OrchestrationError) as caught:
        fit(SMALL, "reviewer", parts)
    assert caught.value.code == "ACODE-ORCH-005"
    assert caught.value.message.startswith(
        "the reviewer's prompt needs at least 1,425 tokens (the task and the least of the rest) but its budget is "
        "1,075 tokens (15% of the model's 8,192-token context less 1,024 for the answer); raise model.num_ctx or "
        "orchestration.token_budget.reviewer")
