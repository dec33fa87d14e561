"""Reading structured answers (plans, verdicts) out of a model's text.

Models wrap JSON in prose or code fences; this takes the first JSON object in the text and
validates it against the contract's Struct. :func:`schema_of` (the bounded schema sent
with the request) lives in :mod:`actors.llm.schemas`. A bad answer raises ModelError ACODE-LLM-003
naming the stage, the problem and the start of the answer.
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from actors.llm.schemas import schema_of
from protocol.errors import ModelError

__all__ = ["parse_answer", "schema_of"]

T = TypeVar("T")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_text(text: str) -> str:
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    start = text.find("{")
    end = text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text.strip()


def parse_answer(text: str, type_: type[T], *, stage: str) -> T:
    try:
        return msgspec.json.decode(_json_text(text), type=type_)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        head = text.strip().replace("\n", " ")[:120]
        raise ModelError(f"the {stage}'s answer is not a valid {type_.__name__}: {exc}; the answer starts "
                         f"with {head!r}", code="ACODE-LLM-003") from exc
