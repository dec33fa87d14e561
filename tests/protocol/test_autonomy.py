"""The approvals table: risk class x autonomy level, refined by ``approvals:``, and how a decision matches a call."""

from __future__ import annotations

import pytest

from protocol.calls.autonomy import (
    TABLE,
    ApprovalDecision,
    Approvals,
    call_hash,
    decision_of,
    gate,
    risk_of_call,
    rule_of,
)
from protocol.calls.tools import Risk


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


def _rule(command: str) -> str:
    return rule_of("run_terminal", {"command": command}, risk_of_call("run_terminal", {"command": command}))


@pytest.mark.parametrize(("approved", "later"), [
    ("git status --short", "git checkout -f"), ("git status --short", "git reset --hard"),
    ("git status --short", "git status"), ("git clean -n", "git clean -f"), ("git clean -n", "git clean -fdx"),
    ("git clean -n", "git clean -n -f -i"), ("git clean --dry-run", "git clean --force"),
    ("git branch new", "git branch -D new"), ("git branch -a", "git branch -D x"), ("git status", "git stash"),
    ("git checkout -b x", "git checkout -f"), ("git checkout -b x", "git checkout -- a.txt"),
    ("git reset --soft HEAD~1", "git reset --hard HEAD~1"), ("git commit -m x", "git commit --amend -m x"),
    ("git log", "git log --output=x"), ("cp -n a b", "cp a b"), ("tar -tf a.tar", "tar -xf a.tar"),
    ("tar -xkf a.tar", "tar -xf a.tar"), ("sort a", "sort -o a a"), ("uniq a", "uniq a b"),
    ("sed -n p f", "sed -i p f"), ("rm a", "rm -rf a"), ("python -m pytest", "python -m pytest --rootdir=/"),
    ("git push origin main", "git push -f origin main"), ("git fetch", "git fetch --prune"),
    ("mkdir x", "mv x y"), ("git stash list", "git stash drop"), ("env ls", "env -u X rm x"),
])
def test_an_always_rule_never_covers_a_different_shape_or_class(approved: str, later: str) -> None:
    rule = _rule(approved)
    always = [_decision("k1", {"command": approved}, always=True)]
    digest = call_hash("run_terminal", {"command": later})
    assert _rule(later) != rule
    assert decision_of(always, "k9", digest, _rule(later)) is None


@pytest.mark.parametrize(("approved", "later"), [
    ("rm a.txt", "rm b.txt"), ("git clean -n", "git clean --dry-run src"), ("git clean -n", "git clean --dry"),
    ("git status --short", "git status -s"), ("python -m pytest -q", "python -m pytest tests/x.py -q"),
    ("git reset --hard HEAD", "git reset --ha HEAD~2"),
])
def test_an_always_rule_covers_later_calls_of_the_same_shape_and_class(approved: str, later: str) -> None:
    always = [_decision("k1", {"command": approved}, always=True)]
    digest = call_hash("run_terminal", {"command": later})
    assert decision_of(always, "k9", digest, _rule(later)) is always[0]


def test_a_rule_says_the_shape_and_the_class_in_full() -> None:
    assert _rule("git clean -n") == "run_terminal: git clean --dry-run (execute)"
    assert _rule("git clean -fdx") == "run_terminal: git clean --force -d -x (destructive)"
    assert _rule("env -u VAR rm -rf src") == "run_terminal: env --unset rm --force --recursive (destructive)"
    assert rule_of("write_file", {"path": "a"}, "write") == "write_file (write)"


@pytest.mark.parametrize("old", ["run_terminal git (execute)", "run_terminal git (destructive)",
                                 "run_terminal rm (destructive)", "run_terminal sed (execute)"])
def test_an_always_rule_stored_in_the_old_form_covers_no_command(old: str) -> None:
    stored = ApprovalDecision(id="d-old", key="k0", call_hash="0" * 64, tool="run_terminal", risk="destructive",
                              rule=old, decision="approve", always=True)
    for command in ("git status", "git reset --hard", "git checkout -f", "rm x", "rm -rf x", "sed -n p f"):
        digest = call_hash("run_terminal", {"command": command})
        assert decision_of([stored], "k9", digest, _rule(command)) is None, (old, command)
