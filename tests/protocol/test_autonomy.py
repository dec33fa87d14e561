"""The approvals table: risk class x autonomy level, refined by ``approvals:``, and how a decision matches a call."""

from __future__ import annotations

import pytest

from protocol.autonomy import (
    TABLE,
    ApprovalDecision,
    Approvals,
    call_hash,
    decision_of,
    gate,
    risk_of_call,
    rule_of,
)
from protocol.tools import Risk


@pytest.mark.parametrize(("command", "risk"), [
    ("cat notes.txt", "execute"), ("python -m pytest -q", "execute"), ("rm -rf build", "destructive"),
    ("git reset --hard HEAD~1", "destructive"), ("git clean -fdx", "destructive"), ("git status", "execute"),
    ("pip install requests", "network"), ("git fetch origin", "network"), ("env rm x", "destructive"),
    ("'unterminated", "execute"),
    # a compound command takes the highest class of its parts, wherever the risky part is
    ("make && rm -rf build", "destructive"), ("true;rm x", "destructive"), ("ls | xargs rm", "destructive"),
    ("python -m pytest || pip install pytest", "network"), ("(cd src && git clean -fd)", "destructive"),
])
def test_a_commands_risk_class_comes_from_what_it_runs(command: str, risk: str) -> None:
    assert risk_of_call("run_terminal", {"command": command}) == risk


def test_the_table_asks_for_less_at_each_higher_level_and_never_for_reads() -> None:
    expected: dict[Risk, str] = {"read": "aaaa", "write": "paaa", "execute": "ppaa", "network": "ppaa",
                                 "destructive": "pppa"}
    for risk, row in expected.items():
        assert "".join(v[0] for v in TABLE[risk]) == row, risk
        for level in range(4):
            assert gate(level, Approvals(), risk)[0] == TABLE[risk][level]


def test_the_approvals_block_overrides_the_level_per_class() -> None:
    strict = Approvals(file_write="prompt", file_delete="deny", terminal_commands="auto")
    assert gate(3, strict, "write") == ("prompt", "approvals.file_write: prompt")
    assert gate(3, strict, "destructive")[0] == "deny"
    assert gate(0, strict, "execute")[0] == "auto" and gate(0, strict, "network")[0] == "auto"
    assert gate(0, strict, "read")[0] == "auto"
    assert gate(2, Approvals(), "destructive") == ("prompt", "destructive calls ask at autonomy 2")


def test_an_unattended_session_decides_a_prompt_by_its_policy() -> None:
    assert gate(2, Approvals(), "destructive", "auto")[0] == "auto"
    assert gate(2, Approvals(), "destructive", "skip")[0] == "deny"
    assert gate(2, Approvals(), "destructive", "fail")[0] == "prompt"
    assert gate(2, Approvals(), "execute", "skip")[0] == "auto"  # only prompts are decided


def _decision(key: str, args: dict[str, str], verdict: str = "approve", *, always: bool = False) -> ApprovalDecision:
    risk = risk_of_call("run_terminal", args)
    return ApprovalDecision(id=f"d-{key}", key=key, call_hash=call_hash("run_terminal", args), tool="run_terminal",
                            risk=risk, rule=rule_of("run_terminal", args, risk), decision=verdict,  # type: ignore[arg-type]
                            always=always)


def test_a_decision_binds_the_exact_call_and_its_retries_and_a_rule_covers_only_its_program() -> None:
    rm = {"command": "rm old.txt"}
    approved = [_decision("s:e1:T1/S1:t1:c0", rm)]
    digest = call_hash("run_terminal", rm)
    assert decision_of(approved, "s:e1:T1/S1:t1:c0", digest, "run_terminal: rm (destructive)") is approved[0]
    assert decision_of(approved, "s:e1:T1/S1:t1:c0:retry1", digest, "run_terminal: rm (destructive)") is approved[0]
    other = call_hash("run_terminal", {"command": "rm -rf /w"})
    assert decision_of(approved, "s:e1:T1/S1:t1:c0", other, "run_terminal: rm (destructive)") is None
    assert decision_of(approved, "s:e1:T1/S1:t2:c0", digest, "run_terminal: rm (destructive)") is None
    always = [_decision("k1", rm, always=True)]
    assert decision_of(always, "k9", other, "run_terminal: rm (destructive)") is always[0]
    assert decision_of(always, "k9", other, "run_terminal: git (destructive)") is None


def test_a_call_denied_before_an_always_rule_stays_denied() -> None:
    rm = {"command": "rm old.txt"}
    decisions = [_decision("k1", rm, "deny"), _decision("k2", {"command": "rm b.txt"}, always=True)]
    found = decision_of(decisions, "k1", call_hash("run_terminal", rm), "run_terminal: rm (destructive)")
    assert found is not None and found.decision == "deny"
