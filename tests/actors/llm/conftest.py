"""A stand-in model server per test, and providers of either wire format pointed at it.

Timeouts and backoffs are small so failure paths take a fraction of a second. After each
test no provider helper thread may be left running: an exchange the watcher abandoned
must notice its shut-down socket at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors.llm.http import HttpModel
from actors.llm.ollama import OllamaModel
from actors.llm.openai import OpenAICompatibleModel
from actors.llm.provider import ChatMessage, ModelRequest
from protocol.plans.results import ModelAnswer
from protocol.sessions.session import OllamaProvider, OpenAIProvider
from tests.harness import wait_until
from tests.modelserver import ModelServer

FAST: dict[str, Any] = {"connect_timeout_s": 1.0, "first_token_timeout_s": 2.0, "idle_timeout_s": 1.0,
                        "max_retries": 2, "backoff_initial_s": 0.01, "backoff_max_s": 0.05}

REQUEST = ModelRequest(stage="planner", call_site="test", messages=[
    ChatMessage(role="system", content="You are the planner of acode, a coding agent."),
    ChatMessage(role="user", content="Add a farewell function.")])


def spec_for(kind: str, base_url: str, **fields: Any) -> OllamaProvider | OpenAIProvider:
    fields = {"model": "test-model", **FAST, **fields}
    if kind == "ollama":
        return OllamaProvider(base_url=base_url, **fields)
    return OpenAIProvider(base_url=base_url, **fields)


def model_for(spec: OllamaProvider | OpenAIProvider) -> HttpModel:
    return OllamaModel(spec) if isinstance(spec, OllamaProvider) else OpenAICompatibleModel(spec)


def ask(model: HttpModel, request: ModelRequest = REQUEST, cancel: threading.Event | None = None) -> ModelAnswer:
    return model.complete(request, seq=0, cancel=cancel or threading.Event())


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as stand_in:
        yield stand_in


@pytest.fixture(params=["ollama", "openai"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(server: ModelServer, kind: str) -> Iterator[Callable[..., HttpModel]]:
    """``make(**spec_fields)``: a provider of this test's kind, aimed at the stand-in server."""
    made: list[HttpModel] = []

    def make(**fields: Any) -> HttpModel:
        base = server.url if kind == "ollama" else server.openai_url
        model = model_for(spec_for(kind, fields.pop("base_url", base), **fields))
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()


def _helpers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("acode-") and t.name.endswith("-http")]


@pytest.fixture(autouse=True)
def _no_helper_left() -> Iterator[None]:
    yield
    wait_until(lambda: not _helpers(), timeout=2.0, what="provider helper threads to finish")
