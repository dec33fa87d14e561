"""One step's conversation with the executor's model, and the window of it the model sees.

The model always sees the system prompt and the step's message; after them, as many of
the most recent turns as fit the budget (seed 004 FR-019..021, BP-012). A turn is the
model's answer and the replies to it: a tool message per native call, and at most one
user message (corrections, and the results of calls written as text). Older turns are
dropped whole, so a tool message never loses the call it answers; the step's message
then lists one line per dropped turn (what was called, and how it went), so the model
does not redo work it can no longer see. The latest turn is always shown.

The window is a pure function of the turns and the budget: a replayed step sends
byte-identical requests and is answered from the record.
"""

from __future__ import annotations

import msgspec

from actors.llm.provider import ChatMessage
from protocol.results import ModelToolCall

__all__ = ["Conversation"]

_DIGEST_LINES = 30


class _Turn:
    __slots__ = ("answer", "tools", "user", "notes")

    def __init__(self, answer: ChatMessage):
        self.answer = answer
        self.tools: list[ChatMessage] = []
        self.user: list[str] = []
        self.notes: list[str] = []

    def messages(self) -> list[ChatMessage]:
        out = [self.answer, *self.tools]
        if self.user:
            out.append(ChatMessage(role="user", content="\n\n".join(self.user)))
        return out


def _size(message: ChatMessage) -> int:
    calls = len(msgspec.json.encode(message.tool_calls)) if message.tool_calls else 0
    return len(message.content) + calls


class Conversation:
    """The system prompt, the step's message and the turns so far."""

    def __init__(self, system: str, step: str):
        self.system = system
        self.step = step
        self.turns: list[_Turn] = []

    def answer(self, content: str, tool_calls: list[ModelToolCall]) -> None:
        """Start a turn with the model's answer."""
        self.turns.append(_Turn(ChatMessage(role="assistant", content=content, tool_calls=tool_calls)))

    def reply_tool(self, call_id: str, name: str, text: str) -> None:
        self.turns[-1].tools.append(ChatMessage(role="tool", tool_call_id=call_id, name=name, content=text))

    def reply_user(self, text: str) -> None:
        """Part of the turn's one user message (parts are joined by a blank line)."""
        self.turns[-1].user.append(text)

    def note(self, line: str) -> None:
        """What the turn did, in a few words, for when it is no longer shown."""
        self.turns[-1].notes.append(line)

    def messages(self, budget_chars: int) -> list[ChatMessage]:
        """The window: system, step (with the digest of dropped turns), recent turns."""
        used = len(self.system) + len(self.step)
        kept: list[list[ChatMessage]] = []
        for turn in reversed(self.turns):
            messages = turn.messages()
            size = sum(_size(m) for m in messages)
            if kept and used + size > budget_chars:
                break
            kept.append(messages)
            used += size
        dropped = self.turns[:len(self.turns) - len(kept)]
        step = self.step
        if dropped:
            lines = [f"- turn {n}: {'; '.join(t.notes) or 'no tool call'}" for n, t in enumerate(dropped, start=1)]
            if len(lines) > _DIGEST_LINES:
                lines = [f"- turns 1-{len(lines) - _DIGEST_LINES}: not listed", *lines[-_DIGEST_LINES:]]
            step += (f"\n\nYour first {len(dropped)} turn(s) of this step are no longer shown, to fit the context. "
                     "What they did:\n" + "\n".join(lines))
        out = [ChatMessage(role="system", content=self.system), ChatMessage(role="user", content=step)]
        for messages in reversed(kept):
            out += messages
        return out
