"""The executor's sliding window: recent turns within a budget, dropped whole, remembered in a line."""

from __future__ import annotations

from actors.stages.execution.conversation import Conversation
from protocol.plans.results import ModelToolCall


def _conversation(turns: int, result_size: int = 1_000) -> Conversation:
    conversation = Conversation("system prompt", "the step")
    for n in range(1, turns + 1):
        conversation.answer("", [ModelToolCall(id=f"c{n}", name="read_file", arguments={"path": f"f{n}.py"})])
        conversation.reply_tool(f"c{n}", "read_file", f"result {n} " + "x" * result_size)
        conversation.note(f"read_file f{n}.py -> ok")
    return conversation


def test_everything_is_shown_while_it_fits() -> None:
    messages = _conversation(3).messages(100_000)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                          "tool"]
    assert messages[1].content == "the step"


def test_old_turns_are_dropped_whole_and_listed_in_the_step_message() -> None:
    messages = _conversation(6).messages(3_500)  # room for about three turns of ~1 KB
    roles = [m.role for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert [m.tool_call_id for m in messages if m.role == "tool"] == ["c4", "c5", "c6"]
    assert [m.tool_calls[0].id for m in messages if m.role == "assistant"] == ["c4", "c5", "c6"]
    assert messages[1].content == (
        "the step\n\nYour first 3 turn(s) of this step are no longer shown, to fit the context. What they did:\n"
        "- turn 1: read_file f1.py -> ok\n- turn 2: read_file f2.py -> ok\n- turn 3: read_file f3.py -> ok")


def test_the_latest_turn_is_shown_even_when_it_alone_is_over_the_budget() -> None:
    messages = _conversation(2, result_size=50_000).messages(1_000)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[-1].content.startswith("result 2 ")


def test_the_window_is_deterministic_and_user_replies_of_a_turn_are_one_message() -> None:
    conversation = _conversation(4)
    conversation.answer("not json", [])
    conversation.reply_user("error: first problem")
    conversation.reply_user("error: second problem")
    first, second = conversation.messages(2_500), conversation.messages(2_500)
    assert first == second
    assert first[-1].role == "user" and first[-1].content == "error: first problem\n\nerror: second problem"
    assert "- turn 5" not in first[1].content and "no tool call" not in first[1].content


def _windows(keep: float, turns: int = 20, budget: int = 6_000) -> list[list[str]]:
    """The tool-call ids shown at each turn of a step whose history exceeds the budget."""
    conversation = Conversation("system prompt", "the step", keep=keep)
    shown = []
    for n in range(1, turns + 1):
        shown.append([m.tool_call_id for m in conversation.messages(budget) if m.role == "tool"])
        conversation.answer("", [ModelToolCall(id=f"c{n}", name="read_file", arguments={"path": f"f{n}.py"})])
        conversation.reply_tool(f"c{n}", "read_file", f"result {n} " + "x" * 1_000)
    return shown


def test_the_window_is_trimmed_in_large_steps_so_its_prefix_stays_put_for_several_turns() -> None:
    shown = _windows(keep=0.5)
    firsts = [ids[0] for ids in shown if ids]
    moves = sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if a != b)
    assert moves <= 5, f"the first turn shown moved {moves} times in 20 turns: {firsts}"
    for before, after in zip(shown, shown[1:], strict=False):  # between moves, turns are only appended
        if before and after and before[0] == after[0]:
            assert after[:len(before)] == before
    assert all(len(ids) >= 2 for ids in shown[4:]), "a trim keeps half of the room, not just the latest turn"


def test_the_old_window_dropped_one_turn_every_turn() -> None:
    firsts = [ids[0] for ids in _windows(keep=1.0) if ids]
    assert sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if a != b) >= 14


def test_a_hidden_turn_leaves_the_window_but_keeps_its_number_and_line_when_dropped() -> None:
    conversation = _conversation(2)
    conversation.answer("broken", [])
    conversation.reply_user("error: not JSON")
    conversation.note("a tool call that was not valid JSON")
    conversation.answer("broken", [])
    conversation.reply_user("error: the same again")
    conversation.hide_previous()
    messages = conversation.messages(100_000)
    assert [m.content for m in messages if m.role == "assistant"] == ["", "", "broken"]
    assert messages[-1].content == "error: the same again"
    for _ in range(3):  # enough turns that the first ones are dropped: the hidden one keeps its line
        conversation.answer("", [ModelToolCall(id="cx", name="read_file", arguments={"path": "f.py"})])
        conversation.reply_tool("cx", "read_file", "x" * 1_500)
    step = conversation.messages(4_000)[1].content
    assert "- turn 3: a tool call that was not valid JSON" in step
