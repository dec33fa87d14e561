"""A session's prompt budgets: how many tokens each stage's prompt may take of the model's
context (seed 000 FR-046..053), from its settings alone.

A stage's budget is its share, ``token_budget[stage]`` percent (default planner 25,
executor 45, verifier 15, reviewer 15), of the model's ``num_ctx`` less a reserve for the
answer (an eighth of it); the planner's is held to ``planner_context_tokens`` too. The
stages trim their prompts to it (:mod:`actors.stages.prompting.budget`); ``acode doctor``
sets it beside each stage's answer cap (:mod:`actors.llm.doctor`). Here, below both, so the
CLI computes it without loading the stages.
"""

from __future__ import annotations

from protocol.plans.stages import STAGES, Stage
from protocol.sessions.session import DEFAULT_TOKEN_BUDGET, SessionSettings

__all__ = ["DEFAULT_CONTEXT_TOKENS", "answer_reserve", "context_window", "prompt_budgets", "stage_budget"]

DEFAULT_CONTEXT_TOKENS = 32_768  # a model without a configured window (the scripted one)


def context_window(settings: SessionSettings) -> int:
    """The model's context in tokens: the provider's ``num_ctx``, else the default."""
    return getattr(settings.provider, "num_ctx", None) or DEFAULT_CONTEXT_TOKENS


def answer_reserve(window: int) -> int:
    """Tokens kept free for the model's answer."""
    return window // 8


def stage_budget(settings: SessionSettings, stage: Stage) -> int:
    """The stage's prompt budget in tokens: its share of the window less the answer's reserve."""
    window = context_window(settings)
    percent = settings.token_budget.get(stage, DEFAULT_TOKEN_BUDGET[stage])
    return (window - answer_reserve(window)) * percent // 100


def prompt_budgets(settings: SessionSettings) -> dict[Stage, int]:
    """Each stage's largest prompt in tokens: its budget, the planner's held to
    ``planner_context_tokens`` too (what ``acode doctor`` adds to each answer cap)."""
    budgets = {stage: stage_budget(settings, stage) for stage in STAGES}
    budgets["planner"] = min(budgets["planner"], settings.planner_context_tokens)
    return budgets
