"""The session's budget as one stage request sees it: the pipeline's budget steps (seed 002 steps 1 and 6).

One :class:`Spending` per ``RunStage`` request. What the session had spent when the
request began comes from persistence's records (``ReplayIndex.spent``: each model answer
and each counted tool call once, when first stored) and the coordinator's running time
(``RunStage.running_s``); what this request spends live is added as it goes. So a stage
killed and dispatched again replays what was recorded without counting it (those answers
and calls are in the records already) and counts again only what it asks anew.

- Before a live model call (:meth:`check`, called by :class:`~actors.llm.recorded.RecordedModel`
  after it knows the answer is not recorded) and before a tool call a model asked for
  (:meth:`check_call`, the pipeline's budget step): a call that would cross a limit is
  not made. What the stage held back is written first, then :class:`BudgetExhausted`
  (ACODE-ORCH-013) ends the stage, and the coordinator pauses the session
  ``budget_exhausted``; ``acode resume --budget-…`` extends the limit and the stage,
  dispatched again, replays up to that call and makes it.
- After a live answer (:meth:`spent`) and after a call that ran (:meth:`called`, the
  budget-update step; a call answered from the journal ran before and counts nothing):
  at :data:`~protocol.policy.budget.WARN_AT` of a limit, a ``budget_warning`` event, under an id
  stable for the session, the limit and its value, so a replay writes it once.

"Would cross": a model call needs about its prompt's estimated tokens (the answer's are
not known before it), a tool call one call; running and model time are checked as spent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from protocol.basics.ids import stable_id
from protocol.errors import BudgetExhausted
from protocol.messages import ReplayIndex, RunStage
from protocol.plans.results import ModelAnswer, ToolResult
from protocol.policy import budget as budgets
from protocol.policy.budget import FLAGS, KINDS, WARN_AT, Budget, BudgetKind, Spent
from protocol.sessions.events import BudgetWarning, Event

__all__ = ["Spending"]


class Spending:
    """The budget steps of one stage request (thread-safe: the verifier's checks run at once)."""

    def __init__(self, request: RunStage, *, index: Callable[[], ReplayIndex], commit: Callable[[list[Event]], None],
                 flush: Callable[[], None], clock: Callable[[], float] = time.monotonic):
        self.request = request
        self.budget: Budget = request.settings.budget
        self._index = index
        self._commit = commit
        self._flush = flush
        self._clock = clock
        self._began = clock()
        self._recorded: Spent | None = None  # read at the first check (the replay index is fetched once)
        self._live = Spent()
        self._warned: set[BudgetKind] = set()  # this request's warnings (the event's id: once per session and limit)
        self._lock = threading.Lock()

    def used(self) -> Spent:
        """What the session has spent, this request's live spending included."""
        with self._lock:
            if self._recorded is None:
                self._recorded = self._index().spent
            running = self.request.running_s + (self._clock() - self._began)
            return self._recorded.plus(self._live).plus(Spent(running_s=running))

    # -- the checks (seed 002 step 1) ---------------------------------------------------------

    def check(self, prompt_tokens: int, *, where: str) -> None:
        """Before a live model call of about ``prompt_tokens``: BudgetExhausted if it would cross a limit."""
        self._check({"tokens": prompt_tokens, "wall_minutes": 0, "model_minutes": 0}, where)

    def check_call(self, *, where: str) -> None:
        """Before a tool call a model asked for: BudgetExhausted if it would cross a limit."""
        self._check({"tool_calls": 1, "wall_minutes": 0}, where)

    def _check(self, needs: dict[BudgetKind, float], where: str) -> None:
        used = self.used()
        over = [kind for kind, more in needs.items() if self._over(kind, budgets.spent_on(used, kind), more)]
        if not over:
            return
        self._flush()  # the answer in flight before this call is recorded: the resumed stage replays it
        figures = "; ".join(f"{budgets.figure(kind, budgets.spent_on(used, kind))} of "
                            f"{budgets.show(kind, budgets.limit_of(self.budget, kind))}" for kind in over)
        flags = " and ".join(FLAGS[kind] for kind in over)
        raise BudgetExhausted(f"the session's {', '.join(over)} budget is spent before {where} ({figures}); "
                              f"extend it with `acode resume` {flags}")

    def _over(self, kind: BudgetKind, spent: float, more: float) -> bool:
        """Whether needing ``more`` (0: time, checked as spent) crosses the limit ``kind`` (0: none)."""
        limit = budgets.limit_of(self.budget, kind)
        return bool(limit) and (spent + more > limit if more else spent >= limit)

    # -- the counts (seed 002 step 6) ---------------------------------------------------------

    def spent(self, answer: ModelAnswer, model_ms: float) -> None:
        """A live model answer came: count it, and warn at 80%."""
        with self._lock:
            self._live = self._live.plus(Spent(tokens_in=answer.usage.prompt_tokens,
                                               tokens_out=answer.usage.completion_tokens, model_ms=model_ms))
        self._warn()

    def called(self, result: ToolResult) -> None:
        """A tool call a model asked for came back: count it unless the journal answered it."""
        if result.replayed:
            return
        with self._lock:
            self._live = self._live.plus(Spent(tool_calls=1))
        self._warn()

    def _warn(self) -> None:
        used = self.used()
        request = self.request
        events: list[Event] = []
        for kind in KINDS:
            limit = budgets.limit_of(self.budget, kind)
            spent = budgets.spent_on(used, kind)
            if limit and spent >= WARN_AT * limit and kind not in self._warned:
                self._warned.add(kind)
                events.append(BudgetWarning(id=stable_id(request.session_id, "budget_warning", kind, f"{limit:g}"),
                                            session_id=request.session_id, at=time.time(), kind=kind,
                                            used=round(spent, 2), limit=limit, stage=request.stage))
        if events:
            self._commit(events)
