"""Each stage's token budget and the trimming of a prompt to it (actors/stages/prompting/budget.py)."""

from __future__ import annotations

import pytest

from actors.stages.prompting.budget import Part, cut_diff, fit, stage_budget
from protocol.errors import OrchestrationError
from protocol.sessions.session import OllamaProvider, SessionSettings

SMALL = SessionSettings(provider=OllamaProvider(model="m", num_ctx=8_192))


def test_each_stage_gets_its_share_of_the_context_less_the_answers_reserve() -> None:
    # 8192 tokens less 1024 for the answer: 7168, of which 25/45/15/15 %
    assert [stage_budget(SMALL, s) for s in ("planner", "executor", "verifier", "reviewer")] == [
        1_792, 3_225, 1_075, 1_075]
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


def _file_diff(name: str, lines: int) -> str:
    body = "".join(f"+line {n} of {name}\n" for n in range(lines))
    return f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n{body}"


def test_a_diff_of_several_files_loses_its_largest_files_first_each_named_and_keeps_its_frame() -> None:
    header = "baseline: ...\n3 files changed: 3 added\nA  a.txt\nA  big.txt\nA  c.txt\n\n"
    diff = header + _file_diff("a.txt", 3) + _file_diff("big.txt", 5_000) + _file_diff("c.txt", 3)
    parts = [Part("the system prompt", "s" * 400, fixed=True),
             Part("the diff", diff, keep=500, cutter=cut_diff, frame=lambda text: f"<<diff>>\n{text}<<end>>")]
    fit(SMALL, "reviewer", parts)
    text = parts[1].text
    assert text.startswith(f"<<diff>>\n{header}") and text.endswith("<<end>>")
    assert "+line 2 of a.txt" in text and "+line 2 of c.txt" in text and "+line 0 of big.txt" not in text
    assert "[… the changes to big.txt (" in text
    assert ("are left out here to fit the reviewer's prompt budget of 1,075 tokens; the file list above is "
            "complete") in text
    assert sum(len(p.text) for p in parts) <= 1_075 * 4


def test_a_diff_of_one_large_file_keeps_its_head_and_tail() -> None:
    text = cut_diff(_file_diff("big.txt", 5_000), 2_000, "to fit")
    assert text.startswith("diff --git a/big.txt") and text.endswith("+line 4999 of big.txt\n")
    assert "characters of the diff" in text and len(text) <= 2_000
