"""What a human gives a session, checked before it is sent: steering text, the answers
to the planner's questions, a resume's budget changes and another model. Each bad value is
refused with its stable code, the value and what to do, in the CLI and the client alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from protocol.errors import CliError, ModelError
from protocol.plans.plan import TaskPlan
from protocol.policy.budget import FLAGS, BudgetChange, BudgetKind, parse_change
from protocol.sessions.session import MAX_STEERING_CHARS, Clarification, ProviderSpec, SessionSnapshot

__all__ = ["budget_changes", "collect_answers", "provider_override", "steering_text"]


def provider_override(current: SessionSnapshot, *, provider: str | None, model: str | None, base_url: str | None,
                      script: Path | None, home: Path | None = None) -> ProviderSpec:
    """The session's model with ``provider/model/base_url/script`` applied: the same kind
    keeps its other settings; another kind is resolved from the configuration of ``home``
    (acode's; None: the default one)."""
    from acode.config.loader import resolve
    from acode.config.settings import provider_spec
    from actors.paths import RunPaths
    from protocol.plans.script import load_script
    from protocol.sessions.session import ScriptedProvider

    spec = current.settings.provider
    kind = provider or (spec.__struct_config__.tag if spec is not None else None)
    if kind == "scripted":
        if model or base_url:
            raise CliError("--model and --base-url are for the ollama and openai providers; the scripted one "
                           "takes --script FILE")
        if script is None:
            if isinstance(spec, ScriptedProvider):
                return spec
            raise CliError("--provider scripted needs --script FILE")
        text = script.read_text(errors="surrogateescape")  # bytes that are not UTF-8: load_script says so
        load_script(text, name=str(script))  # a bad file is refused here, before the session goes on
        return ScriptedProvider(script_yaml=text, script_name=str(script.resolve()))
    if script is not None:
        raise CliError("--script is for --provider scripted")
    if spec is not None and not isinstance(spec, ScriptedProvider) and kind == spec.__struct_config__.tag:
        from actors.llm.locality import check_base_url

        changed = msgspec.structs.replace(spec, **{k: v for k, v in (("model", model), ("base_url", base_url))
                                                   if v is not None})
        check_base_url(changed.base_url, allow_remote=changed.allow_remote)
        return changed
    flags = {"model.provider": kind, "model.model": model, "model.base_url": base_url}
    found = provider_spec(resolve(home=RunPaths.for_home(home).home, workspace=Path(current.workspace), flags=flags))
    if found is None:
        raise ModelError("no model given; pass --provider ollama --model NAME", code="ACODE-LLM-001")
    return found


def steering_text(text: str, what: str) -> str:
    """Steering or feedback text as given: not blank, at most MAX_STEERING_CHARS (ACODE-CLI-009)."""
    if not text.strip():
        raise CliError(f"the {what} is empty; say in a sentence what the session should do differently",
                       code="ACODE-CLI-009")
    if len(text) > MAX_STEERING_CHARS:
        raise CliError(f"the {what} is {len(text):,} characters; at most {MAX_STEERING_CHARS:,} are taken: say it "
                       "shorter", code="ACODE-CLI-009")
    return text


def budget_changes(given: Mapping[BudgetKind, str | float | None]) -> dict[BudgetKind, BudgetChange]:
    """A resume's budget changes: each a new limit, ``+N`` or ``+N%`` (ACODE-CLI-003 otherwise)."""
    changes: dict[BudgetKind, BudgetChange] = {}
    for kind, value in given.items():
        if value is None:
            continue
        try:
            changes[kind] = parse_change(str(value))
        except ValueError as exc:
            raise CliError(f"{FLAGS[kind]} {exc}", code="ACODE-CLI-003") from exc
    return changes


def _chosen(question: Any, given: str) -> str:
    """An answer as typed: an option's number picks that option; other text is free text."""
    text = given.strip()
    if text.isdigit() and question.options:
        number = int(text)
        if not 1 <= number <= len(question.options):
            raise CliError(f"{question.label} has options 1 to {len(question.options)}, not {number}",
                           code="ACODE-CLI-005")
        return str(question.options[number - 1])
    if not text:
        raise CliError(f"the answer to {question.label} is empty; give an option number or some text",
                       code="ACODE-CLI-005")
    if question.options and not question.free_text and text not in question.options:
        numbered = "; ".join(f"{n}) {o}" for n, o in enumerate(question.options, 1))
        raise CliError(f"{question.label} takes one of its options ({numbered}), not {text!r}",
                       code="ACODE-CLI-005")
    return text


def collect_answers(plan: TaskPlan, given: list[str], *, defaults: bool,
                    ask: Callable[[Any], str] | None = None) -> list[Clarification]:
    """Answers for every question of ``plan``: ``LABEL=answer`` pairs first, then each
    remaining one from ``ask(question)`` (a prompt) or, with ``defaults``, its default."""
    by_label = {q.label: q for q in plan.questions}
    answers: dict[str, Clarification] = {}
    for item in given:
        label, sep, text = item.partition("=")
        label = label.strip()
        if not sep:
            raise CliError(f"--answer {item!r} is not LABEL=ANSWER (e.g. Q1=2 or Q1='use pytest')",
                           code="ACODE-CLI-005")
        question = by_label.get(label)
        if question is None:
            raise CliError(f"the plan has no question {label!r}; its questions are {', '.join(by_label)}",
                           code="ACODE-CLI-005")
        answers[label] = Clarification(label=label, question=question.question, answer=_chosen(question, text))
    for question in plan.questions:
        if question.label in answers:
            continue
        if defaults:
            from actors.coordinator.orchestrator import default_answers

            answers[question.label] = next(a for a in default_answers(plan, timed_out=False)
                                           if a.label == question.label)
        elif ask is not None:
            answers[question.label] = Clarification(label=question.label, question=question.question,
                                                    answer=_chosen(question, ask(question)))
        else:
            raise CliError(f"no answer for {question.label} ({question.question}); pass --answer "
                           f"{question.label}=… or --defaults", code="ACODE-CLI-005")
    return [answers[q.label] for q in plan.questions]
