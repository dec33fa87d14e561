"""Small valid records for persistence tests: sessions, events, plans, steps, tool results."""

from __future__ import annotations

from typing import Any

from broker.client import Client
from protocol import codec
from protocol.basics.ids import new_id
from protocol.messages import Commit
from protocol.plans.plan import PlanStep, PlanTask, TaskPlan
from protocol.plans.results import ModelAnswer, StepRecord, ToolResult
from protocol.sessions.events import SessionCreated, ToolCalled, Transitioned
from protocol.sessions.session import SessionSnapshot, SessionStatus

__all__ = ["CommitPump", "answer", "created", "plan", "snapshot", "step", "tool_called", "tool_result",
           "transitioned"]


def snapshot(session_id: str, *, status: SessionStatus = "running", created_at: float = 100.0,
             updated_at: float = 100.0) -> SessionSnapshot:
    return SessionSnapshot(id=session_id, task="add a greeting", workspace="/w", status=status,
                           created_at=created_at, updated_at=updated_at)


def created(session_id: str, event_id: str | None = None, *, at: float = 0.0) -> SessionCreated:
    return SessionCreated(id=event_id or new_id(), session_id=session_id, at=at,
                          task="add a greeting", workspace="/w")


def transitioned(session_id: str, event_id: str | None = None) -> Transitioned:
    return Transitioned(id=event_id or new_id(), session_id=session_id, source="start", target="planner")


def plan(version: int, goal: str = "greet") -> TaskPlan:
    step = PlanStep(label="S1", title="write hello.py", action="write_file")
    return TaskPlan(goal=goal, version=version, id=new_id(),
                    tasks=[PlanTask(label="T1", title="greeting", steps=[step])])


def step(session_id: str, *, visit: int = 1, task: str = "T1", name: str = "S1",
         summary: str = "done") -> StepRecord:
    return StepRecord(session_id=session_id, visit=visit, task=task, step=name, status="completed",
                      summary=summary)


def tool_result(key: str, output: str = "ok") -> ToolResult:
    return ToolResult(key=key, tool="write_file", ok=True, output=output, risk="write", path="hello.py")


def tool_called(session_id: str, key: str, event_id: str | None = None) -> ToolCalled:
    return ToolCalled(id=event_id or new_id(), session_id=session_id, key=key, tool="write_file",
                      target="hello.py")


def answer(content: str) -> ModelAnswer:
    return ModelAnswer(content=content)


class CommitPump:
    """Commits ``total`` events (one per Commit, ids in :attr:`ids`) to one session, ``window``
    at a time, each resent with its own request id until answered; :meth:`pump` does one
    turn and returns how many were answered (:attr:`answers`: index -> reply or error)."""

    def __init__(self, client: Client, session_id: str, *, total: int, window: int, timeout: float,
                 poll_ms: int) -> None:
        self.client, self.session_id = client, session_id
        self.total, self.window, self.timeout, self.poll_ms = total, window, timeout, poll_ms
        self.ids = [new_id() for _ in range(total)]
        self.answers: dict[int, Any] = {}
        self.sent = 0

    def pump(self) -> int:
        self.fill()
        if self.client.socket.poll(self.poll_ms):
            self.client.on_readable()
        self.client.tick()
        return len(self.answers)

    def fill(self) -> None:
        """Send until ``window`` commits are unanswered (or all are sent), reading nothing."""
        while self.sent < self.total and self.sent - len(self.answers) < self.window:
            def answered(reply: Any, error: Exception | None, n: int = self.sent) -> None:
                self.answers[n] = reply or error

            event = transitioned(self.session_id, self.ids[self.sent])
            self.client.send("persistence", Commit(session_id=self.session_id, events=[event]),
                             timeout=self.timeout, decoder=codec.PERSISTENCE_REPLY, on_reply=answered)
            self.sent += 1
