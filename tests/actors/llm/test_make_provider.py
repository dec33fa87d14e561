"""``make_provider`` builds the HTTP providers from a session's spec and keeps one per spec."""

from __future__ import annotations

import threading

from actors.llm.ollama import OllamaModel
from actors.llm.openai import OpenAICompatibleModel
from actors.stages.request.context import make_provider
from protocol.sessions.session import OllamaProvider, OpenAIProvider
from tests.actors.llm.conftest import REQUEST, spec_for
from tests.modelserver import ModelServer, Text


def test_each_kind_gets_its_provider_and_equal_specs_share_one() -> None:
    ollama = make_provider(OllamaProvider(model="llama3.1", base_url="http://127.0.0.1:11434"))
    openai = make_provider(OpenAIProvider(model="llama3.1", base_url="http://127.0.0.1:11434"))
    assert isinstance(ollama, OllamaModel) and isinstance(openai, OpenAICompatibleModel)
    assert make_provider(OllamaProvider(model="llama3.1", base_url="http://127.0.0.1:11434")) is ollama
    assert make_provider(OllamaProvider(model="llama3.1", base_url="http://127.0.0.1:11434", seed=1)) is not ollama


def test_the_provider_made_from_a_spec_answers(server: ModelServer) -> None:
    server.queue(Text("hello"))
    provider = make_provider(spec_for("openai", server.openai_url))
    assert provider.complete(REQUEST, seq=0, cancel=threading.Event()).content == "hello"
