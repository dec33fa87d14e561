"""Greetings for the acode demo project."""


def greet(name: str) -> str:
    """Return a friendly greeting."""
    return f"Hello, {name}!"
