"""A session's health as the CLI shows it: 100 untroubled, lowered by each anomaly, retry,
escalation and a budget past half spent (protocol.sessions.health); each anomaly a line in `acode run`."""

from __future__ import annotations

from cli.progress import Progress, session_detail
from cli.render import active_sessions
from protocol.policy.budget import Budget, Spent
from protocol.sessions.events import (
    AnomalyDetected,
    BudgetWarning,
    Event,
    SessionPaused,
    StageRetried,
    StepRetried,
    Transitioned,
)
from protocol.sessions.health import budget_share, session_health
from protocol.sessions.session import SessionSettings, SessionSnapshot

NOTE = AnomalyDetected(id="a1", session_id="s1", kind="repeated_error", score=60, response="note", task="T1",
                       step="S1", turns=[1, 2, 3], health=88,
                       evidence="run_terminal failed 3 times with the same error")


def test_an_untroubled_session_is_100_and_each_trouble_lowers_it_by_its_weight() -> None:
    budget, spent = Budget(), Spent()
    calm: list[Event] = [Transitioned(id="t1", session_id="s1", source="start", target="planner"),
                         BudgetWarning(id="b1", session_id="s1", kind="tokens", used=1, limit=2)]
    assert session_health(calm, budget, spent) == 100
    troubled: list[Event] = [
        *calm, NOTE,  # 60 // 5 = 12
        StepRetried(id="r1", session_id="s1", visit=1, task="T1", step="S1", attempt=2, of=3),  # 5
        StageRetried(id="r2", session_id="s1", stage="executor", visit=1, attempt=2, reason="lost"),  # 5
        Transitioned(id="t2", session_id="s1", source="executor", target="executor", visit=2,
                     reason="stage retry 1 of 2, afresh: ..."),  # 5
        Transitioned(id="t3", session_id="s1", source="executor", target="executor", visit=3,
                     reason="resumed after escalation: a fresh round"),  # a human's resume: no retry
        SessionPaused(id="p1", session_id="s1", kind="anomaly", code="ACODE-EXEC-011", message="m",
                      exit_code=25),  # 15
        SessionPaused(id="p2", session_id="s1", kind="user", code="ACODE-ORCH-010", message="m", exit_code=22),
    ]
    assert session_health(troubled, budget, spent) == 100 - 12 - 5 - 5 - 5 - 15
    half_and_more = Spent(tokens_in=1_500_000)  # 75% of the tokens: 15
    assert budget_share(budget, half_and_more) == 0.75
    assert session_health(troubled, budget, half_and_more) == 100 - 12 - 5 - 5 - 5 - 15 - 15
    assert budget_share(Budget(tokens=0, tool_calls=0, wall_minutes=0, model_minutes=0), half_and_more) == 0.0


def test_run_prints_a_line_per_anomaly_and_show_and_status_print_the_health() -> None:
    line = Progress().line(NOTE)
    assert line == ("[EXECUTOR]  anomaly repeated_error in T1/S1 (score 60, session health 88): run_terminal "
                    "failed 3 times with the same error; a note goes to the model with its next turn")
    paused = AnomalyDetected(id="a2", session_id="s1", kind="verify_repeat", score=50, response="pause",
                             stage="verifier", evidence="the same criteria failed at verifications 1, 2")
    assert Progress().line(paused) == ("[VERIFIER]  anomaly verify_repeat (score 50, session health 100): the same "
                                       "criteria failed at verifications 1, 2; the session pauses")
    session = SessionSnapshot(id="s1", task="t", workspace="/w", status="running", settings=SessionSettings())
    detail = session_detail(session, [NOTE], Spent())
    assert "health    88 of 100 (1 anomaly: repeated_error)" in detail
    assert "anomaly repeated_error in T1/S1 (score 60" in detail  # among the transitions
    assert "health    100 of 100\n" in session_detail(session, [], Spent())
    assert active_sessions([session], {}, {"s1": Spent()}, {"s1": 88}).splitlines()[-1] == "s1 health: 88 of 100"
