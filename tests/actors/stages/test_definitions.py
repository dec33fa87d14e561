"""The functions and classes a step names, one line each (actors/stages/execution/definitions.py)."""

from __future__ import annotations

from actors.stages.execution.definitions import named_definitions

CORE = '''"""Counting words."""


def count_words(text: str) -> dict[str, int]:
    """Count each word of text.

    More lines."""
    return {}


async def fetch(url, *, timeout=3.0):
    return url


class Counter:
    """A running count."""

    def __init__(self, start: int = 0) -> None:
        self.n = start


def _private():
    pass
'''


def test_each_name_the_words_use_gives_its_signature_and_first_docstring_line() -> None:
    files = [("wordcount/core.py", CORE), ("notes.txt", "count_words"), ("broken.py", "def count_words(:\n")]
    assert named_definitions("Use count_words, fetch and Counter.", files, skip="x.py") == [
        "wordcount/core.py: def count_words(text: str) -> dict[str, int]  # Count each word of text.",
        "wordcount/core.py: async def fetch(url, *, timeout=3.0)",
        "wordcount/core.py: class Counter(self, start: int=0)  # A running count.",
    ]


def test_the_file_being_written_and_unnamed_functions_give_nothing() -> None:
    assert named_definitions("Fix count_words", [("wordcount/core.py", CORE)], skip="wordcount/core.py") == []
    assert named_definitions("Add a --top flag", [("wordcount/core.py", CORE)], skip="cli.py") == []
    assert named_definitions("Fix count_words", [("wordcount/core.py", None)], skip="cli.py") == []
