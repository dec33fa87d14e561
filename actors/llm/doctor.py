"""``acode doctor`` for a model server: is it there, does it have the models, can they do the job?

:func:`probe` runs its checks in order and stops early when a check makes the next ones
meaningless (no server, no model). Each check says what it found, and when it failed, a
one-line fix (never "use the model you have"). The stages need two abilities a model may
lack, so both are tried for real with a tiny request: a tool call the executor can run (the
executor's model; native, or written as JSON text that :func:`actors.llm.toolcalls.from_text`
reads, as small local models often do: the check says which) and an answer that follows
a JSON schema (the planner's, verifier's and reviewer's models). Probes use short
timeouts and no retries: a doctor that hangs helps nobody.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Annotated

import msgspec

from actors.llm import toolcalls
from actors.llm.http import HttpModel
from actors.llm.locality import check_base_url
from actors.llm.ollama import OllamaModel, same_model
from actors.llm.openai import OpenAICompatibleModel
from actors.llm.provider import ChatMessage, ModelRequest
from actors.llm.schemas import schema_of
from protocol.errors import AcodeError
from protocol.plans.stages import STAGES, Stage
from protocol.sessions.session import OllamaProvider, OpenAIProvider

__all__ = ["DoctorCheck", "probe"]

_TOOL = {"type": "function", "function": {
    "name": "record_number", "description": "Record a number.",
    "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}}


class _Sum(msgspec.Struct):
    answer: Annotated[int, msgspec.Meta(ge=-1_000_000, le=1_000_000)]


_PROBE_TOKENS = 512  # a probe's answer cap: a tool call or {"answer": 5} needs a few dozen


class DoctorCheck(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # ok, but worth a look


def _models_for(spec: OllamaProvider | OpenAIProvider, stages: tuple[Stage, ...]) -> list[str]:
    return list(dict.fromkeys(spec.model_for(stage) for stage in stages))


def probe(spec: OllamaProvider | OpenAIProvider, *, timeout_s: float = 5.0,
          generate_timeout_s: float = 60.0, prompt_budgets: Mapping[Stage, int] | None = None) -> list[DoctorCheck]:
    """Check the server ``spec`` names; ``generate_timeout_s`` bounds each tiny generation
    (a model that is not loaded yet may take that long to answer its first token).
    ``prompt_budgets``: each stage's largest prompt in tokens
    (:func:`actors.stages.prompting.budget.prompt_budgets`), set beside its answer cap
    against the context."""
    checks: list[DoctorCheck] = []
    try:
        check_base_url(spec.base_url, allow_remote=spec.allow_remote)
    except AcodeError as exc:
        return [DoctorCheck(name="base_url", ok=False, detail=exc.message,
                            fix="point base_url at a local server, or set allow_remote: true")]
    probe_spec = msgspec.structs.replace(spec, max_retries=0, connect_timeout_s=timeout_s,
                                         first_token_timeout_s=generate_timeout_s,
                                         idle_timeout_s=min(spec.idle_timeout_s, generate_timeout_s))
    model: HttpModel = (OllamaModel(probe_spec) if isinstance(spec, OllamaProvider)
                        else OpenAICompatibleModel(probe_spec))
    try:
        checks.append(_server(model, timeout_s))
        if not checks[-1].ok:
            return checks
        listed = model.list_models(timeout=timeout_s)
        available = set()
        for name in _models_for(spec, ("planner", "executor", "verifier", "reviewer")):
            check = _model(model, name, listed)
            checks.append(check)
            if check.ok:
                available.add(name)
        checks += _context(model, spec, sorted(available), timeout_s)
        checks.append(_budgets(spec, prompt_budgets or {}))
        for name in _models_for(spec, ("executor",)):
            if name in available:
                checks.append(_tool_probe(model, name))
        for name in _models_for(spec, ("planner", "verifier", "reviewer")):
            if name in available:
                checks.append(_json_probe(model, name))
    finally:
        model.close()
    return checks


def _server(model: HttpModel, timeout_s: float) -> DoctorCheck:
    try:
        if isinstance(model, OllamaModel):
            detail = f"Ollama {model.version(timeout=timeout_s)} answered at {model.base_url}"
        else:
            count = len(model.list_models(timeout=timeout_s))
            detail = f"an OpenAI-compatible server answered at {model.base_url} ({count} model(s))"
    except AcodeError as exc:
        return DoctorCheck(name="server", ok=False, detail=exc.message, fix=_server_fix(model, exc))
    return DoctorCheck(name="server", ok=True, detail=detail)


def _server_fix(model: HttpModel, exc: AcodeError) -> str:
    if exc.code == "ACODE-LLM-001":  # api_key_env names a variable that is not set
        return "export the variable api_key_env names before `acode up`, or clear api_key_env"
    if exc.code == "ACODE-LLM-007" and ("HTTP 401" in exc.message or "HTTP 403" in exc.message):
        return "set api_key_env to the environment variable holding the server's key"
    if exc.code == "ACODE-LLM-007" and "HTTP 404" in exc.message:
        return ("this server does not speak Ollama's API; for LM Studio and other OpenAI-compatible servers use "
                "kind: openai with a base_url ending in /v1" if isinstance(model, OllamaModel)
                else "no OpenAI-compatible API at this base_url; does it end in /v1?")
    return model.start_hint


def _model(model: HttpModel, name: str, listed: list[str]) -> DoctorCheck:
    if isinstance(model, OllamaModel):
        found = any(same_model(name, m) for m in listed)
        fix = f"run: ollama pull {name}"
    else:
        found = name in listed
        fix = f"load {name} (LM Studio: `lms load {name}` or the Developer tab), or set model to one listed"
    if found:
        return DoctorCheck(name=f"model {name}", ok=True, detail=f"{name} is available")
    shown = ", ".join(listed[:10]) + (", ..." if len(listed) > 10 else "") if listed else "none"
    return DoctorCheck(name=f"model {name}", ok=False, detail=f"{name} is not on the server (it has: {shown})",
                       fix=fix)


def _context(model: HttpModel, spec: OllamaProvider | OpenAIProvider, names: list[str],
             timeout_s: float) -> list[DoctorCheck]:
    """The context each model gets on the server, where the server says, against num_ctx."""
    checks = []
    for name in names:
        check = f"context length {name}"
        try:
            if isinstance(model, OllamaModel):
                length = model.context_length(name, timeout=timeout_s)
                found = None if length is None else (length, "Ollama /api/show model_info")
            else:
                assert isinstance(model, OpenAICompatibleModel)
                found = model.context_length(name, timeout=timeout_s)
        except AcodeError as exc:
            checks.append(DoctorCheck(name=check, ok=False, detail=exc.message, fix="check the server's log"))
            continue
        if found is None:
            checks.append(DoctorCheck(name=check, ok=True, warning=True, detail=(
                f"unknown: the server does not report {name}'s context; make sure it gives at least num_ctx "
                f"({spec.num_ctx}) tokens (llama-server --ctx-size {spec.num_ctx})")))
            continue
        length, source = found
        if spec.num_ctx > length:
            fix = (f"set num_ctx to {length} or less" if isinstance(model, OllamaModel) else
                   f"start the server with a context of {spec.num_ctx} (llama-server --ctx-size {spec.num_ctx}; LM "
                   f"Studio: the model's context length), or set model.num_ctx to {length}")
            checks.append(DoctorCheck(name=check, ok=False, fix=fix, detail=(
                f"{name}'s context is {length} tokens ({source}), less than num_ctx {spec.num_ctx}: longer prompts "
                "will be refused (ACODE-LLM-013)")))
        else:
            checks.append(DoctorCheck(name=check, ok=True, detail=(
                f"{name}'s context is {length} tokens ({source}); num_ctx {spec.num_ctx} fits")))
    return checks


def _budgets(spec: OllamaProvider | OpenAIProvider, prompts: Mapping[Stage, int]) -> DoctorCheck:
    """Each stage's largest prompt and its answer cap against num_ctx. A request's cap is cut
    to the context its prompt leaves (:mod:`actors.llm.http`), so this warns of answers that
    may be cut short (ACODE-LLM-012), never of a refusal."""
    caps = {stage: spec.max_tokens_for(stage) for stage in STAGES}
    shown = ", ".join(f"{stage} {prompts[stage]} + {cap}" if stage in prompts else f"{stage} {cap}"
                      for stage, cap in caps.items())
    over = {stage: prompts[stage] + cap for stage, cap in caps.items() if prompts.get(stage, 0) + cap > spec.num_ctx}
    if over:
        worst = max(over.values())
        said = ", ".join(f"{stage} {prompts[stage]} + {caps[stage]} = {total}" for stage, total in over.items())
        lower = "planner.context_tokens, " if "planner" in over else ""
        return DoctorCheck(name="token budgets", ok=True, warning=True, detail=(
            f"a stage's largest prompt + its answer cap exceeds num_ctx {spec.num_ctx}: {said}; a full prompt "
            f"leaves its answer less room (prompt + answer cap: {shown})"),
            fix=f"raise num_ctx (and the server's context) to {worst}, or lower {lower}"
                "orchestration.token_budget or model.stage_max_tokens")
    return DoctorCheck(name="token budgets", ok=True, detail=(
        f"each stage's largest prompt and answer cap fit num_ctx {spec.num_ctx} (prompt + answer cap: {shown})"
        if prompts else f"answer caps within num_ctx {spec.num_ctx}: {shown}"))


_SLOW_FIX = "check the server's log, or raise first_token_timeout_s for a slow first load"
# A probe that failed with a permanent server error gets that error's fix, not the slow-load one.
_FIXES = {
    "ACODE-LLM-012": "raise model.max_tokens; the probe's answer ran past its cap",
    "ACODE-LLM-013": "start the server with a larger context (llama-server --ctx-size N) and set model.num_ctx to it",
    "ACODE-LLM-014": "start llama-server with --jinja and a chat template that supports tools",
    "ACODE-LLM-016": "use a model (or chat template) that writes valid tool calls",
}


def _ask(model: HttpModel, name: str, request: ModelRequest) -> tuple[object, str, str]:
    """(answer, '', '') or (None, the error, its fix) for one tiny request to ``name``."""
    spec = msgspec.structs.replace(model.spec, model=name, stage_models={})
    asker = type(model)(spec)
    try:
        return asker.complete(request, seq=0, cancel=threading.Event()), "", ""
    except AcodeError as exc:
        return None, str(exc), _FIXES.get(exc.code, _SLOW_FIX)
    finally:
        asker.close()


def _tool_probe(model: HttpModel, name: str) -> DoctorCheck:
    answer, error, fix = _ask(model, name, ModelRequest(stage="executor", call_site="doctor/tools", tools=[_TOOL],
                                                   max_tokens=_PROBE_TOKENS, messages=[
        ChatMessage(role="system", content="You are a test of tool calling. Answer only by calling a tool."),
        ChatMessage(role="user", content="Call record_number with number 7.")]))
    check = f"tool calls {name}"
    if answer is None:
        return DoctorCheck(name=check, ok=False, detail=f"the tool-call probe failed: {error}",
                           fix=fix)
    calls = getattr(answer, "tool_calls", [])
    good = [c for c in calls if c.name == "record_number" and not c.invalid_arguments]
    if good:
        return DoctorCheck(name=check, ok=True, detail=f"{name} made a native tool call: record_number"
                                                        f"({msgspec.json.encode(good[0].arguments).decode()})")
    content = getattr(answer, "content", "")
    written = [] if calls else toolcalls.from_text(content, ("record_number",))
    if isinstance(written, list) and written and not written[0].invalid_arguments:
        return DoctorCheck(name=check, ok=True, detail=(
            f"{name} made a tool call written as JSON text (the executor reads them): record_number"
            f"({msgspec.json.encode(written[0].arguments).decode()})"))
    text = content.strip().replace("\n", " ")[:80]
    what = (f"called {calls[0].name} with invalid arguments {calls[0].invalid_arguments[:60]!r}" if calls
            else f"answered with text that is no tool call the executor can read: {text!r}")
    return DoctorCheck(name=check, ok=False, detail=f"{name} {what}", fix=_tool_fix(name))


# Models whose chat templates write tool calls, suggested by the tool probe's fix.
_TOOL_MODELS = ("qwen2.5-coder", "llama3.1")


def _tool_fix(name: str) -> str:
    """The tool probe's fix: never the model that just failed it."""
    loaded = re.sub(r"[^a-z0-9.]", "", name.lower())
    others = [m for m in _TOOL_MODELS if re.sub(r"[^a-z0-9.]", "", m) not in loaded]
    if not others:
        return "use a chat template that supports tools (llama-server --jinja), or another model"
    return f"use a model whose template supports tools (for example {' or '.join(others)}), not {name}"


def _json_probe(model: HttpModel, name: str) -> DoctorCheck:
    answer, error, fix = _ask(model, name, ModelRequest(stage="planner", call_site="doctor/json",
                                                   json_schema=schema_of(_Sum), max_tokens=_PROBE_TOKENS, messages=[
        ChatMessage(role="system", content="You are a test of structured output. Answer with one JSON object."),
        ChatMessage(role="user", content='What is 2 + 3? Answer as {"answer": <integer>}.')]))
    check = f"structured output {name}"
    if answer is None:
        return DoctorCheck(name=check, ok=False, detail=f"the JSON-schema probe failed: {error}",
                           fix=fix)
    text = getattr(answer, "content", "")
    try:
        value = msgspec.json.decode(text.strip(), type=_Sum)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        head = text.strip().replace("\n", " ")[:80]
        return DoctorCheck(name=check, ok=False, detail=f"{name}'s answer does not follow the schema ({exc}): {head!r}",
                           fix="update the server (it must support JSON-schema output) or choose another model")
    return DoctorCheck(name=check, ok=True, detail=f"{name} answered JSON that follows the schema ({value.answer})")
