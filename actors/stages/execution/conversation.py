"""One step's conversation with the executor's model, and the window of it the model sees.

The model always sees the system prompt and the step's message; after them, as many of
the most recent turns as fit the budget (seed 004 FR-019..021, BP-012). A turn is the
model's answer and the replies to it: a tool message per native call, and at most one
user message (corrections, and the results of calls written as text). Older turns are
dropped whole, so a tool message never loses the call it answers; the step's message
then lists one line per dropped turn (what was called, and how it went), so the model
does not redo work it can no longer see. The latest turn is always shown. A turn the
executor hides (an invalid answer the next one repeats word for word) is left out of the
window but keeps its number and its line.

Trimming keeps the server's prompt cache useful. A server re-reads a prompt from the
first byte that changed; dropping the oldest turn every turn once the history exceeds the
budget changes the prompt right after the step's message each time, so every turn
re-reads the whole window. Instead, when the window overflows it is cut back to
``keep`` (half) of the room for turns, and then left alone: the next turns are appended
to a prefix that does not change until the window overflows again. The system prompt
(and the tool block the provider sends beside it) never changes within a step.

The window is a pure function of the turns, the budget and ``keep`` (the cut points are
found by replaying the turns from the first): a replayed step sends byte-identical
requests and is answered from the record. ``keep=1.0`` is the old one-turn-at-a-time
window (``scripts/bench.py`` compares the two).
"""

from __future__ import annotations

import msgspec

from actors.llm.provider import ChatMessage
from protocol.plans.results import ModelToolCall

__all__ = ["Conversation"]

_DIGEST_LINES = 30
KEEP = 0.5  # after a trim, the turns shown take at most this share of the room for turns


class _Turn:
    __slots__ = ("answer", "tools", "user", "notes", "hidden")

    def __init__(self, answer: ChatMessage):
        self.answer = answer
        self.tools: list[ChatMessage] = []
        self.user: list[str] = []
        self.notes: list[str] = []
        self.hidden = False

    def messages(self) -> list[ChatMessage]:
        if self.hidden:
            return []
        out = [self.answer, *self.tools]
        if self.user:
            out.append(ChatMessage(role="user", content="\n\n".join(self.user)))
        return out


def _size(message: ChatMessage) -> int:
    calls = len(msgspec.json.encode(message.tool_calls)) if message.tool_calls else 0
    return len(message.content) + calls


class Conversation:
    """The system prompt, the step's message and the turns so far."""

    def __init__(self, system: str, step: str, *, keep: float = KEEP):
        self.system = system
        self.step = step
        self.keep = keep
        self.turns: list[_Turn] = []

    def answer(self, content: str, tool_calls: list[ModelToolCall]) -> None:
        """Start a turn with the model's answer."""
        self.turns.append(_Turn(ChatMessage(role="assistant", content=content, tool_calls=tool_calls)))

    def reply_tool(self, call_id: str, name: str, text: str) -> None:
        self.turns[-1].tools.append(ChatMessage(role="tool", tool_call_id=call_id, name=name, content=text))

    def reply_user(self, text: str) -> None:
        """Part of the turn's one user message (parts are joined by a blank line)."""
        self.turns[-1].user.append(text)

    def tell(self, text: str) -> None:
        """Something the model hears with its next turn: part of the last turn's user message,
        or of the step's message before the first turn."""
        if self.turns:
            self.reply_user(text)
        else:
            self.step += f"\n\n{text}"

    def note(self, line: str) -> None:
        """What the turn did, in a few words, for when it is no longer shown."""
        self.turns[-1].notes.append(line)

    def hide_previous(self) -> None:
        """Leave the turn before the latest out of the window (the same invalid answer the
        latest repeats: the model sees it once, beside the new correction)."""
        if len(self.turns) >= 2:
            self.turns[-2].hidden = True

    def messages(self, budget_chars: int) -> list[ChatMessage]:
        """The window: system, step (with the digest of dropped turns), recent turns."""
        first = self._first_shown(budget_chars)
        dropped = self.turns[:first]
        step = self.step
        if dropped:
            lines = [f"- turn {n}: {'; '.join(t.notes) or 'no tool call'}" for n, t in enumerate(dropped, start=1)]
            if len(lines) > _DIGEST_LINES:
                lines = [f"- turns 1-{len(lines) - _DIGEST_LINES}: not listed", *lines[-_DIGEST_LINES:]]
            step += (f"\n\nYour first {len(dropped)} turn(s) of this step are no longer shown, to fit the context. "
                     "What they did:\n" + "\n".join(lines))
        out = [ChatMessage(role="system", content=self.system), ChatMessage(role="user", content=step)]
        for turn in self.turns[first:]:
            out += turn.messages()
        return out

    def _first_shown(self, budget_chars: int) -> int:
        """The first turn shown: it moves only when the turns overflow their room, and then
        far enough that they take at most ``keep`` of it (the latest turn always stays)."""
        room = budget_chars - len(self.system) - len(self.step)
        first = 0
        used = 0
        sizes = [sum(_size(m) for m in turn.messages()) for turn in self.turns]
        for latest, size in enumerate(sizes):
            used += size
            if used > room:
                while first < latest and used > self.keep * room:
                    used -= sizes[first]
                    first += 1
        return first
